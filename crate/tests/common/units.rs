//! The unit GEMMs' tiling, staging and indexing, run with the fragment
//! operations emulated (kernels/units/syntax.rs) against the CPU twin
//! (`reference::units`: the f64 product of the same f16 inputs).

use half::f16;
use webtrain::kernels::units::{GemmLayout, GemmVariant, Staging, UnitGemm};
use webtrain::reference::units::gemm_errors;
use webtrain::rng::{SplitMix64, uniform};
use webtrain::{Gpu, Result};

/// f32 sums of exact f16 products in K order, against f64: measured at
/// most 2.5e-7 of Σ|a·b| (+|out₀|) on lavapipe at K ≤ 224 (every variant
/// below); the worst case, K·2^-24, is 1.3e-5. A fragment read transposed
/// is off by 0.7 of it.
const BOUND: f64 = 1e-6;

pub async fn unit_gemms_match_reference(gpu: &Gpu) -> Result<()> {
    use Staging::{Double, Scalar, Vec4};
    // small tiles of every staging, both edges, every layout and start;
    // more subgroups than fragments and the other way round
    let bases = [
        GemmVariant::staged(8, Scalar, (2, 1), (1, 2), 16),
        GemmVariant::staged(8, Vec4, (1, 2), (2, 1), 32),
        GemmVariant::staged(8, Double, (2, 2), (1, 1), 16),
        GemmVariant::staged(16, Vec4, (1, 2), (2, 1), 16),
        GemmVariant::staged(16, Double, (2, 1), (1, 2), 32),
    ];
    for base in bases {
        for layout in [GemmLayout::Nn, GemmLayout::Nt, GemmLayout::Tn] {
            for accumulate in [false, true] {
                let v = GemmVariant {
                    layout,
                    accumulate,
                    ..base.emulate()
                };
                let g = UnitGemm::new(gpu, v).await?;
                // 3 × 5 workgroup tiles, 7 K steps
                let (m, n, k) = (3 * v.bm(), 5 * v.bn(), 7 * v.k_step());
                let mut rng = SplitMix64(11);
                let mut halves = |count: u32| -> Vec<f16> {
                    let x = uniform(&mut rng, count as usize, -1.0, 1.0);
                    x.into_iter().map(f16::from_f32).collect()
                };
                let (a, b) = (halves(m * k), halves(k * n));
                // accumulating: out starts random; storing: a sentinel every output must replace
                let out0 = match accumulate {
                    true => uniform(&mut rng, (m * n) as usize, -1.0, 1.0),
                    false => vec![12345.0; (m * n) as usize],
                };
                let got = g.run_once(gpu, (&a, &b), &out0, (m, n, k)).await?;
                let e = gemm_errors(
                    (layout.a_t(), layout.b_t()),
                    (m as usize, n as usize, k as usize),
                    (&a, &b),
                    accumulate.then_some(out0.as_slice()),
                    &got,
                );
                assert!(
                    e.share <= BOUND,
                    "{} at {m}x{n}x{k}: error {:.2e} of Σ|a·b| (abs {:.2e})",
                    v.name(),
                    e.share,
                    e.abs
                );
            }
        }
    }
    Ok(())
}
