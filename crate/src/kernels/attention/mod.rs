//! Launchers for 05_attention.wgsl (causal GQA forward, one-token decode
//! and its KV-cache append) and 05_attention_backward.wgsl (dQ, then dK
//! and dV). Legend: B batch, T sequence, H query heads, Hkv key/value
//! heads, Dh head dim, L cache length, Lmax cache capacity.
//! Views: `views.rs`; params and their checks: `params.rs`.

use super::units::attention::{self as unit_attention, UnitKernel, UnitTiles};
use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_variant_kernels};
use crate::ops::products::AttentionOperands;
use crate::shaders::{ATTENTION, ATTENTION_BACKWARD, ATTENTION_COMMON, Module, Numerics};

pub use crate::ops::shapes::{AttentionShape, DecodeShape};
pub(super) use params::{Params, check_head_dim, check_heads, params};
use params::{check_qkv, decode_params};
pub use views::{AttentionBackward, Heads, KvGrads, Qkv};

mod params;
mod views;

/// Largest head dim: a lane's registers (up to four 4×4 chunks of each row
/// it holds) and a tile of at least 4 rows in 16 KiB of workgroup memory
/// are sized for it.
pub const MAX_HEAD_DIM: u32 = 128;
/// Invocations of the row kernels: `ROW_WG` in 05_attention_common.wgsl.
const ROW_WG: u32 = 64;
/// Workgroup memory a tile may take: beyond this, fewer workgroups fit on
/// a GPU core for no fewer barriers worth having.
const TILE_BUDGET: u32 = 32 * 1024;

const FORWARD: KernelDesc = KernelDesc {
    entry: "attention_forward",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "q"),        // [B·T, q_stride] f32
        Slot::Read(2, "k"),        // [B·T, k_stride] f32
        Slot::Read(3, "v"),        // [B·T, v_stride] f32
        Slot::ReadWrite(4, "o"),   // [B·T, H·Dh] f32
        Slot::ReadWrite(5, "lse"), // [B·T, H] f32, saved for backward
        Slot::BoundaryCounts,
    ],
};
const DECODE: KernelDesc = KernelDesc {
    entry: "attention_decode",
    slots: &[
        Slot::Uniform(0),         // params
        Slot::Read(1, "q"),       // [B, q_stride] f32, the new tokens
        Slot::Read(2, "k_cache"), // k: [B·Lmax, k_stride] f32 cache
        Slot::Read(3, "v_cache"), // v: [B·Lmax, v_stride] f32 cache
        Slot::ReadWrite(4, "o"),  // [B, H·Dh] f32
        Slot::BoundaryCounts,
    ],
};
const KV_APPEND: KernelDesc = KernelDesc {
    entry: "kv_append",
    slots: &[
        Slot::Uniform(0),              // params
        Slot::Read(2, "k"),            // [B, k_stride] f32, the new tokens' keys (rotated)
        Slot::Read(3, "v"),            // [B, v_stride] f32, their values
        Slot::ReadWrite(6, "k_cache"), // [B·Lmax, Hkv·Dh] f32, row b·Lmax + L − 1 written
        Slot::ReadWrite(7, "v_cache"), // [B·Lmax, Hkv·Dh] f32, likewise
    ],
};
const BACKWARD_DQ: KernelDesc = KernelDesc {
    entry: "attention_backward_dq",
    slots: &[
        Slot::Uniform(0),            // params
        Slot::Read(1, "q"),          // [B·T, q_stride] f32
        Slot::Read(2, "k"),          // [B·T, k_stride] f32
        Slot::Read(3, "v"),          // [B·T, v_stride] f32
        Slot::Read(4, "o"),          // [B·T, H·Dh] f32
        Slot::Read(5, "d_o"),        // [B·T, H·Dh] f32
        Slot::Read(6, "lse"),        // [B·T, H] f32
        Slot::ReadWrite(7, "dq"),    // [B·T, dq_stride] f32, written
        Slot::ReadWrite(8, "delta"), // [B·T, H] f32 scratch, written
    ],
};
const BACKWARD_DKV: KernelDesc = KernelDesc {
    entry: "attention_backward_dkv",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "q"),        // [B·T, q_stride] f32
        Slot::Read(2, "k"),        // [B·T, k_stride] f32
        Slot::Read(3, "v"),        // [B·T, v_stride] f32
        Slot::Read(5, "d_o"),      // [B·T, H·Dh] f32
        Slot::Read(6, "lse"),      // [B·T, H] f32
        Slot::Read(7, "delta"),    // delta_in: [B·T, H] f32
        Slot::ReadWrite(8, "dkv"), // [B·T, dkv_stride] f32, dK and dV written
    ],
};

