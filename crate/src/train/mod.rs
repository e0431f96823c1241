//! The training loop: one command submission per step (forward, loss head,
//! backward, Σg², finalize, AdamW), its statistics read back `LAG` steps
//! late so the host never waits on the step it just submitted.
//!
//! A step's AdamW count `t` (bias correction, schedule) is the number of
//! steps submitted, skipped ones included: the host learns of a skip only
//! `LAG` steps later. For the same reason the loss scale (dynamic loss
//! scaling, `optim::loss_scale`) lives and changes on the GPU alone.

mod memory;
mod readback;
pub mod synthetic;

pub use memory::{Memory, check_limits};
pub use readback::{LAG, Record};

use serde::{Deserialize, Serialize};

use crate::data::Batch;
use crate::error::{Error, Result};
use crate::gpu::{BOUNDARY_COUNTERS, Dispatch, Gpu};
use crate::kernels::Kernels;
use crate::kernels::boundary::{self, Clamped};
use crate::kernels::linear::units::UnitCounts;
use crate::kernels::optimizer::partials_for;
use crate::kernels::quantize::Quantize;
use crate::model::{BatchShape, Config, Model, ParamLayout, Pass, Recipe};
use crate::ops::adam::{bf16_bits, bf16_value};
use crate::ops::products::{NoiseRatios, OperandCounts};
use crate::optim::{
    LossScale, LossScaler, MasterWeights, OptimConfig, OptimState, Optimizer, sum_squares,
};
use readback::Readback;

/// Steps the reported tokens/s is averaged over.
const RATE_WINDOW: usize = 8;

/// Everything that defines a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub model: Config,
    pub shape: BatchShape,
    pub precision: Recipe,
    pub optim: OptimConfig,
    /// Seeds the initial weights (and, in the callers, the batches).
    pub seed: u64,
}

/// One step, as the CLI prints it and the page plots it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepStats {
    pub step: u32,
    /// Mean cross-entropy of the step's batch (before its update).
    pub loss: f32,
    /// Of the unscaled gradients, as the clip sees them.
    pub grad_norm: f32,
    pub clip_scale: f32,
    pub lr: f64,
    /// NaN/Inf gradient values, treated as 0 by the update.
    pub nonfinite_grads: u32,
    /// The loss was not finite (or Σg² overflowed; with loss scaling, a
    /// gradient was not finite): nothing was updated.
    pub skipped: bool,
    /// With loss scaling: the scale this step's gradients carried, and the
    /// run's skipped steps so far, this one included (kept by checkpoints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_scale: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_total: Option<u32>,
    /// Targets ≥ V (a tokenizer mismatch), and input tokens ≥ V so far.
    pub out_of_range_targets: u32,
    pub bad_tokens: u32,
    pub tokens_per_s: f64,
    /// sf16: this step's clamps per boundary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clamped: Option<Clamped>,
    /// Recipes whose operands go through the formats' quantizers: this
    /// step's counts per product and operand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operands: Option<OperandCounts>,
    /// Recipes that quantize a gradient, at steps 1 and every
    /// `NOISE_EVERY`-th (and a trainer's first): the smallest of
    /// `noise_ratios`, which FP4 All the Way finds must stay above √3.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_ratio: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise_ratios: Option<NoiseRatios>,
    /// Where this step's products ran: on the matrix units, sent back by
    /// their gate, or on the scalar GEMMs and why.
    pub products_on_units: UnitCounts,
}

/// The run seed's 32 bits that seed a recipe's random draws.
fn stream_seed(seed: u64) -> u32 {
    (seed ^ (seed >> 32)) as u32
}

pub struct Trainer {
    pub gpu: Gpu,
    pub k: Kernels,
    pub model: Model,
    pub optimizer: Optimizer,
    pub config: TrainConfig,
    /// The loss scale's state, where the recipe scales the loss.
    scaler: Option<LossScaler>,
    readback: Readback,
    /// Steps submitted.
    step: u32,
    skipped: u32,
    /// When the first step was submitted, and the last `RATE_WINDOW`
    /// steps were collected (seconds): the tokens/s window.
    first_submitted: Option<f64>,
    collected_at: std::collections::VecDeque<f64>,
    /// The step's products that do not reach the units' gate, by reason.
    routes: UnitCounts,
}

impl Trainer {
    /// A new run from `config.seed`'s initial weights.
    pub async fn new(gpu: &Gpu, config: TrainConfig) -> Result<Trainer> {
        let weights = ParamLayout::new(&config.model).initial_weights(config.seed);
        Self::with_weights(gpu, config, &weights).await
    }

