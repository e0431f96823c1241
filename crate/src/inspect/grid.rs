//! The formats the inspector measures against: every element format of
//! `ops::formats`, widest first, then Q1.15's fixed point — their spacing
//! around a value, smallest value and range by binade.

use serde::Serialize;

use crate::ops::formats::{Element, Minifloat, pow2};

/// The values a master weight or a moment could be stored as: an element
/// format's (`ops::formats`), or Q1.15's fixed point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    Float(Minifloat),
    /// Every value a multiple of 2^-15.
    Q115,
}

impl Grid {
    /// Every element format, widest first, then Q1.15.
    pub const ALL: [Grid; 8] = [
        Grid::Float(Element::Bf16.spec()),
        Grid::Float(Element::F16.spec()),
        Grid::Float(Element::E4m3.spec()),
        Grid::Float(Element::E5m2.spec()),
        Grid::Float(Element::E2m3.spec()),
        Grid::Float(Element::E3m2.spec()),
        Grid::Float(Element::E2m1.spec()),
        Grid::Q115,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Grid::Float(f) => f.name,
            Grid::Q115 => "q1.15",
        }
    }

    /// The smallest positive value (a subnormal; Q1.15's step).
    pub fn min_positive(self) -> f32 {
        match self {
            Grid::Float(f) => f.min_positive(),
            Grid::Q115 => pow2(-15),
        }
    }

    /// The spacing of this format's values around `w` (subnormal spacing
    /// below the normal range).
    pub fn ulp(self, w: f32) -> f32 {
        match self {
            Grid::Float(f) => {
                let e = if w == 0.0 {
                    i32::MIN
                } else {
                    (w.abs().to_bits() >> 23) as i32 - 127
                };
                pow2(e.max(f.emin()) - f.man as i32)
            }
            Grid::Q115 => pow2(-15),
        }
    }
}

/// What a format holds, by binade.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FormatRange {
    pub name: &'static str,
    /// The binade of the smallest positive value: below it, values are
    /// lost (to 0, or to that value).
    pub smallest: i32,
    /// The binade of the smallest normal value (None: fixed point, every
    /// value has the same absolute step).
    pub normal: Option<i32>,
    /// The binade of the largest finite value: above it, values overflow
    /// (saturate or become Inf).
    pub largest: i32,
}

impl Grid {
    pub const fn range(self) -> FormatRange {
        match self {
            Grid::Float(f) => FormatRange {
                name: f.name,
                smallest: f.emin() - f.man as i32,
                normal: Some(f.emin()),
                largest: f.emax,
            },
            Grid::Q115 => FormatRange {
                name: "q1.15",
                smallest: -15,
                normal: None,
                largest: -1,
            },
        }
    }
}

/// `Grid::ALL`'s ranges, as the page draws them.
pub const FORMATS: [FormatRange; Grid::ALL.len()] = {
    let mut out = [Grid::Q115.range(); Grid::ALL.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = Grid::ALL[i].range();
        i += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_by_binade_are_each_formats() {
        let of = |name: &str| *FORMATS.iter().find(|f| f.name == name).unwrap();
        let r = |f: FormatRange| (f.smallest, f.normal, f.largest);
        // bf16: 2^-133 … 2^-126 normal … [2^127, 2^128); f16 2^-24, 2^-14, 65504
        assert_eq!(r(of("bf16")), (-133, Some(-126), 127));
        assert_eq!(r(of("f16")), (-24, Some(-14), 15));
        // E4M3 2^-9, 2^-6, 448; E5M2 2^-16, 2^-14, 57344; E2M3 2^-3, 1, 7.5;
        // E3M2 2^-4, 2^-2, 28; E2M1 0.5, 1, 6
        assert_eq!(r(of("e4m3")), (-9, Some(-6), 8));
        assert_eq!(r(of("e5m2")), (-16, Some(-14), 15));
        assert_eq!(r(of("e2m3")), (-3, Some(0), 2));
        assert_eq!(r(of("e3m2")), (-4, Some(-2), 4));
        assert_eq!(r(of("e2m1")), (-1, Some(0), 2));
        assert_eq!(r(of("q1.15")), (-15, None, -1));
        for f in Grid::ALL {
            let range = f.range();
            assert_eq!(pow2(range.smallest), f.min_positive(), "{}", range.name);
        }
    }
}
