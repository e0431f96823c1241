//! Launchers for 07_loss.wgsl: cross-entropy forward and backward in one
//! pass (dlogits written in place over the logits), and the deterministic
//! sum of the per-row losses with the count of targets that count.
//!
//! A target counts when it is < V and not `ignore_index`. One that does not
//! count contributes loss 0 and a zero gradient row; a target ≥ V other
//! than the ignore index is never read and is reported in
//! [`LossTotals::out_of_range`]. With nothing counted the mean is 0, not NaN.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_kernels};
use crate::ops::loss_scale::LossScale;
use crate::shaders::LOSS;

/// The default ignore index: no token id reaches it.
pub const IGNORE_INDEX: u32 = u32::MAX;

/// One cross-entropy problem: shapes and settings, the kernels' params.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossEntropy {
    pub rows: u32,
    pub vocab: u32,
    pub ignore_index: u32,
    /// ε: the target keeps 1 − ε of the mass, ε is spread over all V classes.
    pub label_smoothing: f32,
    /// β: adds β·lse² per counted row (PaLM's z-loss), keeping lse near 0.
    pub z_loss: f32,
    /// dlogits multiplier; [`CrossEntropy::mean`] sets 1/count.
    pub grad_scale: f32,
}

impl CrossEntropy {
    /// The mean loss over the targets that count, no smoothing or z-loss:
    /// `grad_scale` = 1/count, or 0 when none count (zero gradients, not NaN).
    pub fn mean(targets: &[u32], vocab: u32, ignore_index: u32) -> Self {
        CrossEntropy {
            rows: targets.len() as u32,
            vocab,
            ignore_index,
            label_smoothing: 0.0,
            z_loss: 0.0,
            grad_scale: 1.0,
        }
        .mean_over(targets)
    }

    /// These settings with `grad_scale` making the loss the mean over the
    /// targets in `targets` that count (0 when none do).
    pub fn mean_over(self, targets: &[u32]) -> Self {
        let counted = targets
            .iter()
            .filter(|&&t| t < self.vocab && t != self.ignore_index)
            .count();
        CrossEntropy {
            grad_scale: if counted == 0 {
                0.0
            } else {
                1.0 / counted as f32
            },
            ..self
        }
    }

    /// A uniform buffer holding these params.
    pub fn uniform(&self, gpu: &Gpu) -> wgpu::Buffer {
        gpu.uniform("cross_entropy", &self.params())
    }

    /// Overwrites `buffer` (from [`CrossEntropy::uniform`]) with these
    /// params, for the next submission.
    pub fn rewrite(&self, gpu: &Gpu, buffer: &wgpu::Buffer) {
        gpu.queue
            .write_buffer(buffer, 0, bytemuck::bytes_of(&self.params()));
    }

    fn params(&self) -> Params {
        Params {
            rows: self.rows,
            vocab: self.vocab,
            ignore_index: self.ignore_index,
            label_smoothing: self.label_smoothing,
            z_loss: self.z_loss,
            grad_scale: self.grad_scale,
            _pad: [0; 2],
        }
    }
}

/// What `loss_sum` writes: 16 bytes, read back as one value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct LossTotals {
    /// Σ of the per-row losses (rows that do not count hold 0), fixed order.
    pub sum: f32,
    /// `sum / counted`, or 0 when nothing counts.
    pub mean: f32,
    /// Targets < V other than the ignore index.
    pub counted: u32,
    /// Targets ≥ V other than the ignore index: a data bug to report.
    pub out_of_range: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    rows: u32,
    vocab: u32,
    ignore_index: u32,
    label_smoothing: f32,
    z_loss: f32,
    grad_scale: f32,
    _pad: [u32; 2],
}

const CROSS_ENTROPY: KernelDesc = KernelDesc {
    entry: "cross_entropy_forward_backward",
    slots: &[
        Slot::Uniform(0),             // params
        Slot::Read(1, "targets"),     // [R] u32
        Slot::Read(2, "loss_scale"),  // LossScale: S multiplies dlogits
        Slot::ReadWrite(3, "logits"), // [R, V] f32, overwritten by dlogits · grad_scale · S
        Slot::ReadWrite(4, "losses"), // [R] f32
        Slot::ReadWrite(5, "lse"),    // [R] f32, saved log-sum-exp
    ],
};
const LOSS_SUM: KernelDesc = KernelDesc {
    entry: "loss_sum",
    slots: &[
        Slot::Uniform(0),             // params (rows, vocab, ignore_index)
        Slot::Read(1, "targets"),     // [R] u32
        Slot::Read(2, "losses"),      // [R] f32
        Slot::ReadWrite(3, "totals"), // LossTotals (16 bytes)
    ],
};

