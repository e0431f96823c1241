//! Quartet's MXFP4 quantizers' twins (14_quantize.wgsl's `quantize_blocks`
//! for `Scaling::Quest` and `Scaling::Tseng`, and `quest_mask`), in plain
//! f32 arithmetic: every product, quotient and sum correctly rounded, as
//! the GPU's integer versions and unfused sums are.

use super::ms_eden::E2M1_MIDPOINTS;
use super::{Rounding, SIGN, flushed_to_zero, quantize_scaled, unscale};
use crate::ops::formats::{
    Counts, Element, MX_BLOCK, QUEST_EPS, QUEST_SCALE, TSENG_DIVISOR, TSENG_EXP_MIN, pow2,
};

/// QuEST's block exponent, as `quest_exp`: floor(log2(QUEST_SCALE·σ +
/// QUEST_EPS)), σ = √(mean x² − mean²) over the block's values (32, or a
/// line's last block) summed in order; 128 where a sum overflows.
pub fn quest_exp(v: &[f32]) -> i32 {
    let (mut s1, mut s2) = (0.0f32, 0.0f32);
    for &x in v {
        s1 += x;
        s2 += x * x;
    }
    if !s1.is_finite() || !s2.is_finite() {
        return 128;
    }
    let len = v.len() as f32;
    let mean = s1 / len;
    let d = s2 / len - mean * mean;
    let s = QUEST_SCALE * d.max(0.0).sqrt() + QUEST_EPS;
    (s.to_bits() >> 23) as i32 - 127
}

/// |x| / 2^k, 0 where that is below 2^-126 (`quest_ratio`).
pub fn quest_ratio(x: f32, k: i32) -> f32 {
    unscale(x, k)
}

/// E2M1 of a ≥ 0 by the reference's thresholds: to nearest with ties
/// toward zero, clipped to 6.
pub fn e2m1_toward_zero(a: f32) -> f32 {
    E2M1_MIDPOINTS
        .iter()
        .find(|(t, _)| a > *t)
        .map_or(0.0, |&(_, q)| q)
}

/// A finite, nonzero block (32 values, or a line's last) through QuEST's
/// MXFP4 into `y`.
pub fn quest_block(x: &[f32], y: &mut [f32], idx: &[usize], c: &mut Counts) {
    let v: Vec<f32> = idx.iter().map(|&i| x[i]).collect();
    let k = quest_exp(&v);
    if k > 127 {
        // its sums overflowed: NaN, as the reference's scale
        c.blocks_scale_saturated += 1;
        for &i in idx {
            y[i] = f32::from_bits(0x7fc0_0000 | (x[i].to_bits() & SIGN));
        }
        return;
    }
    for &i in idx {
        let a = quest_ratio(x[i], k);
        y[i] = f32::from_bits((e2m1_toward_zero(a) * pow2(k)).to_bits() | (x[i].to_bits() & SIGN));
        c.saturated += (a > 6.0) as u32;
        c.flushed += flushed_to_zero(x[i], y[i]) as u32;
    }
}

/// A finite, nonzero block of largest magnitude `amax` through Tseng's
/// MXFP4 into `y`: S = 2^(floor(log2 amax) − 2) / ¾, each value
/// E2M1(x / S)·S, `rounding(i)` for value i.
pub fn tseng_block(
    x: &[f32],
    y: &mut [f32],
    (idx, amax): (&[usize], f32),
    rounding: impl Fn(usize) -> Rounding,
    c: &mut Counts,
) {
    let f = Element::E2m1.spec();
    let raw = super::mx_scale_exp(amax, &f, false);
    c.blocks_scale_underflowed += (raw < TSENG_EXP_MIN) as u32;
    // 2^k / ¾ rounded once: a subnormal for the smallest blocks
    let s = pow2(raw.max(TSENG_EXP_MIN)) / TSENG_DIVISOR;
    for &i in idx {
        let (q, sat) = quantize_scaled(x[i] / s, &f, 0, rounding(i));
        y[i] = q * s;
        c.saturated += sat as u32;
        c.flushed += flushed_to_zero(x[i], y[i]) as u32;
    }
}

/// QuEST's gradient mask (`quest_mask`): `g` zeroed where `h`, the forward
/// operand as quantized (in its Hadamard basis), clipped — |x / S| ≥ 6 in
/// its block of 32 along a row of `cols` (a row's last block shorter where
/// 32 does not divide it); blocks the forward made NaN (holding ±Inf or
/// NaN, or whose sums overflow) keep theirs.
pub fn quest_mask(h: &[f32], g: &mut [f32], cols: usize) {
    let blocks = h.chunks(cols).flat_map(|row| row.chunks(MX_BLOCK));
    let grad_blocks = g.chunks_mut(cols).flat_map(|row| row.chunks_mut(MX_BLOCK));
    for (hb, gb) in blocks.zip(grad_blocks) {
        let k = quest_exp(hb);
        if hb.iter().any(|v| !v.is_finite()) || k > 127 {
            continue;
        }
        for (&v, gv) in hb.iter().zip(gb) {
            if quest_ratio(v, k) >= 6.0 {
                *gv = 0.0;
            }
        }
    }
}

/// Blocks whose values sit on QuEST's ties (t·2^k for each threshold t,
/// both signs) with the rest random: the block's k found by iterating
/// until the ties no longer move it. Test inputs: QuEST's ties go toward
/// zero, and random values never sit on one.
pub fn tie_blocks(seed: u64, blocks: usize) -> Vec<f32> {
    let mut r = crate::rng::SplitMix64(seed);
    const TIES: [f32; 7] = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0];
    let mut x = Vec::new();
    for _ in 0..blocks {
        let mut b: Vec<f32> = (0..32).map(|_| r.uniform(-1.0, 1.0)).collect();
        let mut k = quest_exp(&b);
        for _ in 0..20 {
            for (j, t) in TIES.iter().enumerate() {
                b[2 * j] = t * pow2(k);
                b[2 * j + 1] = -t * pow2(k);
            }
            let again = quest_exp(&b);
            if again == k {
                break;
            }
            k = again;
        }
        assert_eq!(quest_exp(&b), k, "the ties settle their block's scale");
        x.extend(b);
    }
    x
}
