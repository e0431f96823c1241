//! 08_cast.wgsl against reference/cast.rs: bit-exact, in both storage modes.

use half::f16;
use rand::Rng;
use webtrain::gpu::f16_bytes;
use webtrain::kernels::Cast;
use webtrain::reference::cast as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_f16_identical, assert_identical, rng};

async fn to_f16(gpu: &Gpu, k: &Cast, xs: &[f32]) -> Result<Vec<f16>> {
    let n = xs.len();
    let src = gpu.upload("src", xs)?;
    let dst = gpu.storage_buffer("dst", f16_bytes(n as u64))?;
    gpu.run(&[&k.f32_to_f16(gpu, (&src).into(), (&dst).into(), n as u32)?])
        .await?;
    let mut out: Vec<f16> = gpu.read_back((&dst).into()).await?;
    assert!(
        n.is_multiple_of(2) || out[n].to_bits() == 0,
        "odd n: padding half must be 0"
    );
    out.truncate(n);
    Ok(out)
}

async fn to_f32(gpu: &Gpu, k: &Cast, hs: &[f16]) -> Result<Vec<f32>> {
    let n = hs.len();
    let src = gpu.upload("src", hs)?;
    let dst = gpu.storage_buffer("dst", 4 * n as u64)?;
    gpu.run(&[&k.f16_to_f32(gpu, (&src).into(), (&dst).into(), n as u32)?])
        .await?;
    gpu.read_back((&dst).into()).await
}

pub async fn cast_saturates_and_keeps_nan(gpu: &Gpu) -> Result<()> {
    let k = Cast::new(gpu).await?;
    let xs = [
        1000.0,
        1e6,
        -1e6,
        65504.0,
        -65504.0,
        65519.0,
        65520.0,
        1e38,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
        1.0,
        -2.5,
        6.0e-8,
        -3.0e-8,
        1e-10,
        f32::MIN_POSITIVE,
        1.0 + 1.0 / 2048.0, // a tie between 1 and its f16 successor: even wins (1.0)
    ];
    let got = to_f16(gpu, &k, &xs).await?;
    let want: Vec<f16> = xs.iter().map(|&x| reference::f32_to_f16(x)).collect();
    assert_f16_identical("saturation cases", &xs, &got, &want);
    // the promises, spelled out
    assert_eq!(got[0].to_f32(), 1000.0);
    assert_eq!((got[1].to_f32(), got[2].to_f32()), (65504.0, -65504.0));
    assert_eq!(
        (got[8].to_f32(), got[9].to_f32()),
        (65504.0, -65504.0),
        "±Inf saturates"
    );
    assert!(got[10].is_nan() && got[11].is_nan(), "NaN stays NaN");
    assert_eq!(got[20].to_f32(), 1.0, "ties round to even");
    Ok(())
}

/// Random values over the whole f16 range (normal, subnormal, overflowing),
/// and exact midpoints between neighbouring f16 values, where only
/// round-to-nearest-even gives the `half` crate's answer. n is odd.
pub async fn cast_rounds_like_the_half_crate(gpu: &Gpu) -> Result<()> {
    let k = Cast::new(gpu).await?;
    let mut r = rng(8);
    let n = 400_001;
    let xs: Vec<f32> = (0..n)
        .map(|i| match i % 4 {
            0 => r.random_range(-1.0f32..1.0) * 2f32.powi(r.random_range(-27..17)),
            1 => f32::from_bits(r.random::<u32>() & 0xc7ff_ffff), // |x| < 2^17, any bits
            _ => {
                let h = f16::from_bits(r.random_range(0..0x7bffu16) | (r.random::<u16>() & 0x8000));
                let next = f16::from_bits(h.to_bits() + 1);
                ((h.to_f32() as f64 + next.to_f32() as f64) / 2.0) as f32 // exact in f32
            }
        })
        .collect();
    let got = to_f16(gpu, &k, &xs).await?;
    assert_f16_identical(
        "random values",
        &xs,
        &got,
        &reference::f32_slice_to_f16(&xs),
    );
    Ok(())
}

