//! Muon on the host side: which matrices it takes (every hidden 2-D weight,
//! the stacked q|k|v and gate|up per part), its scratch, and its dispatches
//! within the step: momentum, Newton–Schulz per part (every layer's
//! matrix of that part in one batch), the update, the f16 mirror.

use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu};
use crate::kernels::Kernels;
use crate::kernels::muon::{MuonPart, MuonStep, NsScratch};
use crate::kernels::optimizer::MuonMomentum;
use crate::model::layout::{ParamLayout, Role, Span};
use crate::model::{Config, MasterStorage, Mirror, Params, f16_range, f32_range};
use crate::ops::muon::MuonHyper;

use super::{BlockWindow, StateBuffers, bf16_range};

/// Muon's parts, scratch and step uniform for one model.
pub struct Muon {
    /// The hidden matrices, contiguous: what Muon updates.
    pub span: Span,
    pub parts: Vec<MuonPart>,
    x: wgpu::Buffer,
    next: wgpu::Buffer,
    gram: wgpu::Buffer,
    square: wgpu::Buffer,
    factors: wgpu::Buffer,
    step: wgpu::Buffer,
}

/// Every layer's matrices of each part, as offsets into `span`: q, k, v
/// (rows of the stacked projection), o, gate, up (rows of gate|up), down.
pub fn parts(config: &Config, layout: &ParamLayout) -> Result<(Span, Vec<MuonPart>)> {
    let span = layout.layer_linears();
    if config.n_layers == 0 || span.len == 0 {
        return Err(Error::Unsupported(
            "muon: the model has no hidden matrices to orthogonalize".into(),
        ));
    }
    let dh = config.head_dim();
    let (q, kv, d, f) = (
        config.n_heads * dh,
        config.n_kv_heads * dh,
        config.d_model,
        config.ffn,
    );
    let stride = |role: Layered| -> u64 {
        match config.n_layers {
            1 => 0,
            _ => layout.get(role(1)).offset - layout.get(role(0)).offset,
        }
    };
    // (role, rows above this part in the tensor, rows, cols)
    let pieces: [(Layered, u32, u32, u32); 7] = [
        (Role::Qkv, 0, q, d),
        (Role::Qkv, q, kv, d),
        (Role::Qkv, q + kv, kv, d),
        (Role::Out, 0, d, q),
        (Role::GateUp, 0, f, d),
        (Role::GateUp, f, f, d),
        (Role::Down, 0, d, f),
    ];
    let mut out = Vec::new();
    for (role, above, rows, cols) in pieces {
        let at = layout.get(role(0)).offset - span.start + above as u64 * cols as u64;
        let (at, stride) = (narrow(at)?, narrow(stride(role))?);
        out.push(MuonPart {
            rows,
            cols,
            at,
            stride,
            count: config.n_layers,
        });
    }
    Ok((span, out))
}

/// A layer's tensor of one kind: `Role::Qkv` and the like.
type Layered = fn(u32) -> Role;

fn narrow(x: u64) -> Result<u32> {
    u32::try_from(x).map_err(|_| Error::Limit {
        op: "muon",
        what: "elements of the hidden matrices".into(),
        needed: x,
        limit: u32::MAX as u64,
    })
}

/// Elements of Newton–Schulz's scratch: X and the next X (the span), the
/// Gram matrices and their squares (the largest part's), the norms.
struct Scratch {
    span: u64,
    grams: u64,
    count: u64,
}

impl Scratch {
    fn of(span: Span, parts: &[MuonPart]) -> Scratch {
        Scratch {
            span: span.len,
            grams: parts.iter().map(MuonPart::gram_len).max().unwrap_or(1),
            count: parts.iter().map(|p| p.count as u64).max().unwrap_or(1),
        }
    }

    fn bytes(&self) -> u64 {
        4 * (2 * self.span + 2 * self.grams + self.count)
    }

    /// Refuses scratch a storage binding cannot hold.
    fn check(&self, max_binding: u64) -> Result<()> {
        for (what, elements) in [
            ("the hidden matrices' update", self.span),
            (
                "the widest part's Gram matrices (layers × side²)",
                self.grams,
            ),
        ] {
            if 4 * elements > max_binding {
                return Err(Error::Limit {
                    op: "muon",
                    what: what.into(),
                    needed: 4 * elements,
                    limit: max_binding,
                });
            }
        }
        Ok(())
    }
}

/// Bytes of Muon's scratch for this model (the memory plan's).
pub fn scratch_bytes(config: &Config, layout: &ParamLayout) -> Result<u64> {
    let (span, parts) = parts(config, layout)?;
    Ok(Scratch::of(span, &parts).bytes())
}

impl Muon {
    pub fn new(gpu: &Gpu, config: &Config, layout: &ParamLayout) -> Result<Muon> {
        let (span, parts) = parts(config, layout)?;
        let sizes = Scratch::of(span, &parts);
        sizes.check(gpu.limits.max_storage_buffer_binding_size)?;
        Ok(Muon {
            span,
            x: gpu.storage_buffer("muon_x", 4 * sizes.span)?,
            next: gpu.storage_buffer("muon_next", 4 * sizes.span)?,
            gram: gpu.storage_buffer("muon_gram", 4 * sizes.grams)?,
            square: gpu.storage_buffer("muon_square", 4 * sizes.grams)?,
            factors: gpu.storage_buffer("muon_factors", 4 * sizes.count)?,
            step: gpu.uniform("muon_step", &MuonStep::default()),
            parts,
        })
    }

