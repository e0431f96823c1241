//! The CLI's files: checkpoints, HF folders and text in, checkpoints out;
//! every error names the file.

use std::path::{Path, PathBuf};

use webtrain::checkpoint::Checkpoint;
use webtrain::data::Corpus;
use webtrain::hf::{self, HfFiles, HfModel};
use webtrain::model::Recipe;
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

    /// A file a checkpoint names: the built-in corpus by its name (an
    /// error if it is not built), others by the path or name they were
    /// given (the page records bare names); none if it is not here.
    pub fn recorded(name: &str) -> Result<Option<TextFile>> {
        if name == BUILTIN_CORPUS {
            return TextFile::builtin().map(Some);
        }
        Ok(Path::new(name).is_file().then(|| TextFile {
            name: name.into(),
            path: name.into(),
        }))
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
    read_checkpoint_bytes(path).map(|(c, _)| c)
}

/// The checkpoint at `path`, checked, and the file's bytes.
pub fn read_checkpoint_bytes(path: &Path) -> Result<(Checkpoint, Vec<u8>)> {
    let bytes = std::fs::read(path).map_err(|e| io(path, "be read", e))?;
    let c = Checkpoint::from_bytes(&bytes).map_err(|e| in_file(path, e))?;
    Ok((c, bytes))
}

/// A checkpoint's problem, naming its file.
pub fn in_file(path: &Path, e: Error) -> Error {
    match e {
        Error::Checkpoint(problem) => Error::Checkpoint(format!("{}: {problem}", path.display())),
        e => e,
    }
}

/// The model in an HF folder, checked; its errors name the file.
pub fn read_hf(dir: &Path) -> Result<HfModel> {
    HfModel::import(&read_folder(dir)?).map_err(|e| match e {
        Error::Format { file, problem } => Error::Format {
            file: dir.join(file).display().to_string(),
            problem,
        },
        Error::Unsupported(problem) => Error::Unsupported(format!("{}: {problem}", dir.display())),
        e => e,
    })
}

/// Writes `bytes` to `path` through a temporary file beside it, so an
/// existing checkpoint is never left half-written.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            std::fs::remove_file(&tmp).ok();
            io(path, "be written", e)
        })
}

/// An I/O failure on `path`: what could not be done, and why.
pub fn io(path: &Path, action: &'static str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        action,
        message: e.to_string(),
    }
}

/// The files of an HF folder (`HfFiles::read`), each error naming its path.
pub fn read_folder(dir: &Path) -> Result<HfFiles> {
    HfFiles::read(|name| {
        let path = dir.join(name);
        match path.exists() {
            false => Ok(None),
            true => std::fs::read(&path)
                .map(Some)
                .map_err(|e| io(&path, "be read", e)),
        }
    })
    .map_err(|e| match e {
        Error::Format { file, problem } => Error::Format {
            file: dir.join(file).display().to_string(),
            problem,
        },
        e => e,
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

/// A precision recipe file (`--recipe`), its problems naming the file.
pub fn read_recipe(path: &Path) -> Result<Recipe> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, "be read", e))?;
    Recipe::from_json(&text).map_err(|e| Error::Unsupported(format!("{}: {e}", path.display())))
}

/// The token ids of a file of whitespace-separated decimal ids, each below `vocab`.
pub fn read_token_ids(path: &Path, vocab: u32) -> Result<Vec<u32>> {
    let text = std::fs::read_to_string(path).map_err(|e| io(path, "be read", e))?;
    text.split_whitespace()
        .enumerate()
        .map(|(i, w)| match w.parse::<u32>() {
            Ok(id) if id < vocab => Ok(id),
            Ok(id) => Err(format!(
                "token {i} is {id}, beyond the vocabulary of {vocab}"
            )),
            Err(_) => Err(format!("token {i}, {w:?}, is not a token id")),
        })
        .map(|id| id.map_err(|p| Error::Unsupported(format!("{}: {p}", path.display()))))
        .collect()
}
