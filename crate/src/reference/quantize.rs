//! Twins of sf16's quantizers in 00_common.wgsl: round-trips through Q1.15
//! and Q1.31 fixed point. Every step is exact in f32 (products by powers of two, `round`), so the
//! GPU and these agree bit for bit.

pub use crate::ops::formats::Q115_LIMIT;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
