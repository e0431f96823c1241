//! The cooperative-matrix GEMMs' tiling, staging and indexing, run with
//! the fragment operations emulated (kernels/linear/coop.rs `EMULATION`)
//! wherever shader-f16 is, against the CPU twin (`coop::check`: the f64
//! product of the same f16 inputs).

use webtrain::kernels::linear::coop::{CoopGemm, CoopLayout, CoopVariant, Staging, check};
use webtrain::{F16Storage, Gpu, Result};

/// f32 sums of exact f16 products in K order, against f64: measured at
/// most 2.5e-7 of Σ|a·b| (+|out₀|) on lavapipe at K ≤ 224 (every variant
/// below); the worst case, K·2^-24, is 1.3e-5. A fragment read transposed
/// is off by 0.7 of it.
const BOUND: f64 = 1e-6;

pub async fn coop_emulated_matches_reference(gpu: &Gpu) -> Result<()> {
    if !gpu.caps.shader_f16 {
        eprintln!(
            "skipped: no shader-f16 ({}), which the coop files read",
            gpu.info.name
        );
        return Ok(());
    }
    if gpu.f16_storage() == F16Storage::Packed {
        return Ok(()); // the coop files read f16 in either storage mode: once is enough
    }
    use Staging::{Double, Scalar, Vec4};
    // small tiles of every staging, both edges, every layout and start;
    // more subgroups than fragments and the other way round
    let bases = [
        CoopVariant::staged(8, Scalar, (2, 1), (1, 2), 16),
        CoopVariant::staged(8, Vec4, (1, 2), (2, 1), 32),
        CoopVariant::staged(8, Double, (2, 2), (1, 1), 16),
        CoopVariant::staged(16, Vec4, (1, 2), (2, 1), 16),
        CoopVariant::staged(16, Double, (2, 1), (1, 2), 32),
    ];
    for base in bases {
        for layout in [CoopLayout::Nn, CoopLayout::Nt, CoopLayout::Tn] {
            for accumulate in [false, true] {
                let v = CoopVariant {
                    layout,
                    accumulate,
                    ..base.emulate()
                };
                let g = CoopGemm::new(gpu, v).await?;
                let (shape, e) = check(gpu, &g).await?;
                assert!(
                    e.share <= BOUND,
                    "{} at {shape}: error {:.2e} of Σ|a·b| (abs {:.2e})",
                    v.name(),
                    e.share,
                    e.abs
                );
            }
        }
    }
    Ok(())
}
