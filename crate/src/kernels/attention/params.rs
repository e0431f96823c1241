//! Attention's `Params` (05_attention_common.wgsl's), filled from a shape
//! and its views, each checked first: errors name the op and the view.

use bytemuck::{Pod, Zeroable};

use super::MAX_HEAD_DIM;
use super::views::{Heads, Qkv};
use crate::error::{Error, Result};
use crate::gpu::Bind;
use crate::ops::shapes::DecodeShape;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct Params {
    pub(crate) batch: u32,
    pub(crate) seq_len: u32,
    pub(crate) heads: u32,
    pub(crate) kv_heads: u32,
    pub(crate) head_dim: u32,
    pub(crate) scale: f32,
    pub(crate) q_stride: u32,
    pub(crate) q_col: u32,
    pub(crate) k_stride: u32,
    pub(crate) k_col: u32,
    pub(crate) v_stride: u32,
    pub(crate) v_col: u32,
    pub(crate) dq_stride: u32,
    pub(crate) dq_col: u32,
    pub(crate) dkv_stride: u32,
    pub(crate) dk_col: u32,
    pub(crate) dv_col: u32,
    pub(crate) cache_len: u32,
    pub(crate) group_heads: u32,
    pub(crate) block_rows: u32,
}

pub(crate) fn check_head_dim(op: &'static str, head_dim: u32) -> Result<()> {
    if head_dim == 0 || !head_dim.is_multiple_of(16) || head_dim > MAX_HEAD_DIM {
        return Err(Error::shape(
            op,
            "head_dim",
            format!("a multiple of 16 up to {MAX_HEAD_DIM}"),
            head_dim,
        ));
    }
    Ok(())
}

/// Params with the shape filled in and checked; views are set by the caller.
pub(crate) fn params(
    op: &'static str,
    batch: u32,
    seq_len: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
) -> Result<Params> {
    check_head_dim(op, head_dim)?;
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(Error::shape(
            op,
            "heads, kv_heads",
            "kv_heads dividing heads",
            format!("{heads}, {kv_heads}"),
        ));
    }
    if batch == 0 || seq_len == 0 || heads == 0 {
        return Err(Error::shape(
            op,
            "batch, seq_len, heads",
            "non-zero",
            format!("{batch}, {seq_len}, {heads}"),
        ));
    }
    let scale = (1.0 / (head_dim as f64).sqrt()) as f32;
    Ok(Params {
        batch,
        seq_len,
        heads,
        kv_heads,
        head_dim,
        scale,
        ..Zeroable::zeroed()
    })
}

/// Params of a decode step (`attention_decode`, `kv_append`): L in
/// `seq_len`, Lmax in `cache_len`.
pub(crate) fn decode_params(op: &'static str, s: DecodeShape) -> Result<Params> {
    if s.len == 0 || s.len > s.max_len {
        return Err(Error::shape(
            op,
            "len",
            format!("1 ..= max_len {}", s.max_len),
            s.len,
        ));
    }
    let p = params(op, s.batch, s.len, s.heads, s.kv_heads, s.head_dim)?;
    Ok(Params {
        cache_len: s.max_len,
        ..p
    })
}

/// Checks the views of `x` (k and v named `kv`), setting their row strides
/// and columns in `p`; returns their bindings, of `rows` q rows and k and
/// v rows.
pub(crate) fn check_qkv<'a>(
    op: &'static str,
    p: &mut Params,
    x: &Qkv<'a>,
    kv: [&'static str; 2],
    [q_rows, kv_rows]: [u64; 2],
) -> Result<[Bind<'a>; 3]> {
    (p.q_stride, p.q_col) = check_heads(op, "q", &x.q, p.heads, p.head_dim)?;
    (p.k_stride, p.k_col) = check_heads(op, kv[0], &x.k, p.kv_heads, p.head_dim)?;
    (p.v_stride, p.v_col) = check_heads(op, kv[1], &x.v, p.kv_heads, p.head_dim)?;
    Ok([x.q.needs(q_rows), x.k.needs(kv_rows), x.v.needs(kv_rows)])
}

/// Checks that `heads` heads fit in each row of `x` (its binding is checked
/// by the dispatch, [`Heads::needs`]); returns (row_stride, col).
pub(crate) fn check_heads(
    op: &'static str,
    what: &'static str,
    x: &Heads,
    heads: u32,
    head_dim: u32,
) -> Result<(u32, u32)> {
    if !x.row_stride.is_multiple_of(4) || !x.col.is_multiple_of(4) {
        return Err(Error::shape(
            op,
            what,
            "row stride and column multiples of 4 (read as vec4)",
            format!("{} and {}", x.row_stride, x.col),
        ));
    }
    let width = x.col as u64 + heads as u64 * head_dim as u64;
    if width > x.row_stride as u64 {
        return Err(Error::shape(
            op,
            what,
            format!("heads within a row of {}", x.row_stride),
            format!("up to column {width}"),
        ));
    }
    Ok((x.row_stride, x.col))
}