pub struct Loss {
    cross_entropy: Kernel,
    loss_sum: Kernel,
    /// `LossScale::UNSCALED`: S = 1 for the runs that do not scale.
    unscaled: wgpu::Buffer,
}

impl Loss {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [cross_entropy, loss_sum] = build_kernels(gpu, LOSS, [CROSS_ENTROPY, LOSS_SUM]).await?;
        Ok(Loss {
            cross_entropy,
            loss_sum,
            unscaled: gpu.upload("loss_scale", &[LossScale::UNSCALED])?,
        })
    }

    /// Per-row loss and log-sum-exp; the logits are overwritten by
    /// `grad_scale · dloss/dlogits`. One workgroup per row.
    pub fn cross_entropy_forward_backward(
        &self,
        gpu: &Gpu,
        ce: &CrossEntropy,
        targets: BufferRange,
        logits: BufferRange,
        losses: BufferRange,
        lse: BufferRange,
    ) -> Result<Dispatch> {
        let params = ce.uniform(gpu);
        self.cross_entropy_in(gpu, ce, &params, None, targets, logits, losses, lse)
    }

    /// [`Loss::cross_entropy_forward_backward`] reading its params from
    /// `params` (made by [`CrossEntropy::uniform`] for `ce`), which
    /// [`CrossEntropy::rewrite`] may change between submissions: a batch
    /// whose count of targets that count differs needs another `grad_scale`.
    /// With `loss_scale` (a [`LossScale`]) the dlogits are also multiplied
    /// by its scale, as it stands when the dispatch runs.
    #[allow(clippy::too_many_arguments)]
    pub fn cross_entropy_in(
        &self,
        gpu: &Gpu,
        ce: &CrossEntropy,
        params: &wgpu::Buffer,
        loss_scale: Option<BufferRange>,
        targets: BufferRange,
        logits: BufferRange,
        losses: BufferRange,
        lse: BufferRange,
    ) -> Result<Dispatch> {
        let op = "cross_entropy_forward_backward";
        check_settings(op, ce)?;
        let rows = ce.rows as u64;
        let binds = [
            params.into(),
            targets.needs(4 * rows),
            loss_scale
                .unwrap_or((&self.unscaled).into())
                .needs(size_of::<LossScale>() as u64),
            logits.needs(4 * rows * ce.vocab as u64),
            losses.needs(4 * rows),
            lse.needs(4 * rows),
        ];
        self.cross_entropy
            .dispatch(gpu, op, &binds, gpu.grid_groups(op, rows)?)
    }

    /// [`LossTotals`] of the per-row `losses`, in one workgroup.
    pub fn loss_sum(
        &self,
        gpu: &Gpu,
        ce: &CrossEntropy,
        targets: BufferRange,
        losses: BufferRange,
        totals: BufferRange,
    ) -> Result<Dispatch> {
        let op = "loss_sum";
        check_settings(op, ce)?;
        let rows = ce.rows as u64;
        let params = gpu.uniform(op, &ce.params());
        let binds = [
            (&params).into(),
            targets.needs(4 * rows),
            losses.needs(4 * rows),
            totals.needs(size_of::<LossTotals>() as u64),
        ];
        self.loss_sum
            .dispatch(gpu, op, &binds, gpu.grid_groups(op, 1)?)
    }
}

fn check_settings(op: &'static str, ce: &CrossEntropy) -> Result<()> {
    if ce.vocab == 0 {
        return Err(Error::shape(op, "vocab", "at least 1", 0));
    }
    if !(0.0..=1.0).contains(&ce.label_smoothing) {
        return Err(Error::shape(
            op,
            "label_smoothing",
            "within [0, 1]",
            ce.label_smoothing,
        ));
    }
    if !(ce.z_loss >= 0.0 && ce.z_loss.is_finite()) {
        return Err(Error::shape(op, "z_loss", "finite and ≥ 0", ce.z_loss));
    }
    Ok(())
}
