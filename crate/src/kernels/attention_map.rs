//! Launcher for 05_attention_map.wgsl: the attention probabilities
//! `[B, H, T, T]` of a forward that ran (its rotated q|k and lse), for the
//! inspector. Built only when someone looks, so training compiles none of it.

use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_variant_kernels};
use crate::shaders::{ATTENTION_COMMON, ATTENTION_MAP, Module};

use super::attention::{
    AttentionShape, FORWARD_COLS, Heads, check_head_dim, check_heads, lane_cols, params,
};

const MAP: KernelDesc = KernelDesc {
    entry: "attention_map",
    slots: &[
        Slot::Uniform(0),            // params
        Slot::Read(1, "q"),          // [B·T, q_stride] f32, rotated
        Slot::Read(2, "k"),          // [B·T, k_stride] f32, rotated
        Slot::Read(5, "lse"),        // [B·T, H] f32, the forward's
        Slot::ReadWrite(6, "probs"), // [B, H, T, T] f32, written
    ],
};

/// The map kernel of each head dim it was built for.
pub struct AttentionMap {
    kernels: Vec<(u32, Kernel)>,
}

impl AttentionMap {
    pub async fn new(gpu: &Gpu, head_dims: &[u32]) -> Result<Self> {
        let mut kernels: Vec<(u32, Kernel)> = Vec::new();
        for &dh in head_dims {
            if kernels.iter().any(|(d, _)| *d == dh) {
                continue;
            }
            check_head_dim("attention_map", dh)?;
            // the common prelude's tile sizes: its workgroup arrays go unused
            // here; scores from q and k as they are (a recipe's f16
            // attention operands move them by f16 rounding, ~2^-11 relative)
            let cols = lane_cols(dh, FORWARD_COLS);
            let constants = format!(
                "const DH: u32 = {dh}u;\nconst COLS: u32 = {cols}u;\nconst TILE: u32 = 4u;\nconst ATTN_F16: bool = false;\n"
            );
            let module = Module {
                prelude: Some(ATTENTION_COMMON),
                file: ATTENTION_MAP,
            };
            let [map] = build_variant_kernels(gpu, module, &constants, [MAP]).await?;
            kernels.push((dh, map));
        }
        Ok(AttentionMap { kernels })
    }

    /// `probs[b, h, t, s] = softmax_s(q_t·k_s / sqrt(Dh))` for s ≤ t, 0 above,
    /// from the forward's `lse` `[B·T, H]`.
    pub fn probabilities(
        &self,
        gpu: &Gpu,
        s: AttentionShape,
        q: Heads,
        k: Heads,
        lse: BufferRange,
        probs: BufferRange,
    ) -> Result<Dispatch> {
        let op = "attention_map";
        let mut p = params(op, s.batch, s.seq_len, s.heads, s.kv_heads, s.head_dim)?;
        let kernel = self
            .kernels
            .iter()
            .find(|(dh, _)| *dh == s.head_dim)
            .map(|(_, kernel)| kernel)
            .ok_or_else(|| {
                crate::Error::Unsupported(format!(
                    "{op}: no kernel built for head_dim {}",
                    s.head_dim
                ))
            })?;
        let rows = s.rows();
        (p.q_stride, p.q_col) = check_heads(op, "q", &q, s.heads, s.head_dim)?;
        (p.k_stride, p.k_col) = check_heads(op, "k", &k, s.kv_heads, s.head_dim)?;
        let entries = rows * s.heads as u64 * s.seq_len as u64;
        let params = gpu.uniform(op, &p);
        let binds = [
            (&params).into(),
            q.needs(rows),
            k.needs(rows),
            lse.needs(4 * rows * s.heads as u64),
            probs.needs(4 * entries),
        ];
        kernel.dispatch(gpu, op, &binds, gpu.grid_1d(op, entries)?)
    }
}
