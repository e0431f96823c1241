//! Launchers for Muon's Newton–Schulz: 15_muon.wgsl between the batched
//! f32 GEMMs of 03_linear.wgsl, one part (one matrix of every layer) per
//! batch, and the update of the weights from its result.

use bytemuck::{Pod, Zeroable};

use super::infrastructure::Infrastructure;
use super::linear::{Layout, Linear, Strided};
use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_variant_kernels};
use crate::kernels::optimizer::{master_bytes, master_prelude};
use crate::ops::adam::MASTER_SR_STREAM;
use crate::ops::muon::{MuonHyper, NS_COEFFICIENTS, NS_EPS, NS_STEPS, update_scale};
use crate::shaders::MUON;

/// One matrix of every layer (say every q): `count` matrices of
/// `rows × cols`, layer l's at element `at + l·stride` of the scratch and
/// of the weights as bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MuonPart {
    pub rows: u32,
    pub cols: u32,
    pub at: u32,
    pub stride: u32,
    pub count: u32,
}

impl MuonPart {
    /// Iterated on Xᵀ: more rows than columns.
    fn transposed(&self) -> bool {
        self.rows > self.cols
    }

    /// The Gram matrices' side.
    pub fn dim(&self) -> u32 {
        self.rows.min(self.cols)
    }

    /// Elements of the Gram matrices of the whole batch.
    pub fn gram_len(&self) -> u64 {
        self.count as u64 * (self.dim() as u64).pow(2)
    }

    /// Elements of the scratch and weights the part reaches.
    pub fn reach(&self) -> u64 {
        self.at as u64
            + (self.count.max(1) as u64 - 1) * self.stride as u64
            + self.rows as u64 * self.cols as u64
    }

    fn uniform(&self) -> PartUniform {
        let (a, b, c) = NS_COEFFICIENTS;
        PartUniform {
            n: self.rows * self.cols,
            stride: self.stride,
            at: self.at,
            count: self.count,
            dim: self.dim(),
            a: a as f32,
            b: b as f32,
            c: c as f32,
            eps: NS_EPS as f32,
            scale: update_scale(self.rows, self.cols) as f32,
            _pad: [0; 2],
        }
    }

    /// Operand `buffer` of the batch: the part's matrices in it.
    fn matrices<'a>(&self, buffer: &'a wgpu::Buffer) -> Strided<'a> {
        Strided {
            range: buffer.into(),
            at: self.at,
            stride: self.stride,
        }
    }

    /// The batch's Gram-sized matrices, contiguous from 0 in `buffer`.
    fn grams<'a>(&self, buffer: &'a wgpu::Buffer) -> Strided<'a> {
        Strided {
            range: buffer.into(),
            at: 0,
            stride: self.dim() * self.dim(),
        }
    }
}

/// `Part` in 15_muon.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct PartUniform {
    n: u32,
    stride: u32,
    at: u32,
    count: u32,
    dim: u32,
    a: f32,
    b: f32,
    c: f32,
    eps: f32,
    scale: f32,
    _pad: [u32; 2],
}

/// `MuonStep` in 15_muon.wgsl: the step's rate, and the draws of bf16-sr
/// master weights, rewritten by the host.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct MuonStep {
    pub lr: f32,
    /// 1 − lr·weight_decay
    pub decay: f32,
    /// The step, 1-based (the draws' step).
    pub t: u32,
    /// bf16-sr master weights (the `MASTER_SR` variant): their draws' seed.
    pub sr_seed: u32,
    /// `ops::adam::MASTER_SR_STREAM`
    pub sr_stream: u32,
    /// The weights binding's first element in its buffer.
    pub offset: u32,
    pub _pad: [u32; 2],
}

impl MuonStep {
    /// Step `t`'s uniform: with `sr_seed`, bf16-sr master weights whose
    /// binding starts at element `offset` of the weights buffer.
    pub fn new(h: &MuonHyper, t: u32, sr_seed: Option<u32>, offset: u32) -> MuonStep {
        MuonStep {
            lr: h.lr as f32,
            decay: (1.0 - h.lr * h.weight_decay) as f32,
            t,
            sr_seed: sr_seed.unwrap_or(0),
            sr_stream: MASTER_SR_STREAM,
            offset,
            _pad: [0; 2],
        }
    }
}

