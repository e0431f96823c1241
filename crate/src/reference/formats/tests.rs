//! The twins against the formats' definitions: every code decoded from its
//! bits, the published values, the `half` crate's casts, and the literal
//! NVFP4 formulas.

use super::*;
use crate::ops::formats::{Blocks, Format};

/// The finite non-negative values of `e`, ascending, from its codes.
fn values(e: Element) -> Vec<f32> {
    let f = e.spec();
    let positive = 1u32 << (f.bits() - 1);
    let v: Vec<f32> = (0..positive)
        .map(|c| decode(e, c))
        .filter(|v| v.is_finite())
        .collect();
    assert!(v.windows(2).all(|p| p[0] < p[1]), "{}: ascending", f.name);
    v
}

#[test]
fn codes_decode_to_the_published_values() {
    // OCP MX v1.0, tables of FP6 and FP4 values; OFP8 E5M2
    assert_eq!(
        values(Element::E2m1),
        [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    );
    let e2m3 = values(Element::E2m3);
    assert_eq!(e2m3.len(), 32);
    assert_eq!(
        (e2m3[1], e2m3[7], e2m3[8], e2m3[31]),
        (0.125, 0.875, 1.0, 7.5)
    );
    let e3m2 = values(Element::E3m2);
    assert_eq!(e3m2.len(), 32);
    assert_eq!(
        (e3m2[1], e3m2[3], e3m2[4], e3m2[31]),
        (0.0625, 0.1875, 0.25, 28.0)
    );
    let e5m2 = values(Element::E5m2);
    assert_eq!(e5m2.len(), 124, "0x00..=0x7b finite");
    assert_eq!(
        (e5m2[1], e5m2[4], e5m2[123]),
        (2f32.powi(-16), 2f32.powi(-14), 57344.0)
    );
    assert_eq!(decode(Element::E5m2, 0x7c), f32::INFINITY);
    assert_eq!(decode(Element::E5m2, 0xfc), f32::NEG_INFINITY);
    assert!((0x7d..=0x7f).all(|c| decode(Element::E5m2, c).is_nan()));
    assert_eq!(decode(Element::E5m2, 0x80).to_bits(), (-0.0f32).to_bits());
    assert_eq!(decode(Element::E2m1, 0xf), -6.0);
    // OFP8 E4M3: subnormals from 2^-9, normals from 2^-6, S.1111.111 NaN
    let e4m3 = values(Element::E4m3);
    assert_eq!(e4m3.len(), 127, "0x00..=0x7e finite");
    assert_eq!(
        (e4m3[1], e4m3[7], e4m3[8], e4m3[9], e4m3[126]),
        (
            2f32.powi(-9),
            7.0 / 512.0,
            2f32.powi(-6),
            1.125 / 64.0,
            448.0
        )
    );
    assert!(decode(Element::E4m3, 0x7f).is_nan() && decode(Element::E4m3, 0xff).is_nan());
    assert_eq!(decode(Element::E4m3, 0xfe), -448.0);
    // f16 and bf16 against the half crate, every code
    for c in 0..=0xffffu32 {
        let (h, b) = (
            half::f16::from_bits(c as u16).to_f32(),
            half::bf16::from_bits(c as u16).to_f32(),
        );
        let (dh, db) = (decode(Element::F16, c), decode(Element::Bf16, c));
        assert!(
            dh.to_bits() == h.to_bits() || dh.is_nan() && h.is_nan(),
            "f16 {c:#x}"
        );
        assert!(
            db.to_bits() == b.to_bits() || db.is_nan() && b.is_nan(),
            "bf16 {c:#x}"
        );
    }
}

#[test]
fn e8m0_codes_are_powers_of_two() {
    for c in 0..=254u8 {
        let v = e8m0_decode(c);
        assert_eq!(v as f64, 2f64.powi(c as i32 - 127), "code {c}");
        assert_eq!(e8m0_encode(c as i32 - 127), c);
    }
    assert_eq!(
        (e8m0_decode(127), e8m0_decode(0), e8m0_decode(254)),
        (1.0, 2f32.powi(-126) / 2.0, 2f32.powi(127))
    );
    assert!(e8m0_decode(0xff).is_nan());
}

#[test]
fn every_value_stays_and_ties_go_to_even() {
    for e in Element::ALL {
        let f = e.spec();
        if f.bits() > 9 {
            continue; // f16 and bf16: against the half crate below
        }
        let v = values(e);
        for (c, &x) in v.iter().enumerate() {
            assert_eq!(round_format(x, e), x, "{} value {c}", f.name);
            assert_eq!(
                round_format(-x, e).to_bits(),
                (-x).to_bits(),
                "{} value -{c}",
                f.name
            );
        }
        for c in 0..v.len() - 1 {
            let (lo, hi) = (v[c], v[c + 1]);
            let mid = (lo + hi) / 2.0;
            let even = if c % 2 == 0 { lo } else { hi };
            assert_eq!(
                round_format(mid, e),
                even,
                "{}: tie of {lo} and {hi}",
                f.name
            );
            assert_eq!(
                (
                    round_format(mid.next_down(), e),
                    round_format(mid.next_up(), e)
                ),
                (lo, hi)
            );
        }
        let max = f.max();
        for x in [max.next_up(), max * 1.1, 1e30, f32::MAX, f32::INFINITY] {
            assert_eq!(
                (round_format(x, e), round_format(-x, e)),
                (max, -max),
                "{} {x}",
                f.name
            );
            assert!(
                quantize_scaled(x, &f, 0, Rounding::Nearest).1,
                "{x} counts as saturated"
            );
        }
        assert!(!quantize_scaled(max, &f, 0, Rounding::Nearest).1);
        let half = f.min_positive() / 2.0;
        assert_eq!(
            (round_format(half, e), round_format(half.next_up(), e)),
            (0.0, f.min_positive())
        );
        assert!(round_format(f32::NAN, e).is_nan());
        assert_eq!(round_format(-1e-40, e).to_bits(), (-0.0f32).to_bits());
    }
}

#[test]
fn bf16_and_f16_round_as_the_half_crate_casts() {
    let mut r = crate::rng::SplitMix64(3);
    let specials = [
        0x7f7f_ffffu32,
        0x7f7f_8000,
        0x7f7f_7fff,
        0x477f_f000,
        0x477f_efff,
        0x0000_8000,
        0x0000_7fff,
        1,
        0x33000000,
        0x33000001,
    ];
    let bits = specials
        .into_iter()
        .chain((0..2_000_000).map(|_| r.next_u64() as u32));
    for b in bits.flat_map(|b| [b, b | SIGN]) {
        let x = f32::from_bits(b);
        if x.is_nan() {
            continue;
        }
        let (h, bf) = (
            half::f16::from_f32(x).to_f32(),
            half::bf16::from_f32(x).to_f32(),
        );
        assert_eq!(
            round_format(x, Element::F16).to_bits(),
            h.to_bits(),
            "f16 of {x:e} ({b:#x})"
        );
        assert_eq!(
            round_format(x, Element::Bf16).to_bits(),
            bf.to_bits(),
            "bf16 of {x:e} ({b:#x})"
        );
    }
    assert_eq!(round_format(f32::MAX, Element::Bf16), f32::INFINITY);
    assert_eq!(round_format(65520.0, Element::F16), f32::INFINITY);
    assert_eq!(round_format(65519.0, Element::F16), 65504.0);
}

/// The blockwise FP8 (DeepSeek-V3's): each 128 values share the smallest
/// power of two that keeps their amax within E4M3's 448, so nothing
/// saturates; a block's values are its own E4M3 round trips under it.
#[test]
fn blockwise_scale_is_the_smallest_power_of_two_that_fits() {
    let q = Quantization::new(Format::parse("e4m3-blockwise").unwrap(), Blocks::Rows, None);
    for (amax, k) in [
        (448.0f32, 0),
        (448.0f32.next_up(), 1),
        (1.0, -8),
        (1.75, -8),
        (1.75f32.next_up(), -7),
        (3.0e-3, -17),
        (1.0e-38, -127), // clamped at E8M0's 2^-127: counted
    ] {
        let mut x = vec![amax / 3.0; 128];
        x[5] = -amax;
        let (y, c) = quantize(&q, &x, 128);
        assert_eq!(
            y[5],
            -round_format(amax * pow2(-k), Element::E4m3) * pow2(k),
            "{amax}"
        );
        assert_eq!(c.saturated, 0, "{amax}");
        assert_eq!(c.blocks_scale_underflowed, (k == -127) as u32, "{amax}");
        let third = round_format(amax / 3.0 * pow2(-k), Element::E4m3) * pow2(k);
        assert_eq!(y[0], third, "{amax}: the block's other values");
    }
    // 300 values: blocks of 128, 128 and 44, each its own scale
    let x: Vec<f32> = (0..300).map(|i| [1.0, 96.0, 1e-4][i / 128]).collect();
    let (y, _) = quantize(&q, &x, 300);
    let small = round_format(1e-4 * pow2(22), Element::E4m3) * pow2(-22);
    assert_eq!((y[0], y[128], y[299]), (1.0, 96.0, small));
    assert_ne!(small, 1e-4, "1e-4 is no E4M3 value times a power of two");
}

#[test]
fn mx_blocks_scale_by_the_block_amax() {
    let mx = |name: &str| Quantization::new(Format::parse(name).unwrap(), Blocks::Rows, None);
    // all equal: exact
    let (y, c) = quantize(&mx("mxfp8-e4m3"), &[1.0; 32], 32);
    assert_eq!((y, c), (vec![1.0; 32], Counts::default()));
    // one outlier: scale 2^(9 − 8) = 2: 1000 / 2 = 500 saturates at 448
    // (the MX scale's known cost), the small values flush
    let mut x = vec![0.0005f32; 32];
    x[7] = 1000.0;
    let (y, c) = quantize(&mx("mxfp8-e4m3"), &x, 32);
    assert_eq!((y[7], y[0], c.saturated, c.flushed), (896.0, 0.0, 1, 31));
    // mxfp4: 1000 / 2^(9 − 2) = 7.8 saturates at 6: 768
    let (y, c) = quantize(&mx("mxfp4"), &x, 32);
    assert_eq!((y[7], c.saturated), (768.0, 1));
    // the rounded-up scale: 480 > 448 takes X = 2, and nothing saturates
    let mut x = vec![1.0f32; 32];
    x[0] = 480.0;
    assert_eq!(quantize(&mx("mxfp8-e4m3"), &x, 32).1.saturated, 1);
    let (y, c) = quantize(&mx("mxfp8-e4m3-rceil"), &x, 32);
    assert_eq!((y[0], y[1], c.saturated), (480.0, 1.0, 0));
    // all zero, and a block below E8M0's range
    let (y, c) = quantize(&mx("mxfp8-e5m2"), &[-0.0; 32], 32);
    assert_eq!(
        (y.iter().all(|v| v.to_bits() == SIGN), c),
        (true, Counts::default())
    );
    let (_, c) = quantize(&mx("mxfp8-e4m3"), &[1e-38; 32], 32);
    assert_eq!(c.blocks_scale_underflowed, 1);
    // a non-finite block is NaN, and counted
    let mut x = vec![1.0f32; 64];
    x[40] = f32::INFINITY;
    let (y, c) = quantize(&mx("mxfp6-e2m3"), &x, 64);
    assert!(y[32..].iter().all(|v| v.is_nan()) && y[..32].iter().all(|&v| v == 1.0));
    assert_eq!((c.blocks_scale_saturated, c.saturated), (1, 1));
}

/// NVFP4 as the formulas evaluate in f32, where they stay normal.
fn nvfp4_literal(x: &[f32], block: usize) -> Vec<f32> {
    let amax_t = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let s = NVFP4_RANGE / amax_t;
    x.chunks(block)
        .flat_map(|b| {
            let amax_b = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = round_format(amax_b / 6.0 * s, Element::E4m3);
            let (up, down) = (s / d, d / s);
            b.iter()
                .map(move |&v| round_format(v * up, Element::E2m1) * down)
        })
        .collect()
}

#[test]
fn nvfp4_is_the_formulas_in_f32() {
    let mut r = crate::rng::SplitMix64(5);
    let q = Quantization::new(Format::parse("nvfp4").unwrap(), Blocks::Rows, None);
    for scale in [1e-20f32, 1e-3, 1.0, 7.0, 3e4, 1e20] {
        let x: Vec<f32> = (0..4096)
            .map(|i| (r.uniform(0.0, 1.0) - 0.5) * scale * if i % 64 < 16 { 1e-3 } else { 1.0 })
            .collect();
        let (y, c) = quantize(&q, &x, 64);
        let want = nvfp4_literal(&x, 16);
        for i in 0..x.len() {
            assert_eq!(
                y[i].to_bits() & 0x7fff_ffff,
                want[i].to_bits() & 0x7fff_ffff,
                "scale {scale}, {i}: {}",
                x[i]
            );
        }
        assert_eq!(c.blocks_scale_saturated, 0);
    }
    // tiny tensors, where S = 2688 / amax_t overflows f32: the same values, scaled
    let x: Vec<f32> = (0..256).map(|_| r.uniform(0.0, 1.0) - 0.5).collect();
    let tiny: Vec<f32> = x.iter().map(|v| v * 2f32.powi(-120)).collect();
    let (y, _) = quantize(&q, &x, 16);
    let (yt, _) = quantize(&q, &tiny, 16);
    for i in 0..x.len() {
        assert_eq!(yt[i] as f64, y[i] as f64 * 2f64.powi(-120), "{i}");
    }
}

/// The mean of n draws is within 5σ ≤ 5·step / (2√n) of the value: each
/// draw is a neighbour, up with probability equal to the distance.
#[test]
fn stochastic_rounding_is_unbiased() {
    let f = Element::E2m1.spec();
    let n = 100_000;
    for (x, step) in [(2.3f32, 1.0), (-0.7, 0.5), (5.9, 2.0), (0.1, 0.5)] {
        let mean = (0..n)
            .map(|i| {
                let r = Rounding::Stochastic(random_bits(7, 0, 1, i));
                quantize_scaled(x, &f, 0, r).0 as f64
            })
            .sum::<f64>()
            / n as f64;
        let bound = 5.0 * step / (2.0 * (n as f64).sqrt());
        assert!((mean - x as f64).abs() < bound, "{x}: mean {mean}");
    }
}

#[test]
fn hadamard_inverts_within_f32_rounding() {
    let mut r = crate::rng::SplitMix64(6);
    let s = Stream {
        seed: 9,
        step: 2,
        tensor: 3,
    };
    let x: Vec<f32> = (0..16 * 64)
        .map(|_| (r.uniform(0.0, 1.0) - 0.5) * 10f32.powi(((r.next_u64() as u32) % 7) as i32 - 3))
        .collect();
    let y = hadamard(&x, Some(s), false, 16, (Blocks::Rows, 16));
    let back = hadamard(&y, Some(s), true, 16, (Blocks::Rows, 16));
    let signs: Vec<f64> = (0..16)
        .map(|j| {
            if random_bits(9, 2, 3, j) & 1 == 1 {
                -1.0
            } else {
                1.0
            }
        })
        .collect();
    assert!(signs.iter().any(|&v| v < 0.0) && signs.iter().any(|&v| v > 0.0));
    for (b, block) in x.chunks(16).enumerate() {
        let l1: f64 = block.iter().map(|v| v.abs() as f64).sum();
        for i in 0..16usize {
            // y_i = Σ_j H_ij s_j x_j / 4, H_ij = (−1)^popcount(i & j)
            let exact: f64 = (0..16)
                .map(|j| if (i & j).count_ones() % 2 == 1 { -1.0 } else { 1.0 } * signs[j] * block[j] as f64)
                .sum::<f64>()
                / 4.0;
            let u = 2f64.powi(-24);
            assert!(
                (y[16 * b + i] as f64 - exact).abs() <= 4.0 * u * l1 / 4.0 * 1.01,
                "forward {b}.{i}"
            );
            assert!(
                (back[16 * b + i] as f64 - block[i] as f64).abs() <= 2.0 * u * l1,
                "round trip {b}.{i}"
            );
        }
    }
}

/// `m` ([rows, cols]) transposed.
fn transpose(m: &[f32], cols: usize) -> Vec<f32> {
    let rows = m.len() / cols;
    (0..m.len())
        .map(|i| m[(i % rows) * cols + i / rows])
        .collect()
}

#[test]
fn column_blocks_are_row_blocks_of_the_transpose() {
    let mut r = crate::rng::SplitMix64(7);
    let (rows, cols) = (64, 7);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| (r.uniform(0.0, 1.0) - 0.5) * 2f32.powi((i % 11) as i32 - 5))
        .collect();
    let xt = transpose(&x, cols);
    for name in ["mxfp8-e4m3", "mxfp8-e4m3-rceil", "mxfp4", "nvfp4"] {
        let q = |blocks| Quantization::new(Format::parse(name).unwrap(), blocks, None);
        let (y, c) = quantize(&q(Blocks::Columns), &x, cols);
        let (yt, ct) = quantize(&q(Blocks::Rows), &xt, rows);
        assert_eq!((transpose(&yt, rows), ct), (y, c), "{name}");
    }
    let s = Stream {
        seed: 1,
        step: 2,
        tensor: 3,
    };
    let y = hadamard(&x, Some(s), false, cols, (Blocks::Columns, 16));
    let yt = hadamard(&xt, Some(s), false, rows, (Blocks::Rows, 16));
    assert_eq!(transpose(&yt, rows), y);
}

