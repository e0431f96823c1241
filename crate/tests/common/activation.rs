//! 06_activation.wgsl against reference/activation.rs.

use webtrain::kernels::Activation;
use webtrain::reference::activation as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_close, rng, uniform};

/// Element counts that are not multiples of the workgroup size, and the
/// seed's MLP shape (512 positions × 384 channels).
const SIZES: &[usize] = &[1, 257, 1000, 512 * 384];
/// SwiGLU's (rows, ffn): one element, one row of 257, rows narrower and
/// wider than a workgroup (no count a multiple of it), the seed's MLP shape.
const SWIGLU_SHAPES: &[(usize, usize)] = &[(1, 1), (1, 257), (37, 176), (130, 688), (512, 384)];
/// Elements past `n` in every output: the kernel must leave them alone.
const GUARD: usize = 37;
const SENTINEL: f32 = -1234.5;

/// Inputs where overflow would show: sigmoid and tanh tails, f32 exp's
/// overflow (88.7), GeLU's clamp (16), and ±1e4 as asked of the kernels.
const LARGE: &[f32] = &[
    0.0,
    -0.0,
    1e-30,
    -1e-30,
    1.0,
    -1.0,
    16.0,
    -16.0,
    17.0,
    -17.0,
    88.0,
    -88.0,
    89.0,
    -89.0,
    100.0,
    -100.0,
    1e4,
    -1e4,
    1e30,
    -1e30,
    f32::MAX,
    -f32::MAX,
];

// Forwards: σ from one exp (WGSL allows 3 + 2|x| ulp: ~1.1e-6 at |x| = 8)
// and one division (2.5 ulp), then products: rtol 2e-6. GeLU's σ argument
// 2u is itself rounded, so its relative error grows like |2u|·2^-23 in the
// left tail: rtol 4e-6, and atol 1e-12 for the far tails, where both
// outputs are < 1e-6 and exp's bound grows with |x| (subnormals may flush).
// Measured, lavapipe / SwiftShader: silu·up 7.4e-7 / 7.5e-7 relative
// (values ≥ 1e-3), GeLU 1.1e-7 relative at |y| > 1; 8e-6 relative only
// below 1e-18 on both.
const SWIGLU_ATOL: f64 = 1e-12;
const SWIGLU_RTOL: f64 = 2e-6;
const GELU_ATOL: f64 = 1e-12;
const GELU_RTOL: f64 = 4e-6;
// Backwards: silu'(x) = σ(1 + x(1 − σ)) crosses zero near x = −1.28 and
// GeLU's derivative near x = −0.75, where two terms of size ~0.2 cancel:
// there only an absolute bound of a few ulp of those terms times |dh·up|
// (≤ 2 here) holds. Measured, lavapipe / SwiftShader: atol needed at
// rtol 4e-6 is 3.3e-8 / 2.9e-8 (worst 1.7e-7 relative away from zeros).
const GRAD_ATOL: f64 = 1e-7;
const GRAD_RTOL: f64 = 4e-6;

fn wide(xs: &[f32]) -> Vec<f64> {
    xs.iter().map(|&x| x as f64).collect()
}

async fn output(gpu: &Gpu, label: &str, n: usize) -> Result<wgpu::Buffer> {
    gpu.upload(label, &vec![SENTINEL; n + GUARD])
}

/// Reads `n` elements and checks that the guard after them is untouched.
async fn read(gpu: &Gpu, what: &str, buffer: &wgpu::Buffer, n: usize) -> Result<Vec<f32>> {
    let mut v: Vec<f32> = gpu.read_back(buffer.into()).await?;
    assert!(
        v[n..].iter().all(|&g| g == SENTINEL),
        "{what}: wrote past n={n}"
    );
    v.truncate(n);
    Ok(v)
}

struct Swiglu {
    h: Vec<f32>,
    dgate: Vec<f32>,
    dup: Vec<f32>,
}

/// swiglu_forward_gu and swiglu_backward_gu on `rows` rows of `[gate | up]`
/// built from `gate` and `up` ([rows, ffn] each); dgu is split back apart.
async fn run_swiglu(
    gpu: &Gpu,
    k: &Activation,
    gate: &[f32],
    up: &[f32],
    dh: &[f32],
    rows: usize,
) -> Result<Swiglu> {
    let n = gate.len();
    assert_eq!(
        n % rows,
        0,
        "swiglu: {n} elements are not {rows} whole rows"
    );
    let ffn = n / rows;
    let gu: Vec<f32> = (0..rows)
        .flat_map(|i| {
            gate[i * ffn..(i + 1) * ffn]
                .iter()
                .chain(&up[i * ffn..(i + 1) * ffn])
                .copied()
        })
        .collect();
    let (gu_b, dh_b) = (gpu.upload("gu", &gu)?, gpu.upload("dh", dh)?);
    let (h, dgu) = (output(gpu, "h", n).await?, output(gpu, "dgu", 2 * n).await?);
    let (rows32, ffn32) = (rows as u32, ffn as u32);
    gpu.run(&[
        &k.swiglu_forward_gu(gpu, (&gu_b).into(), (&h).into(), rows32, ffn32)?,
        &k.swiglu_backward_gu(
            gpu,
            (&dh_b).into(),
            (&gu_b).into(),
            (&dgu).into(),
            rows32,
            ffn32,
        )?,
    ])
    .await?;
    let dgu = read(gpu, "dgu", &dgu, 2 * n).await?;
    let half = |second: usize| -> Vec<f32> {
        (0..rows)
            .flat_map(|i| dgu[(2 * i + second) * ffn..(2 * i + second + 1) * ffn].to_vec())
            .collect()
    };
    Ok(Swiglu {
        h: read(gpu, "h", &h, n).await?,
        dgate: half(0),
        dup: half(1),
    })
}

