//! The variants `webtrain bench --what coop` times (`kernels::units::gemm`).

use webtrain::kernels::units::{GemmLayout, GemmVariant, Staging};

/// The variants `webtrain bench --what coop` tries for fragments of
/// `edge`, least risky first: a failure that loses the device then costs
/// the fewest results: the first probe's best (staged-v4 128x128x32 sg4x2
/// f2x4, 79–100 TFLOP/s on an H200) and sg2x2 f4x4 as references, then
/// more subgroups and bigger tiles, K slices of 16, double-buffered
/// staging, and the trainer's layouts.
pub fn bench_variants(edge: u32) -> Vec<GemmVariant> {
    use Staging::{Double, Vec4};
    let e = edge;
    let best = GemmVariant::staged(e, Vec4, (4, 2), (2, 4), 32);
    let double = GemmVariant::staged(e, Double, (4, 2), (2, 4), 32);
    let all = [GemmLayout::Nt, GemmLayout::Tn];
    let mut v = vec![
        // references (the first probe's)
        best,
        GemmVariant::staged(e, Vec4, (2, 2), (4, 4), 32),
        // more subgroups, bigger tiles
        GemmVariant::staged(e, Vec4, (4, 2), (2, 2), 32), // 128x64, 8 subgroups
        GemmVariant::staged(e, Vec4, (2, 4), (4, 2), 32), // 128x128 transposed
        GemmVariant::staged(e, Vec4, (4, 4), (2, 2), 32), // 128x128, 16 subgroups
        GemmVariant::staged(e, Vec4, (4, 2), (4, 4), 32), // 256x128
        GemmVariant::staged(e, Vec4, (2, 4), (4, 4), 32), // 128x256
        GemmVariant::staged(e, Vec4, (8, 2), (2, 4), 32), // 256x128, 16 subgroups
        // K slices of 16 (more barriers, less staging)
        GemmVariant::staged(e, Vec4, (4, 2), (2, 4), 16),
        // double-buffered staging
        double,
        GemmVariant::staged(e, Double, (4, 2), (2, 4), 16),
        GemmVariant::staged(e, Double, (4, 4), (2, 2), 32),
        GemmVariant::staged(e, Double, (2, 2), (4, 4), 32),
        GemmVariant::staged(e, Double, (4, 2), (4, 4), 16), // 256x128
    ];
    // the trainer's layouts (nn above is dX = dY·W): nt its forward
    // Y = X·Wᵀ, tn += its weight gradient dW += dYᵀ·X
    for base in [best, double] {
        for layout in all {
            v.push(base.with_layout(layout));
        }
        v.push(base.with_layout(GemmLayout::Tn).accumulating());
    }
    v
}

/// The first probe's other variants (dominated on an H200): `bench --what
/// coop --only NAME` can still pick them.
pub fn earlier_variants(edge: u32) -> Vec<GemmVariant> {
    use Staging::{Scalar, Vec4};
    let e = edge;
    let big = GemmVariant::staged(e, Vec4, (2, 2), (4, 4), 32);
    vec![
        GemmVariant::global(e, (1, 1), (1, 1)).accumulating(),
        GemmVariant::global(e, (1, 1), (1, 1)),
        GemmVariant::global(e, (2, 2), (2, 2)),
        GemmVariant::global(e, (2, 2), (4, 2)),
        GemmVariant::staged(e, Scalar, (2, 2), (4, 4), 32),
        GemmVariant::staged(e, Vec4, (2, 2), (2, 2), 32),
        GemmVariant::staged(e, Vec4, (2, 2), (4, 4), 64),
        big.with_layout(GemmLayout::Nt),
        big.with_layout(GemmLayout::Tn),
        big.with_layout(GemmLayout::Tn).accumulating(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's default variants all build on NVIDIA's subgroups of 32
    /// within an H200's limits (1024 invocations, 49152 B of workgroup
    /// memory); `--nocapture` prints each one's size.
    #[test]
    fn bench_variants_fit_nvidia() {
        for v in bench_variants(16).into_iter().chain(earlier_variants(16)) {
            let (wg, bytes) = (v.invocations(32), v.workgroup_bytes());
            eprintln!("{:<46} {wg:>5} invocations {bytes:>6} B", v.name());
            assert!(v.source(32).is_ok(), "{}", v.name());
            assert!(wg <= 1024 && bytes <= 49152, "{}", v.name());
        }
    }
}