/// The kernels of one head dim: both files compiled with `DH` and tiles
/// sized to the adapter.
struct Family {
    head_dim: u32,
    forward: Kernel,
    /// The forward and the backward's two passes on matrix units
    /// (kernels::units::attention), where a recipe's f16 operands meet a
    /// device's units and their tiles fit: they replace the scalar ones.
    units_forward: Option<(Kernel, UnitTiles)>,
    units_backward: Option<[(Kernel, UnitTiles); 2]>,
    decode: Kernel,
    kv_append: Kernel,
    backward_dq: Kernel,
    backward_dkv: Kernel,
}

/// Attention's kernels for each head dim a model uses (each is its own
/// module: a row's registers are sized by the head dim).
pub struct Attention {
    families: Vec<Family>,
}

/// Most head-dim columns one invocation keeps of each row it holds: the
/// forward and dQ rows hold two `Row`s or three, the key-major pass five.
pub(super) const FORWARD_COLS: u32 = 64;
const BACKWARD_COLS: u32 = 32;

/// `COLS`: the widest multiple of 16 up to `most` that divides the head
/// dim (forward / backward: Dh 48 takes 48 / 16, Dh 96 48 / 32, Dh 80 and
/// 112 take 16 in both).
pub(super) fn lane_cols(head_dim: u32, most: u32) -> u32 {
    (1..=most / 16)
        .rev()
        .map(|c| 16 * c)
        .find(|c| head_dim.is_multiple_of(*c))
        .unwrap_or(16)
}

/// Rows of a streamed tile: the largest power of two from 4 to 64 whose
/// workgroup memory, `floats_per_row` f32 per row, fits the adapter.
fn tile_rows(gpu: &Gpu, floats_per_row: u32) -> u32 {
    let budget = gpu
        .limits
        .max_compute_workgroup_storage_size
        .min(TILE_BUDGET);
    let mut rows = 64;
    while rows > 4 && 4 * rows * floats_per_row > budget {
        rows /= 2;
    }
    rows
}

/// Row slots (queries or keys) of a workgroup whose lanes hold at most
/// `most` columns of a row: `ROWS` in the shaders.
fn row_slots(head_dim: u32, most: u32) -> u32 {
    ROW_WG / (head_dim / lane_cols(head_dim, most))
}

impl Attention {
    /// The kernels of every head dim in `head_dims`, f32 operands.
    pub async fn new(gpu: &Gpu, head_dims: &[u32]) -> Result<Self> {
        Self::with_operands(gpu, head_dims, AttentionOperands::F32).await
    }

