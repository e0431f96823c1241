//! One training run as both front ends drive it (the page's worker and
//! `webtrain train` are thin adapters over this): what a new run is made
//! of and its defaults (`spec`), every run opened — new, resumed, from a
//! Hugging Face folder — one way (`open`), what each setting takes (`settings`), the
//! token stream it trains on and how a checkpoint records it (`data`), the
//! batch order, validation, saving and resuming; the loop around it, its
//! cadence and its recovery from a lost device (`session`), and where a
//! run left to train stops (`drive`). So a checkpoint
//! saved by either front end resumes in the other, drawing the batches an
//! uninterrupted run would have drawn.

mod data;
mod drive;
mod open;
mod session;
pub mod settings;
mod spec;

pub use data::{BUILTIN_CORPUS, DataState, Source};
pub use drive::{Drive, Listener, Stopped};
pub use open::{Opening, Origin, TextIn, open};
pub use session::{Cadence, Devices, Event, Session, Snapshot, SnapshotReport};
pub use spec::{
    BATCH_SEED, Changes, FINE_TUNE_LR, FINE_TUNE_SEQ, RunSpec, VALIDATION_BATCHES, warmup_for,
};

use serde::Serialize;

use crate::checkpoint::{self, Checkpoint, RunState};
use crate::data::tasks::{self, Accuracy, Task, TaskSet, TaskSpec};
use crate::data::{Batch, Corpus, Dataset, Tokenizer};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::rng::SplitMix64;
use crate::train::{StepStats, Trainer, synthetic};

/// Tokens of the synthetic stream.
const SYNTHETIC_TOKENS: usize = 1 << 20;

/// Held-out examples a validation shows with the model's answers.
const EXAMPLES_SHOWN: usize = 8;

/// Batches of training examples a task's validation also scores.
const TRAINING_SAMPLE_BATCHES: usize = 2;

/// The token stream a run trains on: its tokenizer (none for synthetic
/// tokens), its training and held-out batches, and what a checkpoint
/// records of them.
pub struct Text {
    pub tokenizer: Option<Tokenizer>,
    pub data: Batches,
    pub state: DataState,
}

/// Where a run's batches come from.
pub enum Batches {
    /// Windows of a token stream, its tail held out.
    Stream(Dataset),
    /// A task's examples, a fixed set held out.
    Task(TaskSet),
}

impl Batches {
    pub fn train_tokens(&self) -> usize {
        match self {
            Batches::Stream(d) => d.train_tokens(),
            Batches::Task(t) => t.train_tokens(),
        }
    }

    pub fn validation_tokens(&self) -> usize {
        match self {
            Batches::Stream(d) => d.validation_tokens(),
            Batches::Task(t) => t.validation_tokens(),
        }
    }

    fn train_batch(&self, rng: &mut SplitMix64, batch: usize) -> Batch {
        match self {
            Batches::Stream(d) => d.train_batch(rng, batch),
            Batches::Task(t) => t.train_batch(rng, batch),
        }
    }

    fn validation_batches(&self, batch: usize) -> Vec<Batch> {
        match self {
            Batches::Stream(d) => d.validation_batches(batch),
            Batches::Task(t) => t.validation_batches(batch),
        }
    }
}

impl Text {
    /// `corpus` through `tokenizer` (at most the model's `vocab` tokens: HF
    /// models may pad their embeddings), its last `val_fraction` held out.
    pub fn from_corpus(
        corpus: &Corpus,
        tokenizer: Tokenizer,
        vocab: u32,
        seq: u32,
        val_fraction: f64,
    ) -> Result<Text> {
        if tokenizer.vocab_size() > vocab {
            return Err(Error::Tokenizer(format!(
                "the tokenizer has {} tokens but the model's vocabulary is {vocab}: use a tokenizer of {vocab} tokens",
                tokenizer.vocab_size()
            )));
        }
        let tokens = corpus.tokenize(&tokenizer, seq as usize)?;
        let files = corpus.files().map(|(name, _)| name.to_string()).collect();
        let state = DataState::of(Source::Corpus, files, val_fraction, &tokens);
        Ok(Text {
            tokenizer: Some(tokenizer),
            data: Batches::Stream(Dataset::new(tokens, seq as usize, val_fraction)?),
            state,
        })
    }

