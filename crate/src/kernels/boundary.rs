//! What sf16 counts, in `Gpu::boundary_counts` (indices as 00_common.wgsl's
//! `SITE_*`): per forward boundary, where its `boundary` rounds a stored
//! value to Q1.15, the values clamped. (A recipe's quantized operands
//! count in `ops::products::OperandCounts`.)

use crate::error::Result;
use crate::gpu::{BOUNDARY_COUNTERS, Gpu};

/// `SITE_NONE`: a product that is no boundary (the backward's).
pub const SITE_NONE: u32 = u32::MAX;
/// `SITE_PROJECTION`
pub const SITE_PROJECTION: u32 = 2;

/// Values each forward boundary clamped to ±0.999 (`SITE_*` order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Clamped {
    pub embedding: u32,
    pub norm: u32,
    /// linear outputs: q|k|v, gate|up and the logits
    pub projection: u32,
    /// the residual stream after the o and down projections
    pub residual: u32,
    /// attention probabilities
    pub softmax: u32,
    /// attention outputs P·V
    pub attention: u32,
    /// SwiGLU outputs
    pub activation: u32,
}

/// Counters the kernels use: `Clamped`'s fields.
pub const SITES: u64 = 7;
const _: () = assert!(SITES <= BOUNDARY_COUNTERS);

impl Clamped {
    /// From the counters as `Gpu::boundary_counts` holds them.
    pub fn from_counters(c: &[u32; BOUNDARY_COUNTERS as usize]) -> Clamped {
        Clamped {
            embedding: c[0],
            norm: c[1],
            projection: c[2],
            residual: c[3],
            softmax: c[4],
            attention: c[5],
            activation: c[6],
        }
    }

    pub fn total(&self) -> u64 {
        let all = [
            self.embedding,
            self.norm,
            self.projection,
            self.residual,
            self.softmax,
            self.attention,
            self.activation,
        ];
        all.iter().map(|&c| c as u64).sum()
    }
}

/// Zeroes the counters, in `encoder`'s order.
pub fn clear(gpu: &Gpu, encoder: &mut wgpu::CommandEncoder) {
    encoder.clear_buffer(&gpu.boundary_counts, 0, None);
}

/// The counters now, after everything submitted so far.
pub async fn read(gpu: &Gpu) -> Result<Clamped> {
    let all: Vec<u32> = gpu.read_back((&gpu.boundary_counts).into()).await?;
    let mut counters = [0; BOUNDARY_COUNTERS as usize];
    counters.copy_from_slice(&all);
    Ok(Clamped::from_counters(&counters))
}