    fn scratch(&self) -> NsScratch<'_> {
        NsScratch {
            x: &self.x,
            next: &self.next,
            gram: &self.gram,
            square: &self.square,
            factors: &self.factors,
        }
    }

    /// The step's Muon dispatches, after finalize: momentum (from `state`,
    /// at the matrices' offsets), Newton–Schulz and the update per part,
    /// then the f16 mirror of the matrices.
    pub fn dispatches(
        &self,
        gpu: &Gpu,
        k: &Kernels,
        p: &Params,
        (state, momentum): (&StateBuffers, f64),
        (adam_step, stats): (&wgpu::Buffer, BufferRange),
    ) -> Result<Vec<Dispatch>> {
        let (start, len) = (self.span.start, self.span.len);
        let n = narrow(len)?;
        let momentum_step = match state {
            StateBuffers::Fp32 { m, .. } => k.optim.muon_momentum(
                gpu,
                momentum,
                n,
                (adam_step, stats),
                f32_range(&p.grads, start, len),
                MuonMomentum::Fp32(f32_range(m, start, len)),
                (&self.x).into(),
            )?,
            StateBuffers::Bf16 { m, .. } => k.optim.muon_momentum(
                gpu,
                momentum,
                n,
                (adam_step, stats),
                f32_range(&p.grads, start, len),
                MuonMomentum::Bf16(bf16_range(m, start, len)),
                (&self.x).into(),
            )?,
            StateBuffers::Bytes {
                code,
                m_codes,
                m_scales,
                ..
            } => {
                let w = BlockWindow::new(*code, start, len);
                k.optim.muon_momentum(
                    gpu,
                    momentum,
                    narrow(w.len)?,
                    (adam_step, stats),
                    f32_range(&p.grads, w.from, w.len),
                    MuonMomentum::Bytes {
                        code: *code,
                        codes: w.codes(m_codes),
                        scales: w.scales(m_scales),
                        first: narrow(w.first)?,
                    },
                    (&self.x).into(),
                )?
            }
        };
        let mut d = vec![momentum_step];
        let s = self.scratch();
        for part in &self.parts {
            d.extend(k.muon.orthogonalize(gpu, (&k.linear, &k.infra), part, &s)?);
        }
        let weights = p.master_range(start, len);
        let bf16 = p.storage() == MasterStorage::Bf16;
        for part in &self.parts {
            let step = (&self.step, stats);
            d.push(k.muon.apply(gpu, part, step, &self.next, (weights, bf16))?);
        }
        if let Some(Mirror::F16(mirror)) = &p.mirror {
            let to = f16_range(mirror, start, len);
            d.push(match bf16 {
                false => k.cast.f32_to_f16(gpu, weights, to, n)?,
                true => k.cast.bf16_to_f16(gpu, weights, to, n)?,
            });
        }
        Ok(d)
    }

    /// Sets step `t`'s rate and decay for the next submission, and with
    /// `sr_seed` the draws of bf16-sr master weights (by element of the
    /// weights buffer: the matrices start at the span's).
    pub fn write_step(&self, gpu: &Gpu, h: &MuonHyper, t: u32, sr_seed: Option<u32>) -> Result<()> {
        let step = MuonStep::new(h, t, sr_seed, narrow(self.span.start)?);
        gpu.queue
            .write_buffer(&self.step, 0, bytemuck::bytes_of(&step));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tiny model's seven parts: q, k and v of the stacked projection
    /// (GQA: k and v half q's height), o, gate and up (taller than wide),
    /// down; each a batch over both layers at the layers' stride.
    #[test]
    fn parts_are_every_layers_matrices_per_part() {
        let c = Config::preset("tiny").unwrap();
        let layout = ParamLayout::new(&c);
        let (span, parts) = parts(&c, &layout).unwrap();
        assert_eq!(span, layout.layer_linears());
        let shapes: Vec<(u32, u32)> = parts.iter().map(|p| (p.rows, p.cols)).collect();
        assert_eq!(
            shapes,
            [
                (64, 64),
                (32, 64),
                (32, 64),
                (64, 64),
                (176, 64),
                (176, 64),
                (64, 176)
            ]
        );
        let qkv = |l| layout.get(Role::Qkv(l)).offset - span.start;
        assert_eq!(
            (parts[0].at as u64, parts[1].at as u64),
            (qkv(0), qkv(0) + 64 * 64)
        );
        assert_eq!(parts[2].at as u64, qkv(0) + (64 + 32) * 64);
        assert_eq!(parts[5].at - parts[4].at, 176 * 64);
        for p in &parts {
            assert_eq!((p.count, p.stride as u64), (2, qkv(1) - qkv(0)));
            assert!(p.reach() <= span.len);
        }
    }

    /// A model whose Gram matrices no binding holds is refused by name.
    #[test]
    fn scratch_beyond_a_binding_is_refused() {
        let c = Config::preset("base").unwrap();
        let layout = ParamLayout::new(&c);
        let (span, parts) = parts(&c, &layout).unwrap();
        let sizes = Scratch::of(span, &parts);
        sizes.check(1 << 30).unwrap();
        // 12 layers × 768² f32 of the widest part: 27 MiB
        let e = sizes.check(16 << 20).unwrap_err().to_string();
        assert!(e.contains("muon") && e.contains("hidden matrices"), "{e}");
        let e = Scratch { span: 1, ..sizes }
            .check(16 << 20)
            .unwrap_err()
            .to_string();
        assert!(e.contains("Gram matrices"), "{e}");
    }
}
