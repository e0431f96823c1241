//! What precision would do to one AdamW step, per tensor: the inspector's
//! numbers for the research modes (issue: "why master weights stay f32").
//!
//! Update survival: an update Δ of a master weight w stored in a format of
//! spacing ulp(w) near w lands only if |Δ| ≥ ½·ulp(w); smaller ones round
//! back to w. The rate is the share of a tensor's nonzero updates that
//! would land in bf16, f16 and E4M3 (unscaled), measured from the weights
//! before and after a real step. Second moments: Adam's v against each
//! format's smallest positive value — a v below it is not stored as itself
//! (below half of it, as 0, and the next update divides by eps alone).

use serde::Serialize;

use crate::model::ParamLayout;
use crate::ops::formats::E4M3_MIN_POSITIVE;

/// The narrow formats a master weight or a moment could be stored in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Format {
    Bf16,
    F16,
    E4m3,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Bf16, Format::F16, Format::E4m3];

    /// Explicit significand bits.
    fn mantissa_bits(self) -> i32 {
        match self {
            Format::Bf16 => 7,
            Format::F16 => 10,
            Format::E4m3 => 3,
        }
    }

    /// The exponent of the smallest normal binade.
    fn min_exponent(self) -> i32 {
        match self {
            Format::Bf16 => -126,
            Format::F16 => -14,
            Format::E4m3 => -6,
        }
    }

    /// The smallest positive value (a subnormal).
    pub fn min_positive(self) -> f32 {
        match self {
            Format::Bf16 => f32::from_bits(1 << 16), // 2^-133
            Format::F16 => 2f32.powi(-24),
            Format::E4m3 => E4M3_MIN_POSITIVE,
        }
    }

    /// The spacing of this format's values around `w` (subnormal spacing
    /// below the normal range).
    pub fn ulp(self, w: f32) -> f32 {
        let e = if w == 0.0 {
            i32::MIN
        } else {
            (w.abs().to_bits() >> 23) as i32 - 127
        };
        2f32.powi(e.max(self.min_exponent()) - self.mantissa_bits())
    }
}

/// One tensor's inspection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Survival {
    pub tensor: String,
    /// Elements whose master weight changed this step.
    pub updated: u64,
    /// Share of those updates with |Δ| ≥ ½·ulp(w) in bf16, f16, E4M3.
    pub bf16: f64,
    pub f16: f64,
    pub e4m3: f64,
    /// The smallest nonzero second moment, and the share of nonzero ones
    /// below each format's smallest positive value (not stored as itself there).
    pub v_min: f32,
    pub v_below_bf16: f64,
    pub v_below_f16: f64,
    pub v_below_e4m3: f64,
}

/// Every tensor of `layout`, from its master weights before and after one
/// step and the second moments after it (all `layout.total` long).
pub fn inspect(layout: &ParamLayout, before: &[f32], after: &[f32], v: &[f32]) -> Vec<Survival> {
    layout
        .tensors
        .iter()
        .map(|t| {
            let r = t.offset as usize..(t.offset + t.len()) as usize;
            let moved: Vec<(f32, f32)> = before[r.clone()]
                .iter()
                .zip(&after[r.clone()])
                .filter(|(a, b)| a != b)
                .map(|(&a, &b)| (a, b - a))
                .collect();
            let share = |count: usize, of: usize| {
                if of == 0 {
                    0.0
                } else {
                    count as f64 / of as f64
                }
            };
            let lands = |f: Format| {
                share(
                    moved
                        .iter()
                        .filter(|&&(w, d)| d.abs() >= 0.5 * f.ulp(w))
                        .count(),
                    moved.len(),
                )
            };
            let nonzero: Vec<f32> = v[r].iter().copied().filter(|&x| x > 0.0).collect();
            let below = |f: Format| {
                share(
                    nonzero.iter().filter(|&&x| x < f.min_positive()).count(),
                    nonzero.len(),
                )
            };
            Survival {
                tensor: t.name.clone(),
                updated: moved.len() as u64,
                bf16: lands(Format::Bf16),
                f16: lands(Format::F16),
                e4m3: lands(Format::E4m3),
                v_min: nonzero.iter().copied().fold(f32::INFINITY, f32::min),
                v_below_bf16: below(Format::Bf16),
                v_below_f16: below(Format::F16),
                v_below_e4m3: below(Format::E4m3),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Config;

    #[test]
    fn ulps_are_each_formats_spacing() {
        // around 1: 2^-7, 2^-10, 2^-3; around 0.75 the binade below
        assert_eq!(
            Format::ALL.map(|f| f.ulp(1.0)),
            [2f32.powi(-7), 2f32.powi(-10), 0.125]
        );
        assert_eq!(
            Format::ALL.map(|f| f.ulp(-0.75)),
            [2f32.powi(-8), 2f32.powi(-11), 0.0625]
        );
        // subnormal spacing below the normal range, and at 0
        assert_eq!(
            (
                Format::F16.ulp(1e-6),
                Format::E4m3.ulp(0.001),
                Format::E4m3.ulp(0.0)
            ),
            (2f32.powi(-24), 2f32.powi(-9), 2f32.powi(-9))
        );
        // each spacing is the gap to the next value of the format itself
        assert_eq!(
            half::f16::from_f32(0.3).to_f32() + Format::F16.ulp(0.3),
            half::f16::from_bits(half::f16::from_f32(0.3).to_bits() + 1).to_f32()
        );
        assert_eq!(
            crate::reference::quantize::e4m3(3.0 + Format::E4m3.ulp(3.0)),
            3.0 + Format::E4m3.ulp(3.0)
        );
        assert_eq!(Format::ALL.map(Format::min_positive)[2], 1.0 / 512.0);
    }

    #[test]
    fn updates_below_half_an_ulp_are_lost_and_small_moments_underflow() {
        let c = Config::preset("tiny").unwrap();
        let layout = ParamLayout::new(&c);
        let (mut before, mut v) = (
            vec![0f32; layout.total as usize],
            vec![0f32; layout.total as usize],
        );
        let t = &layout.tensors[0];
        let at = t.offset as usize;
        // four moved weights near 1: by 1e-7 (lands only in f32), 1e-3
        // (f16: ulp 2^-10 ≈ 9.8e-4, half of it lands), 5e-3 (bf16: ½ulp
        // 3.9e-3), 0.07 (E4M3: ½ulp 0.0625)
        before[at..at + 4].copy_from_slice(&[1.0; 4]);
        let mut after = before.clone();
        for (i, d) in [1e-7f32, 1e-3, 5e-3, 0.07].into_iter().enumerate() {
            after[at + i] = 1.0 + d;
        }
        v[at..at + 3].copy_from_slice(&[1e-9, 1e-5, 0.01]);
        let s = inspect(&layout, &before, &after, &v);
        assert_eq!(s.len(), layout.tensors.len());
        let e = &s[0];
        assert_eq!((e.tensor.as_str(), e.updated), ("embed_tokens", 4));
        assert_eq!((e.f16, e.bf16, e.e4m3), (0.75, 0.5, 0.25));
        assert_eq!(
            (e.v_min, e.v_below_bf16, e.v_below_f16, e.v_below_e4m3),
            (1e-9, 0.0, 1.0 / 3.0, 2.0 / 3.0)
        );
        assert_eq!(
            (s[1].updated, s[1].bf16),
            (0, 0.0),
            "an untouched tensor: nothing to count"
        );
    }
}
