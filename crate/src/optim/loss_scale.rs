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
    /// At `settings.init`, no steps counted.
    pub fn new(gpu: &Gpu, settings: LossScaling) -> Result<LossScaler> {
        settings.validate()?;
        Ok(LossScaler {
            settings,
            state: gpu.upload("loss_scale", &[settings.initial()])?,
        })
    }

    /// The state after every step submitted so far.
    pub async fn read(&self, gpu: &Gpu) -> Result<LossScale> {
        Ok(gpu.read_back::<LossScale>((&self.state).into()).await?[0])
    }

    /// Continues from `state` (a checkpoint's) at the next submission.
    pub fn write(&self, gpu: &Gpu, state: &LossScale) {
        gpu.queue
            .write_buffer(&self.state, 0, bytemuck::bytes_of(state));
    }
}
