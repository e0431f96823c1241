//! The CLI's files: checkpoints, HF folders and text in, checkpoints out;
//! every error names the file.

use std::path::{Path, PathBuf};

use webtrain::checkpoint::Checkpoint;
use webtrain::data::Corpus;
use webtrain::hf::{self, HfFiles, HfModel};
use webtrain::run::BUILTIN_CORPUS;
use webtrain::{Error, Result};

/// The Brown corpus as `scripts/brown-corpus.mjs` writes it: the default text.
const BUILTIN_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../public/corpus/brown.txt");

/// A text file to train on, and the name a run records it under.
pub struct TextFile {
    pub name: String,
    pub path: PathBuf,
}

impl TextFile {
    /// The built-in corpus, named as the page names it.
    pub fn builtin() -> Result<TextFile> {
        if !Path::new(BUILTIN_PATH).exists() {
            return Err(Error::Unsupported(format!(
                "the built-in corpus {BUILTIN_PATH} is not built: run `node scripts/brown-corpus.mjs` (npm run build does), or give --corpus FILE… or --synthetic"
            )));
        }
        Ok(TextFile {
            name: BUILTIN_CORPUS.into(),
            path: BUILTIN_PATH.into(),
        })
    }

    /// A file given on the command line, recorded by its path as given.
    pub fn given(path: &Path) -> TextFile {
        TextFile {
            name: path.display().to_string(),
            path: path.to_path_buf(),
        }
    }

    /// A file a checkpoint names: the built-in corpus by its name, others
    /// by the path or name they were given (the page records bare names);
    /// none if it is not here.
    pub fn recorded(name: &str) -> Option<TextFile> {
        if name == BUILTIN_CORPUS {
            return TextFile::builtin().ok();
        }
        Path::new(name).is_file().then(|| TextFile {
            name: name.into(),
            path: name.into(),
        })
    }
}

/// The files read and checked as one corpus, in order.
pub fn read_corpus(files: &[TextFile]) -> Result<Corpus> {
    let mut corpus = Corpus::default();
    for f in files {
        let bytes = std::fs::read(&f.path).map_err(|e| Error::Corpus {
            file: f.path.display().to_string(),
            problem: format!("cannot be read: {e}"),
        })?;
        corpus.add(&f.name, &bytes)?;
    }
    Ok(corpus)
}

/// The checkpoint at `path`, checked; its errors name the file.
pub fn read_checkpoint(path: &Path) -> Result<Checkpoint> {
    let bytes = std::fs::read(path)
        .map_err(|e| Error::Checkpoint(format!("{}: cannot be read: {e}", path.display())))?;
    Checkpoint::from_bytes(&bytes).map_err(|e| in_file(path, e))
}

/// A checkpoint's problem, naming its file.
pub fn in_file(path: &Path, e: Error) -> Error {
    match e {
        Error::Checkpoint(problem) => Error::Checkpoint(format!("{}: {problem}", path.display())),
        e => e,
    }
}

/// The model in an HF folder, checked; its errors name the folder.
pub fn read_hf(dir: &Path) -> Result<HfModel> {
    HfModel::import(&read_folder(dir)?).map_err(|e| match e {
        Error::Unsupported(problem) => Error::Unsupported(format!("{}: {problem}", dir.display())),
        e => e,
    })
}

/// Writes `bytes` to `path` through a temporary file beside it, so an
/// existing checkpoint is never left half-written.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let named = |e: std::io::Error| {
        Error::Checkpoint(format!("{}: cannot be written: {e}", path.display()))
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            std::fs::remove_file(&tmp).ok();
            named(e)
        })
}

/// An I/O failure on `path`: what could not be done, and why.
pub fn io(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Unsupported(format!("{}: cannot {what}: {e}", path.display()))
}

/// The files of an HF folder: model.safetensors, or the shards its index names.
pub fn read_folder(dir: &Path) -> Result<HfFiles> {
    let text = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| io(&dir.join(name), "be read", e))
    };
    let optional = |name: &str| dir.join(name).exists().then(|| text(name)).transpose();
    let weights = if dir.join(hf::WEIGHTS).exists() {
        vec![
            std::fs::read(dir.join(hf::WEIGHTS))
                .map_err(|e| io(&dir.join(hf::WEIGHTS), "be read", e))?,
        ]
    } else if dir.join(hf::WEIGHTS_INDEX).exists() {
        let index: serde_json::Value = serde_json::from_str(&text(hf::WEIGHTS_INDEX)?)
            .map_err(|e| Error::Unsupported(format!("{}: not JSON ({e})", hf::WEIGHTS_INDEX)))?;
        let map = index["weight_map"]
            .as_object()
            .ok_or_else(|| Error::Unsupported(format!("{}: no weight_map", hf::WEIGHTS_INDEX)))?;
        let shards: std::collections::BTreeSet<&str> =
            map.values().filter_map(|v| v.as_str()).collect();
        shards
            .into_iter()
            .map(|s| std::fs::read(dir.join(s)).map_err(|e| io(&dir.join(s), "be read", e)))
            .collect::<Result<_>>()?
    } else {
        return Err(Error::Unsupported(format!(
            "{}: no {} or {} in it",
            dir.display(),
            hf::WEIGHTS,
            hf::WEIGHTS_INDEX
        )));
    };
    Ok(HfFiles {
        config_json: text(hf::CONFIG)?,
        generation_config_json: optional(hf::GENERATION_CONFIG)?,
        weights,
        tokenizer_json: optional(hf::TOKENIZER)?,
    })
}

pub fn write_folder(dir: &Path, files: &HfFiles) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| io(dir, "be created", e))?;
    let write = |name: &str, bytes: &[u8]| {
        std::fs::write(dir.join(name), bytes).map_err(|e| io(&dir.join(name), "be written", e))
    };
    write(hf::CONFIG, files.config_json.as_bytes())?;
    write(hf::WEIGHTS, &files.weights[0])?;
    if let Some(g) = &files.generation_config_json {
        write(hf::GENERATION_CONFIG, g.as_bytes())?;
    }
    if let Some(t) = &files.tokenizer_json {
        write(hf::TOKENIZER, t.as_bytes())?;
    }
    Ok(())
}
