//! Twins of 08_cast.wgsl. Rounding is the `half` crate's round-to-nearest-even.

use half::f16;

pub const F16_MAX: f32 = 65504.0;

/// Saturating f32 -> f16: ±Inf and overflow become ±65504, NaN stays NaN.
pub fn f32_to_f16(x: f32) -> f16 {
    if x.is_nan() {
        return f16::from_f32(x);
    }
    f16::from_f32(x.clamp(-F16_MAX, F16_MAX))
}

pub fn f16_to_f32(h: f16) -> f32 {
    h.to_f32()
}

/// f16 values as the 16-bit words of a `half2` buffer, odd lengths padded.
pub fn f32_slice_to_f16(xs: &[f32]) -> Vec<f16> {
    xs.iter().map(|&x| f32_to_f16(x)).collect()
}
