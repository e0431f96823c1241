//! 14_quantize.wgsl (and 00_formats.wgsl's round trips) against
//! reference/formats.rs: bit for bit, counters equal, in both storage modes
//! and in the browser.

use rand::Rng;
use webtrain::gpu::{BufferRange, KernelDesc, Slot, build_kernels};
use webtrain::kernels::Quantize;
use webtrain::kernels::quantize::Spread;
use webtrain::kernels::quantize::{NOISE_STATS_WORDS, STATS_WORDS};
use webtrain::ops::formats::{
    Blocks, Counts, Element, Format, NoiseSums, Quantization, Scaling, Stream,
};
use webtrain::reference::formats as twin;
use webtrain::shaders::ShaderFile;
use webtrain::{Gpu, Result};

use super::check::{F32_SPECIALS, rng};

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
    let format = Format {
        name: e.spec().name,
        element: e,
        scaling: Scaling::None,
    };
    Quantization::new(format, Blocks::Rows, None)
}

/// Random values over 80 binades and f32 subnormals, and the specials.
fn awkward(n: usize, seed: u64) -> Vec<f32> {
    let mut r = rng(seed);
    F32_SPECIALS
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
    // both ways of spreading a block over invocations, whichever the adapter takes
    for spread in Spread::ALL {
        blocks_match_reference_spread(gpu, Quantize::new(gpu).await?.with_spread(spread)).await?;
    }
    Ok(())
}

async fn blocks_match_reference_spread(gpu: &Gpu, k: Quantize) -> Result<()> {
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
        .map(|format| Quantization::new(format, Blocks::Rows, None))
        .collect();
    for name in ["nvfp4-4over6", "nvfp4-4over6-mae", "nvfp4"] {
        cases.push(Quantization::new(
            Format::parse(name)?,
            Blocks::Square,
            None,
        ));
    }
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
    // both ways of spreading a block over invocations, whichever the adapter takes
    for spread in Spread::ALL {
        stochastic_rounding_matches_reference_and_is_unbiased_spread(
            gpu,
            Quantize::new(gpu).await?.with_spread(spread),
        )
        .await?;
    }
    Ok(())
}

async fn stochastic_rounding_matches_reference_and_is_unbiased_spread(
    gpu: &Gpu,
    k: Quantize,
) -> Result<()> {
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
    for name in ["mxfp4", "nvfp4", "nvfp4-4over6", "nvfp4-ms-eden"] {
        let q = Quantization::new(Format::parse(name)?, Blocks::Rows, Some(stream));
        assert_same(
            name,
            &x,
            k.run(gpu, &q, &x, 64).await?,
            twin::quantize(&q, &x, 64),
        );
    }
    Ok(())
}

/// The random Hadamard transform and its inverse in blocks of 16, 32, 64
/// and 128: bit for bit the twin's (reference/formats/tests.rs bounds the twin's error against the exact
/// transform and the round trip).
pub async fn hadamard_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let mut r = rng(41);
    let n = 16 * 320;
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
    let shape = [1, n as u64];
    // TE's 16, Quartet's 32 and Quartet II's 128 (`hadamard_wide`); and
    // Quartet's forward 32, without signs
    let signed = [16, 32, 64, 128].map(|size| (size, Some(s)));
    for (size, s) in signed.into_iter().chain([(32, None), (16, None)]) {
        let at = (Blocks::Rows, size);
        let forward = k.hadamard(gpu, s, false, (&src).into(), (&y).into(), shape, at)?;
        let inverse = k.hadamard(gpu, s, true, (&y).into(), (&back).into(), shape, at)?;
        gpu.run(&[&forward, &inverse]).await?;
        let want_y = twin::hadamard(&x, s, false, n, at);
        let got_y: Vec<f32> = gpu.read_back((&y).into()).await?;
        let none = Counts::default();
        let what = format!("forward, blocks of {size}, signs {}", s.is_some());
        assert_same(&what, &x, (got_y, none), (want_y.clone(), none));
        let got_back: Vec<f32> = gpu.read_back((&back).into()).await?;
        let want_back = twin::hadamard(&want_y, s, true, n, at);
        let what = format!("inverse, blocks of {size}, signs {}", s.is_some());
        assert_same(&what, &x, (got_back, none), (want_back, none));
    }
    let refused = k.hadamard(
        gpu,
        None,
        false,
        (&src).into(),
        (&y).into(),
        shape,
        (Blocks::Rows, 48),
    );
    assert!(refused.is_err(), "blocks of 48 are no Hadamard transform's");
    Ok(())
}