/// Newton–Schulz's working buffers: X and the next X (each holding every
/// part at its `at`), and the Gram matrices, their squares and the norms
/// of the largest part.
pub struct NsScratch<'a> {
    pub x: &'a wgpu::Buffer,
    pub next: &'a wgpu::Buffer,
    pub gram: &'a wgpu::Buffer,
    pub square: &'a wgpu::Buffer,
    pub factors: &'a wgpu::Buffer,
}

const NORMS: KernelDesc = KernelDesc {
    entry: "ns_norms",
    slots: &[
        Slot::Uniform(0),
        Slot::ReadWrite(5, "gram"),
        Slot::ReadWrite(7, "factors"),
    ],
};
const NORMALIZE_X: KernelDesc = KernelDesc {
    entry: "ns_normalize_x",
    slots: &[
        Slot::Uniform(0),
        Slot::ReadWrite(4, "x"),
        Slot::ReadWrite(7, "factors"),
    ],
};
const NORMALIZE_GRAM: KernelDesc = KernelDesc {
    entry: "ns_normalize_gram",
    slots: &[
        Slot::Uniform(0),
        Slot::ReadWrite(5, "gram"),
        Slot::ReadWrite(7, "factors"),
    ],
};
const POLY: KernelDesc = KernelDesc {
    entry: "ns_poly",
    slots: &[
        Slot::Uniform(0),
        Slot::ReadWrite(5, "gram"),
        Slot::ReadWrite(6, "square"),
    ],
};
const AX: KernelDesc = KernelDesc {
    entry: "ns_ax",
    slots: &[
        Slot::Uniform(0),
        Slot::Read(3, "x"),
        Slot::ReadWrite(4, "next"),
    ],
};
const APPLY: KernelDesc = KernelDesc {
    entry: "muon_apply",
    slots: &[
        Slot::Uniform(0),
        Slot::Uniform(1),
        Slot::Read(2, "stats"),
        Slot::Read(3, "update"),
        Slot::ReadWrite(8, "weights"),
    ],
};

pub struct NewtonSchulz {
    norms: Kernel,
    normalize_x: Kernel,
    normalize_gram: Kernel,
    poly: Kernel,
    ax: Kernel,
    /// `muon_apply` to f32 master weights, and to bf16-sr ones.
    apply: [Kernel; 2],
}

