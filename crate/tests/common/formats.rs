//! 14_quantize.wgsl (and 00_formats.wgsl's round trips) against
//! reference/formats.rs: bit for bit, counters equal, in both storage modes
//! and in the browser.

use rand::Rng;
use webtrain::kernels::Quantize;
use webtrain::ops::formats::{Blocks, Counts, Element, Format, Quantization, Scaling, Stream};
use webtrain::reference::formats as twin;
use webtrain::{Gpu, Result};

use super::check::rng;

/// Asserts bit-identical values (any NaN matching any NaN) and counts.
fn assert_same(what: &str, x: &[f32], got: (Vec<f32>, Counts), want: (Vec<f32>, Counts)) {
    let differ: Vec<String> = (0..x.len())
        .filter(|&i| {
            let (g, w) = (got.0[i], want.0[i]);
            !(g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan())
        })
        .take(5)
        .map(|i| format!("[{i}] {:e} -> {:e}, want {:e}", x[i], got.0[i], want.0[i]))
        .collect();
    assert!(differ.is_empty(), "{what}: {differ:?}");
    assert_eq!(got.1, want.1, "{what}: counts");
}

fn plain(e: Element) -> Quantization {
    Quantization {
        format: Format {
            name: e.spec().name,
            element: e,
            scaling: Scaling::None,
        },
        blocks: Blocks::Rows,
        stochastic: None,
    }
}

/// Random values over 80 binades and f32 subnormals, and the specials.
fn awkward(n: usize, seed: u64) -> Vec<f32> {
    let mut r = rng(seed);
    let specials = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        -f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        -1e-40,
        f32::from_bits(1),
    ];
    specials
        .into_iter()
        .chain((0..n).map(|_| r.random_range(-1.0f32..1.0) * 2f32.powi(r.random_range(-60..20))))
        .collect()
}

/// Each element format unscaled: every value (from its codes), its
/// neighbours, the ties between neighbours and the values either side of
/// them, the saturation and flush edges, ±0, ±Inf, NaN, f32 subnormals and
/// random values over 80 binades.
pub async fn formats_match_reference(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let around = |x: f32| [x, x.next_down(), x.next_up(), -x];
    for e in Element::ALL {
        let f = e.spec();
        let codes = 1u32 << (f.bits() - 1);
        let values: Vec<f32> = (0..codes)
            .map(|c| twin::decode(e, c))
            .filter(|v| v.is_finite())
            .collect();
        let xs: Vec<f32> = values
            .windows(2)
            .flat_map(|p| around(p[0]).into_iter().chain(around((p[0] + p[1]) / 2.0)))
            .chain(
                [f.max(), f.max() * 1.0625, f.min_positive() / 2.0]
                    .into_iter()
                    .flat_map(around),
            )
            .chain(awkward(20_000, 21 + e.code() as u64))
            .collect();
        let q = plain(e);
        let got = k.run(gpu, &q, &xs, 1).await?;
        let want = twin::quantize(&q, &xs, 1);
        assert!(
            want.1.saturated > 0 && want.1.flushed > 0,
            "{}: the edges are exercised",
            f.name
        );
        assert_same(f.name, &xs, got, want);
    }
    Ok(())
}

/// Every block format on blocks all zero, all equal, with one outlier,
/// with ±Inf or NaN, below E8M0's range, of f32 subnormals, and random
/// over many binades; NVFP4 in 1×16 and 16×16 blocks, and a zero tensor.
pub async fn blocks_match_reference(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let mut r = rng(31);
    let cols = 64;
    let mut rows: Vec<Vec<f32>> = vec![
        vec![0.0; cols],
        vec![-0.0; cols],
        vec![0.75; cols],
        vec![-3.0e5; cols],
    ];
    for (outlier, small) in [(1000.0, 0.0005), (-480.0, 1.0), (7.0, 1e-3), (1e30, 1.0)] {
        let mut row = vec![small; cols];
        row[5] = outlier;
        row[cols - 3] = outlier;
        rows.push(row);
    }
    let mut special = vec![1.0f32; cols];
    (special[3], special[40]) = (f32::INFINITY, f32::NAN);
    rows.push(special);
    rows.push(vec![1e-38; cols]);
    rows.push(
        (0..cols)
            .map(|i| f32::from_bits(1 + 997 * i as u32))
            .collect(),
    );
    for b in 0..21 {
        let binade = r.random_range(-40..30);
        rows.push(
            (0..cols)
                .map(|_| {
                    r.random_range(-1.0f32..1.0) * 2f32.powi(binade + r.random_range(-12..=b % 13))
                })
                .collect(),
        );
    }
    assert_eq!(rows.len(), 32, "whole 16×16 tiles");
    let x: Vec<f32> = rows.concat();
    let mut cases: Vec<Quantization> = Format::ALL
        .into_iter()
        .filter(|f| f.scaling != Scaling::None)
        .map(|format| Quantization {
            format,
            blocks: Blocks::Rows,
            stochastic: None,
        })
        .collect();
    let nvfp4 = Format::parse("nvfp4")?;
    cases.push(Quantization {
        format: nvfp4,
        blocks: Blocks::Square,
        stochastic: None,
    });
    for q in &cases {
        let what = format!("{} {:?}", q.format.name, q.blocks);
        assert_same(
            &what,
            &x,
            k.run(gpu, q, &x, cols).await?,
            twin::quantize(q, &x, cols),
        );
    }
    // NVFP4 over a tensor without the non-finite row, and over zeros
    let finite: Vec<f32> = x
        .iter()
        .map(|&v| if v.is_finite() { v } else { 2.0 })
        .collect();
    let zeros = vec![0.0f32; 16 * 32];
    for (xs, c) in [(&finite, cols), (&zeros, 32)] {
        let q = &cases[cases.len() - 1];
        let want = twin::quantize(q, xs, c);
        assert_same("nvfp4, finite", xs, k.run(gpu, q, xs, c).await?, want);
    }
    Ok(())
}