fn quantization(name: &str, blocks: Blocks, stochastic: Option<Stream>) -> Quantization {
    Quantization::new(
        Format::parse(name).expect("a format's name"),
        blocks,
        stochastic,
    )
}

/// `rows` × `cols` values over many binades, a column holding ±Inf and
/// NaN, an all-zero column, a column with an outlier.
fn awkward_matrix(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut r = rng(seed);
    let mut x: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let binade = (i % cols) as i32 % 40 - 20;
            r.random_range(-1.0f32..1.0) * 2f32.powi(binade + r.random_range(-6..6))
        })
        .collect();
    (x[3 * cols + 1], x[9 * cols + 1]) = (f32::NEG_INFINITY, f32::NAN);
    for row in 0..rows {
        x[row * cols + 2] = 0.0;
    }
    x[5 * cols + 4] = 3.0e4;
    x
}

/// Blocks down the columns, every MX format, NVFP4 and a scale per line, nearest and
/// stochastic, on a matrix of awkward width (invocations across
/// workgroups).
pub async fn quantize_columns_match_reference(gpu: &Gpu) -> Result<()> {
    // both ways of spreading a block over invocations, whichever the adapter takes
    for spread in Spread::ALL {
        quantize_columns_match_reference_spread(gpu, Quantize::new(gpu).await?.with_spread(spread))
            .await?;
    }
    Ok(())
}

async fn quantize_columns_match_reference_spread(gpu: &Gpu, k: Quantize) -> Result<()> {
    let (rows, cols) = (96, 301);
    let x = awkward_matrix(rows, cols, 51);
    let stream = Stream {
        seed: 3,
        step: 4,
        tensor: 5,
    };
    let names = Format::ALL
        .into_iter()
        .filter(|f| f.block() != 1) // blocks, or a scale per line (0)
        .map(|f| (f.name, None))
        .chain([("mxfp4", Some(stream)), ("nvfp4", Some(stream))])
        .chain([("mxfp4-tseng", Some(stream))]);
    for (name, sr) in names {
        let q = quantization(name, Blocks::Columns, sr);
        let what = format!("{name} columns, stochastic {}", sr.is_some());
        let want = twin::quantize(&q, &x, cols);
        assert_same(&what, &x, k.run(gpu, &q, &x, cols).await?, want);
    }
    Ok(())
}

/// Lines whose length is not a multiple of the block (the last block of
/// each shorter) and stacked parts (blocks starting afresh at each), along
/// the rows and down the columns, MX and NVFP4, nearest and stochastic, on
/// the model's shapes and seeded random ones; 16×16 tiles with parts in
/// 16s; square blocks of 40 rows, or cut elsewhere, refused; the blockwise
/// FP8's 128×128 blocks cut short at edges and parts.
pub async fn quantize_partial_blocks_and_parts_match_reference(gpu: &Gpu) -> Result<()> {
    // both ways of spreading a block over invocations, whichever the adapter takes
    for spread in Spread::ALL {
        quantize_partial_blocks_and_parts_match_reference_spread(
            gpu,
            Quantize::new(gpu).await?.with_spread(spread),
        )
        .await?;
    }
    Ok(())
}