/// Every one of the 65 536 f16 bit patterns widens exactly and narrows
/// back to itself (±Inf saturate to ±65504 by design; NaN stays NaN).
pub async fn cast_round_trips_every_f16(gpu: &Gpu) -> Result<()> {
    let k = Cast::new(gpu).await?;
    let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    let widened = to_f32(gpu, &k, &all).await?;
    let want: Vec<f32> = all.iter().map(|&h| reference::f16_to_f32(h)).collect();
    assert_identical("f16 -> f32", &widened, &want);
    let back = to_f16(gpu, &k, &widened).await?;
    let want_back: Vec<f16> = widened.iter().map(|&x| reference::f32_to_f16(x)).collect();
    assert_f16_identical("f16 -> f32 -> f16", &widened, &back, &want_back);
    let changed = all
        .iter()
        .zip(&back)
        .filter(|(a, b)| a.to_bits() != b.to_bits() && !a.is_nan())
        .count();
    assert_eq!(changed, 2, "only +Inf and -Inf change on the round trip");
    Ok(())
}

/// Every one of the 65 536 bf16 bit patterns (pairs in words, as bf16-sr
/// master weights are stored; one more for an odd count) widens to f32 bit
/// for bit, NaN payloads included, and casts to f16 as its widened value does.
pub async fn cast_widens_every_bf16(gpu: &Gpu) -> Result<()> {
    let k = Cast::new(gpu).await?;
    let bits: Vec<u16> = (0..=u16::MAX).chain([0x3f80]).collect();
    let n = bits.len() as u32;
    let src = gpu.upload("src", &bits)?;
    let (wide, half) = (
        gpu.storage_buffer("f32", 4 * n as u64)?,
        gpu.storage_buffer("f16", f16_bytes(n as u64))?,
    );
    let d = [
        k.bf16_to_f32(gpu, (&src).into(), (&wide).into(), n)?,
        k.bf16_to_f16(gpu, (&src).into(), (&half).into(), n)?,
    ];
    gpu.run(&d.iter().collect::<Vec<_>>()).await?;
    let got: Vec<u32> = gpu.read_back((&wide).into()).await?;
    let want: Vec<u32> = bits.iter().map(|&b| (b as u32) << 16).collect();
    assert_eq!(got, want, "bf16 -> f32 keeps every bit");
    let widened: Vec<f32> = want.iter().map(|&b| f32::from_bits(b)).collect();
    let mut got: Vec<f16> = gpu.read_back((&half).into()).await?;
    assert_eq!(
        got[n as usize].to_bits(),
        0,
        "odd n: padding half must be 0"
    );
    got.truncate(n as usize);
    let want: Vec<f16> = widened.iter().map(|&x| reference::f32_to_f16(x)).collect();
    assert_f16_identical("bf16 -> f16", &widened, &got, &want);
    Ok(())
}

/// Both directions with more than 65 535 workgroups (2-D dispatch). f32 -> f16
/// has one invocation per pair, so it needs n > 2·256·65 535; the n chosen
/// keeps the f32 source within lavapipe's 128 MiB binding limit.
pub async fn cast_covers_a_two_dimensional_dispatch(gpu: &Gpu) -> Result<()> {
    let k = Cast::new(gpu).await?;
    let max = gpu.limits.max_compute_workgroups_per_dimension as usize;
    let n = 2 * 256 * max + 81; // odd
    let xs: Vec<f32> = (0..n)
        .map(|i| ((i % 4099) as f32 - 2049.0) * 0.37)
        .collect();
    let src = gpu.upload("src", &xs)?;
    let dst = gpu.storage_buffer("dst", f16_bytes(n as u64))?;
    let d = k.f32_to_f16(gpu, (&src).into(), (&dst).into(), n as u32)?;
    assert!(d.grid.y > 1, "expected a 2-D grid, got {:?}", d.grid);
    gpu.run(&[&d]).await?;
    let mut got: Vec<f16> = gpu.read_back((&dst).into()).await?;
    got.truncate(n);
    assert_f16_identical(
        "f32 -> f16, 2-D",
        &xs,
        &got,
        &reference::f32_slice_to_f16(&xs),
    );
    drop(src);

    let m = 256 * max + 81;
    let back = gpu.storage_buffer("back", 4 * m as u64)?;
    let d = k.f16_to_f32(gpu, (&dst).into(), (&back).into(), m as u32)?;
    assert!(d.grid.y > 1, "expected a 2-D grid, got {:?}", d.grid);
    gpu.run(&[&d]).await?;
    let want: Vec<f32> = got[..m].iter().map(|&h| reference::f16_to_f32(h)).collect();
    assert_identical(
        "f16 -> f32, 2-D",
        &gpu.read_back::<f32>((&back).into()).await?,
        &want,
    );
    Ok(())
}
