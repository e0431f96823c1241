//! The learning-rate schedule: linear warm-up to the peak, then cosine
//! decay to `min_ratio · peak` at the last step, flat after it.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LrSchedule {
    pub peak: f64,
    /// Steps of linear warm-up: step t ≤ warmup trains at peak·t/warmup.
    pub warmup: u32,
    /// The step the cosine reaches its floor.
    pub total: u32,
    pub min_ratio: f64,
}

impl LrSchedule {
    /// A constant rate: no warm-up, no decay.
    pub fn constant(lr: f64) -> Self {
        LrSchedule {
            peak: lr,
            warmup: 0,
            total: 0,
            min_ratio: 1.0,
        }
    }

    /// The rate of step `t` (from 1).
    pub fn lr(&self, t: u32) -> f64 {
        if t <= self.warmup {
            return self.peak * t as f64 / self.warmup as f64;
        }
        let floor = self.peak * self.min_ratio;
        if t >= self.total {
            return floor;
        }
        let progress = (t - self.warmup) as f64 / (self.total - self.warmup) as f64;
        floor + (self.peak - floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_linearly_then_decays_by_cosine_to_the_floor() {
        let s = LrSchedule {
            peak: 1e-3,
            warmup: 10,
            total: 110,
            min_ratio: 0.1,
        };
        assert_eq!(s.lr(1), 1e-4);
        assert_eq!(s.lr(10), 1e-3);
        assert!(
            (s.lr(60) - 0.55e-3).abs() < 1e-12,
            "halfway down: {}",
            s.lr(60)
        );
        assert!((s.lr(110) - 1e-4).abs() < 1e-15);
        assert_eq!(s.lr(500), s.lr(110));
        assert!(
            (11..110).all(|t| s.lr(t + 1) <= s.lr(t)),
            "monotone after warm-up"
        );
        assert_eq!(LrSchedule::constant(3e-4).lr(1), 3e-4);
        assert_eq!(LrSchedule::constant(3e-4).lr(1000), 3e-4);
    }
}