    /// The kernels of every head dim in `head_dims`, their products
    /// reading `operands` (`ATTN_F16` in 05_attention_common.wgsl).
    pub async fn with_operands(
        gpu: &Gpu,
        head_dims: &[u32],
        operands: AttentionOperands,
    ) -> Result<Self> {
        let f16 = operands == AttentionOperands::F16;
        // the units compute f16 operands' products; sf16's boundaries are
        // the scalar kernels'
        let units = match (&gpu.matrix_units, gpu.numerics()) {
            (Some(Ok(u)), Numerics::Exact) if f16 => Some(*u),
            _ => None,
        };
        let mut families: Vec<Family> = Vec::new();
        for &dh in head_dims {
            if families.iter().any(|f| f.head_dim == dh) {
                continue;
            }
            check_head_dim("attention", dh)?;
            // K and V tiles, and a score part per invocation and key
            let forward_tile = tile_rows(gpu, 2 * dh + ROW_WG);
            // two tiles, score and dP parts, lse and Δ
            let backward_tile = tile_rows(gpu, 2 * dh + 2 * ROW_WG + 2);
            let constants = |most: u32, tile: u32| {
                let cols = lane_cols(dh, most);
                format!(
                    "const DH: u32 = {dh}u;\nconst COLS: u32 = {cols}u;\nconst TILE: u32 = {tile}u;\nconst ATTN_F16: bool = {f16};\n"
                )
            };
            let [forward, decode, kv_append] = build_variant_kernels(
                gpu,
                Module {
                    prelude: Some(ATTENTION_COMMON),
                    file: ATTENTION,
                },
                &constants(FORWARD_COLS, forward_tile),
                [FORWARD, DECODE, KV_APPEND],
            )
            .await?;
            let [backward_dq, backward_dkv] = build_variant_kernels(
                gpu,
                Module {
                    prelude: Some(ATTENTION_COMMON),
                    file: ATTENTION_BACKWARD,
                },
                &constants(BACKWARD_COLS, backward_tile),
                [BACKWARD_DQ, BACKWARD_DKV],
            )
            .await?;
            let (mut units_forward, mut units_backward) = (None, None);
            if let Some(u) = units {
                let build = |kernel, desc: KernelDesc| {
                    unit_attention::build(gpu, u, (kernel, desc.slots), dh)
                };
                units_forward = build(UnitKernel::Forward, FORWARD).await?;
                let dq = build(UnitKernel::Dq, BACKWARD_DQ).await?;
                let dkv = build(UnitKernel::Dkv, BACKWARD_DKV).await?;
                units_backward = dq.zip(dkv).map(|(dq, dkv)| [dq, dkv]);
            }
            families.push(Family {
                head_dim: dh,
                forward,
                units_forward,
                units_backward,
                decode,
                kv_append,
                backward_dq,
                backward_dkv,
            });
        }
        Ok(Attention { families })
    }

    fn family(&self, op: &'static str, head_dim: u32) -> Result<&Family> {
        self.families
            .iter()
            .find(|f| f.head_dim == head_dim)
            .ok_or_else(|| {
                let built: Vec<String> = self
                    .families
                    .iter()
                    .map(|f| f.head_dim.to_string())
                    .collect();
                Error::Unsupported(format!(
                    "{op}: kernels for head_dim {head_dim} were not built (built: {})",
                    built.join(", ")
                ))
            })
    }

    /// `o = softmax(q·kᵀ/sqrt(Dh) + causal mask)·v` per head, saving lse.
    pub fn forward(
        &self,
        gpu: &Gpu,
        s: AttentionShape,
        x: Qkv,
        o: BufferRange,
        lse: BufferRange,
    ) -> Result<Dispatch> {
        let op = "attention_forward";
        let kernels = self.family(op, s.head_dim)?;
        let mut p = params(op, s.batch, s.seq_len, s.heads, s.kv_heads, s.head_dim)?;
        let groups = query_groups(&mut p, FORWARD_COLS);
        let rows = s.rows();
        let [q, k, v] = check_qkv(op, &mut p, &x, ["k", "v"], [rows; 2])?;
        let params = gpu.uniform(op, &p);
        let binds = [
            (&params).into(),
            q,
            k,
            v,
            o.needs(4 * rows * s.heads as u64 * s.head_dim as u64),
            lse.needs(4 * rows * s.heads as u64),
        ];
        match &kernels.units_forward {
            Some((kernel, tiles)) => {
                let blocks = (s.seq_len as u64).div_ceil(tiles.br as u64);
                let groups = blocks * s.heads as u64 * s.batch as u64;
                kernel.dispatch(gpu, op, &binds, gpu.grid_groups(op, groups)?)
            }
            None => kernels
                .forward
                .dispatch(gpu, op, &binds, gpu.grid_groups(op, groups)?),
        }
    }

