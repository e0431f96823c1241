//! The whole model on the GPU against reference/model.rs: logits, loss and
//! every parameter gradient of the tiny preset, fp32 and f16 weights.

use webtrain::kernels::Kernels;
use webtrain::kernels::loss::IGNORE_INDEX;
use webtrain::model::decode::Decoder;
use webtrain::model::{BatchShape, Config, MasterStorage, Model, ParamLayout, Pass, Recipe};
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
    let model = Model::new(
        gpu,
        &k,
        (config.clone(), SHAPE, precision.clone()),
        (&w, MasterStorage::F32),
    )
    .await?;
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

/// bf16-sr master weights are stored as bf16 pairs, and each kernel that
/// reads f32 weights reads its tensor widened right before it: a step from
/// them gives the logits, loss and every gradient of the same values in
/// f32 words, bit for bit — every tensor widened (fp32), the f16 mirror
/// filled from them (f16), the quantized copy made from them with the last
/// layer and the head read wide (nvfp4), QuEST's masks reading them
/// (quartet) — and generation's decoder (KV-cache steps) the same logits.
pub async fn model_reads_bf16_master_weights_exactly(gpu: &Gpu) -> Result<()> {
    use webtrain::ops::adam::{bf16_bits, bf16_value};
    let config = Config::preset("tiny")?;
    let layout = ParamLayout::new(&config);
    let w: Vec<f32> = (weights(&layout, 94).iter())
        .map(|&x| bf16_value(bf16_bits(x)))
        .collect();
    // rows a multiple of the Hadamard transforms' 32 (wgrad's K)
    let shape = BatchShape { batch: 2, seq: 32 };
    let n = shape.rows() as usize;
    let (inputs, targets) = (tokens(95, n, config.vocab), tokens(96, n, config.vocab));
    for name in ["fp32", "f16", "nvfp4", "quartet"] {
        let precision = Recipe::named(name)?;
        let mut steps = Vec::new();
        for storage in [MasterStorage::F32, MasterStorage::Bf16] {
            // kernels of their own: a model's products take the next of
            // their random streams when it is built
            let k = precision.kernels(gpu, &[config.head_dim()], 7).await?;
            let spec = (config.clone(), shape, precision.clone());
            let model = Model::new(gpu, &k, spec, (&w, storage)).await?;
            assert_eq!(model.read_weights(gpu).await?, w, "{name} {storage:?}");
            let (logits, loss, grads) = run_step(gpu, &k, &model, &inputs, &targets).await?;
            let mut decoder = Decoder::new(gpu, &k, &model, shape.batch, 3)?;
            let mut decoded = Vec::new();
            for pos in 0..3 {
                let column = [inputs[pos], inputs[shape.seq as usize + pos]];
                decoded.extend(decoder.step(gpu, &k, &model, &column).await?);
            }
            steps.push((logits, loss, grads, decoded));
        }
        let [
            (logits, loss, grads, decoded),
            (logits_bf16, loss_bf16, grads_bf16, decoded_bf16),
        ] = &steps[..]
        else {
            unreachable!("two storages")
        };
        super::check::assert_identical(&format!("{name} logits"), logits_bf16, logits);
        assert_eq!(loss_bf16.to_bits(), loss.to_bits(), "{name} loss");
        super::check::assert_identical(&format!("{name} gradients"), grads_bf16, grads);
        super::check::assert_identical(&format!("{name} decoded logits"), decoded_bf16, decoded);
    }
    Ok(())
}
