//! 00_infrastructure.wgsl against reference/infrastructure.rs.

use webtrain::gpu::BufferRange;
use webtrain::kernels::Infrastructure;
use webtrain::reference::infrastructure as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_close, assert_identical, rng, uniform};

/// Not multiples of the workgroup size, plus the edges around it.
const SIZES: &[usize] = &[1, 7, 255, 256, 257, 1000, 65_537];
/// Elements past `n` in every buffer: the kernel must leave them alone.
const GUARD: usize = 37;
const SENTINEL: f32 = -1234.5;

fn with_guard(mut v: Vec<f32>) -> Vec<f32> {
    v.extend(std::iter::repeat_n(SENTINEL, GUARD));
    v
}

pub async fn fill_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Infrastructure::new(gpu).await?;
    for &n in SIZES {
        let y = gpu.storage_buffer("y", 4 * (n + GUARD) as u64)?;
        let init = gpu.upload("init", &with_guard(vec![0.0; n]))?;
        gpu.run(&[
            &k.copy(gpu, (&init).into(), (&y).into(), (n + GUARD) as u32)?,
            &k.fill(gpu, (&y).into(), n as u32, 3.25)?,
        ])
        .await?;
        let mut want = with_guard(vec![0.0; n]);
        reference::fill(&mut want[..n], 3.25);
        assert_identical(
            &format!("fill n={n}"),
            &gpu.read_back::<f32>((&y).into()).await?,
            &want,
        );
    }
    Ok(())
}

pub async fn scale_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Infrastructure::new(gpu).await?;
    let mut r = rng(1);
    for &n in SIZES {
        let mut want = with_guard(uniform(&mut r, n, -3.0, 3.0));
        let y = gpu.upload("y", &want)?;
        gpu.run(&[&k.scale(gpu, (&y).into(), n as u32, -0.7)?])
            .await?;
        reference::scale(&mut want[..n], -0.7);
        // one correctly rounded f32 multiply, as the reference: exact
        assert_identical(
            &format!("scale n={n}"),
            &gpu.read_back::<f32>((&y).into()).await?,
            &want,
        );
    }
    Ok(())
}

pub async fn axpy_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Infrastructure::new(gpu).await?;
    let mut r = rng(2);
    for &n in SIZES {
        let x = uniform(&mut r, n, -1.0, 1.0);
        let mut want = with_guard(uniform(&mut r, n, -1.0, 1.0));
        let (xb, yb) = (gpu.upload("x", &x)?, gpu.upload("y", &want)?);
        gpu.run(&[&k.axpy(gpu, (&xb).into(), (&yb).into(), n as u32, 0.37)?])
            .await?;
        reference::axpy(&x, &mut want[..n], 0.37);
        // WGSL lets fma round twice (lavapipe does): the product's rounding
        // costs up to half an ulp of |0.37·x| < 0.5, i.e. 2^-26 absolute, and
        // the result and the reference each round once more: 1 ulp apart,
        // at most 2^-23 relative. Measured worst: 1 ulp (1.2e-7 at |y| ~ 1)
        // on lavapipe and SwiftShader.
        let got = gpu.read_back::<f32>((&yb).into()).await?;
        assert_close(
            &format!("axpy n={n}"),
            &got,
            &want,
            2f64.powi(-26),
            2f64.powi(-23),
        );
    }
    Ok(())
}

pub async fn copy_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Infrastructure::new(gpu).await?;
    let mut r = rng(3);
    for &n in SIZES {
        let x = uniform(&mut r, n, -1e30, 1e30);
        let (xb, yb) = (
            gpu.upload("x", &x)?,
            gpu.upload("y", &with_guard(vec![0.0; n]))?,
        );
        gpu.run(&[&k.copy(gpu, (&xb).into(), (&yb).into(), n as u32)?])
            .await?;
        let mut want = with_guard(vec![0.0; n]);
        reference::copy(&x, &mut want[..n]);
        assert_identical(
            &format!("copy n={n}"),
            &gpu.read_back::<f32>((&yb).into()).await?,
            &want,
        );
    }
    Ok(())
}

/// Whole 16-byte words, and nothing past them.
pub async fn copy_words_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Infrastructure::new(gpu).await?;
    let mut r = rng(4);
    for &words in SIZES {
        let x = uniform(&mut r, 4 * words, -1e30, 1e30);
        let (xb, yb) = (
            gpu.upload("x", &x)?,
            gpu.upload("y", &with_guard(vec![0.0; 4 * words]))?,
        );
        gpu.run(&[&k.copy_words(gpu, (&xb).into(), (&yb).into(), words as u32)?])
            .await?;
        let mut want = with_guard(vec![0.0; 4 * words]);
        reference::copy(&x, &mut want[..4 * words]);
        assert_identical(
            &format!("copy_words words={words}"),
            &gpu.read_back::<f32>((&yb).into()).await?,
            &want,
        );
    }
    Ok(())
}

/// A sub-range at an aligned offset: only that range changes.
pub async fn kernels_bind_sub_ranges(gpu: &Gpu) -> Result<()> {
    let k = Infrastructure::new(gpu).await?;
    let align = gpu.limits.min_storage_buffer_offset_alignment as usize / 4;
    let (total, start, n) = (4 * align + 300, 2 * align, 300);
    let y = gpu.upload("y", &vec![SENTINEL; total])?;
    let range = BufferRange {
        buffer: &y,
        offset: 4 * start as u64,
        size: 4 * n as u64,
    };
    gpu.run(&[&k.fill(gpu, range, n as u32, 1.5)?]).await?;
    let mut want = vec![SENTINEL; total];
    reference::fill(&mut want[start..start + n], 1.5);
    assert_identical(
        "fill at an offset",
        &gpu.read_back::<f32>((&y).into()).await?,
        &want,
    );

    let misaligned = BufferRange {
        buffer: &y,
        offset: 4,
        size: 4 * n as u64,
    };
    assert!(
        k.fill(gpu, misaligned, n as u32, 1.0).is_err(),
        "a misaligned offset must be refused"
    );
    let short = BufferRange {
        buffer: &y,
        offset: 0,
        size: 4 * (n as u64 - 1),
    };
    assert!(
        k.fill(gpu, short, n as u32, 1.0).is_err(),
        "a range shorter than n must be refused"
    );
    Ok(())
}

/// More than 65 535 workgroups: the 2-D grid and `flat_id` must cover
/// every element exactly once.
pub async fn axpy_covers_a_two_dimensional_dispatch(gpu: &Gpu) -> Result<()> {
    let k = Infrastructure::new(gpu).await?;
    let max = gpu.limits.max_compute_workgroups_per_dimension as usize;
    let n = max * 256 + 1000;
    let x: Vec<f32> = (0..n).map(|i| (i % 1024) as f32).collect();
    let (xb, yb) = (
        gpu.upload("x", &x)?,
        gpu.upload("y", &with_guard(vec![1.0; n]))?,
    );
    let d = k.axpy(gpu, (&xb).into(), (&yb).into(), n as u32, 2.0)?;
    assert!(d.grid.y > 1, "expected a 2-D grid, got {:?}", d.grid);
    gpu.run(&[&d]).await?;
    let mut want = with_guard(vec![1.0; n]);
    reference::axpy(&x, &mut want[..n], 2.0);
    assert_identical(
        "axpy 2-D",
        &gpu.read_back::<f32>((&yb).into()).await?,
        &want,
    );
    Ok(())
}