    /// A run starting from `weights` (`ParamLayout::total` values); with
    /// bf16-sr master weights, their bf16 values (to nearest, the cast a
    /// model takes to bf16).
    pub async fn with_weights(gpu: &Gpu, config: TrainConfig, weights: &[f32]) -> Result<Trainer> {
        let bf16_weights: Vec<f32>;
        let weights = match config.optim.master {
            MasterWeights::F32 => weights,
            MasterWeights::Bf16Sr => {
                bf16_weights = weights.iter().map(|&x| bf16_value(bf16_bits(x))).collect();
                &bf16_weights
            }
        };
        let gpu = &gpu.with_numerics(config.precision.numerics());
        let keys = Model::gemm_keys(
            &config.model,
            config.shape,
            &config.precision,
            gpu.limits.max_storage_buffer_binding_size,
        )?;
        crate::kernels::linear::tune::prepare(gpu, &keys).await?;
        let k = config
            .precision
            .kernels(gpu, &[config.model.head_dim()], stream_seed(config.seed))
            .await?;
        let mut model = Model::new(
            gpu,
            &k,
            (config.model.clone(), config.shape, config.precision.clone()),
            (weights, config.optim.master.storage()),
        )
        .await?;
        let scaler = config
            .precision
            .loss_scaling()
            .map(|s| LossScaler::new(gpu, s))
            .transpose()?;
        if let Some(s) = &scaler {
            model.scale_loss(gpu, &k, &s.state)?;
        }
        let optimizer = Optimizer::new(
            gpu,
            &k,
            &model,
            (config.optim, config.seed),
            scaler.as_ref(),
        )?;
        let routes = UnitCounts::of_routes(model.pass(Pass::Train).iter().filter_map(|d| d.route));
        Ok(Trainer {
            gpu: gpu.clone(),
            k,
            model,
            optimizer,
            config,
            scaler,
            readback: Readback::default(),
            step: 0,
            skipped: 0,
            first_submitted: None,
            collected_at: Default::default(),
            routes,
        })
    }

    /// Steps submitted so far.
    pub fn steps(&self) -> u32 {
        self.step
    }

    /// Continues a run at step `steps` (a checkpoint's): the next step is
    /// `steps + 1`, so the schedule and AdamW's bias corrections go on. Only
    /// before this trainer's first step.
    pub(crate) fn resume_at(&mut self, steps: u32) -> Result<()> {
        if self.step != 0 || self.readback.in_flight() != 0 {
            return Err(Error::Unsupported(format!(
                "cannot resume at step {steps}: this trainer has already run {} steps",
                self.step
            )));
        }
        self.step = steps;
        Ok(())
    }

    /// Switches to another weights precision or optimizer state, as at a
    /// pause: the master weights are kept, the moments converted (int8 ↔
    /// f32, `HostState::convert`), the step count goes on. The new buffers
    /// are made before the old ones go, so a device that cannot hold both
    /// refuses the switch and the run stays as it was. Returns the stats of
    /// the steps still in flight.
    pub async fn reconfigure(
        &mut self,
        precision: Recipe,
        state: OptimState,
    ) -> Result<Vec<StepStats>> {
        let done = self.flush().await?;
        let weights = self.model.read_weights(&self.gpu).await?;
        let moments = self.optimizer.read_state(&self.gpu).await?.convert(state);
        let scale = self.loss_scale().await?;
        let config = TrainConfig {
            precision,
            optim: OptimConfig {
                state,
                ..self.config.optim
            },
            ..self.config.clone()
        };
        let mut next = Trainer::with_weights(&self.gpu, config, &weights).await?;
        next.optimizer.write_state(&self.gpu, &moments)?;
        if let Some(s) = scale {
            next.restore_loss_scale(s);
        }
        next.resume_at(self.step)?;
        next.skipped = self.skipped;
        *self = next;
        Ok(done)
    }

    /// Steps skipped among those collected.
    pub fn skipped(&self) -> u32 {
        self.skipped
    }

    /// The loss scale's state after every step submitted so far; None
    /// when the run does not scale.
    pub async fn loss_scale(&self) -> Result<Option<LossScale>> {
        match &self.scaler {
            Some(s) => Ok(Some(s.read(&self.gpu).await?)),
            None => Ok(None),
        }
    }

    /// Continues the loss scale from `state` (a checkpoint's), before the
    /// next submission; a run that does not scale ignores it.
    pub(crate) fn restore_loss_scale(&self, state: LossScale) {
        if let Some(s) = &self.scaler {
            s.write(&self.gpu, &state);
        }
    }