/// (y, dx)
async fn run_gelu(
    gpu: &Gpu,
    k: &Activation,
    x: &[f32],
    dy: &[f32],
) -> Result<(Vec<f32>, Vec<f32>)> {
    let n = x.len();
    let (x_b, dy_b) = (gpu.upload("x", x)?, gpu.upload("dy", dy)?);
    let (y, dx) = (output(gpu, "y", n).await?, output(gpu, "dx", n).await?);
    gpu.run(&[
        &k.gelu_forward(gpu, (&x_b).into(), (&y).into(), n as u32)?,
        &k.gelu_backward(gpu, (&dy_b).into(), (&x_b).into(), (&dx).into(), n as u32)?,
    ])
    .await?;
    Ok((read(gpu, "y", &y, n).await?, read(gpu, "dx", &dx, n).await?))
}

fn check_swiglu(what: &str, gate: &[f32], up: &[f32], dh: &[f32], got: &Swiglu) {
    let (gate, up, dh) = (wide(gate), wide(up), wide(dh));
    let (dgate, dup) = reference::swiglu_backward(&dh, &gate, &up);
    assert_close(
        &format!("swiglu h {what}"),
        &got.h,
        &reference::swiglu_forward(&gate, &up),
        SWIGLU_ATOL,
        SWIGLU_RTOL,
    );
    assert_close(
        &format!("swiglu dgate {what}"),
        &got.dgate,
        &dgate,
        GRAD_ATOL,
        GRAD_RTOL,
    );
    assert_close(
        &format!("swiglu dup {what}"),
        &got.dup,
        &dup,
        SWIGLU_ATOL,
        SWIGLU_RTOL,
    );
}

fn check_gelu(what: &str, x: &[f32], dy: &[f32], got: &(Vec<f32>, Vec<f32>)) {
    let (x, dy) = (wide(x), wide(dy));
    assert_close(
        &format!("gelu y {what}"),
        &got.0,
        &reference::gelu_forward(&x),
        GELU_ATOL,
        GELU_RTOL,
    );
    assert_close(
        &format!("gelu dx {what}"),
        &got.1,
        &reference::gelu_backward(&dy, &x),
        GRAD_ATOL,
        GRAD_RTOL,
    );
}

/// The fused-row kernels on `[R, 2F]` rows against the reference on the
/// split halves, and nothing written past the end.
pub async fn swiglu_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Activation::new(gpu).await?;
    let mut r = rng(6);
    for &(rows, ffn) in SWIGLU_SHAPES {
        let n = rows * ffn;
        let (gate, up, dh) = (
            uniform(&mut r, n, -8.0, 8.0),
            uniform(&mut r, n, -2.0, 2.0),
            uniform(&mut r, n, -1.0, 1.0),
        );
        let got = run_swiglu(gpu, &k, &gate, &up, &dh, rows).await?;
        check_swiglu(&format!("rows={rows} ffn={ffn}"), &gate, &up, &dh, &got);
    }
    Ok(())
}

pub async fn gelu_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Activation::new(gpu).await?;
    let mut r = rng(7);
    for &n in SIZES {
        let (x, dy) = (uniform(&mut r, n, -8.0, 8.0), uniform(&mut r, n, -1.0, 1.0));
        let got = run_gelu(gpu, &k, &x, &dy).await?;
        check_gelu(&format!("n={n}"), &x, &dy, &got);
    }
    Ok(())
}

/// No NaN or Inf anywhere, however large the input; from |x| = 1e4 on, the
/// saturated values exactly: silu and gelu are x (slope 1) far right, 0
/// (slope 0) far left. (At −100, silu is −3.7e-42, or 0 where the adapter
/// flushes subnormals.)
pub async fn activations_stay_finite_at_large_inputs(gpu: &Gpu) -> Result<()> {
    let k = Activation::new(gpu).await?;
    let ones = vec![1.0; LARGE.len()];
    let swiglu = run_swiglu(gpu, &k, LARGE, &ones, &ones, 2).await?;
    let gelu = run_gelu(gpu, &k, LARGE, &ones).await?;
    let outputs = [
        ("h", &swiglu.h),
        ("dgate", &swiglu.dgate),
        ("dup", &swiglu.dup),
        ("gelu", &gelu.0),
        ("dgelu", &gelu.1),
    ];
    for (what, v) in outputs {
        let bad: Vec<(f32, f32)> = LARGE
            .iter()
            .zip(v)
            .filter(|(_, y)| !y.is_finite())
            .map(|(&x, &y)| (x, y))
            .collect();
        assert!(bad.is_empty(), "{what}: not finite at (x, value) {bad:?}");
    }
    for (i, &x) in LARGE.iter().enumerate().filter(|(_, x)| x.abs() >= 1e4) {
        let (value, slope) = if x > 0.0 { (x, 1.0) } else { (0.0, 0.0) };
        let got = [swiglu.h[i], gelu.0[i], swiglu.dgate[i], gelu.1[i]];
        assert_eq!(
            got,
            [value, value, slope, slope],
            "x = {x:e}: silu, gelu, silu', gelu'"
        );
    }
    check_swiglu("large inputs", LARGE, &ones, &ones, &swiglu);
    check_gelu("large inputs", LARGE, &ones, &gelu);
    Ok(())
}
