//! Which GEMM variant serves which shape on this adapter.

use std::collections::HashMap;

use super::gemm::{BStorage, Layout, TileVariant};
use crate::gpu::Gpu;

/// A product's shape as the tuner keys it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmKey {
    pub layout: Layout,
    pub b: BStorage,
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

impl GemmKey {
    pub fn new(layout: Layout, b: BStorage, m: u32, n: u32, k: u32) -> GemmKey {
        GemmKey { layout, b, m, n, k }
    }
}

/// The variant for shapes nobody timed: the first of `TileVariant::ALL`
/// that fits the adapter in every layout.
pub fn rule(gpu: &Gpu) -> TileVariant {
    TileVariant::ALL
        .into_iter()
        .find(|v| Layout::ALL.iter().all(|&l| v.fits(&gpu.limits, l)))
        .unwrap_or(TileVariant::ALL[TileVariant::ALL.len() - 1])
}

/// The picks known for this adapter.
pub fn picks(_gpu: &Gpu) -> HashMap<GemmKey, TileVariant> {
    HashMap::new()
}