#[test]
fn tensor_scaling_takes_the_tensor_amax_ceil_exponent() {
    let q = |name: &str| Quantization::new(Format::parse(name).unwrap(), Blocks::Rows, None);
    let e4m3 = q("e4m3-tensor");
    // amax 3: k = -7 (3 ≤ 448·2^-7 = 3.5), each value round(x·2^7)·2^-7
    let x = [3.0f32, -1.0, 0.3, 1e-4, 0.0];
    let (y, c) = quantize(&e4m3, &x, 5);
    let f = Element::E4m3.spec();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| quantize_scaled(v, &f, -7, Rounding::Nearest).0)
        .collect();
    assert_eq!((y[0], y[1], &y[..]), (3.0, -1.0, &want[..]));
    assert_eq!(c.saturated, 0);
    // amax 480 > 448: k = 1, nothing saturates; ±Inf saturates to ±896, NaN stays
    let (y, c) = quantize(&e4m3, &[480.0, 1.0, f32::NEG_INFINITY, f32::NAN], 4);
    assert_eq!((y[0], y[1], y[2], c.saturated), (480.0, 1.0, -896.0, 1));
    assert!(y[3].is_nan());
    // zeros stay zeros; a tensor below 2^-127·max clamps k and counts it
    let (y, c) = quantize(&q("e5m2-tensor"), &[0.0, -0.0], 2);
    assert_eq!(
        (y[0].to_bits(), y[1].to_bits(), c),
        (0, SIGN, Counts::default())
    );
    let (_, c) = quantize(&e4m3, &[1e-40, 3e-41], 2);
    assert_eq!(c.blocks_scale_underflowed, 1);
}

