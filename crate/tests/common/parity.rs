//! webtrain against PyTorch: models built and stepped by transformers and
//! torch.optim.AdamW (tests/parity/make_fixtures.py), loaded through the HF
//! import, run forward, backward and one AdamW step on the GPU. The
//! fixtures are committed; torch is not needed here.

use webtrain::data::Batch;
use webtrain::hf::names::parts;
use webtrain::hf::{HfFiles, HfModel};
use webtrain::kernels::Kernels;
use webtrain::model::{BatchShape, MasterStorage, Model, ParamLayout, Recipe};
use webtrain::optim::{HostState, LrSchedule, OptimConfig, OptimState};
use webtrain::train::{TrainConfig, Trainer};
use webtrain::{Gpu, Result};

use super::check::{assert_close, assert_close_to_scale, assert_within};

struct Fixture {
    name: &'static str,
    config: &'static str,
    weights: &'static [u8],
    expected: &'static [u8],
}

macro_rules! fixture {
    ($name:literal) => {
        Fixture {
            name: $name,
            config: include_str!(concat!(
                "../../../tests/parity/fixtures/",
                $name,
                "/config.json"
            )),
            weights: include_bytes!(concat!(
                "../../../tests/parity/fixtures/",
                $name,
                "/model.safetensors"
            )),
            expected: include_bytes!(concat!(
                "../../../tests/parity/fixtures/",
                $name,
                "/expected.safetensors"
            )),
        }
    };
}

/// What torch computed: f32 tensors by name (input_ids as u32), and the
/// step's hyperparameters from the metadata.
struct Expected {
    tensors: std::collections::HashMap<String, Vec<f64>>,
    ids: Vec<u32>,
    ids_shape: Vec<usize>,
    meta: std::collections::HashMap<String, String>,
}

fn expected(bytes: &[u8]) -> Expected {
    let (_, header) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    let meta: std::collections::HashMap<String, String> = header
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
    let (mut tensors, mut ids, mut ids_shape) = (std::collections::HashMap::new(), vec![], vec![]);
    for (name, view) in st.iter() {
        if name == "input_ids" {
            ids = view
                .data()
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u32)
                .collect();
            ids_shape = view.shape().to_vec();
        } else {
            tensors.insert(
                name.to_string(),
                view.data()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                    .collect(),
            );
        }
    }
    Expected {
        tensors,
        ids,
        ids_shape,
        meta,
    }
}

impl Expected {
    fn hyper(&self, key: &str) -> f64 {
        self.meta[key].parse().unwrap()
    }

    /// webtrain's batch: ids[:, :T] predicting ids[:, 1:].
    fn batch(&self) -> (BatchShape, Batch) {
        let (b, t1) = (self.ids_shape[0], self.ids_shape[1]);
        let rows = |skip: usize| {
            (0..b)
                .flat_map(|r| self.ids[r * t1 + skip..r * t1 + skip + t1 - 1].to_vec())
                .collect::<Vec<u32>>()
        };
        (
            BatchShape {
                batch: b as u32,
                seq: (t1 - 1) as u32,
            },
            Batch {
                inputs: rows(0),
                targets: rows(1),
            },
        )
    }
}

/// Tolerances relative to each tensor's largest value (logits, gradients)
/// or to the value (loss), per precision.
struct Bounds {
    logits: f64,
    loss: f64,
    grads: f64,
}

// Measured on lavapipe: logits 6.1e-7, loss 2.3e-7, gradients ≤ 2e-6.
const FP32: Bounds = Bounds {
    logits: 5e-6,
    loss: 2e-6,
    grads: 2e-5,
};
// f16 mode rounds every weight a matmul reads to f16 (11 significant bits)
// while torch stays in f32, so the outputs carry f16's relative error
// through the layers. Measured: logits 1.2e-3, loss 4.4e-5, gradients
// ≤ 3.2e-3 (k_proj).
const F16: Bounds = Bounds {
    logits: 5e-3,
    loss: 5e-4,
    grads: 1e-2,
};

/// Two f32 roundings of a weight below 0.6 in magnitude (ulp 6e-8).
const WEIGHT_ROUNDING: f64 = 1.2e-7;