    /// The seeded synthetic stream (`train::synthetic`): tests, benchmarks.
    pub fn synthetic(vocab: u32, seed: u64, seq: u32, val_fraction: f64) -> Result<Text> {
        let tokens = synthetic::markov_tokens(vocab, SYNTHETIC_TOKENS, seed);
        let state = DataState::of(Source::Synthetic, vec![], val_fraction, &tokens);
        Ok(Text {
            tokenizer: None,
            data: Batches::Stream(Dataset::new(tokens, seq as usize, val_fraction)?),
            state,
        })
    }

    /// `spec`'s examples for a run of `seed` in rows of `seq`, through the
    /// task's tokenizer.
    pub fn task(spec: &TaskSpec, seed: u64, seq: u32) -> Result<Text> {
        let task = Task::parse(spec)?;
        let set = TaskSet::new(task, seed, seq as usize)?;
        Ok(Text {
            tokenizer: Some(task.tokenizer()?),
            state: DataState::of_task(set.task.spec(), &set.held_out_tokens()),
            data: Batches::Task(set),
        })
    }

    /// The stream `checkpoint` trained on: its synthetic one or its task, or `corpus`
    /// (the files it names, found by the caller) through its tokenizer;
    /// refused, saying what it needs, unless the tokens are those it
    /// trained on.
    pub fn of_checkpoint(checkpoint: &Checkpoint, corpus: Option<&Corpus>) -> Result<Text> {
        let saved = DataState::parse(checkpoint.run.data.as_deref())?;
        let c = &checkpoint.config;
        let (vocab, seq) = (c.model.vocab, c.shape.seq);
        let text = match (saved.source, corpus) {
            (Source::Synthetic, _) => Text::synthetic(vocab, c.seed, seq, saved.val_fraction)?,
            (Source::Task, _) => {
                let task = saved.task.as_ref().ok_or_else(|| {
                    Error::Checkpoint("it trained on a task but does not name it".into())
                })?;
                let tokens = Task::parse(task)?.vocab();
                if tokens != vocab {
                    // modadd spelled its residues in digits before 2026-11-27
                    return Err(Error::Checkpoint(format!(
                        "its model reads {task} in {vocab} tokens, this version in {tokens}: \
                         it was written by a version that spelled the task differently; \
                         resume it with that version, or start a new run"
                    )));
                }
                Text::task(task, c.seed, seq)?
            }
            (Source::Corpus, None) => {
                return Err(Error::DataMismatch {
                    trained_on: saved.describe(),
                    given: "no text".into(),
                });
            }
            (Source::Corpus, Some(corpus)) => {
                let tokenizer = checkpoint.run.tokenizer()?.ok_or_else(|| {
                    Error::Checkpoint("it trained on text but holds no tokenizer".into())
                })?;
                Text::from_corpus(corpus, tokenizer, vocab, seq, saved.val_fraction)?
            }
        };
        saved.check(&text.state)?;
        Ok(text)
    }
}

/// One validation: the held-out loss, and for a task the share of answers
/// wholly right, of answer characters right, the share of a fixed sample of
/// training answers wholly right, and a few held-out examples answered.
#[derive(Clone, Debug, Serialize)]
pub struct Validation {
    pub loss: f64,
    pub accuracy: Option<f64>,
    pub char_accuracy: Option<f64>,
    pub train_accuracy: Option<f64>,
    /// ‖W‖₂ of the decaying weights (`Trainer::weight_norm`).
    pub weight_norm: f64,
    pub examples: Vec<Shown>,
}

/// A held-out example and the model's answer: at each answer position its
/// most likely character given the true ones before it, so `predicted`
/// equals `answer` exactly when the example counts as right.
#[derive(Clone, Debug, Serialize)]
pub struct Shown {
    pub prompt: String,
    pub answer: String,
    pub predicted: String,
}

/// A trainer, the text it trains on, the batch order and the held-out
/// batches it is scored on.
pub struct Run {
    pub trainer: Trainer,
    pub text: Text,
    /// The batch sampler, after the last batch drawn.
    pub rng: SplitMix64,
    /// Full batches of the held-out tail, the same every time.
    pub validation: Vec<Batch>,
    /// A task's fixed sample of training batches, scored for its training
    /// accuracy (none for text).
    pub training_sample: Vec<Batch>,
}

impl Run {
    /// A new run of `trainer` on `text`, its batches in its seed's order,
    /// scored on up to `validation_batches` held-out batches.
    pub fn start(trainer: Trainer, text: Text, validation_batches: usize) -> Run {
        let rng = SplitMix64(trainer.config.seed ^ BATCH_SEED);
        Run::with_rng(trainer, text, rng, validation_batches)
    }