#[test]
fn a_short_last_block_takes_its_own_scale() {
    let q = Quantization::new(Format::parse("mxfp8-e4m3").unwrap(), Blocks::Rows, None);
    // a row of 48: blocks [0, 32) and [32, 48). The outlier's scale 2 flushes
    // its block's 0.0005s; the short block's own, 2^(−11 − 8), keeps them
    let mut x = vec![0.0005f32; 48];
    x[7] = 1000.0;
    assert_eq!(q.block_count([1, 48]), 2);
    let second: Vec<usize> = q.block_values(1, [1, 48]).collect();
    assert_eq!(second, (32..48).collect::<Vec<_>>());
    let (y, c) = quantize(&q, &x, 48);
    assert_eq!((y[7], y[0], y[31]), (896.0, 0.0, 0.0));
    // 0.0005 / 2^-19 = 262.1 rounds to 256 in E4M3
    assert!(
        y[32..].iter().all(|&v| v == 256.0 * 2f32.powi(-19)),
        "{y:?}"
    );
    assert_eq!((c.saturated, c.flushed), (1, 31));
    // two such rows: the second row's blocks start at 48
    let blocks: Vec<Vec<usize>> = (0..4)
        .map(|b| q.block_values(b, [2, 48]).collect())
        .collect();
    assert_eq!((blocks[2][0], blocks[3][0], blocks[3].len()), (48, 80, 16));
}

