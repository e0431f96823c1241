//! The GEMM of 03_linear.wgsl: its layouts and tile variants, each a module
//! composed with the variant's constants, and one launch per product.

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::gpu::{Bind, Dispatch, Gpu, Grid, Kernel, KernelDesc, Slot, build_variant_kernels};
use crate::shaders::{LINEAR, LINEAR_B16, LINEAR_B32, Module};

/// Which operand is contiguous along K: one compiled layout per product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `Y = X·Wᵀ`: A and B both K-contiguous.
    Forward,
    /// `dX = dY·W`: A K-contiguous, B N-contiguous.
    Dx,
    /// `dW += dYᵀ·X`: A M-contiguous, B N-contiguous.
    Dw,
}

impl Layout {
    pub const ALL: [Layout; 3] = [Layout::Forward, Layout::Dx, Layout::Dw];

    fn a_k_fast(self) -> bool {
        self != Layout::Dw
    }

    fn b_k_fast(self) -> bool {
        self == Layout::Forward
    }

    pub fn name(self) -> &'static str {
        match self {
            Layout::Forward => "forward",
            Layout::Dx => "dx",
            Layout::Dw => "dw",
        }
    }
}

/// A workgroup tile `tm × tn` over K slices of `tk`, each invocation owning
/// `rm × rn` outputs. Every variant sums each output's products in the
/// same order (fma, ascending K), so all give bit-identical results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileVariant {
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub rm: u32,
    pub rn: u32,
}

const fn tile(tm: u32, tn: u32, tk: u32, rm: u32, rn: u32) -> TileVariant {
    TileVariant { tm, tn, tk, rm, rn }
}

impl TileVariant {
    /// Every variant the tuner may choose (kernels/linear/tune.rs), each
    /// tested against the CPU twin.
    /// The first that fits an adapter serves shapes nobody timed (`tune::rule`).
    pub const ALL: [TileVariant; 6] = [
        tile(128, 128, 16, 8, 8),
        tile(128, 128, 8, 8, 8),
        tile(128, 64, 8, 8, 4),
        tile(64, 128, 8, 4, 8),
        tile(64, 64, 16, 4, 4),
        tile(64, 64, 8, 8, 8),
    ];

    /// `128x128x8/8x8`: tile, K slice, micro-tile.
    pub fn name(&self) -> String {
        format!(
            "{}x{}x{}/{}x{}",
            self.tm, self.tn, self.tk, self.rm, self.rn
        )
    }

    pub fn parse(name: &str) -> Option<TileVariant> {
        TileVariant::ALL.into_iter().find(|v| v.name() == name)
    }

    pub fn invocations(&self) -> u32 {
        (self.tm / self.rm) * (self.tn / self.rn)
    }

    /// Words added to a staged row that is stored transposed (K-contiguous
    /// operand): 4 puts the rows of one store on other banks.
    fn pads(&self, layout: Layout) -> (u32, u32) {
        let pad = |transposed: bool| if transposed { 4 } else { 0 };
        (pad(layout.a_k_fast()), pad(layout.b_k_fast()))
    }

    /// Workgroup memory of the staged tiles.
    pub fn workgroup_bytes(&self, layout: Layout) -> u32 {
        let (pa, pb) = self.pads(layout);
        4 * self.tk * (self.tm + pa + self.tn + pb)
    }

    /// Whether the adapter's limits allow this variant in `layout`.
    pub fn fits(&self, limits: &wgpu::Limits, layout: Layout) -> bool {
        self.invocations() <= limits.max_compute_invocations_per_workgroup
            && self.invocations() <= limits.max_compute_workgroup_size_x
            && self.workgroup_bytes(layout) <= limits.max_compute_workgroup_storage_size
    }

    /// The WGSL constants that make 03_linear.wgsl this variant in `layout`.
    fn constants(&self, layout: Layout) -> String {
        let (pa, pb) = self.pads(layout);
        format!(
            "const A_K_FAST: bool = {};\nconst B_K_FAST: bool = {};\n\
             const TM: u32 = {}u;\nconst TN: u32 = {}u;\nconst TK: u32 = {}u;\n\
             const RM: u32 = {}u;\nconst RN: u32 = {}u;\n\
             const PAD_A: u32 = {pa}u;\nconst PAD_B: u32 = {pb}u;\n",
            layout.a_k_fast(),
            layout.b_k_fast(),
            self.tm,
            self.tn,
            self.tk,
            self.rm,
            self.rn
        )
    }
}

/// How B is stored: f32, or the f16 mirror (either storage mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BStorage {
    F32,
    F16,
}

