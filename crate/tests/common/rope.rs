//! 04_rope.wgsl against reference/rope.rs.

use webtrain::kernels::rope::inv_freq;
use webtrain::kernels::{Rope, RopeShape};
use webtrain::reference::rope as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_close, rng, uniform};

/// Rotates `x` on the GPU (forward or backward) and returns it.
async fn rotate(
    gpu: &Gpu,
    k: &Rope,
    s: RopeShape,
    theta: f64,
    x: &[f32],
    backward: bool,
) -> Result<Vec<f32>> {
    let fb = gpu.upload("inv_freq", &inv_freq(s.head_dim, theta))?;
    let xb = gpu.upload("x", x)?;
    let d = if backward {
        k.backward(gpu, s, (&fb).into(), (&xb).into())?
    } else {
        k.forward(gpu, s, (&fb).into(), (&xb).into())?
    };
    gpu.run(&[&d]).await?;
    gpu.read_back((&xb).into()).await
}

fn want(s: RopeShape, theta: f64, x: &[f32], sign: f64) -> Vec<f64> {
    let mut w: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    reference::rope(&mut w, &inv_freq(s.head_dim, theta), s, sign);
    w
}

/// (batch, T, H, Hkv, Dh, pos_offset, theta): GQA ratios 1–4, head dims 32–128,
/// sequences of 129 and 512 (the seed's), a decode-style offset.
const CASES: &[(u32, u32, u32, u32, u32, u32, f64)] = &[
    (2, 129, 6, 2, 64, 0, 10_000.0),
    (1, 512, 12, 12, 64, 0, 10_000.0),
    (3, 7, 8, 2, 128, 1000, 500_000.0),
    (1, 33, 4, 1, 32, 4090, 10_000.0),
];

/// q and k as separate tensors, each rotated by its own dispatch.
pub async fn rope_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Rope::new(gpu).await?;
    let mut r = rng(50);
    for &(batch, t, h, hkv, dh, offset, theta) in CASES {
        for heads in [h, hkv] {
            let rows = batch * t;
            let s = RopeShape {
                rows,
                seq_len: t,
                pos_offset: offset,
                heads,
                head_dim: dh,
                row_stride: heads * dh,
                col0: 0,
            };
            let x = uniform(&mut r, (rows * heads * dh) as usize, -2.0, 2.0);
            // The reduced angle errs by ~5e-7 rad, sin/cos (ours) by < 3e-8,
            // times |x| <= 2 over two products. Measured worst: 5.4e-7 on
            // lavapipe, 6.2e-7 on SwiftShader (4.1e-4 with WGSL's own sin/cos).
            let what = format!("rope T={t} heads={heads} Dh={dh} offset={offset}");
            assert_close(
                &format!("{what} forward"),
                &rotate(gpu, &k, s, theta, &x, false).await?,
                &want(s, theta, &x, 1.0),
                2e-6,
                0.0,
            );
            assert_close(
                &format!("{what} backward"),
                &rotate(gpu, &k, s, theta, &x, true).await?,
                &want(s, theta, &x, -1.0),
                2e-6,
                0.0,
            );
        }
    }
    Ok(())
}

/// q and k heads of a fused [q | k | v] row in one dispatch; v untouched.
pub async fn rope_rotates_q_and_k_of_a_fused_row(gpu: &Gpu) -> Result<()> {
    let k = Rope::new(gpu).await?;
    let (t, h, hkv, dh) = (65u32, 4u32, 2u32, 64u32);
    let stride = (h + 2 * hkv) * dh;
    let s = RopeShape {
        rows: 2 * t,
        seq_len: t,
        pos_offset: 3,
        heads: h + hkv,
        head_dim: dh,
        row_stride: stride,
        col0: 0,
    };
    let x = uniform(&mut rng(51), (2 * t * stride) as usize, -1.0, 1.0);
    let got = rotate(gpu, &k, s, 10_000.0, &x, false).await?;
    assert_close(
        "rope fused qkv",
        &got,
        &want(s, 10_000.0, &x, 1.0),
        2e-6,
        0.0,
    );
    for row in 0..(2 * t) as usize {
        let v = row * stride as usize + ((h + hkv) * dh) as usize..(row + 1) * stride as usize;
        assert_eq!(got[v.clone()], x[v], "v of row {row} changed");
    }
    Ok(())
}

/// Far positions keep their accuracy (the angle reduction), and backward
/// undoes forward.
pub async fn rope_is_accurate_at_far_positions_and_invertible(gpu: &Gpu) -> Result<()> {
    let k = Rope::new(gpu).await?;
    let s = RopeShape {
        rows: 9,
        seq_len: 9,
        pos_offset: 150_000,
        heads: 3,
        head_dim: 64,
        row_stride: 192,
        col0: 0,
    };
    let x = uniform(&mut rng(52), (9 * 192) as usize, -1.0, 1.0);
    let y = rotate(gpu, &k, s, 10_000.0, &x, false).await?;
    assert_close(
        "rope at positions 150 000+",
        &y,
        &want(s, 10_000.0, &x, 1.0),
        2e-6,
        0.0,
    );
    let back = rotate(gpu, &k, s, 10_000.0, &y, true).await?;
    assert_close("rope backward ∘ forward", &back, &x, 4e-6, 0.0);
    let too_far = RopeShape {
        pos_offset: webtrain::kernels::rope::MAX_POSITION,
        ..s
    };
    let fb = gpu.upload("inv_freq", &inv_freq(64, 10_000.0))?;
    let xb = gpu.upload("x", &x)?;
    assert!(
        k.forward(gpu, too_far, (&fb).into(), (&xb).into()).is_err(),
        "positions past MAX_POSITION must be refused"
    );
    Ok(())
}
