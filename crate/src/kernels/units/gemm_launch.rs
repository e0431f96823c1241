//! A GEMM variant built on one device, through the pipeline cache
//! (`gpu::pipeline`): its module compiled once per device, its pipeline
//! created by its first dispatch.

use half::f16;

use super::gemm::GemmVariant;
use crate::error::{Error, Result};
use crate::gpu::{
    BufferRange, Dispatch, Gpu, Grid, Kernel, KernelDesc, Slot, build_composed_kernels,
};
use crate::shaders::{Composed, F16Storage};

/// `Params` of the unit GEMM files.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    m: u32,
    n: u32,
    k: u32,
    pad: u32,
}

const GEMM: KernelDesc = KernelDesc {
    entry: "gemm",
    slots: &[
        Slot::Uniform(0),
        Slot::Read(1, "a"),        // a: op(A) [M, K], f16, in the layout
        Slot::Read(2, "b"),        // b: op(B) [K, N], f16, in the layout
        Slot::ReadWrite(3, "out"), // out: [M, N] f32
        Slot::Read(4, "scale"),    // scale: the epilogue's s and 1 / s
    ],
};

/// A built variant.
pub struct UnitGemm {
    pub variant: GemmVariant,
    kernel: Kernel,
    /// s = 1: the plain product.
    unscaled: wgpu::Buffer,
}

impl UnitGemm {
    /// Compiles `variant` for `gpu`'s subgroups; a workgroup the device
    /// cannot hold, or a source its compiler refuses, is an error naming
    /// the variant.
    pub async fn new(gpu: &Gpu, variant: GemmVariant) -> Result<UnitGemm> {
        check_limits(gpu, &variant).map_err(|message| Error::Gpu {
            op: format!("unit GEMM {}", variant.name()),
            message,
        })?;
        let source = variant.source(variant.lanes(gpu))?;
        let file = (variant.file(), F16Storage::Native);
        let [kernel] =
            build_composed_kernels(gpu, file, Composed::standalone(source), [GEMM]).await?;
        let unscaled = gpu.upload("unit_gemm.unscaled", &[1.0f32, 1.0])?;
        Ok(UnitGemm {
            variant,
            kernel,
            unscaled,
        })
    }

    /// The pipeline created now, its refusal an error (see `Kernel::prepare`).
    pub async fn prepare(&self, gpu: &Gpu) -> Result<()> {
        self.kernel.prepare(gpu).await
    }

    /// Why (m, n, k) does not fit the variant's tiles, if it does not.
    pub fn misfit(&self, m: u32, n: u32, k: u32) -> Option<String> {
        let v = &self.variant;
        let (bm, bn, ks) = (v.bm(), v.bn(), v.k_step());
        (!m.is_multiple_of(bm) || !n.is_multiple_of(bn) || !k.is_multiple_of(ks) || k == 0)
            .then(|| format!("{m}x{n}x{k} is not a multiple of the {bm}x{bn}x{ks} tile"))
    }

    /// One product on host data: `out0` (M·N, what `out` starts as)
    /// uploaded with `a` and `b`, the product run, `out` read back.
    pub async fn run_once(
        &self,
        gpu: &Gpu,
        (a, b): (&[f16], &[f16]),
        out0: &[f32],
        mnk: (u32, u32, u32),
    ) -> Result<Vec<f32>> {
        let (ab, bb, ob) = (
            gpu.upload("a", a)?,
            gpu.upload("b", b)?,
            gpu.upload("out", out0)?,
        );
        let d = self.dispatch(gpu, (&ab).into(), (&bb).into(), (&ob).into(), mnk)?;
        gpu.run(&[&d]).await?;
        gpu.read_back((&ob).into()).await
    }

    /// `out[m, n] (=|+=) op(a) · op(b)`: a holds M·K halves, b K·N halves
    /// (in the variant's layout), out M·N f32.
    pub fn dispatch(
        &self,
        gpu: &Gpu,
        a: BufferRange,
        b: BufferRange,
        out: BufferRange,
        mnk: (u32, u32, u32),
    ) -> Result<Dispatch> {
        self.dispatch_scaled(gpu, (a, b), out, (&self.unscaled).into(), mnk)
    }

    /// `out[m, n] = s·(op(a) · op(b))` (`+ out`, accumulating), s and 1 / s
    /// the two f32 of `scale`.
    pub fn dispatch_scaled(
        &self,
        gpu: &Gpu,
        (a, b): (BufferRange, BufferRange),
        out: BufferRange,
        scale: BufferRange,
        (m, n, k): (u32, u32, u32),
    ) -> Result<Dispatch> {
        let op = "unit_gemm";
        if let Some(why) = self.misfit(m, n, k) {
            return Err(Error::Unsupported(format!("{op}: {why}")));
        }
        let (gx, gy) = (n / self.variant.bn(), m / self.variant.bm());
        let max = gpu.limits.max_compute_workgroups_per_dimension;
        if gx > max || gy > max {
            return Err(Error::Limit {
                op,
                what: "workgroups per dimension".into(),
                needed: gx.max(gy) as u64,
                limit: max as u64,
            });
        }
        let params = gpu.uniform(op, &Params { m, n, k, pad: 0 });
        let (m, n, k) = (m as u64, n as u64, k as u64);
        let binds = [
            (&params).into(),
            a.needs(2 * m * k),
            b.needs(2 * k * n),
            out.needs(4 * m * n),
            scale.needs(8),
        ];
        self.kernel
            .dispatch(gpu, op, &binds, Grid { x: gx, y: gy, z: 1 })
    }
}

/// Whether `variant`'s workgroup fits the device's limits; why not.
fn check_limits(gpu: &Gpu, variant: &GemmVariant) -> std::result::Result<(), String> {
    let wg = variant.invocations(variant.lanes(gpu));
    let l = &gpu.limits;
    if wg > l.max_compute_invocations_per_workgroup || wg > l.max_compute_workgroup_size_x {
        return Err(format!("{wg} invocations per workgroup exceed the limits"));
    }
    if variant.workgroup_bytes() > l.max_compute_workgroup_storage_size {
        return Err(format!(
            "{} B of workgroup memory exceed the limit, {} B",
            variant.workgroup_bytes(),
            l.max_compute_workgroup_storage_size
        ));
    }
    Ok(())
}
