//! One launcher module per shader file: it owns the file's pipelines and
//! layouts, checks shapes, and turns buffers into [`Dispatch`]es.
//!
//! [`Dispatch`]: crate::gpu::Dispatch

pub mod activation;
pub mod cast;
pub mod infrastructure;
pub mod loss;

pub use activation::Activation;
pub use cast::Cast;
pub use infrastructure::Infrastructure;
pub use loss::Loss;