async fn quantize_partial_blocks_and_parts_match_reference_spread(
    gpu: &Gpu,
    k: Quantize,
) -> Result<()> {
    let mut r = rng(91);
    let mut shapes = vec![
        (67, 352, Blocks::Rows, [176, 352]), // gate|up's dY: 176 = 5·32 + 16, twice
        (40, 176, Blocks::Rows, [176, 176]),
        (130, 37, Blocks::Columns, [64, 96]),
        (352, 11, Blocks::Columns, [176, 352]),
    ];
    for blocks in [Blocks::Rows, Blocks::Columns, Blocks::Rows, Blocks::Columns] {
        let (rows, cols) = (r.random_range(10..150), r.random_range(5..300));
        let len = if blocks == Blocks::Rows { cols } else { rows };
        let (a, b) = (r.random_range(0..=len), r.random_range(0..=len));
        shapes.push((rows, cols, blocks, [a.min(b) as u32, a.max(b) as u32]));
    }
    let stream = Stream {
        seed: 13,
        step: 2,
        tensor: 4,
    };
    for (i, &(rows, cols, blocks, parts)) in shapes.iter().enumerate() {
        let x = awkward_matrix(rows, cols, 92 + i as u64);
        for name in ["mxfp8-e4m3", "mxfp4", "nvfp4", "e4m3-row"] {
            for sr in [None, Some(stream)] {
                let q = Quantization {
                    parts,
                    ..quantization(name, blocks, sr)
                };
                let what = format!(
                    "{name} [{rows}, {cols}] {blocks:?} {parts:?}, stochastic {}",
                    sr.is_some()
                );
                let want = twin::quantize(&q, &x, cols);
                assert_same(&what, &x, k.run(gpu, &q, &x, cols).await?, want);
            }
        }
    }
    let x = awkward_matrix(64, 32, 99);
    let square = Quantization {
        parts: [16, 48],
        ..quantization("nvfp4", Blocks::Square, None)
    };
    let want = twin::quantize(&square, &x, 32);
    assert_same(
        "nvfp4 square, parts",
        &x,
        k.run(gpu, &square, &x, 32).await?,
        want,
    );
    let e = k.run(gpu, &square, &x[..40 * 32], 32).await.unwrap_err();
    assert!(e.to_string().contains("40 rows"), "{e}");
    let cut = Quantization {
        parts: [24, 48],
        ..square
    };
    let e = k.run(gpu, &cut, &x, 32).await.unwrap_err();
    assert!(e.to_string().contains("parts [24, 48]"), "{e}");
    // the blockwise FP8's 128×128 weight blocks, cut short at the right
    // and bottom edges and at [W_q; W_k; W_v]-like parts off the 128s
    for (rows, cols, parts) in [(300, 200, [90, 127]), (352, 176, [176, 352])] {
        let x = awkward_matrix(rows, cols, 93);
        let q = Quantization {
            parts,
            ..quantization("e4m3-blockwise", Blocks::Square, None)
        };
        let what = format!("e4m3-blockwise square [{rows}, {cols}] {parts:?}");
        let want = twin::quantize(&q, &x, cols);
        assert_same(&what, &x, k.run(gpu, &q, &x, cols).await?, want);
    }
    Ok(())
}

/// Per-tensor scaling (e4m3-tensor, e5m2-tensor): nearest and stochastic
/// on awkward values (±Inf, NaN, f32::MAX, subnormals), a tensor of
/// ordinary range, one below 2^-127·max (its scale clamped and counted)
/// and a zero tensor.
pub async fn quantize_tensor_scaling_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let mut r = rng(61);
    let ordinary: Vec<f32> = (0..3001)
        .map(|_| r.random_range(-1.0f32..1.0) * 2f32.powi(r.random_range(-12..3)))
        .collect();
    let tiny: Vec<f32> = ordinary.iter().map(|v| v * 1e-38).collect();
    let zeros = vec![0.0f32; 517];
    let stream = Stream {
        seed: 8,
        step: 2,
        tensor: 1,
    };
    for name in ["e4m3-tensor", "e5m2-tensor"] {
        for sr in [None, Some(stream)] {
            let q = quantization(name, Blocks::Rows, sr);
            for (what, x) in [
                ("awkward", &awkward(5000, 62)),
                ("ordinary", &ordinary),
                ("tiny", &tiny),
                ("zeros", &zeros),
            ] {
                let want = twin::quantize(&q, x, 1);
                if what == "tiny" && name == "e4m3-tensor" {
                    assert_eq!(want.1.blocks_scale_underflowed, 1, "{name}: tiny's scale");
                }
                let what = format!("{name} {what}, stochastic {}", sr.is_some());
                assert_same(&what, x, k.run(gpu, &q, x, 1).await?, want);
            }
        }
    }
    Ok(())
}

