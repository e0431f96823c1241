//! `webtrain bench` for whole training steps: per preset, precision and
//! optimizer state, the GPU time of one step (forward, head, backward,
//! optimizer) and the tokens/s it gives; and the AdamW dispatches alone, as
//! GB/s against the copy kernel's GB/s of the same run.

use serde::Serialize;
use webtrain::gpu::{Dispatch, Gpu};
use webtrain::model::{BatchShape, Config, Precision};
use webtrain::optim::{OptimConfig, OptimState};
use webtrain::train::{Memory, TrainConfig, Trainer};
use webtrain::Result;

#[derive(Serialize)]
struct StepRow {
    preset: String,
    precision: &'static str,
    optim_state: &'static str,
    batch: u32,
    seq: u32,
    parameters: u64,
    step_ms: f64,
    tokens_per_s: f64,
    adamw_ms: f64,
    /// Bytes AdamW reads and writes per parameter (stated, not measured).
    adamw_bytes_per_param: u64,
    adamw_gb_s: f64,
    adamw_of_copy_bandwidth: f64,
    /// Dispatches of the optimizer per step: Σg² per chunk, finalize, update per chunk.
    optimizer_dispatches: usize,
    dispatches_per_step: usize,
    memory: Memory,
}

/// Bytes the fused update moves per parameter: weights, gradients (read,
/// then zeroed) and both moments read and written; the mirror written.
fn adamw_bytes(precision: Precision, state: OptimState) -> u64 {
    let moments = match state {
        OptimState::Fp32 => 2 * (4 + 4),
        OptimState::Int8 => 2 * (1 + 1), // + 8 B of scales per 256 values, left out
    };
    let mirror = if precision == Precision::F16 { 2 } else { 0 };
    2 * 4 + 2 * 4 + moments + mirror
}

pub fn shape_of(preset: &str) -> BatchShape {
    match preset {
        "tiny" => BatchShape { batch: 8, seq: 64 },
        "small" => BatchShape { batch: 8, seq: 256 },
        _ => BatchShape { batch: 8, seq: 512 },
    }
}

pub async fn run(gpu: &Gpu, presets: &[String], reps: u32, copy_bw: f64) -> Result<()> {
    eprintln!("{:<6} {:<5} {:<5} {:>10} {:>10} {:>12} {:>10} {:>9} {:>7} {:>6}", "preset", "prec", "state", "params", "step ms", "tokens/s", "adamw ms", "GB/s", "%copy", "disp");
    for preset in presets {
        for precision in [Precision::Fp32, Precision::F16] {
            for state in [OptimState::Fp32, OptimState::Int8] {
                let shape = shape_of(preset);
                let config = TrainConfig {
                    model: Config::preset(preset)?,
                    shape,
                    precision,
                    optim: OptimConfig { state, ..OptimConfig::default() },
                    seed: 1,
                };
                let trainer = match Trainer::new(gpu, config).await {
                    Ok(t) => t,
                    Err(e) => {
                        eprintln!("{preset:<6} {:<5} {:<5} skipped: {e}", precision.name(), state.name());
                        continue;
                    }
                };
                let m = &trainer.model;
                let step: Vec<&Dispatch> = [&m.forward, &m.head_train, &m.backward, &trainer.adam.dispatches].into_iter().flatten().collect();
                gpu.time_dispatches(&step, 1).await?; // warm-up
                let step_s = gpu.time_dispatches(&step, reps).await?;
                let adam: Vec<&Dispatch> = trainer.adam.dispatches.iter().collect();
                let adam_s = gpu.time_dispatches(&adam, reps).await?;
                let memory = trainer.memory()?;
                let bytes = adamw_bytes(precision, state);
                let gb_s = (bytes * m.layout.total) as f64 / adam_s / 1e9;
                let row = StepRow {
                    preset: preset.clone(),
                    precision: precision.name(),
                    optim_state: state.name(),
                    batch: shape.batch,
                    seq: shape.seq,
                    parameters: memory.parameters,
                    step_ms: step_s * 1e3,
                    tokens_per_s: shape.rows() as f64 / step_s,
                    adamw_ms: adam_s * 1e3,
                    adamw_bytes_per_param: bytes,
                    adamw_gb_s: gb_s,
                    adamw_of_copy_bandwidth: gb_s * 1e9 / copy_bw,
                    optimizer_dispatches: adam.len(),
                    dispatches_per_step: step.len(),
                    memory,
                };
                eprintln!(
                    "{:<6} {:<5} {:<5} {:>10} {:>10.2} {:>12.0} {:>10.3} {:>9.1} {:>7.1} {:>6}",
                    row.preset, row.precision, row.optim_state, row.parameters, row.step_ms, row.tokens_per_s, row.adamw_ms, row.adamw_gb_s,
                    100.0 * row.adamw_of_copy_bandwidth, row.optimizer_dispatches
                );
                println!("{}", serde_json::to_string(&row).map_err(|e| webtrain::Error::Unsupported(e.to_string()))?);
            }
        }
    }
    Ok(())
}
