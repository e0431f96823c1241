//! The matrix-unit kernels, one family: f16 products with f32 accumulation
//! on tensor cores. Every unit shader is written once with neutral
//! fragment operations and spelled by one speller (`syntax`) for wgpu's
//! cooperative matrices (natively), Dawn's subgroup matrices (Chrome) or
//! plain code (emulated: any adapter with shader-f16, which is how CI
//! proves them). `gemm*` are the GEMMs (variants, composition, launcher)
//! that `kernels::linear` runs a recipe's products on; `attention` holds
//! attention's forward and backward on the units. Their CPU twins are in
//! `reference::units` and `reference::attention`.

pub mod attention;
pub mod gemm;
mod gemm_launch;
mod gemm_source;
pub mod syntax;
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;

pub use gemm::{GemmLayout, GemmVariant, Staging};
pub use gemm_launch::UnitGemm;
pub use syntax::Syntax;

use crate::error::Result;

/// One composed kernel and what its pipeline needs of a device.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ComposedKernel {
    pub name: String,
    pub entry: &'static str,
    pub source: String,
    pub invocations: u32,
    pub workgroup_bytes: u32,
}

/// The GEMM variants the checks compile for fragments of `edge`: every
/// staging, the trainer's tiles and two smaller ones, in every layout and
/// accumulator start (wgpu's syntax; `webtrain bench --what coop` keeps
/// its own catalogue).
pub fn checked_gemms(edge: u32) -> Vec<GemmVariant> {
    let mut out = Vec::new();
    for staging in [
        Staging::Global,
        Staging::Scalar,
        Staging::Vec4,
        Staging::Double,
    ] {
        for (sg, frags, bk) in [
            ((4, 2), (2, 4), 16),
            ((2, 2), (2, 2), 32),
            ((2, 2), (1, 1), 32),
        ] {
            let base = match staging {
                Staging::Global => GemmVariant::global(edge, sg, frags),
                _ => GemmVariant::staged(edge, staging, sg, frags, bk),
            };
            for layout in [GemmLayout::Nn, GemmLayout::Nt, GemmLayout::Tn] {
                for accumulate in [false, true] {
                    out.push(GemmVariant {
                        layout,
                        accumulate,
                        ..base
                    });
                }
            }
        }
    }
    out
}

/// Every unit kernel the page may compile, in Dawn's syntax on subgroups
/// of `subgroup` invocations: the staged GEMMs of `checked_gemms` for
/// fragments of 16 and 8, and attention's kernels; for the check that
/// Tint accepts them (tests/e2e/dawn.test.mjs).
pub fn dawn_sources(subgroup: u32) -> Result<Vec<ComposedKernel>> {
    let mut out = Vec::new();
    for v in [16, 8].into_iter().flat_map(checked_gemms) {
        let v = v.in_dawn_syntax();
        if v.unbuildable(subgroup).is_some() {
            continue; // global fragments, or quads that do not divide
        }
        out.push(ComposedKernel {
            name: v.name(),
            entry: "gemm",
            source: v.source(subgroup)?,
            invocations: v.invocations(subgroup),
            workgroup_bytes: v.workgroup_bytes(),
        });
    }
    out.extend(attention::dawn_sources(subgroup)?);
    Ok(out)
}
