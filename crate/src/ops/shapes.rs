//! The shapes the attention and RoPE kernels and their CPU twins compute
//! over.

use bytemuck::{Pod, Zeroable};

/// Causal self-attention over `batch` sequences of `seq_len` tokens.
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    pub batch: u32,
    pub seq_len: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
}

/// One decode step: a new query per sequence against `len` cached keys.
#[derive(Clone, Copy, Debug)]
pub struct DecodeShape {
    pub batch: u32,
    /// L: cached positions including the new token's, 1 ≤ L ≤ `max_len`.
    pub len: u32,
    /// Lmax: cache rows per sequence.
    pub max_len: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
}

/// Which heads of which rows RoPE rotates (see 04_rope.wgsl); laid out as
/// its params struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct RopeShape {
    pub rows: u32,
    pub seq_len: u32,
    pub pos_offset: u32,
    pub heads: u32,
    pub head_dim: u32,
    pub row_stride: u32,
    pub col0: u32,
}

/// Largest position the kernel's angle reduction keeps exact (k < 2^15 turns).
pub const MAX_POSITION: u32 = 200_000;

/// HF Llama's inverse frequencies `theta^(−2j/Dh)`, j < Dh/2, correctly
/// rounded to f32 (HF computes them in f32 and may differ by an ulp).
pub fn inv_freq(head_dim: u32, theta: f64) -> Vec<f32> {
    (0..head_dim / 2)
        .map(|j| theta.powf(-2.0 * j as f64 / head_dim as f64) as f32)
        .collect()
}