/// `encode_stepped`, recorded once and run at two steps written into a
/// step uniform (at an offset of a bigger buffer): each run's draws are
/// the twin's at that step, and the steps' draws differ.
pub async fn quantize_stepped_draws_match_reference(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let (rows, cols) = (48, 96);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 37) % 101) as f32 * 0.013 - 0.6)
        .collect();
    let n = (rows * cols) as u64;
    let src = gpu.upload("x", &x)?;
    let dst = gpu.storage_buffer("y", 4 * n)?;
    let steps = gpu.uniform("steps", &[0u32; 128]);
    let step = BufferRange {
        buffer: &steps,
        offset: 256,
        size: 16,
    };
    let recorded = Stream {
        seed: 11,
        step: 999, // not used: the draws read the step buffer
        tensor: 6,
    };
    for (name, blocks) in [
        ("e4m3", Blocks::Rows),
        ("e4m3-tensor", Blocks::Rows),
        ("mxfp4", Blocks::Rows),
        ("nvfp4", Blocks::Columns),
        ("nvfp4", Blocks::Square),
    ] {
        let q = quantization(name, blocks, Some(recorded));
        let stats = gpu.upload("stats", &[0u32; STATS_WORDS as usize])?;
        let d = k.encode_stepped(
            gpu,
            &q,
            (&src).into(),
            (&dst).into(),
            (&stats).into(),
            [rows as u64, cols as u64],
            step,
        )?;
        let mut previous = Vec::new();
        for t in [5, 6] {
            Quantize::write_step(gpu, step, t);
            gpu.run(&d.iter().collect::<Vec<_>>()).await?;
            let y: Vec<f32> = gpu.read_back((&dst).into()).await?;
            let at = Quantization {
                stochastic: Some(Stream {
                    step: t,
                    ..recorded
                }),
                ..q
            };
            let (want, _) = twin::quantize(&at, &x, cols);
            let none = Counts::default();
            let what = format!("{name} {blocks:?} at step {t}");
            assert_same(&what, &x, (y.clone(), none), (want, none));
            assert_ne!(y, previous, "{what}: the same draws as the step before");
            previous = y;
        }
    }
    Ok(())
}

