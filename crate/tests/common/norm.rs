//! 02_norm.wgsl against reference/norm.rs.

use half::f16;
use webtrain::kernels::{NormBackward, NormShape, RmsNorm, Weights};
use webtrain::reference::norm as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_close, rng, uniform};

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Awkward sizes, and the seed's widths at its sequence length.
const SHAPES: &[(u32, u32)] = &[(129, 1000), (3, 1), (512, 384), (64, 768), (2, 4097)];
const EPS: f32 = 1e-5;

struct Case {
    shape: NormShape,
    x: Vec<f32>,
    gain: Vec<f32>,
}

fn case(seed: u64, rows: u32, d: u32) -> Case {
    let mut r = rng(seed);
    let mut x = uniform(&mut r, (rows * d) as usize, -2.0, 2.0);
    if rows > 2 {
        x[d as usize..2 * d as usize].fill(0.0); // a zero row: eps keeps it finite
    }
    Case {
        shape: NormShape { rows, d, eps: EPS },
        x,
        gain: uniform(&mut r, d as usize, 0.5, 1.5),
    }
}

async fn forward(
    gpu: &Gpu,
    k: &RmsNorm,
    c: &Case,
    gain: Weights<'_>,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let xb = gpu.upload("x", &c.x)?;
    let y = gpu.storage_buffer("y", 4 * c.x.len() as u64)?;
    let rrms = gpu.storage_buffer("rrms", 4 * c.shape.rows as u64)?;
    gpu.run(&[&k.forward(
        gpu,
        c.shape,
        (&xb).into(),
        gain,
        (&y).into(),
        (&rrms).into(),
    )?])
    .await?;
    Ok((
        gpu.read_back((&y).into()).await?,
        gpu.read_back((&rrms).into()).await?,
    ))
}

pub async fn rmsnorm_forward_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = RmsNorm::new(gpu).await?;
    for (i, &(rows, d)) in SHAPES.iter().enumerate() {
        let c = case(20 + i as u64, rows, d);
        // f32 sums of D squares, inverseSqrt (2 ulp in WGSL), two products:
        // a few ulp relative. Measured worst: 2.2e-7 relative (y) and
        // 1.4e-7 (rrms) on lavapipe, 2.3e-7 and 1.2e-7 on SwiftShader.
        let (want, want_rrms) = reference::rmsnorm_forward(&f64s(&c.x), &f64s(&c.gain), EPS as f64);
        let gb = gpu.upload("gain", &c.gain)?;
        let (y, rrms) = forward(gpu, &k, &c, Weights::F32((&gb).into())).await?;
        assert_close(&format!("rmsnorm y {rows}x{d}"), &y, &want, 1e-8, 1e-6);
        assert_close(
            &format!("rmsnorm rrms {rows}x{d}"),
            &rrms,
            &want_rrms,
            0.0,
            1e-6,
        );

        let halves: Vec<f16> = c.gain.iter().map(|&g| f16::from_f32(g)).collect();
        let hb = gpu.upload("gain_h", &halves)?;
        let (y, _) = forward(gpu, &k, &c, Weights::F16((&hb).into())).await?;
        let gain16: Vec<f64> = halves.iter().map(|h| h.to_f64()).collect();
        let (want, _) = reference::rmsnorm_forward(&f64s(&c.x), &gain16, EPS as f64);
        assert_close(&format!("rmsnorm_w16 y {rows}x{d}"), &y, &want, 1e-8, 1e-6);
    }
    Ok(())
}

pub async fn rmsnorm_backward_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = RmsNorm::new(gpu).await?;
    for (i, &(rows, d)) in SHAPES.iter().enumerate() {
        let c = case(30 + i as u64, rows, d);
        let mut r = rng(40 + i as u64);
        let dy = uniform(&mut r, c.x.len(), -1.0, 1.0);
        let dx0 = uniform(&mut r, c.x.len(), -1.0, 1.0); // the residual's gradient, added to
        let dgain0 = uniform(&mut r, d as usize, -1.0, 1.0);
        let (_, rrms) = reference::rmsnorm_forward(&f64s(&c.x), &f64s(&c.gain), EPS as f64);
        let (mut want_dx, mut want_dgain) = (f64s(&dx0), f64s(&dgain0));
        reference::rmsnorm_backward(
            &f64s(&c.x),
            &f64s(&c.gain),
            &rrms,
            &f64s(&dy),
            &mut want_dx,
            &mut want_dgain,
        );

        let rrms32: Vec<f32> = rrms.iter().map(|&v| v as f32).collect();
        let (xb, gb, rb, dyb) = (
            gpu.upload("x", &c.x)?,
            gpu.upload("gain", &c.gain)?,
            gpu.upload("rrms", &rrms32)?,
            gpu.upload("dy", &dy)?,
        );
        let (dxb, dgb) = (gpu.upload("dx", &dx0)?, gpu.upload("dgain", &dgain0)?);
        let scratch = gpu.storage_buffer("scratch", c.shape.backward_scratch_bytes())?;
        let b = NormBackward {
            x: (&xb).into(),
            gain: Weights::F32((&gb).into()),
            rrms: (&rb).into(),
            dy: (&dyb).into(),
            dx: (&dxb).into(),
            dgain: (&dgb).into(),
            scratch: (&scratch).into(),
        };
        let [a, f] = k.backward(gpu, c.shape, &b)?;
        gpu.run(&[&a, &f]).await?;
        // dx = dx0 + r·g·dy − c·x: a few roundings of terms up to r·g ≈ 470 in
        // the all-zero row, where r = 1/sqrt(eps) ≈ 316. Measured
        // worst 5.3e-5 absolute on lavapipe, 4.9e-5 on SwiftShader, all in
        // the zero row (1.7e-7 of its values).
        let got_dx = gpu.read_back::<f32>((&dxb).into()).await?;
        assert_close(
            &format!("rmsnorm dx {rows}x{d}"),
            &got_dx,
            &want_dx,
            2e-5,
            1e-5,
        );
        // dgain: R f32 additions, each rounding by 2^-24 of a partial sum that
        // is at most Σ|dy·x·r| of its column. Measured worst (R = 512):
        // 5.5e-6 absolute on lavapipe, 5.9e-6 on SwiftShader.
        let sum_abs = (0..d as usize)
            .map(|i| {
                (0..rows as usize)
                    .map(|r| (dy[r * d as usize + i] * c.x[r * d as usize + i]) as f64 * rrms[r])
                    .map(f64::abs)
                    .sum::<f64>()
            })
            .fold(0.0, f64::max);
        let dgain = gpu.read_back::<f32>((&dgb).into()).await?;
        assert_close(
            &format!("rmsnorm dgain {rows}x{d}"),
            &dgain,
            &want_dgain,
            rows as f64 * 2f64.powi(-24) * sum_abs,
            2f64.powi(-23),
        );

        // deterministic: the same inputs give the same bits
        let again = gpu.upload("dgain", &dgain0)?;
        let b2 = NormBackward {
            dgain: (&again).into(),
            ..b
        };
        let [a, f] = k.backward(gpu, c.shape, &b2)?;
        gpu.run(&[&a, &f]).await?;
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(
            bits(gpu.read_back((&again).into()).await?),
            bits(dgain),
            "dgain differs between runs"
        );
    }
    Ok(())
}