/// Stochastic rounding: the GPU's draws are the twin's, bit for bit, and
/// the mean of 4 096 draws of a value lies within 5 standard deviations of
/// it. Each draw is the lower or the upper neighbour, up with probability
/// p = the distance (exact to 2^-32): its mean is the value and its
/// standard deviation step·√(p(1−p)) ≤ step / 2, so the mean of n
/// independent draws is within 5·step / (2√n) but for a 6·10^-7 chance.
pub async fn stochastic_rounding_matches_reference_and_is_unbiased(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let n = 4096;
    let values = [2.3f32, -0.7, 5.9, 0.1, 1.0 / 3.0, 200.0, 1e-3];
    let x: Vec<f32> = values.iter().flat_map(|&v| vec![v; n]).collect();
    let stream = Stream {
        seed: 42,
        step: 7,
        tensor: 3,
    };
    for (format, element) in [
        ("e2m1", Element::E2m1),
        ("e4m3", Element::E4m3),
        ("bf16", Element::Bf16),
    ] {
        let q = Quantization {
            stochastic: Some(stream),
            ..plain(element)
        };
        let (y, c) = k.run(gpu, &q, &x, 1).await?;
        assert_same(format, &x, (y.clone(), c), twin::quantize(&q, &x, 1));
        for (v, draws) in values.iter().zip(y.chunks(n)) {
            if v.abs() > element.spec().max() {
                continue; // saturates: no neighbour above
            }
            let (lo, hi) = draws
                .iter()
                .fold((f32::MAX, f32::MIN), |(a, b), &d| (a.min(d), b.max(d)));
            let step = (hi - lo) as f64;
            let mean = draws.iter().map(|&d| d as f64).sum::<f64>() / n as f64;
            assert!(
                (mean - *v as f64).abs() <= 5.0 * step / (2.0 * (n as f64).sqrt()),
                "{format}: the mean of {v}'s draws is {mean}"
            );
        }
    }
    // in a block format the elements round stochastically under the same scale
    let x: Vec<f32> = (0..1024)
        .map(|i| ((i * 37) % 101) as f32 * 0.013 - 0.6)
        .collect();
    for name in ["mxfp4", "nvfp4"] {
        let q = Quantization {
            format: Format::parse(name)?,
            blocks: Blocks::Rows,
            stochastic: Some(stream),
        };
        assert_same(
            name,
            &x,
            k.run(gpu, &q, &x, 64).await?,
            twin::quantize(&q, &x, 64),
        );
    }
    Ok(())
}

/// The random Hadamard transform and its inverse: bit for bit the twin's
/// (reference/formats/tests.rs bounds the twin's error against the exact
/// transform and the round trip).
pub async fn hadamard_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let mut r = rng(41);
    let n = 16 * 300;
    let x: Vec<f32> = (0..n)
        .map(|_| r.random_range(-1.0f32..1.0) * 2f32.powi(r.random_range(-20..20)))
        .collect();
    let s = Stream {
        seed: 5,
        step: 1,
        tensor: 2,
    };
    let src = gpu.upload("x", &x)?;
    let (y, back) = (
        gpu.storage_buffer("y", 4 * n as u64)?,
        gpu.storage_buffer("back", 4 * n as u64)?,
    );
    let forward = k.hadamard(gpu, s, false, (&src).into(), (&y).into(), n as u64)?;
    let inverse = k.hadamard(gpu, s, true, (&y).into(), (&back).into(), n as u64)?;
    gpu.run(&[&forward, &inverse]).await?;
    let want_y = twin::hadamard16(&x, s, false);
    let got_y: Vec<f32> = gpu.read_back((&y).into()).await?;
    let none = Counts::default();
    assert_same("forward", &x, (got_y, none), (want_y.clone(), none));
    let got_back: Vec<f32> = gpu.read_back((&back).into()).await?;
    assert_same(
        "inverse",
        &x,
        (got_back, none),
        (twin::hadamard16(&want_y, s, true), none),
    );
    Ok(())
}
