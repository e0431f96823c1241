//! The buffers a training step works in: what the forward saves for the
//! backward (per layer), the loss head's, and the activation-gradient
//! scratch every layer's backward reuses. Legend: R = B·T rows, D d_model,
//! Q = (H + 2·Hkv)·Dh the fused qkv width, A = H·Dh, H heads, F ffn,
//! V vocab, Rc rows per logits chunk.

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::norm::NormShape;

use super::{BatchShape, Config};

/// Most bytes one logits chunk may take: lm_head and the loss run over row
/// chunks, so the `[R, V]` logits (256 MiB at the seed's sizes) never exist whole.
const LOGITS_BUDGET: u64 = 64 << 20;
/// Chunk starts are multiples of this many rows, so every row-offset binding
/// (`r·D·4`, `r·4` bytes) is 256-B aligned.
const CHUNK_ROWS_ALIGN: u32 = 64;

/// The sizes every buffer below is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    pub rows: u64,
    pub d: u64,
    pub qkv: u64,
    pub attn: u64,
    pub heads: u64,
    pub ffn: u64,
    pub vocab: u64,
    pub chunk_rows: u64,
}

impl Dims {
    /// Fails where one logits row chunk cannot be bound on this adapter.
    pub fn new(c: &Config, s: BatchShape, max_binding: u64) -> Result<Dims> {
        let rows = s.rows() as u64;
        let row_bytes = 4 * c.vocab as u64;
        let fit = (max_binding.min(LOGITS_BUDGET) / row_bytes) / CHUNK_ROWS_ALIGN as u64
            * CHUNK_ROWS_ALIGN as u64;
        let chunk_rows = if rows <= fit { rows } else { fit };
        if chunk_rows == 0 {
            return Err(Error::Limit {
                op: "model",
                what: format!("{CHUNK_ROWS_ALIGN} rows of logits over vocab {}", c.vocab),
                needed: CHUNK_ROWS_ALIGN as u64 * row_bytes,
                limit: max_binding,
            });
        }
        Ok(Dims {
            rows,
            d: c.d_model as u64,
            qkv: c.qkv_width() as u64,
            attn: (c.n_heads * c.head_dim()) as u64,
            heads: c.n_heads as u64,
            ffn: c.ffn as u64,
            vocab: c.vocab as u64,
            chunk_rows,
        })
    }

    fn norm(&self) -> NormShape {
        NormShape {
            rows: self.rows as u32,
            d: self.d as u32,
            eps: 0.0,
        }
    }

    /// f32 elements of one layer's saved activations.
    fn layer_floats(&self) -> u64 {
        let (r, d) = (self.rows, self.d);
        r * d * 4 + r * 2 + r * self.qkv + r * self.attn + r * self.heads + r * self.ffn * 3
    }

    /// Bytes of everything in this file for `layers` layers: saved
    /// activations, the loss head and the gradient scratch.
    pub fn bytes(&self, layers: u64) -> u64 {
        let (r, d) = (self.rows, self.d);
        let head = r * d * 2 + r + self.chunk_rows * self.vocab + r * 2 + 4;
        let grads = r * d * 2 + r * self.qkv + r * self.attn + r * self.ffn * 3 + r * self.heads;
        4 * (layers * self.layer_floats() + head + grads) + self.norm().backward_scratch_bytes()
    }
}

fn f32s(gpu: &Gpu, label: &str, n: u64) -> Result<wgpu::Buffer> {
    gpu.storage_buffer(label, 4 * n)
}

/// What layer l's forward saves.
pub struct LayerActivations {
    pub x: wgpu::Buffer,     // [R, D] the layer's input: the residual stream
    pub xn1: wgpu::Buffer,   // [R, D] input_layernorm(x)
    pub rrms1: wgpu::Buffer, // [R] its 1/rms
    pub qkv: wgpu::Buffer,   // [R, Q] q | k | v, q and k rotated
    pub attn: wgpu::Buffer,  // [R, A] attention output
    pub lse: wgpu::Buffer,   // [R, H] attention log-sum-exp
    pub x_mid: wgpu::Buffer, // [R, D] x + attn·Woᵀ
    pub xn2: wgpu::Buffer,   // [R, D] post_attention_layernorm(x_mid)
    pub rrms2: wgpu::Buffer, // [R]
    pub gu: wgpu::Buffer,    // [R, 2F] gate | up
    pub act: wgpu::Buffer,   // [R, F] silu(gate)·up
}

