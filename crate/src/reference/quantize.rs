//! Twins of the research modes' quantizers in 00_common.wgsl: round-trips
//! through Q1.15 and Q1.31 fixed point (sf16) and through FP8 E4M3 (fp8).
//! Every step is exact in f32 (products by powers of two, `round`), so the
//! GPU and these agree bit for bit.

use std::ops::Range;

pub use crate::ops::formats::{E4M3_MAX, E4M3_MIN_NORMAL, E4M3_MIN_POSITIVE, Q115_LIMIT};

/// Q1.15 round trip: clamp to ±0.999, round to the nearest multiple of
/// 2^-15 (ties to even). NaN stays NaN; ±Inf clamps.
pub fn q115(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    (x.clamp(-Q115_LIMIT, Q115_LIMIT) * 32768.0).round_ties_even() * (1.0 / 32768.0)
}

/// Q1.31 round trip, the SF16 document's register format: clamp to
/// [-1, 1), round to a multiple of 2^-31. In f32 it only changes values
/// below 2^-8 in magnitude.
pub fn q131(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    (x.clamp(-1.0, 1.0f32.next_down()) * 2_147_483_648.0).round_ties_even()
        * (1.0 / 2_147_483_648.0)
}

/// A matmul output's SF16 boundary: the Q1.31 register, then Q1.15 storage.
pub fn sf16_matmul(x: f32) -> f32 {
    q115(q131(x))
}

/// Whether Q1.15's clamp changes `x` (what the sf16 counters count).
pub fn q115_clamps(x: f32) -> bool {
    x.abs() > Q115_LIMIT
}

/// E4M3 round trip: the nearest E4M3 value (ties to even mantissa),
/// subnormals down to 2^-9, beyond ±448 (±Inf included) saturated to ±448.
/// NaN stays NaN. The sign of a flushed value is kept (-0).
pub fn e4m3(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs().min(E4M3_MAX);
    // the exponent of a's binade, at least the subnormals' 2^-6
    let e = ((a.to_bits() >> 23) as i32 - 127).max(-6);
    let ulp = f32::from_bits(((e - 3 + 127) as u32) << 23);
    let q = ((a * f32::from_bits(((127 - (e - 3)) as u32) << 23)).round_ties_even() * ulp)
        .min(E4M3_MAX);
    f32::from_bits(q.to_bits() | (x.to_bits() & 0x8000_0000))
}

/// Whether E4M3 saturates `x` (|x| > 448, ±Inf included).
pub fn e4m3_saturates(x: f32) -> bool {
    x.abs() > E4M3_MAX
}

/// Whether E4M3 flushes a nonzero `x` to zero (|x| ≤ 2^-10: half the
/// smallest subnormal, the tie going to the even 0).
pub fn e4m3_flushes(x: f32) -> bool {
    x != 0.0 && !x.is_nan() && e4m3(x) == 0.0
}

/// The value of E4M3 byte `b` (OCP FP8 E4M3FN: bias 7, no infinities,
/// S.1111.111 is NaN), from the format's definition.
pub fn e4m3_decode(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let (exp, man) = ((b >> 3) & 0xf, b & 0x7);
    if exp == 0xf && man == 0x7 {
        return f32::NAN;
    }
    let magnitude = if exp == 0 {
        man as f32 / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + man as f32 / 8.0) * 2f32.powi(exp as i32 - 7)
    };
    sign * magnitude
}

