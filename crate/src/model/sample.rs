//! Choosing the next token from a row of logits, on the host: greedy, or a
//! draw at a temperature among the k most likely tokens, from a seeded
//! `SplitMix64` so the same seed gives the same text.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::rng::SplitMix64;

/// How the next token is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// 0 takes the most likely token (greedy); otherwise the logits are
    /// divided by it before the softmax (below 1 sharpens, above flattens).
    pub temperature: f32,
    /// Draw only among the `top_k` most likely tokens; 0 means all of them.
    pub top_k: u32,
}

impl Sampling {
    pub const GREEDY: Sampling = Sampling {
        temperature: 0.0,
        top_k: 0,
    };

    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(Error::Unsupported(format!(
                "sampling: temperature {} must be finite and ≥ 0 (0 is greedy)",
                self.temperature
            )));
        }
        Ok(())
    }
}

/// The model's probabilities: the softmax of `logits` (one row, `[V]`, at
/// temperature 1, whatever the sampling), in f64.
pub fn softmax(logits: &[f32]) -> Vec<f64> {
    let max = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let exp: Vec<f64> = logits.iter().map(|&x| (x as f64 - max).exp()).collect();
    let total: f64 = exp.iter().sum();
    exp.into_iter().map(|e| e / total).collect()
}

/// The model's probability of `token` (`softmax`).
pub fn probability(logits: &[f32], token: u32) -> f64 {
    softmax(logits)[token as usize]
}

