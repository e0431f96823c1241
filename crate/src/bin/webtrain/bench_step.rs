//! `webtrain bench` for whole training steps: per preset, precision,
//! optimizer, its state and the master weights, the GPU time of one step (forward, head, backward,
//! optimizer) and the tokens/s it gives; and the optimizer's dispatches
//! alone, their share of the step and, for AdamW, GB/s against the copy
//! kernel's GB/s of the same run; or (`profile`)
//! where one step's GPU time goes, kernel by kernel.

use serde::Serialize;
use webtrain::Result;
use webtrain::data::Batch;
use webtrain::gpu::{BufferRange, Dispatch, Gpu};
use webtrain::model::{Recipe, Span};
use webtrain::optim::{MasterWeights, OptimState, OptimizerKind};
use webtrain::rng::{SplitMix64, uniform};
use webtrain::run::RunSpec;
use webtrain::train::{Memory, Trainer, synthetic};

#[derive(Serialize)]
struct StepRow {
    preset: String,
    precision: String,
    /// Where the recipe's f16 products ran (`--matrix-units`), if on matrix units.
    matrix_units: Option<String>,
    optimizer: &'static str,
    optim_state: &'static str,
    master_weights: &'static str,
    batch: u32,
    seq: u32,
    parameters: u64,
    step_ms: f64,
    tokens_per_s: f64,
    /// The optimizer's dispatches alone (AdamW's, or Muon's and AdamW's).
    adamw_ms: f64,
    optimizer_share_of_step: f64,
    /// AdamW for every parameter: bytes it reads and writes per parameter
    /// (stated, not measured), and the bandwidth that gives.
    adamw_bytes_per_param: Option<u64>,
    adamw_gb_s: Option<f64>,
    adamw_of_copy_bandwidth: Option<f64>,
    /// Dispatches of the optimizer per step: Σg² per chunk, finalize, update per chunk.
    optimizer_dispatches: usize,
    dispatches_per_step: usize,
    memory: Memory,
}

/// Bytes the fused update moves per parameter: weights (f32, or bf16-sr's
/// bf16) and both moments read and written, gradients read then zeroed;
/// the mirror written.
fn adamw_bytes(precision: &Recipe, state: OptimState, master: MasterWeights) -> u64 {
    let moments = match state {
        OptimState::Fp32 => 2 * (4 + 4),
        OptimState::Bf16 => 2 * (2 + 2),
        OptimState::Fp8 | OptimState::Int8 | OptimState::Int8Linear => 2 * (1 + 1), // + 8 B of scales per 256 values, left out
        OptimState::Int4 => 1 + 1, // a nibble of each moment read and written; + 8 B per 128
    };
    let mirror = if precision.f16_weights() { 2 } else { 0 };
    let weights = match master {
        MasterWeights::F32 => 4,
        MasterWeights::Bf16Sr => 2,
    };
    2 * weights + 2 * 4 + moments + mirror
}

/// Which steps to time: every preset × precision × optimizer × state ×
/// master weights listed.
pub struct Runs<'a> {
    pub presets: &'a [String],
    pub precisions: &'a [Recipe],
    pub optimizers: &'a [OptimizerKind],
    pub states: &'a [OptimState],
    pub masters: &'a [MasterWeights],
}

impl Runs<'_> {
    /// Each run's trainer in turn, for `each`; a run the adapter cannot
    /// hold is skipped with its reason on stderr.
    async fn for_each(
        &self,
        gpu: &Gpu,
        mut each: impl AsyncFnMut(&str, Trainer) -> Result<()>,
    ) -> Result<()> {
        for preset in self.presets {
            for precision in self.precisions {
                for (&optimizer, &state, &master) in self.optimizers.iter().flat_map(|o| {
                    (self.states.iter())
                        .flat_map(move |s| self.masters.iter().map(move |m| (o, s, m)))
                }) {
                    // the preset's run, as the page and `train` start it
                    let spec = RunSpec {
                        precision: precision.clone(),
                        optimizer,
                        optim_state: state,
                        master_weights: master,
                        ..RunSpec::preset(preset)?
                    };
                    let config = spec.config()?;
                    match Trainer::new(gpu, config).await {
                        Ok(trainer) => each(preset, trainer).await?,
                        Err(e) => eprintln!(
                            "{preset:<6} {:<5} {} {:<5} {:<7} skipped: {e}",
                            precision.name(),
                            optimizer.name(),
                            state.name(),
                            master.name()
                        ),
                    }
                }
            }
        }
        Ok(())
    }
}

