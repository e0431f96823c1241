//! A synthetic token stream for tests and benchmarks: an order-1 Markov
//! chain whose rows put most mass on a few seeded successors, so a model
//! has something to learn (its entropy is well below ln V) without a corpus.

use crate::rng::SplitMix64;

/// `n` tokens below `vocab` from the chain of `seed`.
pub fn markov_tokens(vocab: u32, n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64(seed);
    let successors: Vec<[u32; 4]> = (0..vocab)
        .map(|_| std::array::from_fn(|_| rng.below(vocab as u64) as u32))
        .collect();
    let mut t = rng.below(vocab as u64) as u32;
    (0..n)
        .map(|_| {
            // 7/8: one of 4 favoured successors; 1/8: anything
            let r = rng.below(32) as usize;
            t = if r < 28 {
                successors[t as usize][r % 4]
            } else {
                rng.below(vocab as u64) as u32
            };
            t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_in_range() {
        let a = markov_tokens(301, 10_000, 5);
        assert_eq!(a, markov_tokens(301, 10_000, 5));
        assert_ne!(a, markov_tokens(301, 10_000, 6));
        assert!(a.iter().all(|&t| t < 301));
    }
}
