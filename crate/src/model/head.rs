//! The loss head: final hidden states → lm_head → cross-entropy, over row
//! chunks so the `[R, V]` logits never exist whole. In training each
//! chunk's dlogits (the loss writes them over its logits) flow at once into
//! d(xnf) and d(W_lm), before the next chunk reuses the logits buffer.
//!
//! The loss is the mean over the batch's targets that count (a task counts
//! only its answers), so each batch's count sets the gradient's scale:
//! `write_batch` rewrites the chunks' params (`HeadLoss`).

use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch};
use crate::kernels::loss::{CrossEntropy, IGNORE_INDEX};
use crate::kernels::{LinearShape, Output};

use super::{Net, Role};

/// One row chunk's cross-entropy settings and the params buffer its
/// dispatches read (training's and evaluation's alike).
pub struct HeadLoss {
    pub ce: CrossEntropy,
    pub params: wgpu::Buffer,
}

impl HeadLoss {
    /// One per row chunk of `dims`, scaled for a batch whose every target counts.
    pub(super) fn chunks(gpu: &crate::gpu::Gpu, dims: &super::Dims) -> Vec<HeadLoss> {
        let rows = dims.rows;
        (0..rows)
            .step_by(dims.chunk_rows as usize)
            .map(|r0| {
                let ce = CrossEntropy {
                    rows: dims.chunk_rows.min(rows - r0) as u32,
                    vocab: dims.vocab as u32,
                    ignore_index: IGNORE_INDEX,
                    label_smoothing: 0.0,
                    z_loss: 0.0,
                    grad_scale: 1.0 / rows as f32,
                };
                HeadLoss {
                    params: ce.uniform(gpu),
                    ce,
                }
            })
            .collect()
    }
}

impl<'a> Net<'a> {
    pub(super) fn head(&self, train: bool) -> Result<Vec<Dispatch>> {
        let (gpu, k, m) = (self.gpu, self.k, self.m);
        let (a, dm) = (&m.acts, m.acts.dims);
        let (rows, d, v) = (dm.rows, dm.d, dm.vocab);
        // loss_sum reads only the rows, vocabulary and ignore index
        let mean = CrossEntropy {
            rows: rows as u32,
            ..m.head_losses[0].ce
        };
        let range = |b: &'a wgpu::Buffer, r0: u64, n: u64, width: u64| BufferRange {
            buffer: b,
            offset: 4 * r0 * width,
            size: 4 * n * width,
        };
        let mut s = Vec::new();
        let w = self.w(Role::LmHead, &mut s)?;
        let mut r0 = 0;
        for loss in &m.head_losses {
            let n = loss.ce.rows as u64;
            let shape = LinearShape::new(n as u32, d as u32, v as u32);
            let (xnf, logits) = (range(&a.xnf, r0, n, d), range(&a.logits, 0, n, v));
            s.extend(
                k.head()
                    .forward(gpu, shape, xnf, w, Output::Store(logits))?,
            );
            let (targets, losses, lse) = (
                range(&m.inputs.targets, r0, n, 1),
                range(&a.losses, r0, n, 1),
                range(&a.loss_lse, r0, n, 1),
            );
            s.push(k.loss.cross_entropy_in(
                gpu,
                &loss.ce,
                &loss.params,
                m.loss_scale.as_ref().map(Into::into),
                targets,
                logits,
                losses,
                lse,
            )?);
            if train {
                s.extend(k.head().backward_input(
                    gpu,
                    shape,
                    logits,
                    w,
                    Output::Store(range(&a.dnorm, r0, n, d)),
                )?);
                s.extend(k.head().backward_weight(
                    gpu,
                    shape,
                    logits,
                    xnf,
                    self.grad(Role::LmHead),
                )?);
            }
            r0 += n;
        }
        s.push(k.loss.loss_sum(
            gpu,
            &mean,
            (&m.inputs.targets).into(),
            (&a.losses).into(),
            (&a.loss).into(),
        )?);
        Ok(s)
    }
}

impl super::Model {
    /// The `[R, V]` logits of the batch the last `forward` ran on: lm_head
    /// again, chunk by chunk, into a buffer of its own (the head's logits
    /// buffer holds dlogits once the loss has run). For evaluation and the
    /// parity checks against transformers.
    pub async fn logits(
        &self,
        gpu: &crate::gpu::Gpu,
        k: &crate::kernels::Kernels,
    ) -> Result<Vec<f32>> {
        let dm = self.acts.dims;
        let (rows, d, v) = (dm.rows, dm.d, dm.vocab);
        let mut widen = Vec::new();
        let w = self.net(gpu, k).w(Role::LmHead, &mut widen)?;
        gpu.run(&widen.iter().collect::<Vec<_>>()).await?; // bf16: once, for every chunk
        let out = gpu.storage_buffer("logits (read back)", 4 * dm.chunk_rows.min(rows) * v)?;
        let mut logits = Vec::with_capacity((rows * v) as usize);
        let mut r0 = 0;
        while r0 < rows {
            let n = dm.chunk_rows.min(rows - r0);
            let shape = LinearShape::new(n as u32, d as u32, v as u32);
            let xnf = BufferRange {
                buffer: &self.acts.xnf,
                offset: 4 * r0 * d,
                size: 4 * n * d,
            };
            let dst = BufferRange {
                buffer: &out,
                offset: 0,
                size: 4 * n * v,
            };
            let d = k.head().forward(gpu, shape, xnf, w, Output::Store(dst))?;
            gpu.run(&d.iter().collect::<Vec<_>>()).await?;
            logits.extend(gpu.read_back::<f32>(dst).await?);
            r0 += n;
        }
        Ok(logits)
    }
}