/// Quantizations sharing one stats buffer (bound at an offset of a bigger
/// one) in one submission: the counters are the sums of each tensor's,
/// and each tensor gets its own amax (the first's, larger, must not leak
/// into the second's scale); the noise sums add up as the twin's, the
/// last tensor's more values than the noise's workgroups cover at once.
pub async fn quantize_shares_its_stats_buffer(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let (rows, cols) = (96, 80);
    let mut a = awkward_matrix(rows, cols, 71);
    a[7] = 1000.0;
    let b: Vec<f32> = awkward_matrix(rows, cols, 72)
        .iter()
        .map(|v| v * 1e-3)
        .collect();
    let tall = awkward_matrix(4 * rows, cols, 73);
    let cases = [
        (quantization("nvfp4", Blocks::Columns, None), &a, rows),
        (quantization("e4m3-tensor", Blocks::Rows, None), &b, rows),
        (quantization("nvfp4", Blocks::Rows, None), &b, rows),
        (quantization("mxfp8-e4m3", Blocks::Columns, None), &a, rows),
        (quantization("mxfp4", Blocks::Rows, None), &tall, 4 * rows),
    ];
    let pool = gpu.storage_buffer("stats pool", 1024)?;
    let stats = BufferRange {
        buffer: &pool,
        offset: 256,
        size: 4 * NOISE_STATS_WORDS,
    };
    let (mut outputs, mut dispatches, mut total) = (Vec::new(), Vec::new(), Counts::default());
    let mut sums = [0f32; 2];
    let (measured, between) = (
        Quantize::step_buffer(gpu, 20),
        Quantize::step_buffer(gpu, 21),
    );
    Quantize::write_noise(gpu, (&measured).into(), true);
    for (q, x, rows) in &cases {
        let n = (rows * cols) as u64;
        let (src, dst) = (gpu.upload("x", x)?, gpu.storage_buffer("y", 4 * n)?);
        let shape = [*rows as u64, cols as u64];
        dispatches.extend(k.encode(gpu, q, (&src).into(), (&dst).into(), stats, shape)?);
        let xy = ((&src).into(), (&dst).into());
        dispatches.extend(k.encode_noise(gpu, xy, stats, n, (&measured).into())?);
        // a step that does not sum adds nothing
        dispatches.extend(k.encode_noise(gpu, xy, stats, n, (&between).into())?);
        let (y, c) = twin::quantize(q, x, cols);
        total.saturated += c.saturated;
        total.flushed += c.flushed;
        total.blocks_scale_saturated += c.blocks_scale_saturated;
        total.blocks_scale_underflowed += c.blocks_scale_underflowed;
        sums = twin::noise_sums(x, &y, Quantize::noise_groups(n) as usize, sums);
        outputs.push((src, dst));
    }
    gpu.run(&dispatches.iter().collect::<Vec<_>>()).await?;
    let none = Counts::default();
    for ((q, x, _), (_, dst)) in cases.iter().zip(&outputs) {
        let y: Vec<f32> = gpu.read_back(dst.into()).await?;
        let want = twin::quantize(q, x, cols).0;
        let what = format!("{} {:?}, sharing stats", q.format.name, q.blocks);
        assert_same(&what, x, (y, none), (want, none));
    }
    let words: Vec<u32> = gpu.read_back(stats).await?;
    assert!(
        total.saturated > 0 && total.flushed > 0,
        "counters exercised"
    );
    assert_eq!(Counts::from_words(&words), total, "the counts add up");
    let got = NoiseSums::from_words(&words);
    assert_eq!(
        [got.signal, got.noise],
        sums,
        "the noise sums, in the twin's order"
    );
    assert!(Quantize::noise_groups(cases[4].1.len() as u64) * 256 < cases[4].1.len() as u64);
    Ok(())
}

/// The Hadamard transform in blocks of 128 and 16 down the columns of a
/// matrix of awkward width, forward and inverse: bit for bit the twin's;
/// rows not a multiple of 16 refused; signs drawn at a step buffer's step.
pub async fn hadamard_columns_match_reference(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let mut r = rng(81);
    let (rows, cols) = (128, 301);
    let n = rows * cols;
    let x: Vec<f32> = (0..n)
        .map(|_| r.random_range(-1.0f32..1.0) * 2f32.powi(r.random_range(-20..20)))
        .collect();
    let s = Stream {
        seed: 7,
        step: 3,
        tensor: 9,
    };
    let src = gpu.upload("x", &x)?;
    let (y, back) = (
        gpu.storage_buffer("y", 4 * n as u64)?,
        gpu.storage_buffer("back", 4 * n as u64)?,
    );
    let shape = [rows as u64, cols as u64];
    let c = Blocks::Columns;
    let none = Counts::default();
    let mut want_y = Vec::new();
    for size in [128, 16] {
        let at = (c, size);
        let forward = k.hadamard(gpu, Some(s), false, (&src).into(), (&y).into(), shape, at)?;
        let inverse = k.hadamard(gpu, Some(s), true, (&y).into(), (&back).into(), shape, at)?;
        gpu.run(&[&forward, &inverse]).await?;
        want_y = twin::hadamard(&x, Some(s), false, cols, at);
        let got_y: Vec<f32> = gpu.read_back((&y).into()).await?;
        let what = format!("forward, blocks of {size}");
        assert_same(&what, &x, (got_y, none), (want_y.clone(), none));
        let got_back: Vec<f32> = gpu.read_back((&back).into()).await?;
        let want_back = twin::hadamard(&want_y, Some(s), true, cols, at);
        let what = format!("inverse, blocks of {size}");
        assert_same(&what, &x, (got_back, none), (want_back, none));
    }
    let c = (c, 16);
    let refused = k.hadamard(
        gpu,
        Some(s),
        false,
        (&src).into(),
        (&y).into(),
        [40, 301],
        c,
    );
    assert!(refused.is_err(), "40 rows are not whole blocks of 16");
    // signs drawn at the step a step buffer holds when it runs
    let step = Quantize::step_buffer(gpu, 0);
    let stepped = k.hadamard_stepped(
        gpu,
        s,
        false,
        ((&src).into(), (&y).into()),
        shape,
        c,
        (&step).into(),
    )?;
    Quantize::write_step(gpu, (&step).into(), 11);
    gpu.run(&[&stepped]).await?;
    let at_11 = twin::hadamard(&x, Some(Stream { step: 11, ..s }), false, cols, c);
    let got: Vec<f32> = gpu.read_back((&y).into()).await?;
    assert_same("forward at step 11", &x, (got, none), (at_11.clone(), none));
    assert_ne!(at_11, want_y, "another step draws other signs");
    Ok(())
}