    /// Whether any head dim's forward runs on matrix units.
    pub fn on_units(&self) -> bool {
        self.families.iter().any(|f| f.units_forward.is_some())
    }

    /// The tiles of the forward and of the backward's passes on matrix
    /// units at `head_dim`, those that run there.
    pub fn units_tiles(&self, head_dim: u32) -> [Option<UnitTiles>; 3] {
        let family = self.families.iter().find(|f| f.head_dim == head_dim);
        let forward = family.and_then(|f| f.units_forward.as_ref().map(|(_, t)| *t));
        let backward = family.and_then(|f| f.units_backward.as_ref());
        [
            forward,
            backward.map(|[dq, _]| dq.1),
            backward.map(|[_, dkv]| dkv.1),
        ]
    }

    /// One generation step: `o[b] = attention(q[b], cache rows 0..L of b)`.
    /// The new token's k and v must already sit at row L−1 of the caches.
    pub fn decode(&self, gpu: &Gpu, s: DecodeShape, x: Qkv, o: BufferRange) -> Result<Dispatch> {
        let op = "attention_decode";
        let kernels = self.family(op, s.head_dim)?;
        let mut p = decode_params(op, s)?;
        let (batch, cache_rows) = (s.batch as u64, s.batch as u64 * s.max_len as u64);
        let kv = ["k_cache", "v_cache"];
        let [q, k, v] = check_qkv(op, &mut p, &x, kv, [batch, cache_rows])?;
        let params = gpu.uniform(op, &p);
        let o = o.needs(4 * batch * s.heads as u64 * s.head_dim as u64);
        let binds = [(&params).into(), q, k, v, o];
        let grid = gpu.grid_groups(op, batch * s.heads as u64)?;
        kernels.decode.dispatch(gpu, op, &binds, grid)
    }

