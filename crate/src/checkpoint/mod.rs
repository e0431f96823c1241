//! The native checkpoint: one `.safetensors` file that resumes a run
//! exactly — the master weights per tensor (f32, or BF16 for bf16-sr
//! weights, which are bf16 values), AdamW's state as the GPU holds it, the
//! step, and (as string metadata) the training config, the loss scale's
//! state, the caller's data state and the tokenizer. The f16 mirror is not
//! stored: it is the master rounded, rebuilt when the trainer is made.
//! docs/CHECKPOINTS.md describes the format.
//!
//! `save` reads the GPU after every step submitted so far (the queue orders
//! the copies after them), so it needs no flush and the caller still
//! collects the pending steps' stats. `load` refuses a damaged or foreign
//! file with the reason before it touches the GPU.

mod file;
mod format;
#[cfg(test)]
mod tests;

pub use format::{FORMAT, VERSION};

use crate::data::Tokenizer;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::optim::{HostState, LossScale};
use crate::train::{TrainConfig, Trainer};

/// What the caller needs, besides the trainer, to go on with the same
/// batches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunState {
    /// The batch sampler's `SplitMix64` state after the last step's batch.
    pub rng: u64,
    /// The run's tokenizer.json (none for synthetic tokens).
    pub tokenizer_json: Option<String>,
    /// The caller's own description of its data (free text, e.g. JSON).
    pub data: Option<String>,
}

impl RunState {
    /// The run's tokenizer, if it has one.
    pub fn tokenizer(&self) -> Result<Option<Tokenizer>> {
        self.tokenizer_json
            .as_deref()
            .map(Tokenizer::from_json)
            .transpose()
    }
}

/// A checkpoint on the host: everything the file holds, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub config: TrainConfig,
    /// Steps trained (submitted, skipped ones included): the next is `step + 1`.
    pub step: u32,
    pub run: RunState,
    /// The tokenizer's fingerprint (of `run.tokenizer_json`).
    pub tokenizer_fingerprint: Option<String>,
    /// The master weights at their `ParamLayout` offsets, padding zero
    /// (bf16-sr's: bf16 values).
    pub weights: Vec<f32>,
    pub state: HostState,
    /// With `config.loss_scaling`: the loss scale's state.
    pub loss_scale: Option<LossScale>,
}

/// The largest checkpoint the page loads. Its module is wasm32: one 4 GiB
/// address space holds the file's bytes and the weights and optimizer
/// state read from them (as large again), then the run; no allocation may
/// pass 2 GiB. 1.5 GiB takes the base preset's run with fp32 moments (110 M
/// parameters: 1.23 GiB) and keeps file and copy at 3 GiB. The CLI
/// (`webtrain train --resume`) reads any size. www/limits.js holds the
/// same number for the file the page reads.
pub const PAGE_MAX_BYTES: u64 = 3 << 29;

impl Checkpoint {
    /// Refuses, before it is read, a checkpoint of `bytes` that the page
    /// cannot hold (`PAGE_MAX_BYTES`).
    pub fn check_page_size(bytes: u64) -> Result<()> {
        if bytes <= PAGE_MAX_BYTES {
            return Ok(());
        }
        Err(Error::Checkpoint(format!(
            "the file is {}, beyond the cap of {} for a checkpoint the page loads: the page's \
             wasm module (4 GiB of memory for the file, the run it holds and the model) takes \
             no more; the CLI (webtrain train --resume) has no such cap",
            crate::error::byte_size(bytes),
            crate::error::byte_size(PAGE_MAX_BYTES)
        )))
    }

    /// The trainer's weights and AdamW state after every step submitted so far.
    pub async fn read(trainer: &Trainer, run: RunState) -> Result<Checkpoint> {
        let tokenizer_fingerprint = run.tokenizer()?.map(|t| t.fingerprint().to_string());
        Ok(Checkpoint {
            config: trainer.config.clone(),
            step: trainer.steps(),
            run,
            tokenizer_fingerprint,
            weights: trainer.model.read_weights(&trainer.gpu).await?,
            state: trainer.optimizer.read_state(&trainer.gpu).await?,
            loss_scale: trainer.loss_scale().await?,
        })
    }

    /// A trainer holding these weights and this state, whose next step is `step + 1`.
    pub async fn restore(&self, gpu: &Gpu) -> Result<Trainer> {
        let c = &self.config;
        let mut trainer = Trainer::with_weights(gpu, c.clone(), &self.weights)
            .await
            .map_err(|e| match e {
                Error::Limit { .. } => Error::Checkpoint(format!(
                    "this adapter cannot hold its run ({} parameters, batch {} × {}): {e}",
                    crate::model::ParamLayout::new(&c.model).parameters(),
                    c.shape.batch,
                    c.shape.seq
                )),
                e => e,
            })?;
        trainer.optimizer.write_state(gpu, &self.state)?;
        if let Some(s) = self.loss_scale {
            trainer.restore_loss_scale(s);
        }
        trainer.resume_at(self.step)?;
        Ok(trainer)
    }

    /// Refuses a checkpoint made with another tokenizer than `in_use` (its fingerprint).
    pub fn check_tokenizer(&self, in_use: &str) -> Result<()> {
        match &self.tokenizer_fingerprint {
            Some(made_with) if made_with == in_use => Ok(()),
            made_with => Err(Error::TokenizerMismatch {
                what: "the checkpoint".into(),
                made_with: made_with
                    .clone()
                    .unwrap_or_else(|| "none (synthetic tokens)".into()),
                in_use: in_use.to_string(),
            }),
        }
    }
}

/// The run as `.safetensors` bytes: `trainer`'s weights and AdamW state
/// after every step submitted so far, and the caller's `run` state.
pub async fn save(trainer: &Trainer, run: &RunState) -> Result<Vec<u8>> {
    Checkpoint::read(trainer, run.clone()).await?.to_bytes()
}

/// A trainer continuing the run in `bytes`, and the caller's state.
pub async fn load(gpu: &Gpu, bytes: &[u8]) -> Result<(Trainer, RunState)> {
    let c = Checkpoint::from_bytes(bytes)?;
    Ok((c.restore(gpu).await?, c.run))
}

/// `load`, refusing a checkpoint made with another tokenizer than the one
/// whose fingerprint is `tokenizer_fingerprint`, naming both.
pub async fn load_checked(
    gpu: &Gpu,
    bytes: &[u8],
    tokenizer_fingerprint: &str,
) -> Result<(Trainer, RunState)> {
    let c = Checkpoint::from_bytes(bytes)?;
    c.check_tokenizer(tokenizer_fingerprint)?;
    Ok((c.restore(gpu).await?, c.run))
}