/// One token from `logits` (one row, `[V]`). Candidates are ranked by logit,
/// ties to the lower id, so a draw depends only on the logits and the
/// generator. Temperature 0 or `top_k` 1 take the first candidate and leave
/// `rng` untouched; otherwise one u64 is drawn. Non-finite logits (a
/// corrupt model) are an error rather than a plausible token.
pub fn sample(logits: &[f32], s: &Sampling, rng: &mut SplitMix64) -> Result<u32> {
    s.validate()?;
    if logits.is_empty() {
        return Err(Error::Unsupported("sampling: no logits".into()));
    }
    if let Some(i) = logits.iter().position(|x| !x.is_finite()) {
        return Err(Error::Unsupported(format!(
            "sampling: logit {i} is {}: the model's output is not finite",
            logits[i]
        )));
    }
    let first = |a: &u32, b: &u32| {
        logits[*b as usize]
            .total_cmp(&logits[*a as usize])
            .then(a.cmp(b))
    };
    let all = logits.len() as u32;
    let k = if s.top_k == 0 { all } else { s.top_k.min(all) };
    if s.temperature == 0.0 || k == 1 {
        return Ok((0..all).min_by(first).unwrap_or(0));
    }
    let mut candidates: Vec<u32> = (0..all).collect();
    if k < all {
        candidates.select_nth_unstable_by(k as usize - 1, first);
        candidates.truncate(k as usize);
        candidates.sort_unstable_by(first);
    }
    // softmax(l / T) over the candidates, in f64, relative to the largest
    let max = candidates
        .iter()
        .map(|&i| logits[i as usize])
        .fold(f32::NEG_INFINITY, f32::max) as f64;
    let t = s.temperature as f64;
    let weights: Vec<f64> = candidates
        .iter()
        .map(|&i| ((logits[i as usize] as f64 - max) / t).exp())
        .collect();
    let total: f64 = weights.iter().sum(); // ≥ 1: the largest weighs exp(0)
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total; // in [0, total)
    let mut sum = 0.0;
    for (&i, w) in candidates.iter().zip(&weights) {
        sum += w;
        if u < sum {
            return Ok(i);
        }
    }
    Ok(*candidates.last().unwrap_or(&0)) // u within rounding of total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 50 logits with a unique largest at 17 and a tie between 3 and 40.
    fn logits() -> Vec<f32> {
        let mut rng = SplitMix64(1);
        let mut l: Vec<f32> = (0..50)
            .map(|_| (rng.below(2001) as f32 - 1000.0) / 400.0)
            .collect();
        l[17] = 4.0;
        (l[3], l[40]) = (3.5, 3.5);
        l
    }

    #[test]
    fn greedy_picks_the_largest_logit_and_the_lower_id_on_ties() {
        let mut rng = SplitMix64(5);
        assert_eq!(sample(&logits(), &Sampling::GREEDY, &mut rng).unwrap(), 17);
        let mut l = logits();
        l[17] = 0.0;
        assert_eq!(sample(&l, &Sampling::GREEDY, &mut rng).unwrap(), 3);
        assert_eq!(rng, SplitMix64(5), "greedy draws nothing");
    }

    #[test]
    fn temperature_zero_and_top_k_one_agree() {
        let l = logits();
        let (mut a, mut b) = (SplitMix64(7), SplitMix64(7));
        let greedy = sample(
            &l,
            &Sampling {
                temperature: 0.0,
                top_k: 20,
            },
            &mut a,
        )
        .unwrap();
        let top1 = sample(
            &l,
            &Sampling {
                temperature: 1.5,
                top_k: 1,
            },
            &mut b,
        )
        .unwrap();
        assert_eq!((greedy, top1), (17, 17));
    }

    #[test]
    fn top_k_never_picks_outside_the_k_largest() {
        let l = logits();
        let mut ranked: Vec<u32> = (0..l.len() as u32).collect();
        ranked.sort_by(|&a, &b| l[b as usize].total_cmp(&l[a as usize]).then(a.cmp(&b)));
        let mut rng = SplitMix64(11);
        for k in [2u32, 3, 5, 10] {
            let allowed = &ranked[..k as usize];
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..2000 {
                // a high temperature makes every candidate likely
                let t = sample(
                    &l,
                    &Sampling {
                        temperature: 20.0,
                        top_k: k,
                    },
                    &mut rng,
                )
                .unwrap();
                assert!(
                    allowed.contains(&t),
                    "top_k {k} picked {t}, outside {allowed:?}"
                );
                seen.insert(t);
            }
            assert_eq!(
                seen.len(),
                k as usize,
                "top_k {k}: every candidate is drawn at T = 20"
            );
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_picks() {
        let l = logits();
        let s = Sampling {
            temperature: 1.0,
            top_k: 0,
        };
        let draw = |seed| {
            let mut rng = SplitMix64(seed);
            (0..100)
                .map(|_| sample(&l, &s, &mut rng).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    /// Over 20 000 draws from 4 tokens, each frequency is within 4 standard
    /// deviations of softmax(l / T).
    #[test]
    fn draws_follow_the_softmax_at_the_temperature() {
        let l = [1.0f32, 0.0, 2.0, -1.0];
        let s = Sampling {
            temperature: 0.7,
            top_k: 0,
        };
        let mut rng = SplitMix64(13);
        let n = 20_000;
        let mut counts = [0u32; 4];
        for _ in 0..n {
            counts[sample(&l, &s, &mut rng).unwrap() as usize] += 1;
        }
        let w: Vec<f64> = l.iter().map(|&x| (x as f64 / 0.7).exp()).collect();
        let total: f64 = w.iter().sum();
        for (i, &c) in counts.iter().enumerate() {
            let p = w[i] / total;
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (c as f64 - n as f64 * p).abs() < 4.0 * sd,
                "token {i}: {c} draws, expected {:.0} ± {sd:.0}",
                n as f64 * p
            );
        }
    }

    #[test]
    fn bad_settings_and_logits_are_errors() {
        let mut rng = SplitMix64(1);
        let s = Sampling {
            temperature: 1.0,
            top_k: 0,
        };
        assert!(sample(&[0.0, f32::NAN], &s, &mut rng).is_err());
        assert!(sample(&[0.0, f32::INFINITY], &Sampling::GREEDY, &mut rng).is_err());
        assert!(sample(&[], &s, &mut rng).is_err());
        assert!(
            sample(
                &[0.0],
                &Sampling {
                    temperature: -1.0,
                    top_k: 0
                },
                &mut rng
            )
            .is_err()
        );
        assert!(
            sample(
                &[0.0],
                &Sampling {
                    temperature: f32::NAN,
                    top_k: 0
                },
                &mut rng
            )
            .is_err()
        );
    }
}