/// fp8's scale for a tile whose largest |value| is `amax`: the smallest
/// power of two s ≥ 2^-126 with amax / s ≤ 448 (1 for an all-zero or
/// non-finite tile). Found from amax's bits as 03_linear.wgsl does:
/// amax = m·2^e with m in [1, 2) needs 2^(e−8) if m ≤ 1.75, else 2^(e−7).
pub fn fp8_scale(amax: f32) -> f32 {
    if amax == 0.0 || !amax.is_finite() {
        return 1.0;
    }
    let bits = amax.to_bits();
    let e = ((bits >> 23) as i32 - 127).max(-126);
    let k = (e - 8 + i32::from(bits & 0x7f_ffff > 0x60_0000)).clamp(-126, 127);
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `[0, len)` in fp8's blocks: cut where each stacked part begins (`parts`,
/// ascending: `[W_gate; W_up]` begins up at ffn), then into `side` values
/// from each part's beginning, so that no block spans two tensors.
pub fn fp8_blocks(len: usize, side: usize, parts: &[usize]) -> Vec<Range<usize>> {
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(parts.iter().copied())
        .chain(std::iter::once(len))
        .collect();
    bounds
        .windows(2)
        .flat_map(|part| {
            (part[0]..part[1])
                .step_by(side)
                .map(move |b| b..(b + side).min(part[1]))
        })
        .collect()
}

/// A row-major `[rows, cols]` matrix through E4M3 as fp8's GEMMs read it:
/// one scale per tile, a block of `row_blocks` by one of `col_blocks`
/// (`fp8_blocks`); returns the values and how many nonzero ones became 0.
pub fn fp8_tiles(
    x: &[f32],
    cols: usize,
    row_blocks: &[Range<usize>],
    col_blocks: &[Range<usize>],
) -> (Vec<f32>, u32) {
    let (mut out, mut flushed) = (vec![0.0; x.len()], 0);
    for rb in row_blocks {
        for cb in col_blocks {
            let tile = || {
                rb.clone()
                    .flat_map(move |r| cb.clone().map(move |c| r * cols + c))
            };
            let s = fp8_scale(tile().map(|i| x[i].abs()).fold(0.0, f32::max));
            for i in tile() {
                out[i] = e4m3(x[i] / s) * s;
                flushed += (x[i] != 0.0 && out[i] == 0.0) as u32;
            }
        }
    }
    (out, flushed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The finite non-negative E4M3 values, ascending (0 and 126 more).
    fn e4m3_values() -> Vec<f32> {
        (0u8..0x7f).map(e4m3_decode).collect()
    }

    #[test]
    fn e4m3_decodes_to_its_known_values() {
        let v = e4m3_values();
        assert_eq!(v.len(), 127);
        assert!(v.windows(2).all(|p| p[0] < p[1]), "ascending");
        assert_eq!(
            (v[0], v[1], v[7], v[8], v[126]),
            (
                0.0,
                E4M3_MIN_POSITIVE,
                7.0 / 512.0,
                E4M3_MIN_NORMAL,
                E4M3_MAX
            )
        );
        assert!(e4m3_decode(0x7f).is_nan() && e4m3_decode(0xff).is_nan());
        assert_eq!(e4m3_decode(0xfe), -448.0);
    }

    #[test]
    fn e4m3_keeps_every_value_and_rounds_midpoints_to_even() {
        let v = e4m3_values();
        for (k, &x) in v.iter().enumerate() {
            assert_eq!(
                (e4m3(x), e4m3(-x).to_bits()),
                (x, (-x).to_bits()),
                "value {k}: {x}"
            );
        }
        for k in 0..v.len() - 1 {
            let (lo, hi) = (v[k], v[k + 1]);
            let mid = (lo + hi) / 2.0; // exact: a few bits
            let even = if k % 2 == 0 { lo } else { hi }; // byte k's mantissa parity is k's
            assert_eq!(e4m3(mid), even, "tie between {lo} and {hi}");
            assert_eq!(
                (e4m3(mid.next_down()), e4m3(mid.next_up())),
                (lo, hi),
                "around the tie of {lo} and {hi}"
            );
        }
    }

    #[test]
    fn e4m3_saturates_flushes_and_keeps_nan() {
        for x in [448.5, 464.0, 479.0, 1e6, f32::INFINITY, f32::MAX] {
            assert_eq!((e4m3(x), e4m3(-x)), (448.0, -448.0), "{x}");
            assert!(e4m3_saturates(x));
        }
        assert!(!e4m3_saturates(448.0) && e4m3(447.0) == 448.0);
        assert!(e4m3(f32::NAN).is_nan());
        // half the smallest subnormal ties to 0; just above goes up
        let half = E4M3_MIN_POSITIVE / 2.0;
        assert_eq!(
            (e4m3(half), e4m3(half.next_up()), e4m3(-half).to_bits()),
            (0.0, E4M3_MIN_POSITIVE, (-0.0f32).to_bits())
        );
        assert!(
            e4m3_flushes(half)
                && e4m3_flushes(f32::MIN_POSITIVE / 4.0)
                && !e4m3_flushes(0.0)
                && !e4m3_flushes(half.next_up())
        );
        // 1.5 × 2^-9 ties between the subnormals 1 and 2 × 2^-9: even wins
        assert_eq!(e4m3(1.5 / 512.0), 2.0 / 512.0);
    }

    #[test]
    fn q115_keeps_every_code_within_the_clamp_and_rounds_ties_to_even() {
        let limit = (Q115_LIMIT * 32768.0).round() as i32; // 32735
        for k in -32768..=32767i32 {
            let x = k as f32 / 32768.0;
            let want = k.clamp(-limit, limit) as f32 / 32768.0;
            assert_eq!(q115(x), want, "code {k}");
            assert_eq!(q115_clamps(x), k.abs() > limit, "code {k}");
            let mid = (k as f32 + 0.5) / 32768.0;
            if k.abs() < limit && (k + 1).abs() < limit {
                let even = if k % 2 == 0 { k } else { k + 1 };
                assert_eq!(q115(mid), even as f32 / 32768.0, "tie after code {k}");
            }
        }
        assert_eq!(
            (q115(5.0), q115(f32::NEG_INFINITY)),
            (32735.0 / 32768.0, -32735.0 / 32768.0)
        );
        assert!(q115(f32::NAN).is_nan());
    }

    #[test]
    fn q131_changes_only_what_is_below_its_grain() {
        for x in [0.5f32, -0.75, 0.003_906_25, 0.123_456_79, -0.007_812_5] {
            assert_eq!(q131(x), x, "{x}: f32 has no bits below 2^-31 here");
        }
        assert_eq!(q131(2f32.powi(-33)), 0.0);
        assert_eq!(
            q131(3.0 * 2f32.powi(-32)),
            2f32.powi(-30),
            "a tie at 1.5 grains goes to the even 2"
        );
        assert_eq!((q131(2.0), q131(-2.0)), (1.0f32.next_down(), -1.0));
        // the register round trip can move a value onto a Q1.15 tie
        let tie = 0.5 / 32768.0;
        let x = tie + 2f32.powi(-33);
        assert_eq!((q115(x), sf16_matmul(x)), (1.0 / 32768.0, 0.0));
    }

    #[test]
    fn fp8_scale_is_the_smallest_power_of_two_that_fits() {
        for amax in [
            448.0f32,
            448.1,
            1.0,
            1.75 * 2f32.powi(-20),
            1.76 * 2f32.powi(-20),
            3e30,
            1e-30,
        ] {
            let s = fp8_scale(amax);
            assert_eq!(s.to_bits() & 0x7f_ffff, 0, "{s} is a power of two");
            assert!(
                amax / s <= E4M3_MAX && amax / (s / 2.0) > E4M3_MAX,
                "amax {amax}: scale {s}"
            );
        }
        // tiny tiles: the scale stops at f32's smallest normal, as on the GPU
        for amax in [f32::MIN_POSITIVE, 1e-40, 1e-36] {
            assert_eq!(fp8_scale(amax), f32::MIN_POSITIVE, "amax {amax}");
        }
        assert_eq!(fp8_scale(0.0), 1.0);
    }

    #[test]
    fn fp8_blocks_start_afresh_in_each_stacked_part() {
        let starts = |b: Vec<Range<usize>>| b.iter().map(|r| r.start).collect::<Vec<_>>();
        assert_eq!(starts(fp8_blocks(300, 128, &[])), [0, 128, 256]);
        assert_eq!(fp8_blocks(300, 128, &[]).last(), Some(&(256..300)));
        // [W_gate; W_up] of the small preset: up's first block begins at 688, not 640
        let gu = fp8_blocks(2 * 688, 128, &[688]);
        assert_eq!(
            starts(gu.clone()),
            [0, 128, 256, 384, 512, 640, 688, 816, 944, 1072, 1200, 1328]
        );
        assert_eq!((gu[5].end, gu[11].end), (688, 1376));
        // an empty third part adds no block
        assert_eq!(fp8_blocks(20, 8, &[5, 20]), [0..5, 5..13, 13..20]);
        assert_eq!(starts(fp8_blocks(5, 1, &[])), [0, 1, 2, 3, 4]);
    }
}
