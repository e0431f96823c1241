//! The bins of `13_histogram.wgsl`'s log2 histogram, shared by the kernel's
//! launcher, its CPU twin and the inspector: one bin per f32 binade
//! floor(log2|x|) from −149 (the smallest subnormal's) to 127, then zeros,
//! infinities and NaNs.

/// The binade of bin 0.
pub const MIN_BINADE: i32 = -149;
/// Bins of binades: −149 … 127.
pub const BINADES: usize = 277;
pub const ZERO_BIN: usize = 277;
pub const INF_BIN: usize = 278;
pub const NAN_BIN: usize = 279;
pub const BINS: usize = 280;

/// The binade of bin `b < BINADES`.
pub fn binade(b: usize) -> i32 {
    MIN_BINADE + b as i32
}
