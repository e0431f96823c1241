//! 13_histogram.wgsl against reference/histogram.rs and the host's
//! quantization error.

use rand::Rng;
use webtrain::kernels::histogram::{BINS, Histogram};
use webtrain::kernels::quantize::quantization_error;
use webtrain::ops::histogram::{INF_BIN, NAN_BIN, ZERO_BIN};
use webtrain::reference::histogram as reference;
use webtrain::{Gpu, Result};

use super::check::rng;

/// Values over 80 binades (2^-40 … 2^40, either sign), then f32's edges:
/// ±0, subnormals from the smallest up, the smallest normal, the largest
/// finite, ±Inf and NaNs of several payloads.
fn awkward(r: &mut impl Rng, n: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n)
        .map(|_| {
            let e = r.random_range(-40..40);
            let sign = if r.random::<bool>() { -1.0 } else { 1.0 };
            sign * r.random_range(1.0f32..2.0) * 2f32.powi(e)
        })
        .collect();
    let edges = [
        0.0,
        -0.0,
        f32::from_bits(1),
        f32::from_bits(2),
        f32::from_bits(3),
        -f32::from_bits(0x40_0000),
        f32::from_bits(0x7f_ffff),
        f32::MIN_POSITIVE,
        -f32::MAX,
        f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc0_1234),
    ];
    // half of them over random values (scattered), half appended
    for (i, e) in edges.into_iter().enumerate() {
        let at = (i * 7919) % n.max(1);
        if at < n && i % 2 == 0 {
            x[at] = e;
        } else {
            x.push(e);
        }
    }
    x
}

pub async fn log2_histogram_matches_reference(gpu: &Gpu) -> Result<()> {
    let h = Histogram::new(gpu).await?;
    let mut r = rng(131);
    // the edge values alone, under a workgroup's share, and over 256 workgroups' worth (the grid-stride loop)
    for n in [0, 1000, 300_001] {
        let x = awkward(&mut r, n);
        let xb = gpu.upload("x", &x)?;
        let counts = gpu.upload("counts", &[0u32; BINS])?;
        let sums = gpu.storage_buffer("sums", 4 * Histogram::groups(x.len() as u64))?;
        let d = h.log2(
            gpu,
            (&xb).into(),
            x.len() as u64,
            (&counts).into(),
            (&sums).into(),
        )?;
        gpu.run(&[&d, &d]).await?; // counts accumulate: twice each
        let got: Vec<u32> = gpu.read_back((&counts).into()).await?;
        let want: Vec<u64> = reference::log2_histogram(&x)
            .iter()
            .map(|c| 2 * c)
            .collect();
        let got64: Vec<u64> = got.iter().map(|&c| c as u64).collect();
        assert_eq!(got64, want, "log2 histogram of {} values", x.len());
        assert_eq!(want.iter().sum::<u64>(), 2 * x.len() as u64);
        let edges = (want[ZERO_BIN], want[INF_BIN], want[NAN_BIN]);
        assert_eq!(edges, (4, 4, 6), "zeros, infinities, NaNs");
        assert_eq!(
            (want[0], want[1], want[22], want[276]),
            (2, 4, 4, 4),
            "binades -149, -148, -127, 127"
        );
        // the sums of squares, of the values whose squares f32 holds (±MAX's
        // overflow on the GPU alone): f32 partials of up to n/256 terms each;
        // squares of subnormals flush to 0 in f32 (the 1e-30)
        let held: Vec<f32> = x.iter().copied().filter(|v| v.abs() < 1e18).collect();
        let hb = gpu.upload("held", &held)?;
        let sums = gpu.storage_buffer("sums", 4 * Histogram::groups(held.len() as u64))?;
        gpu.run(&[&h.log2(
            gpu,
            (&hb).into(),
            held.len() as u64,
            (&counts).into(),
            (&sums).into(),
        )?])
        .await?;
        let partials: Vec<f32> = gpu.read_back((&sums).into()).await?;
        let got_sum: f64 = partials.iter().map(|&p| p as f64).sum();
        let want_sum = reference::sum_of_squares(&held);
        assert!(
            (got_sum - want_sum).abs() <= 1e-5 * want_sum + 1e-30,
            "sum of squares of {} values: {got_sum} vs {want_sum}",
            held.len()
        );
    }
    Ok(())
}

pub async fn relative_error_matches_reference(gpu: &Gpu) -> Result<()> {
    let h = Histogram::new(gpu).await?;
    let mut r = rng(137);
    for n in [0, 1000, 300_001] {
        let x = awkward(&mut r, n);
        // y as a quantizer leaves x: off by up to 30 % (normal x), flushed
        // to 0, kept or moved to a neighbour (subnormal x), ±Inf or NaN
        let y: Vec<f32> = x
            .iter()
            .map(|&v| match r.random_range(0..20) {
                0 => 0.0,
                1 => f32::INFINITY,
                2 => f32::NAN,
                _ if v.abs() < 1e-30 => match r.random::<bool>() {
                    true => v,
                    false => f32::from_bits(v.to_bits() + 1),
                },
                _ => v * (1.0 + r.random_range(-0.3f32..0.3)),
            })
            .collect();
        let (xb, yb) = (gpu.upload("x", &x)?, gpu.upload("y", &y)?);
        let groups = Histogram::groups(x.len() as u64);
        let errors = gpu.storage_buffer("errors", 8 * groups)?;
        let d = h.relative_error(
            gpu,
            (&xb).into(),
            (&yb).into(),
            x.len() as u64,
            (&errors).into(),
        )?;
        gpu.run(&[&d]).await?;
        let partials: Vec<f32> = gpu.read_back((&errors).into()).await?;
        let terms: f64 = partials.chunks(2).map(|p| p[1] as f64).sum();
        let counted = x
            .iter()
            .zip(&y)
            .filter(|(a, b)| a.is_finite() && b.is_finite() && **a != 0.0)
            .count();
        assert_eq!(terms, counted as f64, "terms of {} values", x.len());
        let got = Histogram::mean_relative_error(&partials);
        let want = quantization_error(&x, &y).mean_relative;
        // f32 terms (division within 2.5 ulp) summed in f32 per workgroup
        // of up to n/256 terms, against f64
        assert!(
            (got - want).abs() <= 1e-5 * want,
            "mean relative error of {} values: {got} vs {want}",
            x.len()
        );
        if n > 0 {
            assert!(want > 0.05, "the test's errors are not all tiny: {want}");
        }
    }
    Ok(())
}
