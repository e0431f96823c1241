//! Training and validation windows from one token stream. The validation
//! set is the held-out tail; training windows never reach into it.

use crate::error::{Error, Result};
use crate::rng::SplitMix64;

/// Tokens per batch row are `seq + 1`: inputs are the first `seq`,
/// targets the last `seq` (the next token of each input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub inputs: Vec<u32>,  // [batch, seq]
    pub targets: Vec<u32>, // [batch, seq]
}

#[derive(Debug)]
pub struct Dataset {
    tokens: Vec<u32>,
    /// `tokens[..train_end]` trains, `tokens[train_end..]` validates.
    train_end: usize,
    seq: usize,
}

impl Dataset {
    /// Holds out the last `val_fraction` of `tokens` (0 for none); both parts
    /// must fit at least one window of `seq + 1` tokens.
    pub fn new(tokens: Vec<u32>, seq: usize, val_fraction: f64) -> Result<Dataset> {
        if !(0.0..0.5).contains(&val_fraction) {
            return Err(Error::Unsupported(format!(
                "validation fraction {val_fraction} must be in [0, 0.5)"
            )));
        }
        let window = seq + 1;
        let val = (tokens.len() as f64 * val_fraction).round() as usize;
        let train_end = tokens.len() - val;
        if train_end < window || (val > 0 && val < window) {
            return Err(Error::Unsupported(format!(
                "{} tokens with {} held out cannot fill training and validation windows of {window}: \
                 give more text, a shorter sequence, or a different validation fraction",
                tokens.len(),
                val
            )));
        }
        Ok(Dataset {
            tokens,
            train_end,
            seq,
        })
    }

    pub fn train_tokens(&self) -> usize {
        self.train_end
    }

    pub fn validation_tokens(&self) -> usize {
        self.tokens.len() - self.train_end
    }

    /// `batch` windows starting at uniform random offsets of the training part.
    pub fn train_batch(&self, rng: &mut SplitMix64, batch: usize) -> Batch {
        let starts: Vec<usize> = (0..batch)
            .map(|_| rng.below((self.train_end - self.seq) as u64) as usize)
            .collect();
        self.windows(&starts)
    }

    /// The validation part as consecutive, non-overlapping windows, in
    /// batches of up to `batch` (the last may be smaller): the same every time.
    pub fn validation_batches(&self, batch: usize) -> Vec<Batch> {
        let starts: Vec<usize> = (self.train_end..self.tokens.len().saturating_sub(self.seq))
            .step_by(self.seq)
            .collect();
        starts
            .chunks(batch.max(1))
            .map(|c| self.windows(c))
            .collect()
    }

    fn windows(&self, starts: &[usize]) -> Batch {
        let mut b = Batch {
            inputs: Vec::with_capacity(starts.len() * self.seq),
            targets: Vec::with_capacity(starts.len() * self.seq),
        };
        for &s in starts {
            b.inputs.extend_from_slice(&self.tokens[s..s + self.seq]);
            b.targets
                .extend_from_slice(&self.tokens[s + 1..s + 1 + self.seq]);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token i is i, so a window's values say where it came from.
    fn counting(n: u32, seq: usize, val: f64) -> Dataset {
        Dataset::new((0..n).collect(), seq, val).unwrap()
    }

    #[test]
    fn the_same_seed_draws_the_same_batches() {
        let d = counting(10_000, 16, 0.1);
        let (mut a, mut b) = (SplitMix64(7), SplitMix64(7));
        for _ in 0..5 {
            assert_eq!(d.train_batch(&mut a, 4), d.train_batch(&mut b, 4));
        }
        assert_ne!(
            d.train_batch(&mut SplitMix64(8), 4),
            d.train_batch(&mut SplitMix64(7), 4)
        );
    }

    #[test]
    fn training_windows_never_touch_validation_tokens() {
        let d = counting(2_000, 32, 0.2);
        let first_val = d.train_tokens() as u32;
        let mut rng = SplitMix64(1);
        for _ in 0..2_000 {
            let b = d.train_batch(&mut rng, 8);
            assert!(b.inputs.iter().chain(&b.targets).all(|&t| t < first_val));
            // targets are the inputs shifted by one
            for (row_in, row_tg) in b.inputs.chunks(32).zip(b.targets.chunks(32)) {
                assert!(row_in.iter().zip(row_tg).all(|(i, t)| t == &(i + 1)));
            }
        }
        for b in d.validation_batches(3) {
            assert!(b.inputs.iter().chain(&b.targets).all(|&t| t >= first_val));
        }
    }

    #[test]
    fn validation_windows_cover_the_tail_without_overlap() {
        let d = counting(1_000, 10, 0.1); // 100 held out: 9 windows of 10 + 1
        let batches = d.validation_batches(4);
        let starts: Vec<u32> = batches
            .iter()
            .flat_map(|b| b.inputs.chunks(10).map(|w| w[0]))
            .collect();
        assert_eq!(starts, (900..990).step_by(10).collect::<Vec<_>>());
        assert_eq!(
            batches
                .iter()
                .map(|b| b.inputs.len() / 10)
                .collect::<Vec<_>>(),
            [4, 4, 1]
        );
    }

    #[test]
    fn too_little_text_is_refused_with_advice() {
        assert!(
            Dataset::new((0..20).collect(), 32, 0.0)
                .unwrap_err()
                .to_string()
                .contains("give more text")
        );
        assert!(
            Dataset::new((0..100).collect(), 32, 0.1).is_err(),
            "10 held-out tokens cannot fill a window of 33"
        );
        assert!(Dataset::new((0..100).collect(), 32, 0.0).is_ok());
    }

    #[test]
    fn below_is_uniform_enough_and_in_range() {
        let mut rng = SplitMix64(3);
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            counts[rng.below(7) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }
}