/// 00_formats.wgsl's `round_f16` (attention's f16 operands) equals
/// `round_format(x, FMT_F16)` on the GPU and the `half` crate's cast, bit
/// for bit: every finite f16 value and its f32 neighbours, each tie between
/// neighbours and either side of it (65520's, to Inf, included), both
/// signs, f32 subnormals, the specials and random bit patterns.
pub async fn round_f16_equals_round_format(gpu: &Gpu) -> Result<()> {
    const PROBE: ShaderFile = ShaderFile {
        name: "99_round_f16_probe",
        source: "
@group(0) @binding(0) var<uniform> n: vec4<u32>;
@group(0) @binding(1) var<storage, read> xs: array<f32>;
@group(0) @binding(2) var<storage, read_write> ys: array<u32>;  // [2n]: round_f16's, round_format's

@compute @workgroup_size(WG)
fn round_f16_probe(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= n.x) { return; }
    ys[2u * i] = bitcast<u32>(round_f16(xs[i]));
    ys[2u * i + 1u] = bitcast<u32>(round_format(xs[i], FMT_F16));
}
",
    };
    let desc = KernelDesc {
        entry: "round_f16_probe",
        slots: &[
            Slot::Uniform(0),
            Slot::Read(1, "xs"),
            Slot::ReadWrite(2, "ys"),
        ],
    };
    let [probe] = build_kernels(gpu, PROBE, [desc]).await?;
    let f16_value = |c: u16| half::f16::from_bits(c).to_f32();
    let mut xs: Vec<f32> = (0..0x7c00u16)
        .flat_map(|c| {
            let (v, next) = (f16_value(c), f16_value(c + 1));
            let tie = if c + 1 == 0x7c00 {
                65520.0
            } else {
                (v + next) / 2.0
            };
            [
                v,
                v.next_up(),
                v.next_down(),
                tie,
                tie.next_up(),
                tie.next_down(),
            ]
        })
        .flat_map(|x| [x, -x])
        .collect();
    let mut r = rng(41);
    xs.extend(F32_SPECIALS);
    xs.extend((1..200u32).map(|b| f32::from_bits(b * 40_503))); // f32 subnormals
    xs.extend((0..20_000).map(|_| f32::from_bits(r.random())));
    let n = xs.len() as u64;
    let (x, y) = (gpu.upload("xs", &xs)?, gpu.storage_buffer("ys", 8 * n)?);
    let params = gpu.uniform("round_f16_probe", &[n as u32, 0, 0, 0]);
    let op = "round_f16_probe";
    let d = probe.dispatch(
        gpu,
        op,
        &[(&params).into(), (&x).into(), (&y).into()],
        gpu.grid_1d(op, n)?,
    )?;
    gpu.run(&[&d]).await?;
    let ys: Vec<u32> = gpu.read_back((&y).into()).await?;
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan();
    let differ: Vec<String> = xs
        .iter()
        .enumerate()
        .filter_map(|(i, &x)| {
            let (fast, generic) = (f32::from_bits(ys[2 * i]), f32::from_bits(ys[2 * i + 1]));
            let cast = half::f16::from_f32(x).to_f32();
            (!same(fast, generic) || !same(fast, cast)).then(|| {
                format!("{x:e}: round_f16 {fast:e}, round_format {generic:e}, half {cast:e}")
            })
        })
        .take(5)
        .collect();
    assert!(differ.is_empty(), "round_f16 over {n} values: {differ:?}");
    Ok(())
}
