//! What each fuzz target in crate/fuzz does with its bytes, shared with the
//! replay of the committed corpora (tests/fuzz_corpora.rs), so stable
//! `cargo test` runs exactly what the fuzzer ran. Any bytes give `Ok` or a
//! checked `Err`; a panic, an overflow or an allocation the input does not
//! back is a bug in the reader. docs/INTEROP.md has the campaign.

use crate::checkpoint::Checkpoint;
use crate::data::{Corpus, Tokenizer};
use crate::error::Result;
use crate::hf::{HfFiles, HfModel};

/// What a fuzz target does with its input.
pub type Target = fn(&[u8]) -> Result<()>;

/// The fuzz targets by name (crate/fuzz/fuzz_targets/NAME.rs, corpus in
/// crate/fuzz/corpus/NAME/), each with what it does.
pub const TARGETS: [(&str, Target); 4] = [
    ("checkpoint_reader", checkpoint_reader),
    ("hf_import", hf_import),
    ("tokenizer_json", tokenizer_json),
    ("corpus_reader", corpus_reader),
];

/// The configs `hf_import` picks from: the parity fixtures' (GQA; tied
/// embeddings) and a one-layer model small enough to seed with whole files.
pub const HF_CONFIGS: [&str; 3] = [
    include_str!("../../tests/parity/fixtures/gqa/config.json"),
    include_str!("../../tests/parity/fixtures/tied/config.json"),
    r#"{"model_type": "llama", "vocab_size": 5, "hidden_size": 16, "num_hidden_layers": 1,
        "num_attention_heads": 1, "num_key_value_heads": 1, "intermediate_size": 8,
        "max_position_embeddings": 16, "tie_word_embeddings": true}"#,
];

/// Text a loaded tokenizer must encode and decode (as the page and the CLI
/// then tokenize the user's files with it).
const SAMPLE: &str = "The jury said 42 times: «ça va», İyi akşamlar 🐈\n\tend.";

/// `Checkpoint::from_bytes` of the bytes (the CLI's `--checkpoint`, the
/// page's Load and autosave).
pub fn checkpoint_reader(bytes: &[u8]) -> Result<()> {
    Checkpoint::from_bytes(bytes).map(drop)
}

/// `HfModel::import` of the bytes after the first as model.safetensors,
/// with the config `HF_CONFIGS[first byte % 3]`.
pub fn hf_import(bytes: &[u8]) -> Result<()> {
    let (pick, weights) = bytes.split_first().unwrap_or((&0, &[]));
    let files = HfFiles {
        config_json: HF_CONFIGS[*pick as usize % HF_CONFIGS.len()].to_string(),
        weights: vec![weights.to_vec()],
        ..Default::default()
    };
    HfModel::import(&files).map(drop)
}

/// `Tokenizer::from_json` of the bytes (lossy UTF-8) and, if it loads,
/// `SAMPLE` encoded and decoded with it.
pub fn tokenizer_json(bytes: &[u8]) -> Result<()> {
    let t = Tokenizer::from_json(&String::from_utf8_lossy(bytes))?;
    t.decode(&t.encode(SAMPLE)?).map(drop)
}

/// `Corpus::add` of the bytes as a user's file (the page's picker and
/// drop, the CLI's `--corpus`): its text, or why it is not text.
pub fn corpus_reader(bytes: &[u8]) -> Result<()> {
    Corpus::default().add("fuzz.txt", bytes)
}
