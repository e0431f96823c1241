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

    /// Bytes of everything in this file for `layers` layers: saved
    /// activations, the loss head and the gradient scratch (the tables
    /// the buffers are made from).
    pub fn bytes(&self, layers: u64) -> u64 {
        let sum = |table: &[(&str, u64)]| table.iter().map(|(_, b)| b).sum::<u64>();
        layers * sum(&self.layer_table()) + sum(&self.step_table())
    }

    /// What one layer's forward saves: each buffer's label and bytes, in
    /// `LayerActivations`' order.
    fn layer_table(&self) -> [(&'static str, u64); 11] {
        let (r, d) = (4 * self.rows, self.d);
        [
            ("x", r * d),
            ("xn1", r * d),
            ("rrms1", r),
            ("qkv", r * self.qkv),
            ("attn", r * self.attn),
            ("attn_lse", r * self.heads),
            ("x_mid", r * d),
            ("xn2", r * d),
            ("rrms2", r),
            ("gu", r * 2 * self.ffn),
            ("act", r * self.ffn),
        ]
    }

    /// The rest of a step's buffers, in `Activations`' order.
    fn step_table(&self) -> [(&'static str, u64); 15] {
        let (r, d) = (4 * self.rows, self.d);
        [
            ("x_out", r * d),
            ("xnf", r * d),
            ("rrmsf", r),
            ("logits", 4 * self.chunk_rows * self.vocab),
            ("losses", r),
            ("loss_lse", r),
            ("loss", 16),
            ("dx", r * d),
            ("dnorm", r * d),
            ("dqkv", r * self.qkv),
            ("dattn", r * self.attn),
            ("dgu", r * 2 * self.ffn),
            ("dact", r * self.ffn),
            ("delta", r * self.heads),
            ("norm_scratch", self.norm().backward_scratch_bytes()),
        ]
    }
}

/// A buffer for each row of `table`.
fn allocate<const N: usize>(
    gpu: &Gpu,
    table: [(&'static str, u64); N],
) -> Result<[wgpu::Buffer; N]> {
    let buffers = table
        .iter()
        .map(|&(label, bytes)| gpu.storage_buffer(label, bytes))
        .collect::<Result<Vec<_>>>()?;
    Ok(buffers
        .try_into()
        .unwrap_or_else(|_| unreachable!("one buffer per row")))
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
    /// The forward's boundaries (what the inspector's value ranges read),
    /// with their names.
    pub fn boundaries(&self) -> [(&'static str, &wgpu::Buffer); 8] {
        [
            ("x", &self.x),
            ("xn1", &self.xn1),
            ("qkv", &self.qkv),
            ("attn", &self.attn),
            ("x_mid", &self.x_mid),
            ("xn2", &self.xn2),
            ("gu", &self.gu),
            ("act", &self.act),
        ]
    }

    fn new(gpu: &Gpu, m: &Dims) -> Result<Self> {
        let [x, xn1, rrms1, qkv, attn, lse, x_mid, xn2, rrms2, gu, act] =
            allocate(gpu, m.layer_table())?;
        Ok(LayerActivations {
            x,
            xn1,
            rrms1,
            qkv,
            attn,
            lse,
            x_mid,
            xn2,
            rrms2,
            gu,
            act,
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
        let [
            x_out,
            xnf,
            rrmsf,
            logits,
            losses,
            loss_lse,
            loss,
            dx,
            dnorm,
            dqkv,
            dattn,
            dgu,
            dact,
            delta,
            norm_scratch,
        ] = allocate(gpu, m.step_table())?;
        Ok(Activations {
            dims: m,
            layers: (0..layers)
                .map(|_| LayerActivations::new(gpu, &m))
                .collect::<Result<_>>()?,
            x_out,
            xnf,
            rrmsf,
            logits,
            losses,
            loss_lse,
            loss,
            dx,
            dnorm,
            dqkv,
            dattn,
            dgu,
            dact,
            delta,
            norm_scratch,
        })
    }
}