    /// Writes the new tokens' k and v (row b of each view) into row L − 1
    /// of sequence b of the caches `[B·Lmax, Hkv·Dh]`, for `decode` with
    /// the same shape to read. Row offsets are seldom 256-B aligned, hence
    /// a kernel rather than a sub-range binding.
    pub fn kv_append(
        &self,
        gpu: &Gpu,
        s: DecodeShape,
        k: Heads,
        v: Heads,
        k_cache: BufferRange,
        v_cache: BufferRange,
    ) -> Result<Dispatch> {
        let op = "kv_append";
        let kernels = self.family(op, s.head_dim)?;
        let mut p = decode_params(op, s)?;
        let batch = s.batch as u64;
        (p.k_stride, p.k_col) = check_heads(op, "k", &k, s.kv_heads, s.head_dim)?;
        (p.v_stride, p.v_col) = check_heads(op, "v", &v, s.kv_heads, s.head_dim)?;
        let width = s.kv_heads as u64 * s.head_dim as u64;
        let cache_bytes = 4 * batch * s.max_len as u64 * width;
        let params = gpu.uniform(op, &p);
        let binds = [
            (&params).into(),
            k.needs(batch),
            v.needs(batch),
            k_cache.needs(cache_bytes),
            v_cache.needs(cache_bytes),
        ];
        kernels
            .kv_append
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, batch * width / 4)?)
    }

    /// dQ, dK and dV (written, not accumulated), in two dispatches to record
    /// in order: the query-major pass (dQ and Δ), then the key-major pass.
    pub fn backward(
        &self,
        gpu: &Gpu,
        s: AttentionShape,
        g: &AttentionBackward,
    ) -> Result<[Dispatch; 2]> {
        let op = "attention_backward";
        let kernels = self.family(op, s.head_dim)?;
        let mut p = params(op, s.batch, s.seq_len, s.heads, s.kv_heads, s.head_dim)?;
        let dq_groups = query_groups(&mut p, BACKWARD_COLS);
        let dkv_groups = (s.seq_len as u64).div_ceil(row_slots(s.head_dim, BACKWARD_COLS) as u64)
            * s.kv_heads as u64
            * s.batch as u64;
        let rows = s.rows();
        let (hdh, kvdh) = (s.heads * s.head_dim, s.kv_heads * s.head_dim);
        let [q, k, v] = check_qkv(op, &mut p, &g.qkv, ["k", "v"], [rows; 2])?;
        (p.dq_stride, p.dq_col) = check_heads(op, "dq", &g.dq, s.heads, s.head_dim)?;
        let dkv = g.dkv;
        let dk = Heads {
            data: dkv.data,
            row_stride: dkv.row_stride,
            col: dkv.k_col,
        };
        let dv = Heads {
            data: dkv.data,
            row_stride: dkv.row_stride,
            col: dkv.v_col,
        };
        (p.dkv_stride, p.dk_col) = check_heads(op, "dk", &dk, s.kv_heads, s.head_dim)?;
        p.dv_col = check_heads(op, "dv", &dv, s.kv_heads, s.head_dim)?.1;
        if dkv.k_col.abs_diff(dkv.v_col) < kvdh {
            return Err(Error::shape(
                op,
                "dkv columns",
                format!("k and v ranges of {kvdh} apart"),
                format!("{} and {}", dkv.k_col, dkv.v_col),
            ));
        }
        let params = gpu.uniform(op, &p);
        let d_o = g.d_o.needs(4 * rows * hdh as u64);
        let lse = g.lse.needs(4 * rows * s.heads as u64);
        let delta = g.delta.needs(s.backward_scratch_bytes());
        let dq_binds = [
            (&params).into(),
            q,
            k,
            v,
            g.o.needs(4 * rows * hdh as u64),
            d_o,
            lse,
            g.dq.needs(rows),
            delta,
        ];
        // dk and dv are column ranges of one binding, dkv, checked once
        let dkv_binds = [(&params).into(), q, k, v, d_o, lse, delta, dk.needs(rows)];
        if let Some([(dq, dq_tiles), (dkv, dkv_tiles)]) = &kernels.units_backward {
            // workgroups of BR queries of a head, and of BR keys of a kv head
            let blocks = |t: &UnitTiles| (s.seq_len as u64).div_ceil(t.br as u64) * s.batch as u64;
            let dq_grid = gpu.grid_groups(op, blocks(dq_tiles) * s.heads as u64)?;
            let dkv_grid = gpu.grid_groups(op, blocks(dkv_tiles) * s.kv_heads as u64)?;
            return Ok([
                dq.dispatch(gpu, op, &dq_binds, dq_grid)?,
                dkv.dispatch(gpu, op, &dkv_binds, dkv_grid)?,
            ]);
        }
        let dq_grid = gpu.grid_groups(op, dq_groups)?;
        let dq = kernels.backward_dq.dispatch(gpu, op, &dq_binds, dq_grid)?;
        let grid = gpu.grid_groups(op, dkv_groups)?;
        let dkv = kernels.backward_dkv.dispatch(gpu, op, &dkv_binds, grid)?;
        Ok([dq, dkv])
    }
}

/// Sets how a query-major kernel whose lanes hold `cols` columns splits
/// its row slots: Gw heads of a kv group (the largest divisor of G that
/// fits) × `block_rows` queries; returns its workgroup count.
fn query_groups(p: &mut Params, cols: u32) -> u64 {
    let slots = row_slots(p.head_dim, cols);
    let g = p.heads / p.kv_heads;
    p.group_heads = (1..=g.min(slots))
        .rev()
        .find(|d| g.is_multiple_of(*d))
        .unwrap_or(1);
    p.block_rows = slots / p.group_heads;
    (p.seq_len as u64).div_ceil(p.block_rows as u64)
        * (p.heads / p.group_heads) as u64
        * p.batch as u64
}