pub async fn run(gpu: &Gpu, runs: &Runs<'_>, reps: u32, copy_bw: f64) -> Result<()> {
    eprintln!(
        "{:<6} {:<5} {:<5} {:<5} {:<7} {:>10} {:>10} {:>12} {:>10} {:>6} {:>9} {:>7} {:>6}",
        "preset",
        "prec",
        "optim",
        "state",
        "master",
        "params",
        "step ms",
        "tokens/s",
        "optim ms",
        "%step",
        "GB/s",
        "%copy",
        "disp"
    );
    runs.for_each(gpu, async |preset, trainer| {
        let (shape, precision, state, master) = (
            trainer.config.shape,
            trainer.config.precision.clone(),
            trainer.config.optim.state,
            trainer.config.optim.master,
        );
        trainer.optimizer.write_step(gpu, &trainer.k, 1)?;
        let m = &trainer.model;
        let step: Vec<&Dispatch> = trainer.step_dispatches();
        gpu.warm_up(&step, 0.5).await?;
        let step_s = gpu.time_dispatches(&step, reps).await?;
        let adam_s = adamw_seconds(gpu, &trainer, reps).await?;
        let memory = trainer.memory()?;
        let optimizer = trainer.config.optim.optimizer;
        let bytes =
            (optimizer == OptimizerKind::Adamw).then(|| adamw_bytes(&precision, state, master));
        let gb_s = bytes.map(|b| (b * m.layout.total) as f64 / adam_s / 1e9);
        let row = StepRow {
            preset: preset.to_string(),
            precision: precision.name().to_string(),
            matrix_units: trainer.k.matrix_units_report(gpu),
            optimizer: optimizer.name(),
            optim_state: state.name(),
            master_weights: master.name(),
            batch: shape.batch,
            seq: shape.seq,
            parameters: memory.parameters,
            step_ms: step_s * 1e3,
            tokens_per_s: shape.rows() as f64 / step_s,
            adamw_ms: adam_s * 1e3,
            optimizer_share_of_step: adam_s / step_s,
            adamw_bytes_per_param: bytes,
            adamw_gb_s: gb_s,
            adamw_of_copy_bandwidth: gb_s.map(|g| g * 1e9 / copy_bw),
            optimizer_dispatches: trainer.optimizer.dispatches.len(),
            dispatches_per_step: step.len(),
            memory,
        };
        eprintln!(
            "{:<6} {:<5} {:<5} {:<5} {:<7} {:>10} {:>10.2} {:>12.0} {:>10.3} {:>6.1} {:>9} {:>7} {:>6}",
            row.preset,
            row.precision,
            row.optimizer,
            row.optim_state,
            row.master_weights,
            row.parameters,
            row.step_ms,
            row.tokens_per_s,
            row.adamw_ms,
            100.0 * row.optimizer_share_of_step,
            row.adamw_gb_s.map_or("—".into(), |g| format!("{g:.1}")),
            row.adamw_of_copy_bandwidth
                .map_or("—".into(), |c| format!("{:.1}", 100.0 * c)),
            row.optimizer_dispatches
        );
        println!(
            "{}",
            serde_json::to_string(&row).map_err(|e| webtrain::Error::Unsupported(e.to_string()))?
        );
        Ok(())
    })
    .await
}

#[derive(Serialize)]
struct ProfileRow<'a> {
    preset: &'a str,
    precision: &'a str,
    optim_state: &'static str,
    master_weights: &'static str,
    kernel: &'a str,
    dispatches: u32,
    ms: f64,
    share_of_step: f64,
}

