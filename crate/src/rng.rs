//! The one seeded RNG: batching, initial weights, sampling, synthetic data
//! and the tuner's operands all draw from it, so a seed means the same
//! numbers everywhere.

/// SplitMix64: a whole RNG state in one u64, so a checkpoint can store it
/// and a resumed run draws the same windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by rejection so no value is favoured.
    pub fn below(&mut self, n: u64) -> u64 {
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }

    /// Uniform in `lo..hi` (lo < hi): 24 random bits scaled onto the
    /// range, drawn again in the rare case rounding lands on `hi`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        assert!(lo < hi, "uniform: empty range {lo}..{hi}");
        loop {
            let unit = (self.next_u64() >> 40) as f32 * 2f32.powi(-24);
            let x = lo + (hi - lo) * unit;
            if x < hi {
                return x;
            }
        }
    }
}

/// `n` values uniform in `lo..hi`, in turn from `rng`: the random operands
/// of the kernel bench, the GEMM tuner and the kernel tests. Random, not
/// zeros: all-zero traffic can run faster than real data.
pub fn uniform(rng: &mut SplitMix64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.uniform(lo, hi)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_stays_in_its_range_and_is_seeded() {
        let xs = uniform(&mut SplitMix64(1), 10_000, -1.0, 1.0);
        assert!(xs.iter().all(|x| (-1.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f32>() / xs.len() as f32;
        assert!(mean.abs() < 0.05, "mean {mean}");
        assert_eq!(xs, uniform(&mut SplitMix64(1), 10_000, -1.0, 1.0));
    }
}