impl BStorage {
    pub fn name(self) -> &'static str {
        match self {
            BStorage::F32 => "f32",
            BStorage::F16 => "f16",
        }
    }
}

/// A product's shape, and what the tuner keys a variant by.
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

    /// The products of a linear layer `[rows, d_in] → [rows, d_out]` whose
    /// weights are stored as `w`: forward, dX (both read the weights) and
    /// dW (reads f32 activations).
    pub fn of_linear(rows: u32, d_in: u32, d_out: u32, w: BStorage) -> [GemmKey; 3] {
        [
            GemmKey::new(Layout::Forward, w, rows, d_out, d_in),
            GemmKey::new(Layout::Dx, w, rows, d_in, d_out),
            GemmKey::new(Layout::Dw, BStorage::F32, d_out, d_in, rows),
        ]
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub(super) struct Params {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    /// Leading dimensions: the stride of A's, B's and C's slow index.
    pub lda: u32,
    pub ldb: u32,
    pub ldc: u32,
    /// The output's forward boundary (`boundary::SITE_*`), or `SITE_NONE`.
    pub site: u32,
    /// Product z of a batch reads A at `a_at + z·a_stride`, B at
    /// `b_at + z·b_stride`, writes C at `c_at + z·c_stride` (elements).
    pub a_at: u32,
    pub a_stride: u32,
    pub b_at: u32,
    pub b_stride: u32,
    pub c_at: u32,
    pub c_stride: u32,
    pub _pad: [u32; 3],
}

impl Params {
    /// `key`'s product over dense operands, its output at boundary `site`:
    /// the leading dimensions follow from the layout.
    pub fn of(key: &GemmKey, site: u32) -> Params {
        let (m, n, k) = (key.m, key.n, key.k);
        let (lda, ldb) = match key.layout {
            Layout::Forward => (k, k),
            Layout::Dx => (k, n),
            Layout::Dw => (m, n),
        };
        Params {
            m,
            n,
            k,
            lda,
            ldb,
            ldc: n,
            site,
            ..Params::zeroed()
        }
    }
}

/// The slots of `matmul` and `matmul_accumulate`, named as a layout's
/// product names its operands.
macro_rules! slots {
    ($a:literal, $b:literal, $c:literal) => {
        &[
            Slot::Uniform(0),       // params
            Slot::Read(1, $a),      // a: A
            Slot::Read(2, $b),      // b: B, f32 or f16 (prelude)
            Slot::ReadWrite(4, $c), // c: [M, N], stored or accumulated
            Slot::BoundaryCounts,
        ]
    };
}
const FORWARD_SLOTS: &[Slot] = slots!("x", "w", "y");
const DX_SLOTS: &[Slot] = slots!("dy", "w", "dx");
const DW_SLOTS: &[Slot] = slots!("dy", "x", "dw");
/// The forward's `Y = R + X·Wᵀ`.
const ADD: KernelDesc = KernelDesc {
    entry: "matmul_add",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "x"),        // a
        Slot::Read(2, "w"),        // b
        Slot::Read(3, "residual"), // [M, N]
        Slot::ReadWrite(4, "y"),   // c: [M, N]
        Slot::BoundaryCounts,
    ],
};

impl Layout {
    /// `entry`'s kernel (`matmul` or `matmul_accumulate`) in this layout.
    fn desc(self, entry: &'static str) -> KernelDesc {
        let slots = match self {
            Layout::Forward => FORWARD_SLOTS,
            Layout::Dx => DX_SLOTS,
            Layout::Dw => DW_SLOTS,
        };
        KernelDesc { entry, slots }
    }
}

/// What a product does with C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Epilogue {
    Store,
    Add,
    Accumulate,
}

/// One variant in one layout and B storage: the epilogues that layout uses
/// (forward all three, dX store and accumulate, dW accumulate).
pub(super) struct GemmModule {
    pub variant: TileVariant,
    pub layout: Layout,
    pub b: BStorage,
    store: Option<Kernel>,
    add: Option<Kernel>,
    accumulate: Option<Kernel>,
}

impl GemmModule {
    pub async fn new(
        gpu: &Gpu,
        variant: TileVariant,
        layout: Layout,
        b: BStorage,
    ) -> Result<GemmModule> {
        Self::build(gpu, variant, layout, b, false).await
    }

    /// Only the accumulate epilogue: what the tuner times.
    pub async fn accumulate_only(
        gpu: &Gpu,
        variant: TileVariant,
        layout: Layout,
        b: BStorage,
    ) -> Result<GemmModule> {
        Self::build(gpu, variant, layout, b, true).await
    }

