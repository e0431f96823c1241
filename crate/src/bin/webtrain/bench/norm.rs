//! RMSNorm over the model's rows.

use webtrain::Result;
use webtrain::kernels::{NormBackward, NormShape, Weights};

use super::{Case, Cases, Ctx};

pub(super) fn cases<'a>(c: Ctx<'a>) -> Cases<'a> {
    c.cases(&[("rmsnorm forward", forward), ("rmsnorm backward", backward)])
}

fn shape(c: Ctx) -> NormShape {
    NormShape {
        rows: c.s.rows(),
        d: c.s.d,
        eps: 1e-5,
    }
}

/// x, the gain, y (or dy) and the rows' 1/rms.
fn operands(c: Ctx, y: &str) -> Result<[wgpu::Buffer; 4]> {
    let (rows, d) = (c.s.rows(), c.s.d);
    c.bufs([("x", rows * d), ("gain", d), (y, rows * d), ("rrms", rows)])
}

fn forward(c: Ctx) -> Result<Case> {
    let (norm, rows, d) = (shape(c), c.s.rows(), c.s.d);
    let [x, g, y, rr] = operands(c, "y")?;
    let gain = Weights::F32((&g).into());
    let dispatch =
        c.k.norm
            .forward(c.gpu, norm, (&x).into(), gain, (&y).into(), (&rr).into())?;
    // x read twice (its sum of squares, then y), y written
    let bytes = 12.0 * rows as f64 * d as f64;
    Ok(Case::memory(format!("{rows}x{d}"), bytes, vec![dispatch]))
}

fn backward(c: Ctx) -> Result<Case> {
    let (norm, rows, d) = (shape(c), c.s.rows(), c.s.d);
    let [x, g, dy, rr] = operands(c, "dy")?;
    let [dx, dg] = c.bufs([("dx", rows * d), ("dgain", d)])?;
    let scratch = c
        .gpu
        .storage_buffer("scratch", norm.backward_scratch_bytes())?;
    let b = NormBackward {
        x: (&x).into(),
        gain: Weights::F32((&g).into()),
        rrms: (&rr).into(),
        dy: (&dy).into(),
        dx: (&dx).into(),
        dgain: (&dg).into(),
        scratch: (&scratch).into(),
    };
    // x and dy read twice (the row sums, then the columns), dx read and
    // written; the dgain partials written and read back, dgain updated
    let bytes =
        24.0 * rows as f64 * d as f64 + 2.0 * norm.backward_scratch_bytes() as f64 + 8.0 * d as f64;
    let dispatches = c.k.norm.backward(c.gpu, norm, &b)?.into();
    Ok(Case::memory(format!("{rows}x{d}"), bytes, dispatches))
}
