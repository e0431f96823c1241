//! One error type for the whole crate. Every variant carries what a person
//! needs to act on it: which kernel, which limit, which adapter.

use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum Error {
    #[error(
        "this browser has no WebGPU (navigator.gpu is missing). Use a recent Chrome or Edge; \
         on Linux start it with --enable-unsafe-webgpu --enable-features=Vulkan, \
         or enable chrome://flags/#enable-unsafe-webgpu"
    )]
    NoWebGpu,

    #[error("no GPU adapter{}: {}", wanted.as_ref().map(|w| format!(" named like {w:?}")).unwrap_or_default(),
        if available.is_empty() { hint.to_string() } else { format!("available: {}", available.join(", ")) })]
    NoAdapter {
        wanted: Option<String>,
        available: Vec<String>,
        hint: &'static str,
    },

    #[error("the adapter {adapter:?} refused a device: {message}")]
    DeviceRequest { adapter: String, message: String },

    #[error("the GPU device was lost ({reason}); the page or process must create a new one")]
    DeviceLost { reason: String },

    /// A session gave up on a lost device (`run::Session::recover`).
    #[error("the GPU device was lost at step {at} ({reason}), and the run cannot go on: {why}")]
    RunLost {
        at: u32,
        reason: String,
        why: String,
        /// The step of the run's snapshot in memory, if it has one.
        snapshot: Option<u32>,
    },

    #[error("kernel {kernel} does not compile for this adapter ({storage} f16 storage): {message}")]
    Shader {
        kernel: &'static str,
        storage: &'static str,
        message: String,
    },

    /// A unit kernel's neutral fragment operation that cannot be spelled.
    #[error("kernel {kernel}, line {line} of its composed source: {message}")]
    Spelling {
        kernel: String,
        line: usize,
        message: String,
    },

    #[error("GPU error in {op}: {message}")]
    Gpu { op: String, message: String },

    #[error("{op}: {what} expected {expected}, got {got}")]
    Shape {
        op: &'static str,
        what: &'static str,
        expected: String,
        got: String,
    },

    #[error("{op}: {what} needs {needed} but this adapter allows {limit}")]
    Limit {
        op: &'static str,
        what: String,
        needed: u64,
        limit: u64,
    },

    #[error("{file}: {problem}")]
    Corpus { file: String, problem: String },

    #[error("tokenizer error: {0}")]
    Tokenizer(String),

    #[error(
        "{what} was made with tokenizer {made_with}, but the tokenizer in use is {in_use}: \
         use the tokenizer it was made with, or re-tokenize"
    )]
    TokenizerMismatch {
        what: String,
        made_with: String,
        in_use: String,
    },

    /// A checkpoint that cannot be read or restored: what is wrong with it.
    #[error("checkpoint: {0}")]
    Checkpoint(String),

    /// A run resumed on other tokens than it trained on: what it needs.
    #[error(
        "the run trained on {trained_on}, but the text given is {given}: resume on the same text"
    )]
    DataMismatch { trained_on: String, given: String },

    /// A file that could not be read or written (the CLI's files).
    #[error("{path}: cannot {action}: {message}")]
    Io {
        path: String,
        action: &'static str,
        message: String,
    },

    /// A file of a model format (a Hugging Face folder's config.json,
    /// safetensors, tokenizer.json) that webtrain cannot take: which file,
    /// and what is wrong with it.
    #[error("{file}: {problem}")]
    Format { file: String, problem: String },

    #[error("{0}")]
    Unsupported(String),
}

impl Error {
    pub(crate) fn shape(
        op: &'static str,
        what: &'static str,
        expected: impl ToString,
        got: impl ToString,
    ) -> Self {
        Error::Shape {
            op,
            what,
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }
}

/// "a, b, c, d, e and 4 more": names in an error message, the first five.
pub(crate) fn name_list(names: &[String]) -> String {
    const SHOWN: usize = 5;
    let shown = names[..names.len().min(SHOWN)].join(", ");
    match names.len().saturating_sub(SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// "3 GiB", "1.5 GiB", "64 MiB", "900 B": a size in an error message, as
/// the page writes sizes (www/dom.js `bytes`).
pub(crate) fn byte_size(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut x, mut unit) = (n as f64, 0);
    while x >= 1024.0 && unit < UNITS.len() - 1 {
        x /= 1024.0;
        unit += 1;
    }
    if x.fract() == 0.0 {
        format!("{x} {}", UNITS[unit])
    } else {
        format!("{x:.1} {}", UNITS[unit])
    }
}
