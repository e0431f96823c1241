//! The model: its shape and presets (`config`), where its parameters live
//! (`layout`), the activations it saves (`activations`), and the forward
//! and backward schedules that record the kernels in the seed's order.

pub mod config;
pub mod layout;

pub use config::{BatchShape, Config, PRESETS};
pub use layout::{Chunk, ParamLayout, Role, Span, Tensor};
