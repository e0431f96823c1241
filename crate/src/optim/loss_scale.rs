//! The run's loss scale on the GPU: its settings and the 16-byte state
//! that the loss head reads and `finalize_grad_stats` updates every step,
//! read and restored whole by checkpoints and precision switches.

use crate::error::Result;
use crate::gpu::Gpu;
pub use crate::ops::loss_scale::{LossScale, LossScaling};

pub struct LossScaler {
    pub settings: LossScaling,
    /// One `LossScale`.
    pub state: wgpu::Buffer,
}

impl LossScaler {
    /// Starting from `state` (`settings.initial()` for a new run).
    pub fn new(gpu: &Gpu, settings: LossScaling, state: LossScale) -> Result<LossScaler> {
        settings.validate()?;
        Ok(LossScaler {
            settings,
            state: gpu.upload("loss_scale", &[state])?,
        })
    }

    /// The state after every step submitted so far.
    pub async fn read(&self, gpu: &Gpu) -> Result<LossScale> {
        Ok(gpu.read_back::<LossScale>((&self.state).into()).await?[0])
    }
}
