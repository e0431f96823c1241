//! What attention reads and writes: views of heads in row-major tensors,
//! and the shapes' derived sizes.

use crate::gpu::{Bind, BufferRange};
use crate::ops::shapes::AttentionShape;

/// The heads of an f32 tensor `[rows, row_stride]`: head i at columns
/// `col + i·Dh`. A contiguous q is `{ row_stride: H·Dh, col: 0 }`; the k
/// of a fused `[q | k | v]` row is `{ row_stride: (H + 2·Hkv)·Dh, col: H·Dh }`.
#[derive(Clone, Copy, Debug)]
pub struct Heads<'a> {
    pub data: BufferRange<'a>,
    pub row_stride: u32,
    pub col: u32,
}

impl<'a> Heads<'a> {
    /// The binding of `rows` rows of this view.
    pub(crate) fn needs(&self, rows: u64) -> Bind<'a> {
        self.data.needs(4 * rows * self.row_stride as u64)
    }
}

/// The attention inputs; for decode, k and v are the caches `[B·Lmax, ·]`.
#[derive(Clone, Copy, Debug)]
pub struct Qkv<'a> {
    pub q: Heads<'a>,
    pub k: Heads<'a>,
    pub v: Heads<'a>,
}

/// dK and dV, written into column ranges of one buffer `[rows, row_stride]`
/// (one dispatch may bind a buffer writable only once).
#[derive(Clone, Copy, Debug)]
pub struct KvGrads<'a> {
    pub data: BufferRange<'a>,
    pub row_stride: u32,
    pub k_col: u32,
    pub v_col: u32,
}

/// What the forward wrote: o `[B·T, H·Dh]` and lse `[B·T, H]`.
pub struct AttentionBackward<'a> {
    pub qkv: Qkv<'a>,
    pub o: BufferRange<'a>,
    pub d_o: BufferRange<'a>,
    pub lse: BufferRange<'a>,
    /// Written (not accumulated), in q's shape.
    pub dq: Heads<'a>,
    /// Written (not accumulated).
    pub dkv: KvGrads<'a>,
    /// Scratch for Δ = rowsum(dO∘O): `AttentionShape::backward_scratch_bytes`.
    pub delta: BufferRange<'a>,
}

impl AttentionShape {
    pub(crate) fn rows(&self) -> u64 {
        self.batch as u64 * self.seq_len as u64
    }

    /// Bytes of the backward's Δ scratch, `[B·T, H]` f32.
    pub fn backward_scratch_bytes(&self) -> u64 {
        4 * self.rows() * self.heads as u64
    }
}