impl LayerActivations {
    fn new(gpu: &Gpu, m: &Dims) -> Result<Self> {
        let r = m.rows;
        Ok(LayerActivations {
            x: f32s(gpu, "x", r * m.d)?,
            xn1: f32s(gpu, "xn1", r * m.d)?,
            rrms1: f32s(gpu, "rrms1", r)?,
            qkv: f32s(gpu, "qkv", r * m.qkv)?,
            attn: f32s(gpu, "attn", r * m.attn)?,
            lse: f32s(gpu, "attn_lse", r * m.heads)?,
            x_mid: f32s(gpu, "x_mid", r * m.d)?,
            xn2: f32s(gpu, "xn2", r * m.d)?,
            rrms2: f32s(gpu, "rrms2", r)?,
            gu: f32s(gpu, "gu", r * 2 * m.ffn)?,
            act: f32s(gpu, "act", r * m.ffn)?,
        })
    }
}

/// Every buffer of a step but the parameters'.
pub struct Activations {
    pub dims: Dims,
    pub layers: Vec<LayerActivations>,
    pub x_out: wgpu::Buffer,    // [R, D] the last layer's output
    pub xnf: wgpu::Buffer,      // [R, D] norm(x_out)
    pub rrmsf: wgpu::Buffer,    // [R]
    pub logits: wgpu::Buffer,   // [Rc, V] one row chunk; dlogits in place
    pub losses: wgpu::Buffer,   // [R] per-row loss
    pub loss_lse: wgpu::Buffer, // [R] per-row log-sum-exp
    pub loss: wgpu::Buffer,     // LossTotals, 16 B

    // gradient scratch, shared by all layers
    pub dx: wgpu::Buffer,           // [R, D] residual stream, accumulated
    pub dnorm: wgpu::Buffer,        // [R, D] a norm's output
    pub dqkv: wgpu::Buffer,         // [R, Q]
    pub dattn: wgpu::Buffer,        // [R, A]
    pub dgu: wgpu::Buffer,          // [R, 2F]
    pub dact: wgpu::Buffer,         // [R, F]
    pub delta: wgpu::Buffer,        // [R, H] attention backward's Δ
    pub norm_scratch: wgpu::Buffer, // rmsnorm dgain partials
}

impl Activations {
    pub fn new(gpu: &Gpu, layers: u32, m: Dims) -> Result<Self> {
        let r = m.rows;
        Ok(Activations {
            dims: m,
            layers: (0..layers)
                .map(|_| LayerActivations::new(gpu, &m))
                .collect::<Result<_>>()?,
            x_out: f32s(gpu, "x_out", r * m.d)?,
            xnf: f32s(gpu, "xnf", r * m.d)?,
            rrmsf: f32s(gpu, "rrmsf", r)?,
            logits: f32s(gpu, "logits", m.chunk_rows * m.vocab)?,
            losses: f32s(gpu, "losses", r)?,
            loss_lse: f32s(gpu, "loss_lse", r)?,
            loss: f32s(gpu, "loss", 4)?,
            dx: f32s(gpu, "dx", r * m.d)?,
            dnorm: f32s(gpu, "dnorm", r * m.d)?,
            dqkv: f32s(gpu, "dqkv", r * m.qkv)?,
            dattn: f32s(gpu, "dattn", r * m.attn)?,
            dgu: f32s(gpu, "dgu", r * 2 * m.ffn)?,
            dact: f32s(gpu, "dact", r * m.ffn)?,
            delta: f32s(gpu, "delta", r * m.heads)?,
            norm_scratch: gpu.storage_buffer("norm_scratch", m.norm().backward_scratch_bytes())?,
        })
    }

    /// Bytes allocated here (equal to `Dims::bytes`, which the tests check).
    pub fn allocated(&self) -> u64 {
        let per_layer = |l: &LayerActivations| {
            [
                &l.x, &l.xn1, &l.rrms1, &l.qkv, &l.attn, &l.lse, &l.x_mid, &l.xn2, &l.rrms2, &l.gu,
                &l.act,
            ]
            .iter()
            .map(|b| b.size())
            .sum::<u64>()
        };
        let rest = [
            &self.x_out,
            &self.xnf,
            &self.rrmsf,
            &self.logits,
            &self.losses,
            &self.loss_lse,
            &self.loss,
            &self.dx,
            &self.dnorm,
            &self.dqkv,
            &self.dattn,
            &self.dgu,
            &self.dact,
            &self.delta,
            &self.norm_scratch,
        ];
        self.layers.iter().map(per_layer).sum::<u64>() + rest.iter().map(|b| b.size()).sum::<u64>()
    }
}