    /// Continues the run in `checkpoint` on `text` (`Text::of_checkpoint`):
    /// its weights, optimizer state, step count and batch order.
    pub async fn resume(
        gpu: &Gpu,
        checkpoint: &Checkpoint,
        text: Text,
        validation_batches: usize,
    ) -> Result<Run> {
        let trainer = checkpoint.restore(gpu).await?;
        let rng = SplitMix64(checkpoint.run.rng);
        Ok(Run::with_rng(trainer, text, rng, validation_batches))
    }

    /// Goes back to `checkpoint`, this run's own from earlier, on `gpu` (a
    /// new device where the old one was lost): its weights, optimizer
    /// state, step and batch order; the text and held-out batches stay.
    /// The one rebuild path (`Session::recover`).
    pub async fn rewind(&mut self, gpu: &Gpu, checkpoint: &Checkpoint) -> Result<()> {
        self.trainer = checkpoint.restore(gpu).await?;
        self.rng = SplitMix64(checkpoint.run.rng);
        Ok(())
    }

    fn with_rng(trainer: Trainer, text: Text, rng: SplitMix64, validation_batches: usize) -> Run {
        let shape = trainer.config.shape;
        let validation = text
            .data
            .validation_batches(shape.batch as usize)
            .into_iter()
            .filter(|b| b.inputs.len() == shape.rows() as usize)
            .take(validation_batches)
            .collect();
        let training_sample = match &text.data {
            Batches::Task(set) => {
                set.training_sample(shape.batch as usize, TRAINING_SAMPLE_BATCHES)
            }
            Batches::Stream(_) => vec![],
        };
        Run {
            trainer,
            text,
            rng,
            validation,
            training_sample,
        }
    }

    /// The next training batch.
    pub fn batch(&mut self) -> Batch {
        let batch = self.trainer.config.shape.batch as usize;
        self.text.data.train_batch(&mut self.rng, batch)
    }

    /// Submits a step on the next batch; the stats of the steps completed
    /// meanwhile (`Trainer::step`).
    pub async fn step(&mut self) -> Result<Vec<StepStats>> {
        let batch = self.batch();
        self.trainer.step(&batch).await
    }

    /// The mean loss over the held-out batches at the current weights, and
    /// for a task its accuracy and the first few examples answered.
    pub async fn validate(&mut self) -> Result<Validation> {
        let weight_norm = self.trainer.weight_norm().await?;
        let Batches::Task(set) = &self.text.data else {
            let loss = self.trainer.evaluate(&self.validation, false).await?.loss;
            return Ok(Validation {
                loss,
                accuracy: None,
                char_accuracy: None,
                train_accuracy: None,
                weight_norm,
                examples: vec![],
            });
        };
        let seq = self.trainer.config.shape.seq as usize;
        let score = |batches: &[Batch], predicted: &[Vec<u32>]| {
            let mut a = Accuracy::default();
            for (b, p) in batches.iter().zip(predicted) {
                a.add(Accuracy::of(&b.targets, p, seq));
            }
            a
        };
        let trained = self.trainer.evaluate(&self.training_sample, true).await?;
        let train_accuracy = score(&self.training_sample, &trained.predicted).exact();
        let e = self.trainer.evaluate(&self.validation, true).await?;
        let accuracy = score(&self.validation, &e.predicted);
        // the validation batches hold the held-out examples in order
        let first = (&self.validation[0].targets, &e.predicted[0]);
        let examples = tasks::answers(first.0, seq)
            .into_iter()
            .zip(set.held_out())
            .take(EXAMPLES_SHOWN)
            .map(|(span, example)| Shown {
                prompt: set.task.text(&example.prompt),
                answer: set.task.text(&example.answer),
                predicted: set.task.text(&first.1[span]),
            })
            .collect();
        Ok(Validation {
            loss: e.loss,
            accuracy: Some(accuracy.exact()),
            char_accuracy: Some(accuracy.per_char()),
            train_accuracy: Some(train_accuracy),
            weight_norm,
            examples,
        })
    }

    /// What a checkpoint keeps besides the trainer: the batch order, the
    /// tokenizer and the data state.
    pub fn run_state(&self) -> Result<RunState> {
        Ok(RunState {
            rng: self.rng.0,
            tokenizer_json: self
                .text
                .tokenizer
                .as_ref()
                .map(Tokenizer::to_json)
                .transpose()?,
            data: Some(self.text.state.to_json()?),
        })
    }

    /// The run as a checkpoint, after every step submitted so far.
    pub async fn save(&self) -> Result<Vec<u8>> {
        checkpoint::save(&self.trainer, &self.run_state()?).await
    }
}