/// `x` ([rows, cols]) with each part of each row (cut at `parts`) padded
/// with zeros to whole blocks of `side`: the padded matrix, its width, and
/// where each value of `x` went.
fn pad_parts(
    x: &[f32],
    cols: usize,
    parts: [u32; 2],
    side: usize,
) -> (Vec<f32>, usize, Vec<usize>) {
    let cuts = [0, parts[0] as usize, parts[1] as usize, cols];
    let wide: usize = cuts
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(side) * side)
        .sum();
    let rows = x.len() / cols;
    let (mut padded, mut at) = (vec![0.0; rows * wide], Vec::new());
    for row in 0..rows {
        let mut o = row * wide;
        for w in cuts.windows(2) {
            for c in w[0]..w[1] {
                padded[o + c - w[0]] = x[row * cols + c];
                at.push(o + c - w[0]);
            }
            o += (w[1] - w[0]).div_ceil(side) * side;
        }
    }
    (padded, wide, at)
}

/// A part's shorter last block quantizes as that part padded with zeros
/// to whole blocks (as MX implementations do), values and counts; down
/// the columns as along the rows of the transpose.
#[test]
fn parts_and_short_blocks_are_zero_padding() {
    let mut r = crate::rng::SplitMix64(8);
    let (rows, cols) = (7, 352);
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| (r.uniform(0.0, 1.0) - 0.5) * 2f32.powi((i % 13) as i32 - 6))
        .collect();
    for name in ["mxfp8-e4m3", "mxfp4", "nvfp4"] {
        let format = Format::parse(name).unwrap();
        for parts in [[0, 0], [176, 352], [100, 176], [40, 40]] {
            let q = Quantization {
                parts,
                ..Quantization::new(format, Blocks::Rows, None)
            };
            q.check([rows, cols], "x").unwrap();
            let (padded, wide, at) = pad_parts(&x, cols, parts, format.block());
            let (y, c) = quantize(&q, &x, cols);
            let (yp, cp) = quantize(
                &Quantization::new(format, Blocks::Rows, None),
                &padded,
                wide,
            );
            let want: Vec<u32> = at.iter().map(|&i| yp[i].to_bits()).collect();
            let got: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
            assert_eq!((got, c), (want, cp), "{name} {parts:?}");
            // down the columns of the transpose, cut down its rows
            let xt = transpose(&x, cols);
            let down = Quantization {
                blocks: Blocks::Columns,
                ..q
            };
            let (yt, ct) = quantize(&down, &xt, rows);
            assert_eq!(
                (transpose(&yt, rows), ct),
                (y, c),
                "{name} {parts:?} columns"
            );
        }
    }
}
