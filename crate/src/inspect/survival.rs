//! What precision would do to one AdamW step, per tensor: the inspector's
//! numbers for the research modes (issue: "why master weights stay f32").
//!
//! Update survival: an update Δ of a master weight w stored in a format of
//! spacing ulp(w) near w lands only if |Δ| ≥ ½·ulp(w); smaller ones round
//! back to w. The rate is the share of a tensor's nonzero updates that
//! would land in each format of `Grid::ALL` (unscaled: what storing the
//! weight itself in that format would keep), measured from the weights
//! before and after a real step. Second moments: Adam's v against each
//! format's smallest positive value — a v below it is not stored as itself
//! (below half of it, as 0, and the next update divides by eps alone).

use serde::Serialize;

use super::grid::Grid;
use crate::model::ParamLayout;

/// A share of a tensor's values, for one format.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Share {
    pub format: &'static str,
    pub share: f64,
}

/// One tensor's inspection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Survival {
    pub tensor: String,
    /// Elements whose master weight changed this step.
    pub updated: u64,
    /// Per format of `Grid::ALL`: the share of those updates with |Δ| ≥ ½·ulp(w).
    pub lands: Vec<Share>,
    /// The smallest nonzero second moment, and per format the share of
    /// nonzero ones below its smallest positive value (not stored as itself there).
    pub v_min: f32,
    pub v_below: Vec<Share>,
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
            let nonzero: Vec<f32> = v[r].iter().copied().filter(|&x| x > 0.0).collect();
            let per_format = |count: &dyn Fn(Grid) -> f64| {
                Grid::ALL
                    .iter()
                    .map(|&g| Share {
                        format: g.name(),
                        share: count(g),
                    })
                    .collect()
            };
            Survival {
                tensor: t.name.clone(),
                updated: moved.len() as u64,
                lands: per_format(&|g| {
                    let lands = moved.iter().filter(|&&(w, d)| d.abs() >= 0.5 * g.ulp(w));
                    share(lands.count(), moved.len())
                }),
                v_min: nonzero.iter().copied().fold(f32::INFINITY, f32::min),
                v_below: per_format(&|g| {
                    let below = nonzero.iter().filter(|&&x| x < g.min_positive());
                    share(below.count(), nonzero.len())
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Config;
    use crate::ops::formats::Element;
    use crate::reference::formats::round_format;

    /// A grid by name.
    fn grid(name: &str) -> Grid {
        *Grid::ALL.iter().find(|g| g.name() == name).unwrap()
    }

    #[test]
    fn ulps_are_each_formats_spacing() {
        let names = Grid::ALL.map(Grid::name);
        assert_eq!(
            names,
            [
                "bf16", "f16", "e4m3", "e5m2", "e2m3", "e3m2", "e2m1", "q1.15"
            ]
        );
        // around 1: 2^-mantissa bits; Q1.15's one step everywhere
        assert_eq!(
            Grid::ALL.map(|g| g.ulp(1.0)),
            [-7, -10, -3, -2, -3, -2, -1, -15].map(|e| 2f32.powi(e))
        );
        // around 0.75 the binade below; E2M3 and E2M1 are subnormal there
        // (smallest normal 1), so their spacing stays
        assert_eq!(
            Grid::ALL.map(|g| g.ulp(-0.75)),
            [-8, -11, -4, -3, -3, -3, -1, -15].map(|e| 2f32.powi(e))
        );
        // subnormal spacing below the normal range, and at 0
        assert_eq!(
            (
                grid("f16").ulp(1e-6),
                grid("e4m3").ulp(0.001),
                grid("e4m3").ulp(0.0)
            ),
            (2f32.powi(-24), 2f32.powi(-9), 2f32.powi(-9))
        );
        // each spacing is the gap to the next value of the format itself
        assert_eq!(
            half::f16::from_f32(0.3).to_f32() + grid("f16").ulp(0.3),
            half::f16::from_bits(half::f16::from_f32(0.3).to_bits() + 1).to_f32()
        );
        for g in Grid::ALL {
            let Grid::Float(spec) = g else { continue };
            let element = Element::ALL.into_iter().find(|e| e.spec() == spec).unwrap();
            for w in [0.3f32, 1.0, 3.0, 1e-3] {
                let x = round_format(w, element);
                let next = round_format(x + g.ulp(x), element);
                assert_eq!(
                    next,
                    x + g.ulp(x),
                    "{}: {x} + one step is a value",
                    g.name()
                );
                assert_eq!(
                    round_format(x + 0.49 * g.ulp(x), element),
                    x,
                    "{}: under half a step rounds back",
                    g.name()
                );
            }
        }
        assert_eq!(
            Grid::ALL.map(Grid::min_positive),
            [-133, -24, -9, -16, -3, -4, -1, -15].map(|e| 2f32.powi(e))
        );
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
        // 3.9e-3), 0.07 (E4M3: ½ulp 0.0625; E5M2's 0.125 and E2M1's 0.25
        // keep none; Q1.15's ½·2^-15 all but the first)
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
        let of = |shares: &[Share]| shares.iter().map(|s| s.share).collect::<Vec<_>>();
        assert_eq!(
            of(&e.lands),
            [0.5, 0.75, 0.25, 0.0, 0.25, 0.0, 0.0, 0.75],
            "bf16 f16 e4m3 e5m2 e2m3 e3m2 e2m1 q1.15"
        );
        // v of 1e-9, 1e-5, 0.01 against 2^-133, 2^-24, 2^-9, 2^-16, 2^-3, 2^-4, 2^-1, 2^-15
        let third = 1.0 / 3.0;
        assert_eq!(e.v_min, 1e-9);
        assert_eq!(
            of(&e.v_below),
            [
                0.0,
                third,
                2.0 * third,
                2.0 * third,
                1.0,
                1.0,
                1.0,
                2.0 * third
            ]
        );
        assert_eq!(
            (s[1].updated, s[1].lands[0].share),
            (0, 0.0),
            "an untouched tensor: nothing to count"
        );
    }
}
