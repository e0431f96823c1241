//! Causal attention on a fused [q | k | v] row; FLOPs count the causal half.

use webtrain::Result;
use webtrain::kernels::{AttentionBackward, AttentionShape, Heads, KvGrads, Qkv};

use super::{Case, Cases, Ctx};

pub(super) fn cases<'a>(c: Ctx<'a>) -> Cases<'a> {
    c.cases(&[
        ("attention forward", forward),
        ("attention backward", backward),
    ])
}

/// The shape, as "BxTxHh"; q·k products of the causal half (× head_dim);
/// bytes of q, k, v and o with the lse.
fn work(c: Ctx) -> (AttentionShape, String, f64, f64) {
    let s = c.s;
    let shape = AttentionShape {
        batch: s.batch,
        seq_len: s.seq,
        heads: s.heads,
        kv_heads: s.heads,
        head_dim: s.head_dim,
    };
    let dims = format!("{}x{}x{}h", s.batch, s.seq, s.heads);
    let pairs = s.batch as f64 * s.heads as f64 * (s.seq as f64).powi(2) * s.head_dim as f64 / 2.0;
    let io = 4.0 * s.rows() as f64 * (4 * s.hd() + s.heads) as f64;
    (shape, dims, pairs, io)
}

/// q, k and v: the thirds of rows of `data`, each `hd` wide.
fn fused(data: &wgpu::Buffer, hd: u32) -> Qkv<'_> {
    let heads = |col: u32| Heads {
        data: data.into(),
        row_stride: 3 * hd,
        col,
    };
    Qkv {
        q: heads(0),
        k: heads(hd),
        v: heads(2 * hd),
    }
}

/// The forward's inputs and outputs: a fused [q | k | v] row, o and lse.
fn qkv_o_lse(c: Ctx) -> Result<[wgpu::Buffer; 3]> {
    let (rows, hd) = (c.s.rows(), c.s.hd());
    c.bufs([
        ("qkv", rows * 3 * hd),
        ("o", rows * hd),
        ("lse", rows * c.s.heads),
    ])
}

fn forward(c: Ctx) -> Result<Case> {
    let (shape, dims, pairs, io) = work(c);
    let [qkv, o, lse] = qkv_o_lse(c)?;
    let qkv = fused(&qkv, c.s.hd());
    let d =
        c.k.attn
            .forward(c.gpu, shape, qkv, (&o).into(), (&lse).into())?;
    Ok(Case {
        variant: None,
        shape: dims,
        flops: 4.0 * pairs,
        bytes: io,
        dispatches: vec![d],
    })
}

/// dO read from o's buffer: its values do not change the work.
fn backward(c: Ctx) -> Result<Case> {
    let (shape, dims, pairs, io) = work(c);
    let (rows, hd) = (c.s.rows(), c.s.hd());
    let [qkv, o, lse] = qkv_o_lse(c)?;
    let dqkv = c.buf("dqkv", rows * 3 * hd)?;
    let delta = c
        .gpu
        .storage_buffer("delta", shape.backward_scratch_bytes())?;
    let g = AttentionBackward {
        qkv: fused(&qkv, hd),
        o: (&o).into(),
        d_o: (&o).into(),
        lse: (&lse).into(),
        dq: fused(&dqkv, hd).q,
        dkv: KvGrads {
            data: (&dqkv).into(),
            row_stride: 3 * hd,
            k_col: hd,
            v_col: 2 * hd,
        },
        delta: (&delta).into(),
    };
    Ok(Case {
        variant: None,
        shape: dims,
        flops: 10.0 * pairs,
        bytes: 2.0 * io,
        dispatches: c.k.attn.backward(c.gpu, shape, &g)?.into(),
    })
}