    /// ‖W‖₂ of the weights that decay — the 2-D matrices and embeddings,
    /// not the norm gains, whose 1s would swamp it (padding holds 0) —
    /// after the steps submitted so far: what grokking studies watch.
    /// Σw² per chunk on the GPU, the partials summed here.
    pub async fn weight_norm(&self) -> Result<f64> {
        let chunks: Vec<_> = self.optimizer.chunks.iter().filter(|c| c.decays).collect();
        let count: u64 = chunks.iter().map(|c| partials_for(c.span.len)).sum();
        let partials = self.gpu.storage_buffer("weight_norm", 8 * count)?;
        let weights = self.model.f32_weights(&self.gpu, &self.k).await?;
        let dispatches = sum_squares(&self.gpu, &self.k, &weights, &chunks, &partials)?;
        self.gpu.run(&dispatches.iter().collect::<Vec<_>>()).await?;
        let sums: Vec<[f32; 2]> = self.gpu.read_back((&partials).into()).await?;
        Ok(sums.iter().map(|s| s[0] as f64).sum::<f64>().sqrt())
    }

    /// Optimizer dispatches per step: depends on the model's size, not its tensor count.
    pub fn optimizer_dispatches(&self) -> usize {
        self.optimizer.dispatches.len()
    }

    pub fn memory(&self) -> Result<Memory> {
        Memory::of(
            &self.config.model,
            self.config.shape,
            &self.config.precision,
            (
                self.config.optim.optimizer,
                self.config.optim.state,
                self.config.optim.master.storage(),
            ),
            self.gpu.limits.max_storage_buffer_binding_size,
        )
    }

    /// Submits one training step on `batch`; returns the stats of the steps
    /// that completed meanwhile (those more than `LAG` steps old).
    pub async fn step(&mut self, batch: &Batch) -> Result<Vec<StepStats>> {
        self.submit(batch, None)?;
        let mut done = Vec::new();
        while self.readback.in_flight() > LAG {
            done.extend(self.collect().await?);
        }
        Ok(done)
    }

    /// Every dispatch of a step, in order: the model's training pass, the
    /// optimizer, and the quantized copy of the updated weights.
    pub fn step_dispatches(&self) -> Vec<&Dispatch> {
        let m = &self.model;
        [
            m.pass(Pass::Train),
            self.optimizer.dispatches.iter().collect(),
            m.pass(Pass::AfterUpdate),
        ]
        .concat()
    }

