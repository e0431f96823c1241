//! SwiGLU on the fused [gate | up] rows the gate|up GEMM writes: n =
//! rows·ffn elements of h; forward reads 2n and writes n, backward reads
//! 3n and writes 2n.

use webtrain::Result;

use super::{Case, Cases, Ctx};

pub(super) fn cases<'a>(c: Ctx<'a>) -> Cases<'a> {
    c.cases(&[("swiglu forward", forward), ("swiglu backward", backward)])
}

fn forward(c: Ctx) -> Result<Case> {
    let (rows, ffn) = (c.s.rows(), c.s.ffn);
    let n = rows * ffn;
    let [gu, h] = c.bufs([("gu", 2 * n), ("h", n)])?;
    let act = &c.k.act;
    let d = act.swiglu_forward_gu(c.gpu, (&gu).into(), (&h).into(), rows, ffn)?;
    Ok(Case::memory(
        format!("{rows}x{ffn}"),
        12.0 * n as f64,
        vec![d],
    ))
}

fn backward(c: Ctx) -> Result<Case> {
    let (rows, ffn) = (c.s.rows(), c.s.ffn);
    let n = rows * ffn;
    let [dh, gu, dgu] = c.bufs([("dh", n), ("gu", 2 * n), ("dgu", 2 * n)])?;
    let (dh, gu, dgu) = ((&dh).into(), (&gu).into(), (&dgu).into());
    let d = c.k.act.swiglu_backward_gu(c.gpu, dh, gu, dgu, rows, ffn)?;
    Ok(Case::memory(
        format!("{rows}x{ffn}"),
        20.0 * n as f64,
        vec![d],
    ))
}
