//! Rotary position embedding, applied to q and k together in place.

use webtrain::Result;
use webtrain::kernels::RopeShape;
use webtrain::kernels::rope::inv_freq;

use super::{Case, Cases, Ctx};

pub(super) fn cases<'a>(c: Ctx<'a>) -> Cases<'a> {
    c.cases(&[("rope q,k", forward)])
}

/// q and k of a fused [q | k | v] row's first two thirds, read and written.
fn forward(c: Ctx) -> Result<Case> {
    let (s, rows) = (c.s, c.s.rows());
    let width = 2 * s.hd();
    let rope = RopeShape {
        rows,
        seq_len: s.seq,
        pos_offset: 0,
        heads: 2 * s.heads,
        head_dim: s.head_dim,
        row_stride: width,
        col0: 0,
    };
    let f = c.gpu.upload("inv_freq", &inv_freq(s.head_dim, 10_000.0))?;
    let qk = c.buf("qk", rows * width)?;
    let d = c.k.rope.forward(c.gpu, rope, (&f).into(), (&qk).into())?;
    let bytes = 8.0 * rows as f64 * width as f64;
    Ok(Case::memory(format!("{rows}x{width}"), bytes, vec![d]))
}
