//! Which GEMM variant serves which shape on this adapter.

use std::collections::HashMap;

use super::gemm::{BStorage, Epilogue, GemmModule, Layout, Params, TileVariant};
use crate::error::Result;
use crate::gpu::Gpu;
use crate::kernels::boundary::SITE_NONE;

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

/// Random operands of one product's shape, reused for every variant timed.
pub struct Operands {
    key: GemmKey,
    a: wgpu::Buffer,
    b: wgpu::Buffer,
    c: wgpu::Buffer,
}

impl Operands {
    pub fn new(gpu: &Gpu, key: GemmKey) -> Result<Operands> {
        let (m, n, k) = (key.m as u64, key.n as u64, key.k as u64);
        // random values: all-zero traffic can run faster than real data
        let random = |label: &str, words: u64| {
            let mut rng = crate::data::SplitMix64(words);
            let data: Vec<u32> = (0..words)
                .map(|_| {
                    // f32 in [1, 2), or two f16 in [1, 2)
                    let r = rng.next_u64();
                    if label == "b" && key.b == BStorage::F16 {
                        0x3c00_3c00 | (r as u32 & 0x03ff_03ff)
                    } else {
                        0x3f80_0000 | (r as u32 >> 9)
                    }
                })
                .collect();
            gpu.upload(label, &data)
        };
        let b_words = match key.b {
            BStorage::F32 => k * n,
            BStorage::F16 => (k * n).div_ceil(2),
        };
        Ok(Operands {
            key,
            a: random("a", m * k)?,
            b: random("b", b_words)?,
            c: random("c", m * n)?,
        })
    }
}

/// GPU seconds of one product of `ops`' shape in `variant`: the mean of
/// `reps` after a warm-up. Needs timestamp queries.
pub async fn time_variant(
    gpu: &Gpu,
    variant: TileVariant,
    ops: &Operands,
    reps: u32,
) -> Result<f64> {
    let key = ops.key;
    let module = GemmModule::new(gpu, variant, key.layout, key.b).await?;
    let (m, n, k) = (key.m, key.n, key.k);
    let (lda, ldb) = match key.layout {
        Layout::Forward => (k, k),
        Layout::Dx => (k, n),
        Layout::Dw => (m, n),
    };
    let p = Params {
        m,
        n,
        k,
        lda,
        ldb,
        ldc: n,
        site: SITE_NONE,
        _pad: 0,
    };
    let d = module.launch(
        gpu,
        Epilogue::Accumulate,
        p,
        &[
            ops.a.as_entire_binding(),
            ops.b.as_entire_binding(),
            ops.c.as_entire_binding(),
        ],
    )?;
    gpu.time_dispatches(&[&d], 1).await?;
    gpu.time_dispatches(&[&d], reps).await
}
