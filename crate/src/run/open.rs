//! `open`: every run either front end trains — a new one, one resumed
//! from a checkpoint, one fine-tuning a Hugging Face model — made here,
//! with one set of defaults (`RunSpec::preset`, `task`, `fine_tune`) and
//! one rule for the text each reads. A front end only finds the files
//! (the CLI on disk, the page in its `Data`) and says what a person
//! changed. Two steps, so that everything that needs no device is checked
//! before one is made, and the page can read its text before its promise.

use super::{Changes, Run, RunSpec, Snapshot, Text};
use crate::checkpoint::Checkpoint;
use crate::data::{Corpus, Tokenizer};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::hf::HfModel;
use crate::train::{TrainConfig, Trainer};

/// What a run begins from.
pub enum Origin {
    /// A new run of `spec` (a preset's or a task's, changed as the person said).
    New(RunSpec),
    /// The run in a checkpoint, and its bytes: the session's first snapshot.
    Resume(Checkpoint, Vec<u8>),
    /// A Hugging Face model fine-tuned (`RunSpec::fine_tune`), with `Changes`.
    HuggingFace(HfModel, Changes),
}

/// The tokens a front end offers the run.
pub enum TextIn<'a> {
    /// No text: a task's examples, or a checkpoint's synthetic stream or task.
    None,
    /// The seeded synthetic stream (new runs).
    Synthetic,
    /// Text files, and a tokenizer given for them (none: a Hugging Face
    /// folder's, a checkpoint's, or one learned from the text).
    Corpus(&'a Corpus, Option<Box<Tokenizer>>),
}

/// A run checked and its text read, not yet on a device (`Opening::on`).
pub struct Opening {
    pub config: TrainConfig,
    pub text: Text,
    start: Start,
}

enum Start {
    Fresh,
    Weights(Vec<f32>),
    Checkpoint(Box<Checkpoint>, Vec<u8>),
}

/// The run `origin` describes, reading `text`; refused, saying why, where
/// the settings, the model or the text do not fit.
pub fn open(origin: Origin, text: TextIn) -> Result<Opening> {
    match origin {
        Origin::New(spec) => {
            let config = spec.config()?;
            let text = new_text(&spec, &config, text, None)?;
            Ok(Opening {
                config,
                text,
                start: Start::Fresh,
            })
        }
        Origin::HuggingFace(model, changes) => {
            let spec = RunSpec::fine_tune(&model.config)?.with(&changes);
            let config = spec.config()?;
            let json = model.tokenizer_json.as_deref();
            let text = new_text(&spec, &config, text, Some(json))?;
            Ok(Opening {
                config,
                text,
                start: Start::Weights(model.weights),
            })
        }
        Origin::Resume(checkpoint, bytes) => {
            let corpus = match text {
                TextIn::Corpus(corpus, tokenizer) => {
                    if let Some(t) = tokenizer {
                        checkpoint.check_tokenizer(t.fingerprint())?;
                    }
                    Some(corpus)
                }
                TextIn::None | TextIn::Synthetic => None,
            };
            let text = Text::of_checkpoint(&checkpoint, corpus)?;
            Ok(Opening {
                config: checkpoint.config.clone(),
                text,
                start: Start::Checkpoint(Box::new(checkpoint), bytes),
            })
        }
    }
}

/// A new run's tokens: a task's examples, the synthetic stream, or the
/// text through the tokenizer given, else (`imported`: a Hugging Face
/// folder's tokenizer.json, if it has one) the imported model's own, else
/// one learned from the text.
fn new_text(
    spec: &RunSpec,
    config: &TrainConfig,
    text: TextIn,
    imported: Option<Option<&str>>,
) -> Result<Text> {
    let (vocab, seq, seed) = (config.model.vocab, config.shape.seq, config.seed);
    if let Some(task) = &spec.task {
        return Text::task(task, seed, seq);
    }
    let (corpus, given) = match text {
        TextIn::Synthetic => return Text::synthetic(vocab, seed, seq, spec.val_fraction),
        TextIn::None => return Err(Error::Tokenizer("a new run needs text to train on".into())),
        TextIn::Corpus(corpus, given) => (corpus, given),
    };
    let tokenizer = match (given, imported) {
        (Some(t), _) => *t,
        (None, Some(Some(json))) => Tokenizer::from_json(json)?,
        (None, Some(None)) => {
            return Err(Error::Tokenizer(
                "the Hugging Face folder has no tokenizer.json to read the text with".into(),
            ));
        }
        (None, None) => {
            let texts: Vec<&str> = corpus.files().map(|(_, t)| t).collect();
            Tokenizer::train(&texts, vocab, |_| {})?
        }
    };
    Text::from_corpus(corpus, tokenizer, vocab, seq, spec.val_fraction)
}

impl Opening {
    /// The run on `gpu`, scored on up to `validation_batches` held-out
    /// batches, and the snapshot it starts from where it was resumed.
    pub async fn on(self, gpu: &Gpu, validation_batches: usize) -> Result<(Run, Option<Snapshot>)> {
        let (config, text) = (self.config, self.text);
        Ok(match self.start {
            Start::Fresh => {
                let trainer = Trainer::new(gpu, config).await?;
                (Run::start(trainer, text, validation_batches), None)
            }
            Start::Weights(weights) => {
                let trainer = Trainer::with_weights(gpu, config, &weights).await?;
                (Run::start(trainer, text, validation_batches), None)
            }
            Start::Checkpoint(c, bytes) => {
                let run = Run::resume(gpu, &c, text, validation_batches).await?;
                let snapshot = Snapshot {
                    step: c.step,
                    bytes,
                };
                (run, Some(snapshot))
            }
        })
    }
}