    async fn build(
        gpu: &Gpu,
        variant: TileVariant,
        layout: Layout,
        b: BStorage,
        accumulate_only: bool,
    ) -> Result<GemmModule> {
        if !variant.fits(&gpu.limits, layout) {
            return Err(Error::Limit {
                op: "linear",
                what: format!(
                    "GEMM variant {} ({} invocations, {} B of workgroup memory)",
                    variant.name(),
                    variant.invocations(),
                    variant.workgroup_bytes(layout)
                ),
                needed: variant.workgroup_bytes(layout) as u64,
                limit: gpu.limits.max_compute_workgroup_storage_size as u64,
            });
        }
        let module = Module {
            prelude: Some(match b {
                BStorage::F32 => LINEAR_B32,
                BStorage::F16 => LINEAR_B16,
            }),
            file: LINEAR,
        };
        let constants = variant.constants(layout);
        let (store, accumulate) = (layout.desc("matmul"), layout.desc("matmul_accumulate"));
        let (store, add, accumulate) = match layout {
            _ if accumulate_only => {
                let [c] = build_variant_kernels(gpu, module, &constants, [accumulate]).await?;
                (None, None, Some(c))
            }
            Layout::Forward => {
                let [s, a, c] =
                    build_variant_kernels(gpu, module, &constants, [store, ADD, accumulate])
                        .await?;
                (Some(s), Some(a), Some(c))
            }
            Layout::Dx => {
                let [s, c] =
                    build_variant_kernels(gpu, module, &constants, [store, accumulate]).await?;
                (Some(s), None, Some(c))
            }
            Layout::Dw => {
                let [c] = build_variant_kernels(gpu, module, &constants, [accumulate]).await?;
                (None, None, Some(c))
            }
        };
        Ok(GemmModule {
            variant,
            layout,
            b,
            store,
            add,
            accumulate,
        })
    }

    /// One dispatch over the tiles of C: `buffers` are what the epilogue's
    /// kernel binds after the params (checked as `op`'s).
    pub fn launch(
        &self,
        gpu: &Gpu,
        op: &'static str,
        epilogue: Epilogue,
        p: Params,
        buffers: &[Bind],
    ) -> Result<Dispatch> {
        self.launch_batch(gpu, op, epilogue, (p, 1), buffers)
    }

    /// `batch` products of `p`'s shape in one dispatch, each at its strides.
    pub fn launch_batch(
        &self,
        gpu: &Gpu,
        op: &'static str,
        epilogue: Epilogue,
        (p, batch): (Params, u32),
        buffers: &[Bind],
    ) -> Result<Dispatch> {
        let kernel = match epilogue {
            Epilogue::Store => &self.store,
            Epilogue::Add => &self.add,
            Epilogue::Accumulate => &self.accumulate,
        };
        let kernel = kernel.as_ref().ok_or_else(|| {
            Error::Unsupported(format!(
                "linear: no {epilogue:?} epilogue in the {} layout",
                self.layout.name()
            ))
        })?;
        let v = self.variant;
        let grid = Grid {
            x: p.n.div_ceil(v.tn).max(1),
            y: p.m.div_ceil(v.tm).max(1),
            z: batch.max(1),
        };
        let max = gpu.limits.max_compute_workgroups_per_dimension;
        if grid.x > max || grid.y > max || grid.z > max {
            return Err(Error::Limit {
                op: kernel.entry,
                what: "tiles per dimension".into(),
                needed: grid.x.max(grid.y).max(grid.z) as u64,
                limit: max as u64,
            });
        }
        let params = gpu.uniform(kernel.entry, &p);
        let binds: Vec<Bind> = std::iter::once((&params).into())
            .chain(buffers.iter().copied())
            .collect();
        kernel.dispatch(gpu, op, &binds, grid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What 03_linear.wgsl assumes of a variant: micro-tiles of one or two
    /// 4×4 blocks each way, K slices of whole quads, at most two staged
    /// quads per invocation and operand, the tile a whole number of micro-tiles.
    #[test]
    fn every_variant_is_one_the_shader_can_build() {
        for v in TileVariant::ALL {
            assert!([4, 8].contains(&v.rm) && [4, 8].contains(&v.rn), "{v:?}");
            assert!(
                v.tk % 4 == 0 && v.tm % v.rm == 0 && v.tn % v.rn == 0,
                "{v:?}"
            );
            let nt = v.invocations();
            assert!(nt <= 256, "{v:?}: {nt} invocations");
            assert!(
                v.tm * v.tk / 4 <= 2 * nt && v.tn * v.tk / 4 <= 2 * nt,
                "{v:?}"
            );
            assert_eq!(TileVariant::parse(&v.name()), Some(v));
        }
    }
}