/// Where a step's GPU time goes, per run: `reps` steps trained on a
/// synthetic batch after a warm-up, each dispatch in a timed pass of its
/// own (`Trainer::profiled_step`), the least time of each kernel kept.
pub async fn profile(gpu: &Gpu, runs: &Runs<'_>, reps: u32) -> Result<()> {
    runs.for_each(gpu, async |preset, mut trainer| {
        let shape = trainer.config.shape;
        let tokens =
            synthetic::markov_tokens(trainer.config.model.vocab, shape.rows() as usize + 1, 3);
        let batch = Batch {
            inputs: tokens[..shape.rows() as usize].to_vec(),
            targets: tokens[1..].to_vec(),
        };
        trainer.optimizer.write_step(gpu, &trainer.k, 1)?; // warm up on a real update
        gpu.warm_up(&trainer.step_dispatches(), 0.5).await?;
        let mut best = trainer.profiled_step(&batch).await?.1;
        for _ in 1..reps {
            for t in trainer.profiled_step(&batch).await?.1 {
                if let Some(b) = best.iter_mut().find(|b| b.kernel == t.kernel) {
                    b.ms = b.ms.min(t.ms);
                }
            }
        }
        best.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        let total: f64 = best.iter().map(|t| t.ms).sum();
        let precision = trainer.config.precision.name().to_string();
        let (state, master) = (trainer.config.optim.state.name(), trainer.config.optim.master.name());
        eprintln!("{preset} {precision} / {state} state, {master} master weights: {total:.2} ms of kernels");
        for t in &best {
            let row = ProfileRow {
                preset,
                precision: &precision,
                optim_state: state,
                master_weights: master,
                kernel: &t.kernel,
                dispatches: t.dispatches,
                ms: t.ms,
                share_of_step: t.ms / total,
            };
            eprintln!(
                "  {:<28} {:>5} {:>10.3} ms {:>6.1}%",
                row.kernel,
                row.dispatches,
                row.ms,
                100.0 * row.share_of_step
            );
            println!(
                "{}",
                serde_json::to_string(&row)
                    .map_err(|e| webtrain::Error::Unsupported(e.to_string()))?
            );
        }
        Ok(())
    })
    .await
}

/// GPU seconds of one optimizer step on gradients as a backward leaves
/// them: before each rep a fixed random gradient is restored in a pass of
/// its own, outside the timed one (AdamW zeroes it, and all-zero traffic ran
/// faster than the H100's HBM3 peak allows).
async fn adamw_seconds(gpu: &Gpu, trainer: &Trainer, reps: u32) -> Result<f64> {
    let n = trainer.model.layout.total as usize;
    let saved = uniform(&mut SplitMix64(7), n, -1e-3, 1e-3);
    let saved = gpu.upload("saved gradients", &saved)?;
    let range = |buffer, span: &Span| BufferRange {
        buffer,
        offset: 4 * span.start,
        size: 4 * span.len,
    };
    let restore = trainer
        .optimizer
        .chunks
        .iter()
        .map(|c| {
            trainer.k.infra.copy(
                gpu,
                range(&saved, &c.span),
                range(&trainer.model.params.grads, &c.span),
                c.span.len as u32,
            )
        })
        .collect::<Result<Vec<Dispatch>>>()?;
    let restore: Vec<&Dispatch> = restore.iter().collect();
    let adam: Vec<&Dispatch> = trainer.optimizer.dispatches.iter().collect();
    gpu.warm_up(&[&restore[..], &adam[..]].concat(), 0.05)
        .await?;
    let seconds = gpu.time_after(&restore, &adam, reps).await?;
    // GradStats {norm, clip_scale, nonfinite, skip}: a skipped step only zeroes gradients
    if gpu
        .read_back::<u32>((&trainer.optimizer.stats).into())
        .await?[3]
        != 0
    {
        return Err(webtrain::Error::Unsupported("bench: the optimizer skipped its step (non-finite loss or gradients), so its time is not AdamW's".into()));
    }
    Ok(seconds)
}