impl NewtonSchulz {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let descs = [NORMS, NORMALIZE_X, NORMALIZE_GRAM, POLY, AX, APPLY];
        let plain = master_prelude(8, false);
        let [norms, normalize_x, normalize_gram, poly, ax, apply] =
            build_variant_kernels(gpu, MUON, &plain, descs).await?;
        let [apply_bf16] =
            build_variant_kernels(gpu, MUON, &master_prelude(8, true), [APPLY]).await?;
        let apply = [apply, apply_bf16];
        Ok(NewtonSchulz {
            norms,
            normalize_x,
            normalize_gram,
            poly,
            ax,
            apply,
        })
    }

    /// Orthogonalizes `part`'s matrices of `s.x` (Frobenius-normalized,
    /// then `NS_STEPS` quintic iterations); the result lands in `s.next`
    /// (the iterations swap the two, an odd number of times).
    pub fn orthogonalize(
        &self,
        gpu: &Gpu,
        (linear, infra): (&Linear, &Infrastructure),
        part: &MuonPart,
        s: &NsScratch,
    ) -> Result<Vec<Dispatch>> {
        const { assert!(NS_STEPS % 2 == 1) };
        let op = "newton_schulz";
        check_part(part, s)?;
        let params = gpu.uniform(op, &part.uniform());
        let (r, c, d) = (part.rows, part.cols, part.dim());
        let (elements, grams) = (part.count as u64 * (r * c) as u64, part.gram_len());
        let mut out = Vec::new();
        let (mut x, mut next) = (s.x, s.next);
        for iteration in 0..NS_STEPS {
            // A = X·Xᵀ, or Xᵀ·X (dW's layout, which only accumulates)
            if part.transposed() {
                out.push(infra.fill(gpu, s.gram.into(), grams as u32, 0.0)?);
                let operands = [part.matrices(x), part.matrices(x), part.grams(s.gram)];
                out.push(linear.batched_f32(
                    gpu,
                    (Layout::Dw, d, d, r),
                    true,
                    part.count,
                    operands,
                )?);
            } else {
                let operands = [part.matrices(x), part.matrices(x), part.grams(s.gram)];
                out.push(linear.batched_f32(
                    gpu,
                    (Layout::Forward, d, d, c),
                    false,
                    part.count,
                    operands,
                )?);
            }
            if iteration == 0 {
                let groups = gpu.grid_groups(op, part.count as u64)?;
                let norms = [(&params).into(), s.gram.into(), s.factors.into()];
                out.push(self.norms.dispatch(gpu, op, &norms, groups)?);
                let binds = [(&params).into(), x.into(), s.factors.into()];
                out.push(
                    self.normalize_x
                        .dispatch(gpu, op, &binds, gpu.grid_1d(op, elements)?)?,
                );
                out.push(
                    self.normalize_gram
                        .dispatch(gpu, op, &norms, gpu.grid_1d(op, grams)?)?,
                );
            }
            // B = b·A + c·A² (A is symmetric: A·A is the forward layout's A·Aᵀ)
            let operands = [part.grams(s.gram), part.grams(s.gram), part.grams(s.square)];
            out.push(linear.batched_f32(
                gpu,
                (Layout::Forward, d, d, d),
                false,
                part.count,
                operands,
            )?);
            let binds = [(&params).into(), s.gram.into(), s.square.into()];
            out.push(
                self.poly
                    .dispatch(gpu, op, &binds, gpu.grid_1d(op, grams)?)?,
            );
            // next = a·X + B·X (or X·B, transposed)
            let binds = [(&params).into(), x.into(), next.into()];
            out.push(
                self.ax
                    .dispatch(gpu, op, &binds, gpu.grid_1d(op, elements)?)?,
            );
            let product = match part.transposed() {
                true => (
                    (Layout::Dx, r, c, c),
                    [part.matrices(x), part.grams(s.square)],
                ),
                false => (
                    (Layout::Dx, r, c, r),
                    [part.grams(s.square), part.matrices(x)],
                ),
            };
            let [a, b] = product.1;
            out.push(linear.batched_f32(
                gpu,
                product.0,
                true,
                part.count,
                [a, b, part.matrices(next)],
            )?);
            (x, next) = (next, x);
        }
        Ok(out)
    }

    /// `W ← W·(1 − lr·wd) − lr·scale·O` over `part`'s matrices of
    /// `weights`, O in `update`; nothing on a skipped step. `bf16`: bf16-sr
    /// master weights (pairs), each new weight rounded on the step's draws.
    pub fn apply(
        &self,
        gpu: &Gpu,
        part: &MuonPart,
        (step, stats): (&wgpu::Buffer, BufferRange),
        update: &wgpu::Buffer,
        (weights, bf16): (BufferRange, bool),
    ) -> Result<Dispatch> {
        let op = "muon_apply";
        let params = gpu.uniform(op, &part.uniform());
        let reach = part.reach();
        let binds = [
            (&params).into(),
            step.into(),
            stats.needs(16),
            BufferRange::from(update).needs(4 * reach),
            weights.needs(master_bytes(reach, bf16)),
        ];
        let elements = part.count as u64 * (part.rows * part.cols) as u64;
        self.apply[usize::from(bf16)].dispatch(gpu, op, &binds, gpu.grid_1d(op, elements)?)
    }
}

/// Refuses a part the scratch cannot hold or a u32 index cannot reach.
fn check_part(part: &MuonPart, s: &NsScratch) -> Result<()> {
    let op = "newton_schulz";
    if part.reach() > u32::MAX as u64 || part.gram_len() > u32::MAX as u64 {
        return Err(Error::Limit {
            op,
            what: format!("{} matrices of {}×{}", part.count, part.rows, part.cols),
            needed: part.reach().max(part.gram_len()),
            limit: u32::MAX as u64,
        });
    }
    for (name, buffer, needed) in [
        ("x", s.x, part.reach()),
        ("next", s.next, part.reach()),
        ("gram", s.gram, part.gram_len()),
        ("square", s.square, part.gram_len()),
        ("factors", s.factors, part.count as u64),
    ] {
        if buffer.size() < 4 * needed {
            return Err(Error::shape(op, name, 4 * needed, buffer.size()));
        }
    }
    Ok(())
}
