//! fp8's pre-pass (03_linear_fp8.wgsl): a GEMM operand through E4M3 once,
//! into a scratch buffer the GEMM then reads as f32 (activations and
//! gradients, per product: `operands`), or into the weights' E4M3 mirror
//! (once per optimizer step).

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, Grid, Kernel, KernelDesc, Slot, build_kernels};
use crate::shaders::LINEAR_FP8;

/// fp8's tile side: a scale covers 128 values along K, or a weight's
/// 128×128 block: `FP8_BLOCK`.
const FP8_BLOCK: u32 = 128;

/// How an operand's values share scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiles {
    /// 1 row × 128 columns: activations and gradients whose K runs along the row.
    Rows,
    /// 128 rows × 1 column: the same, where K runs down the rows (dW's operands).
    Columns,
    /// 128 × 128: weights.
    Blocks,
}

impl Tiles {
    /// (tile rows, tile columns, lanes along a row, region rows, region
    /// columns): a workgroup's region, as 03_linear_fp8.wgsl lays it out.
    fn geometry(self) -> [u32; 5] {
        match self {
            Tiles::Rows => [1, FP8_BLOCK, 32, 8, FP8_BLOCK],
            Tiles::Columns => [FP8_BLOCK, 1, 64, FP8_BLOCK, 64],
            Tiles::Blocks => [FP8_BLOCK, FP8_BLOCK, 128, FP8_BLOCK, FP8_BLOCK],
        }
    }
}

/// A `[rows, cols]` row-major operand, with the rows and columns where
/// stacked weights' second and third parts begin (`rows`/`cols` if none).
#[derive(Clone, Copy, Debug)]
pub struct Operand {
    pub rows: u32,
    pub cols: u32,
    pub row_parts: [u32; 2],
    pub col_parts: [u32; 2],
}

impl Operand {
    pub fn plain(rows: u32, cols: u32) -> Operand {
        Operand {
            rows,
            cols,
            row_parts: [rows; 2],
            col_parts: [cols; 2],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct Params {
    rows: u32,
    cols: u32,
    ld: u32,
    tile_rows: u32,
    tile_cols: u32,
    lane_cols: u32,
    region_rows: u32,
    region_cols: u32,
    row_parts: [u32; 2],
    col_parts: [u32; 2],
}

const QUANTIZE: KernelDesc = KernelDesc {
    entry: "fp8_quantize",
    slots: &[
        Slot::Uniform(0),        // params
        Slot::Read(1, "x"),      // [rows, cols]
        Slot::ReadWrite(2, "y"), // [rows, cols], E4M3 values × their scales
        Slot::BoundaryCounts,
    ],
};

/// Blocks of `bl` along a dimension of length `len` cut at `parts`.
fn blocks(len: u32, parts: [u32; 2], bl: u32) -> u32 {
    let bounds = [0, parts[0], parts[1], len];
    bounds.windows(2).map(|w| (w[1] - w[0]).div_ceil(bl)).sum()
}

/// The pre-pass kernel.
pub struct Fp8 {
    kernel: Kernel,
}

impl Fp8 {
    pub async fn new(gpu: &Gpu) -> Result<Fp8> {
        let [kernel] = build_kernels(gpu, LINEAR_FP8, [QUANTIZE]).await?;
        Ok(Fp8 { kernel })
    }

    /// `y` = `x` through E4M3 in `tiles`, saturations and flushes counted.
    pub fn quantize(
        &self,
        gpu: &Gpu,
        tiles: Tiles,
        o: Operand,
        x: BufferRange,
        y: BufferRange,
    ) -> Result<Dispatch> {
        let op = "fp8_quantize";
        let bytes = 4 * o.rows as u64 * o.cols as u64;
        let [tile_rows, tile_cols, lane_cols, region_rows, region_cols] = tiles.geometry();
        let p = Params {
            rows: o.rows,
            cols: o.cols,
            ld: o.cols,
            tile_rows,
            tile_cols,
            lane_cols,
            region_rows,
            region_cols,
            row_parts: o.row_parts,
            col_parts: o.col_parts,
        };
        let grid = Grid {
            x: blocks(o.cols, o.col_parts, region_cols).max(1),
            y: blocks(o.rows, o.row_parts, region_rows).max(1),
            z: 1,
        };
        let max = gpu.limits.max_compute_workgroups_per_dimension;
        if grid.x > max || grid.y > max {
            return Err(Error::Limit {
                op,
                what: "regions per dimension".into(),
                needed: grid.x.max(grid.y) as u64,
                limit: max as u64,
            });
        }
        let params = gpu.uniform(op, &p);
        let binds = [(&params).into(), x.needs(bytes), y.needs(bytes)];
        self.kernel.dispatch(gpu, op, &binds, grid)
    }
}