async fn matches_pytorch(gpu: &Gpu, f: &Fixture, precision: Recipe, bounds: &Bounds) -> Result<()> {
    let files = HfFiles {
        config_json: f.config.to_string(),
        weights: vec![f.weights.to_vec()],
        ..Default::default()
    };
    let hf = HfModel::import(&files)?;
    let want = expected(f.expected);
    let (shape, batch) = want.batch();
    let what = |x: &str| format!("{} ({}): {x}", f.name, precision.name());

    // forward and backward
    let k = Kernels::new(gpu, &[hf.config.head_dim()]).await?;
    let model = Model::new(
        gpu,
        &k,
        (hf.config.clone(), shape, precision.clone()),
        (&hf.weights, MasterStorage::F32),
    )
    .await?;
    let (logits, loss, grads) =
        super::model::run_step(gpu, &k, &model, &batch.inputs, &batch.targets).await?;
    assert_close_to_scale(
        &what("logits"),
        &logits,
        &want.tensors["logits"],
        bounds.logits,
    );
    assert_close(
        &what("loss"),
        &[loss],
        &want.tensors["loss"],
        0.0,
        bounds.loss,
    );
    let layout = ParamLayout::new(&hf.config);
    for p in parts(&hf.config, &layout) {
        assert_close_to_scale(
            &what(&format!("grad {}", p.name)),
            &grads[p.range(&layout)],
            &want.tensors[&format!("grad.{}", p.name)],
            bounds.grads,
        );
    }

    // one clipped AdamW step from the same weights
    let optim = OptimConfig {
        state: OptimState::Fp32,
        schedule: LrSchedule::constant(want.hyper("lr")),
        beta1: want.hyper("beta1"),
        beta2: want.hyper("beta2"),
        eps: want.hyper("eps"),
        weight_decay: want.hyper("weight_decay"),
        max_grad_norm: want.hyper("max_norm") as f32,
        ..OptimConfig::default()
    };
    let config = TrainConfig {
        model: hf.config.clone(),
        shape,
        precision: precision.clone(),
        optim,
        seed: 0,
    };
    let mut trainer = Trainer::with_weights(gpu, config, &hf.weights).await?;
    trainer.step(&batch).await?;
    let stats = trainer.flush().await?;
    let norm: f64 = want.meta["grad_norm"].parse().unwrap();
    assert_close(
        &what("grad norm"),
        &[stats.last().unwrap().grad_norm],
        &[norm],
        0.0,
        bounds.grads,
    );
    let after = trainer.model.read_weights(gpu).await?;
    // The moments carry the clip: m = (1 − β1)·g̃ and v = (1 − β2)·g̃², g̃
    // the clipped gradient, so they have the gradients' relative error
    // (v twice it). Measured: m 1.6e-6 (fp32), 3.2e-3 (f16); v 2.4e-6,
    // 3.5e-3.
    let HostState::Fp32 { m, v } = trainer.optimizer.read_state(gpu).await? else {
        unreachable!("f32 state")
    };
    for p in parts(&hf.config, &layout) {
        assert_close_to_scale(
            &what(&format!("m of {}", p.name)),
            &m[p.range(&layout)],
            &want.tensors[&format!("m.{}", p.name)],
            bounds.grads,
        );
        assert_close_to_scale(
            &what(&format!("v of {}", p.name)),
            &v[p.range(&layout)],
            &want.tensors[&format!("v.{}", p.name)],
            2.0 * bounds.grads,
        );
    }
    // The first step moves w by lr·u(g̃), u(x) = x / (|x| + eps), which the
    // clip does not change: ±lr where |g̃| ≫ eps, but steep near 0, where
    // the gradients' allowed error δ can move it. Each weight may differ by
    // what δ does to u at its own gradient, plus rounding; a wrong decay
    // or bias correction misses by ~lr everywhere.
    let (lr, eps) = (want.hyper("lr"), want.hyper("eps"));
    let clip = (want.hyper("max_norm") / norm).min(1.0);
    let u = |x: f64| x / (x.abs() + eps);
    for p in parts(&hf.config, &layout) {
        let g = &want.tensors[&format!("grad.{}", p.name)];
        let delta = bounds.grads * clip * g.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let bound: Vec<f64> = g
            .iter()
            .map(|&gi| {
                let x = clip * gi;
                lr * (u(x + delta) - u(x)).abs().max((u(x - delta) - u(x)).abs()) + WEIGHT_ROUNDING
            })
            .collect();
        assert_within(
            &what(&format!("{} after the step", p.name)),
            &after[p.range(&layout)],
            &want.tensors[&format!("after.{}", p.name)],
            &bound,
        );
    }
    Ok(())
}

pub async fn parity_gqa_fp32(gpu: &Gpu) -> Result<()> {
    matches_pytorch(gpu, &fixture!("gqa"), Recipe::fp32(), &FP32).await
}

pub async fn parity_gqa_f16(gpu: &Gpu) -> Result<()> {
    matches_pytorch(gpu, &fixture!("gqa"), Recipe::f16(), &F16).await
}

pub async fn parity_tied_fp32(gpu: &Gpu) -> Result<()> {
    matches_pytorch(gpu, &fixture!("tied"), Recipe::fp32(), &FP32).await
}

pub async fn parity_tied_f16(gpu: &Gpu) -> Result<()> {
    matches_pytorch(gpu, &fixture!("tied"), Recipe::f16(), &F16).await
}
