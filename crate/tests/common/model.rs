//! The whole model on the GPU against reference/model.rs: logits, loss and
//! every parameter gradient of the tiny preset, fp32 and f16 weights.

use webtrain::kernels::Kernels;
use webtrain::kernels::loss::IGNORE_INDEX;
use webtrain::model::{BatchShape, Config, Model, ParamLayout, Pass, Recipe};
use webtrain::reference::model as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_close, assert_close_to_scale, rng};
use rand::Rng;

/// Not a multiple of the 64-row tiles or the 16-row attention blocks.
pub const SHAPE: BatchShape = BatchShape { batch: 3, seq: 45 };

/// A run of the tiny preset on `SHAPE`: AdamW with `state`, at 3e-3 after
/// `warmup` steps, cosine to a tenth at step `total`.
pub fn tiny_run(
    precision: Recipe,
    state: webtrain::optim::OptimState,
    (warmup, total): (u32, u32),
    seed: u64,
) -> Result<webtrain::train::TrainConfig> {
    let schedule = webtrain::optim::LrSchedule {
        peak: 3e-3,
        warmup,
        total,
        min_ratio: 0.1,
    };
    let optim = webtrain::optim::OptimConfig {
        state,
        schedule,
        ..Default::default()
    };
    Ok(webtrain::train::TrainConfig {
        model: Config::preset("tiny")?,
        shape: SHAPE,
        precision,
        optim,
        seed,
    })
}

pub fn tokens(seed: u64, n: usize, vocab: u32) -> Vec<u32> {
    let mut r = rng(seed);
    (0..n).map(|_| r.random_range(0..vocab)).collect()
}

/// Initial weights made less trivial: matrices at std 0.1 (logits far from
/// uniform, attention not flat) and gains spread over [0.5, 1.5].
pub fn weights(layout: &ParamLayout, seed: u64) -> Vec<f32> {
    let mut w = layout.initial_weights(seed);
    let mut r = rng(seed);
    for t in &layout.tensors {
        for x in &mut w[t.offset as usize..(t.offset + t.len()) as usize] {
            *x = if t.decays {
                *x * 5.0
            } else {
                r.random_range(0.5..1.5)
            };
        }
    }
    w
}

/// Runs forward, head and backward once; returns (logits, loss, grads).
pub async fn run_step(
    gpu: &Gpu,
    k: &Kernels,
    model: &Model,
    inputs: &[u32],
    targets: &[u32],
) -> Result<(Vec<f32>, f32, Vec<f32>)> {
    model.write_batch(gpu, inputs, targets)?;
    model.run(gpu, Pass::Forward).await?;
    // the logits, before the loss overwrites them with dlogits
    let logits = model.logits(gpu, k).await?;
    model.run(gpu, Pass::Backward).await?;
    let loss = model.loss(gpu).await?.mean;
    Ok((logits, loss, model.read_grads(gpu).await?))
}

async fn matches_reference(gpu: &Gpu, precision: Recipe, tied: bool) -> Result<()> {
    let n = SHAPE.rows() as usize;
    let targets = tokens(92, n, Config::preset("tiny")?.vocab);
    matches_reference_on(gpu, precision, tied, &targets).await
}

async fn matches_reference_on(
    gpu: &Gpu,
    precision: Recipe,
    tied: bool,
    targets: &[u32],
) -> Result<()> {
    let config = Config {
        tie_word_embeddings: tied,
        ..Config::preset("tiny")?
    };
    let k = Kernels::new(gpu, &[config.head_dim()]).await?;
    let layout = ParamLayout::new(&config);
    let w = weights(&layout, 90);
    let n = SHAPE.rows() as usize;
    let inputs = tokens(91, n, config.vocab);
    let model = Model::new(gpu, &k, config.clone(), SHAPE, precision.clone(), &w).await?;
    let (logits, loss, grads) = run_step(gpu, &k, &model, &inputs, targets).await?;
    let want = reference::forward_backward(
        &config,
        &layout,
        &w,
        SHAPE,
        &inputs,
        targets,
        precision == Recipe::f16(),
    );
    let counted = targets.iter().filter(|&&t| t != IGNORE_INDEX).count();
    let what = format!("{} tied={tied} counted={counted}", precision.name());

    // Errors of f32 chains (2 layers of GEMMs, norms, softmaxes), judged
    // against each tensor's largest value. Measured worst |error|/max:
    // logits 7.8e-7 (lavapipe); loss relative 1.3e-8; gradients 1.3e-6 (o_proj).
    assert_close_to_scale(&format!("{what} logits"), &logits, &want.logits, 5e-6);
    assert_close(&format!("{what} loss"), &[loss], &[want.loss], 0.0, 1e-6);
    for t in &layout.tensors {
        let range = t.offset as usize..(t.offset + t.len()) as usize;
        assert_close_to_scale(
            &format!("{what} grad {}", t.name),
            &grads[range.clone()],
            &want.grads[range],
            1e-5,
        );
    }
    Ok(())
}

pub async fn model_matches_reference_fp32(gpu: &Gpu) -> Result<()> {
    matches_reference(gpu, Recipe::fp32(), false).await
}

pub async fn model_matches_reference_f16(gpu: &Gpu) -> Result<()> {
    matches_reference(gpu, Recipe::f16(), false).await
}

pub async fn model_matches_reference_tied(gpu: &Gpu) -> Result<()> {
    matches_reference(gpu, Recipe::fp32(), true).await
}

/// A task's batch: most targets ignored, the loss and its gradient the mean
/// over the 19 that count, not over every row.
pub async fn model_matches_reference_on_answers_only(gpu: &Gpu) -> Result<()> {
    let n = SHAPE.rows() as usize;
    let vocab = Config::preset("tiny")?.vocab;
    let mut targets = vec![IGNORE_INDEX; n];
    for (i, t) in tokens(93, n, vocab).into_iter().enumerate() {
        if i % 7 == 3 {
            targets[i] = t;
        }
    }
    matches_reference_on(gpu, Recipe::fp32(), false, &targets).await
}
