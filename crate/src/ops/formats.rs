//! The research formats' constants, for the host: the CPU twins and the
//! inspector (00_common.wgsl writes the same values for the kernels).

/// Q1.15's clamp, as the SF16 document's `Q115_OVERFLOW_THRESHOLD`.
pub const Q115_LIMIT: f32 = 0.999;
/// The largest finite E4M3 value (S.1111.110).
pub const E4M3_MAX: f32 = 448.0;
/// E4M3's smallest positive value, a subnormal: 2^-9.
pub const E4M3_MIN_POSITIVE: f32 = 1.0 / 512.0;
/// E4M3's smallest normal value: 2^-6.
pub const E4M3_MIN_NORMAL: f32 = 1.0 / 64.0;
