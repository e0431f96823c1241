//! Which tokens a run trains on, as its checkpoints record them: one schema
//! for the page and the CLI, read in every form either has written.

use serde::{Deserialize, Serialize};

use crate::data::tasks::TaskSpec;
use crate::error::{Error, Result};

/// The name the built-in Brown corpus goes by in a run's file list (the
/// page has always called it so; each front end knows where to find it).
pub const BUILTIN_CORPUS: &str = "Brown corpus (built in)";

/// Where a run's tokens come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Text files through the run's tokenizer.
    #[default]
    Corpus,
    /// The seeded synthetic stream (`train::synthetic`): tests, benchmarks.
    Synthetic,
    /// An algorithmic task's examples (`data::tasks`), generated from the seed.
    Task,
}

/// What a checkpoint keeps of a run's data: enough to draw the same
/// batches again and to refuse other text.
///
/// Forms read: this one (since 2026-11-25, both front ends; `task` since
/// 2026-11-26, absent before and for text); the CLI's
/// before it (the same fields, its files named by path, the built-in
/// corpus by its path too); the page's before it (`{files, val_fraction}`:
/// no source, no token count or fingerprint, so only the file names can
/// be checked).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataState {
    #[serde(default)]
    pub source: Source,
    /// The text files in the order they were tokenized, by the name (or
    /// path) they were given; the built-in corpus as [`BUILTIN_CORPUS`].
    #[serde(default)]
    pub files: Vec<String>,
    /// The held-out tail's share of the tokens.
    pub val_fraction: f64,
    /// Tokens of the whole stream.
    #[serde(default)]
    pub tokens: Option<usize>,
    /// [`fingerprint`] of the token ids: the same text through the same
    /// tokenizer gives the same one.
    #[serde(default)]
    pub tokens_fingerprint: Option<String>,
    /// The task, every option written out (its held-out examples are the
    /// tokens fingerprinted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskSpec>,
}

impl DataState {
    /// The state of a run on `tokens`.
    pub fn of(source: Source, files: Vec<String>, val_fraction: f64, tokens: &[u32]) -> DataState {
        DataState {
            source,
            files,
            val_fraction,
            tokens: Some(tokens.len()),
            tokens_fingerprint: Some(fingerprint(tokens)),
            task: None,
        }
    }

    /// The state of a run on `task`, whose held-out examples are `held_out`.
    pub fn of_task(task: TaskSpec, held_out: &[u32]) -> DataState {
        DataState {
            task: Some(task),
            ..DataState::of(Source::Task, vec![], 0.0, held_out)
        }
    }

    /// A checkpoint's `data`, in any form a front end has written.
    pub fn parse(data: Option<&str>) -> Result<DataState> {
        let unusable = |why: &str| {
            Error::Checkpoint(format!(
                "it does not say which data it trained on ({why}); it was not saved by webtrain"
            ))
        };
        serde_json::from_str(data.ok_or_else(|| unusable("no data state"))?)
            .map_err(|e| unusable(&e.to_string()))
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).map_err(|e| Error::Checkpoint(e.to_string()))
    }

    /// Refuses `now` unless it is the data this state describes: the same
    /// tokens (count and fingerprint), or, where this state predates them
    /// (the page's checkpoints before 2026-11-25), the same file names.
    pub fn check(&self, now: &DataState) -> Result<()> {
        let same = match (&self.tokens_fingerprint, &now.tokens_fingerprint) {
            (Some(saved), Some(got)) => self.tokens == now.tokens && saved == got,
            _ => names(&self.files) == names(&now.files),
        };
        if same && self.source == now.source && self.task == now.task {
            return Ok(());
        }
        Err(Error::DataMismatch {
            trained_on: self.describe(),
            given: now.describe(),
        })
    }

    /// The data in words, for messages: the files and the tokens.
    pub fn describe(&self) -> String {
        let what = match self.source {
            Source::Synthetic => "the synthetic token stream".to_string(),
            Source::Task => match &self.task {
                Some(t) => t.to_string(),
                None => "a task it does not name".to_string(),
            },
            Source::Corpus if self.files.is_empty() => "no text".to_string(),
            Source::Corpus => self.files.join(", "),
        };
        match (&self.tokens, &self.tokens_fingerprint) {
            (Some(n), Some(f)) => format!("{what} ({n} tokens, fingerprint {f})"),
            _ => what,
        }
    }
}

/// File names as a person sees them: a path's last part (the CLI names
/// files by path, the page by name), the built-in corpus under its name
/// (the CLI recorded it by its path, …/public/corpus/brown.txt, before
/// 2026-11-25).
fn names(files: &[String]) -> Vec<&str> {
    files
        .iter()
        .map(|f| {
            let name = f.rsplit(['/', '\\']).next().unwrap_or(f);
            if f.ends_with("public/corpus/brown.txt") {
                BUILTIN_CORPUS
            } else {
                name
            }
        })
        .collect()
}

/// The fingerprint of the token ids: tells two token streams apart.
fn fingerprint(tokens: &[u32]) -> String {
    crate::fingerprint::fnv1a(tokens.iter().flat_map(|t| t.to_le_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_written_so_far_reads() {
        // the page's, before 2026-11-25
        let page = DataState::parse(Some(
            r#"{"files":["Brown corpus (built in)"],"val_fraction":0.05}"#,
        ))
        .unwrap();
        assert_eq!(page.source, Source::Corpus);
        assert_eq!(
            (page.tokens, page.tokens_fingerprint.as_deref()),
            (None, None)
        );
        // the CLI's, before 2026-11-25
        let cli = DataState::parse(Some(
            r#"{"source":"synthetic","files":[],"val_fraction":0.05,"tokens":1048576,"tokens_fingerprint":"0123456789abcdef"}"#,
        ))
        .unwrap();
        assert_eq!(cli.source, Source::Synthetic);
        assert_eq!(cli.tokens, Some(1 << 20));
        // and this one, round trip
        let now = DataState::of(Source::Corpus, vec!["a.txt".into()], 0.1, &[1, 2, 3]);
        assert_eq!(
            DataState::parse(Some(&now.to_json().unwrap())).unwrap(),
            now
        );
        for bad in [None, Some("{}"), Some("not json")] {
            let e = DataState::parse(bad).unwrap_err().to_string();
            assert!(e.contains("does not say which data"), "{e}");
        }
    }

    #[test]
    fn checks_tokens_or_else_names() {
        let saved = DataState::of(Source::Corpus, vec!["/data/a.txt".into()], 0.05, &[1, 2, 3]);
        let same = DataState::of(Source::Corpus, vec!["a.txt".into()], 0.05, &[1, 2, 3]);
        saved.check(&same).unwrap();
        let other = DataState::of(Source::Corpus, vec!["/data/a.txt".into()], 0.05, &[1, 2, 4]);
        let e = saved.check(&other).unwrap_err().to_string();
        assert!(e.contains("/data/a.txt (3 tokens, fingerprint"), "{e}");
        // a page checkpoint of before: names only, the built-in corpus wherever it was read
        let old_page = DataState::parse(Some(
            r#"{"files":["Brown corpus (built in)"],"val_fraction":0.05}"#,
        ))
        .unwrap();
        let cli = DataState::of(
            Source::Corpus,
            vec!["/x/crate/../public/corpus/brown.txt".into()],
            0.05,
            &[7],
        );
        old_page.check(&cli).unwrap();
        assert!(old_page.check(&same).is_err());
        let synthetic = DataState::of(Source::Synthetic, vec![], 0.05, &[1, 2, 3]);
        assert!(
            synthetic.check(&same).is_err(),
            "the same tokens from another source"
        );
    }
}
