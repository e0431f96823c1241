//! What the page's Inspect and Inside panels and `webtrain inspect`,
//! `attention`, `predict` and `ranges` show of a run: one training step
//! looked into — each tensor's values, how far it moved, and what narrower
//! formats would have lost of its update (`survival`); the attention
//! probabilities' tails (`softmax_tail`); each kernel's GPU time
//! (`profile`); a text through the model's forward, its attention maps and
//! predictions (`probe`); every tensor's value range against the narrow
//! formats (`ranges`). The training loop knows nothing of it.

pub mod grid;
pub mod probe;
pub mod profile;
pub mod ranges;
pub mod softmax_tail;
pub mod survival;

pub use probe::{Prediction, Probe};
pub use profile::KernelTime;
pub use softmax_tail::SoftmaxTail;
pub use survival::Survival;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::Tensor;
use crate::optim::{HostState, OptimState};
use crate::run::Run;
use crate::train::{Memory, StepStats};

/// One tensor after the inspected step.
#[derive(Clone, Debug, Serialize)]
pub struct TensorStats {
    pub name: String,
    pub shape: [u32; 2],
    pub rms: f64,
    pub max_abs: f64,
    /// ‖Δw‖/‖w‖ per step since the previous inspection (none at the first).
    pub update_ratio: Option<f64>,
    pub nonfinite: u64,
    /// What the inspected step's update would have lost in narrower formats.
    pub survival: Survival,
}

#[derive(Clone, Debug, Serialize)]
pub struct Inspection {
    /// Steps trained, the inspected one included.
    pub step: u32,
    pub tensors: Vec<TensorStats>,
    pub memory: Memory,
    /// Stats of the steps completed meanwhile, the inspected one last.
    pub steps: Vec<StepStats>,
    /// Per-kernel GPU time of the inspected step, largest first.
    pub kernels: Option<Vec<KernelTime>>,
    /// Why there are no kernel times (not asked for, or no timestamps).
    pub kernels_error: Option<String>,
    pub softmax: Vec<SoftmaxTail>,
}

/// Looks into steps of one run; where asked, it keeps the weights it saw
/// last (a host copy of every parameter) so the next inspection can tell
/// how far each tensor moved since.
pub struct Inspector {
    track_updates: bool,
    previous: Option<(u32, Vec<f32>)>,
}

impl Inspector {
    /// With `track_updates`, each inspection reports ‖Δw‖/‖w‖ since the last.
    pub fn new(track_updates: bool) -> Inspector {
        Inspector {
            track_updates,
            previous: None,
        }
    }

    /// Forgets the weights seen last (they were on a lost device).
    pub fn forget(&mut self) {
        self.previous = None;
    }

    /// Trains `run`'s next step — it counts like any other — with each
    /// kernel timed if `profile` (and the adapter has timestamps), and
    /// reports on it.
    pub async fn step(&mut self, run: &mut Run, profile: bool) -> Result<Inspection> {
        let batch = run.batch();
        let t = &mut run.trainer;
        // after every step submitted so far: the weights the inspected step starts from
        let before = t.model.read_weights(&t.gpu).await?;
        let profiled = match profile {
            true => t.profiled_step(&batch).await,
            false => Err(Error::Unsupported("not asked for".into())),
        };
        let (steps, kernels, kernels_error) = match profiled {
            Ok((steps, kernels)) => (steps, Some(kernels), None),
            Err(Error::Unsupported(why)) => {
                let mut steps = t.step(&batch).await?;
                steps.extend(t.flush().await?);
                (steps, None, Some(why))
            }
            Err(e) => return Err(e),
        };
        let step = t.steps();
        let after = t.model.read_weights(&t.gpu).await?;
        let HostState::Fp32 { v, .. } = t
            .optimizer
            .read_state(&t.gpu)
            .await?
            .convert(OptimState::Fp32)
        else {
            return Err(Error::Unsupported(
                "inspect: the optimizer state did not convert to f32".into(),
            ));
        };
        let layout = &t.model.layout;
        let previous = self.previous.as_ref().filter(|(at, _)| *at < step);
        let tensors = layout
            .tensors
            .iter()
            .zip(survival::inspect(layout, &before, &after, &v))
            .map(|(tensor, survival)| tensor_stats(tensor, &after, previous, step, survival))
            .collect();
        let inspection = Inspection {
            step,
            tensors,
            memory: t.memory()?,
            steps,
            kernels,
            kernels_error,
            softmax: softmax_tail::read(&t.gpu, &t.model).await?,
        };
        if self.track_updates {
            self.previous = Some((step, after));
        }
        Ok(inspection)
    }
}

/// `tensor` in the weights `w` after step `step`, against the weights an
/// inspection at an earlier step saw.
fn tensor_stats(
    tensor: &Tensor,
    w: &[f32],
    previous: Option<&(u32, Vec<f32>)>,
    step: u32,
    survival: Survival,
) -> TensorStats {
    let r = tensor.offset as usize..(tensor.offset + tensor.len()) as usize;
    let values = &w[r.clone()];
    let finite = values.iter().filter(|x| x.is_finite());
    let sum_sq: f64 = finite.clone().map(|&x| (x as f64) * (x as f64)).sum();
    let max_abs = finite.fold(0.0f64, |m, &x| m.max(x.abs() as f64));
    let update_ratio = previous.map(|(at, old)| {
        let old = &old[r];
        let delta: f64 = values
            .iter()
            .zip(old)
            .map(|(&a, &b)| ((a - b) as f64).powi(2))
            .sum();
        let norm: f64 = old.iter().map(|&x| (x as f64) * (x as f64)).sum();
        (delta / norm.max(f64::MIN_POSITIVE)).sqrt() / (step - at) as f64
    });
    TensorStats {
        name: tensor.name.clone(),
        shape: [tensor.rows, tensor.cols],
        rms: (sum_sq / values.len() as f64).sqrt(),
        max_abs,
        update_ratio,
        nonfinite: values.iter().filter(|x| !x.is_finite()).count() as u64,
        survival,
    }
}