    /// Records and submits step t + 1: one compute pass, or with `timing`
    /// one pass per dispatch bracketed by timestamps (2 queries each).
    pub(crate) fn submit(&mut self, batch: &Batch, timing: Option<&wgpu::QuerySet>) -> Result<()> {
        self.gpu.check_health()?;
        let t = self.step + 1;
        self.model
            .write_batch(&self.gpu, &batch.inputs, &batch.targets)?;
        self.optimizer.write_step(&self.gpu, &self.k, t)?;
        // a trainer's first step too: a run switched to a recipe shows it at once
        let noise = Quantize::measures_noise(t) || self.first_submitted.is_none();
        self.k.write_step(&self.gpu, t, noise);
        let record = self.readback.target(&self.gpu);
        let mut encoder = self
            .gpu
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("train_step"),
            });
        if let Some(s) = &self.scaler {
            // the scale this step runs with, before its finalize changes it
            let at = std::mem::offset_of!(Record, scale) as u64;
            encoder.copy_buffer_to_buffer(&s.state, 0, &record, at, 16);
        }
        boundary::clear(&self.gpu, &mut encoder);
        self.k.linear.clear_counts(&mut encoder);
        match timing {
            None => {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("train_step"),
                    timestamp_writes: None,
                });
                self.step_dispatches()
                    .into_iter()
                    .for_each(|d| d.record(&mut pass));
            }
            Some(queries) => {
                for (i, d) in self.step_dispatches().into_iter().enumerate() {
                    let writes = wgpu::ComputePassTimestampWrites {
                        query_set: queries,
                        beginning_of_pass_write_index: Some(2 * i as u32),
                        end_of_pass_write_index: Some(2 * i as u32 + 1),
                    };
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: Some(d.label),
                        timestamp_writes: Some(writes),
                    });
                    d.record(&mut pass);
                }
            }
        }
        let m = &self.model;
        encoder.copy_buffer_to_buffer(
            &self.gpu.boundary_counts,
            0,
            &record,
            std::mem::offset_of!(Record, clamped) as u64,
            4 * BOUNDARY_COUNTERS,
        );
        let operands = std::mem::offset_of!(Record, operands) as u64;
        self.k.linear.copy_counts(&mut encoder, &record, operands);
        let noise = std::mem::offset_of!(Record, noise) as u64;
        self.k.linear.copy_noise(&mut encoder, &record, noise);
        let units = std::mem::offset_of!(Record, units) as u64;
        self.k.linear.copy_unit_counts(&mut encoder, &record, units);
        encoder.copy_buffer_to_buffer(&m.acts.loss, 0, &record, 0, 16);
        encoder.copy_buffer_to_buffer(&self.optimizer.stats, 0, &record, 16, 16);
        encoder.copy_buffer_to_buffer(&m.inputs.bad_tokens, 0, &record, 32, 4);
        let submission = self.gpu.queue.submit([encoder.finish()]);
        self.readback.submitted(t, record, submission);
        self.first_submitted.get_or_insert_with(now_s);
        self.step = t;
        Ok(())
    }

    /// Waits for every submitted step; returns their stats.
    pub async fn flush(&mut self) -> Result<Vec<StepStats>> {
        let mut done = Vec::new();
        while self.readback.in_flight() > 0 {
            done.extend(self.collect().await?);
        }
        Ok(done)
    }

    async fn collect(&mut self) -> Result<Option<StepStats>> {
        let Some((step, r)) = self.readback.collect_oldest(&self.gpu).await? else {
            return Ok(None);
        };
        // steps are collected in bursts (a drain, a device that finishes
        // several submissions at once): rate over a window of them
        let now = now_s();
        let (since, steps) = match self.collected_at.front() {
            Some(&oldest) => (now - oldest, self.collected_at.len()),
            None => (now - self.first_submitted.unwrap_or(now), 1),
        };
        self.collected_at.push_back(now);
        if self.collected_at.len() > RATE_WINDOW {
            self.collected_at.pop_front();
        }
        let skipped = r.grads.skip != 0;
        self.skipped += skipped as u32;
        let tokens = self.config.shape.rows() as f64;
        let scale = self.scaler.is_some().then_some(r.scale);
        let products = self.config.precision.products();
        // steps that did not sum it have none
        let noise = NoiseRatios::from_sums(&r.noise).filter(|_| products.quantizes_gradients());
        Ok(Some(StepStats {
            step,
            loss: r.loss.mean,
            grad_norm: r.grads.norm,
            // AdamW's factor has the scale divided out: the clip alone
            clip_scale: r.grads.clip_scale * scale.map_or(1.0, |s| s.scale),
            lr: self.config.optim.schedule.lr(step),
            nonfinite_grads: r.grads.nonfinite,
            skipped,
            loss_scale: scale.map(|s| s.scale),
            skipped_total: scale.map(|s| s.skipped + skipped as u32),
            out_of_range_targets: r.loss.out_of_range,
            bad_tokens: r.bad_tokens,
            clamped: self
                .config
                .precision
                .counts()
                .then(|| Clamped::from_counters(&r.clamped)),
            operands: (products.counts_operands()).then(|| OperandCounts::from_words(&r.operands)),
            noise_ratio: noise.and_then(|n| n.min()),
            noise_ratios: noise,
            products_on_units: self.routes.with_gate(&r.units),
            tokens_per_s: if since > 0.0 {
                steps as f64 * tokens / since
            } else {
                0.0
            },
        }))
    }

    /// Mean loss over `batches` with the current weights (no update), and
    /// with `predict` each batch's most likely token at every position
    /// (`[rows]` per batch: the logits are read back, so meant for small
    /// vocabularies such as the tasks'). Batches that are not the model's
    /// shape are refused.
    pub async fn evaluate(&mut self, batches: &[Batch], predict: bool) -> Result<Evaluation> {
        if batches.is_empty() {
            return Err(Error::Unsupported(
                "no validation batches to evaluate".into(),
            ));
        }
        let mut sum = 0.0;
        let mut predicted = Vec::new();
        for b in batches {
            let m = &self.model;
            sum += m.evaluate(&self.gpu, &b.inputs, &b.targets).await?.mean as f64;
            if predict {
                let logits = m.logits(&self.gpu, &self.k).await?;
                predicted.push(argmax_rows(&logits, m.config.vocab as usize));
            }
        }
        Ok(Evaluation {
            loss: sum / batches.len() as f64,
            predicted,
        })
    }
}

/// What `Trainer::evaluate` found.
pub struct Evaluation {
    /// The mean of the batches' mean losses.
    pub loss: f64,
    /// Per batch, the most likely token at each position (empty unless asked).
    pub predicted: Vec<Vec<u32>>,
}

/// The index of each `width`-wide row's largest value (the first of equals).
fn argmax_rows(values: &[f32], width: usize) -> Vec<u32> {
    values
        .chunks(width)
        .map(|row| {
            let mut best = 0;
            for (j, &z) in row.iter().enumerate() {
                if z > row[best] {
                    best = j;
                }
            }
            best as u32
        })
        .collect()
}

/// Seconds on a monotonic clock (the browser's `Date.now` where `Instant` panics).
pub(crate) fn now_s() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Date::now() / 1000.0
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs_f64()
    }
}
