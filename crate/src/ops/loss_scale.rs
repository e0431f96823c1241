//! Dynamic loss scaling, as torch.cuda.amp.GradScaler does it: the loss's
//! gradient is multiplied by a scale S so small f16 gradients do not flush
//! to zero; a step whose gradients overflowed is skipped and S backs off,
//! and after `growth_interval` clean steps S grows. S is always a power of
//! two, so scaling and unscaling are exact in f32. The state lives on the
//! GPU (07_loss.wgsl reads S, finalize_grad_stats in 12_optimizer.wgsl
//! updates it), so no step waits on the host.

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The smallest and largest scales: 1/S must be a normal f32 too (AdamW
/// multiplies by clip/S, and a GPU may flush a subnormal factor to zero).
pub const MIN_SCALE: f32 = f32::MIN_POSITIVE; // 2^-126
pub const MAX_SCALE: f32 = 8.507059e37; // 2^126

/// The settings, GradScaler's names and defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct LossScaling {
    /// The first step's scale.
    pub init: f32,
    /// Clean steps in a row after which the scale grows.
    pub growth_interval: u32,
    /// Multiplies the scale after `growth_interval` clean steps.
    pub growth: f32,
    /// Multiplies the scale after a step with a non-finite gradient.
    pub backoff: f32,
}

impl Default for LossScaling {
    /// torch.cuda.amp.GradScaler's: init_scale 2^16, growth_factor 2,
    /// backoff_factor 0.5, growth_interval 2000.
    fn default() -> Self {
        LossScaling {
            init: 65536.0,
            growth_interval: 2000,
            growth: 2.0,
            backoff: 0.5,
        }
    }
}

/// Whether `x` is a power of two within [`MIN_SCALE`, `MAX_SCALE`].
fn power_of_two(x: f32) -> bool {
    (MIN_SCALE..=MAX_SCALE).contains(&x) && x.to_bits() & 0x7f_ffff == 0
}

impl LossScaling {
    /// Refuses factors that would make scaling inexact, or that do not grow and back off.
    pub fn validate(&self) -> Result<()> {
        let refuse = |what: &str, value: f32, want: &str| {
            Err(Error::Unsupported(format!(
                "loss scaling: {what} {value} must be {want}, so scaling and unscaling stay exact in f32"
            )))
        };
        if !power_of_two(self.init) {
            return refuse("init", self.init, "a power of two in [2^-126, 2^126]");
        }
        if !power_of_two(self.growth) || self.growth <= 1.0 {
            return refuse("growth", self.growth, "a power of two above 1");
        }
        if !power_of_two(self.backoff) || self.backoff >= 1.0 {
            return refuse("backoff", self.backoff, "a power of two below 1");
        }
        if self.growth_interval == 0 {
            return Err(Error::Unsupported(
                "loss scaling: growth_interval must be at least 1 step".into(),
            ));
        }
        Ok(())
    }

    /// The state before the first step.
    pub fn initial(&self) -> LossScale {
        LossScale {
            scale: self.init,
            ..LossScale::UNSCALED
        }
    }
}

/// The state across steps, 16 bytes on the GPU (`LossScale` in the shaders).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable, Serialize, Deserialize)]
pub struct LossScale {
    /// S: the loss's gradient is multiplied by it.
    pub scale: f32,
    /// Clean steps since the scale last changed or a step was skipped.
    pub clean: u32,
    /// Steps skipped so far.
    pub skipped: u32,
    /// Times the scale changed so far.
    pub changes: u32,
}

impl LossScale {
    /// S = 1: what the loss reads when the run does not scale.
    pub const UNSCALED: LossScale = LossScale {
        scale: 1.0,
        clean: 0,
        skipped: 0,
        changes: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_powers_of_two_are_accepted() {
        LossScaling::default().validate().unwrap();
        assert_eq!(MAX_SCALE, 2f32.powi(126));
        assert!((1.0 / MAX_SCALE).is_normal());
        for init in [MIN_SCALE, 1.0, 1024.0, MAX_SCALE] {
            let s = LossScaling {
                init,
                ..Default::default()
            };
            s.validate().unwrap();
        }
        for init in [
            0.0,
            -2.0,
            3.0,
            1e-40,
            2f32.powi(127),
            f32::INFINITY,
            f32::NAN,
        ] {
            let s = LossScaling {
                init,
                ..Default::default()
            };
            assert!(s.validate().is_err(), "init {init}");
        }
        let bad = [
            LossScaling {
                growth: 1.0,
                ..Default::default()
            },
            LossScaling {
                backoff: 0.75,
                ..Default::default()
            },
            LossScaling {
                growth_interval: 0,
                ..Default::default()
            },
        ];
        let e = bad.map(|s| s.validate().unwrap_err().to_string());
        assert!(e[1].contains("power of two"), "{}", e[1]);
    }

    #[test]
    fn settings_read_as_gradscaler_defaults() {
        let s: LossScaling = serde_json::from_str(r#"{"growthInterval": 10}"#).unwrap();
        assert_eq!(
            s,
            LossScaling {
                growth_interval: 10,
                ..Default::default()
            }
        );
    }
}
