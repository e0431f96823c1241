//! The launchers of the block-wise states (int8, int8-linear, fp8, int4): AdamW's
//! update and Muon's momentum step over codes and block scales.

use bytemuck::Zeroable;

use super::{
    Adam8bitBuffers, AdamBlock, MuonMomentum, Optimizer, STATS_BYTES, UpdateState,
    bf16_state_bytes, master_bytes,
};
use crate::error::{Error, Result};
use crate::gpu::{Bind, BufferRange, Dispatch, Gpu, f16_bytes};
use crate::ops::adam::{AdamHyper, ByteCode};

/// Refuses a `first` that is not whole blocks of `code` within `n` elements.
fn whole_blocks(op: &'static str, code: ByteCode, first: u32, n: u32) -> Result<()> {
    match (first as usize).is_multiple_of(code.block()) && first <= n {
        true => Ok(()),
        false => Err(Error::shape(op, "first", "whole blocks within n", first)),
    }
}

impl Optimizer {
    /// AdamW over `n` parameters of one block with 8-bit moments (block-wise
    /// int8 codes or E4M3, `b.code`), otherwise as [`Optimizer::update`]:
    /// the same order, clipping, decay, bias corrections, skip and mirror.
    #[allow(clippy::too_many_arguments)] // as `update`
    pub fn update_8bit(
        &self,
        gpu: &Gpu,
        hyper: &AdamHyper,
        decays: bool,
        n: u32,
        step: &wgpu::Buffer,
        stats: BufferRange,
        b: &Adam8bitBuffers,
    ) -> Result<Dispatch> {
        let op = "adamw_8bit_update";
        let (n64, words) = (n as u64, (n as u64).div_ceil(b.code.per_word()));
        whole_blocks(op, b.code, b.first, n)?;
        let params = gpu.uniform(
            op,
            &AdamBlock {
                first: b.first,
                ..hyper.block(n, decays).master(&b.weights, b.sr_seed)
            },
        );
        let mut binds: Vec<Bind> = vec![
            (&params).into(),
            step.into(),
            stats.needs(STATS_BYTES),
            self.tables(b.code).into(),
            b.weights.needs(master_bytes(n64, b.sr_seed.is_some())),
            b.grads.needs(4 * n64),
            b.m_codes.needs(b.code.code_bytes(n64)),
            b.v_codes.needs(b.code.code_bytes(n64)),
            b.m_scales.needs(b.code.scale_bytes(n64)),
            b.v_scales.needs(b.code.scale_bytes(n64)),
        ];
        let grid = gpu.grid_1d(op, words)?;
        let kernel = self
            .updates(b.sr_seed)
            .get(UpdateState::Bytes(b.code), b.mirror.is_some());
        if let Some(mirror) = b.mirror {
            binds.push(mirror.needs(f16_bytes(n64)));
        }
        kernel.dispatch(gpu, op, &binds, grid)
    }

    /// Muon's momentum step over `n` elements of hidden matrices (μ =
    /// `momentum`): the new momentum into `state`, the Nesterov direction
    /// into `nesterov` (`n − first` elements), the gradients zeroed.
    #[allow(clippy::too_many_arguments)] // the step's whole state, as the kernel's bindings
    pub fn muon_momentum(
        &self,
        gpu: &Gpu,
        momentum: f64,
        n: u32,
        (step, stats): (&wgpu::Buffer, BufferRange),
        grads: BufferRange,
        state: MuonMomentum,
        nesterov: BufferRange,
    ) -> Result<Dispatch> {
        let op = "muon_momentum";
        let n64 = n as u64;
        let block = |first| AdamBlock {
            n,
            beta1: momentum as f32,
            first,
            ..AdamBlock::zeroed()
        };
        match state {
            MuonMomentum::Fp32(m) => {
                let params = gpu.uniform(op, &block(0));
                let binds = [
                    (&params).into(),
                    stats.needs(STATS_BYTES),
                    grads.needs(4 * n64),
                    m.needs(4 * n64),
                    nesterov.needs(4 * n64),
                ];
                self.muon_momentum
                    .dispatch(gpu, op, &binds, gpu.grid_1d(op, n64)?)
            }
            MuonMomentum::Bf16(m) => {
                let params = gpu.uniform(op, &block(0));
                let binds = [
                    (&params).into(),
                    stats.needs(STATS_BYTES),
                    grads.needs(4 * n64),
                    m.needs(bf16_state_bytes(n64)),
                    nesterov.needs(4 * n64),
                ];
                self.muon_momentum_bf16
                    .dispatch(gpu, op, &binds, gpu.grid_1d(op, n64.div_ceil(2))?)
            }
            MuonMomentum::Bytes {
                code,
                codes,
                scales,
                first,
            } => {
                whole_blocks(op, code, first, n)?;
                let params = gpu.uniform(op, &block(first));
                let binds = [
                    (&params).into(),
                    step.into(),
                    stats.needs(STATS_BYTES),
                    self.tables(code).into(),
                    grads.needs(4 * n64),
                    codes.needs(code.code_bytes(n64)),
                    scales.needs(code.scale_bytes(n64)),
                    nesterov.needs(4 * (n64 - first as u64)),
                ];
                let grid = gpu.grid_1d(op, n64.div_ceil(code.per_word()))?;
                let kernel = match code {
                    ByteCode::Dynamic => &self.muon_momentum_8bit,
                    ByteCode::E4m3 => &self.muon_momentum_fp8,
                    ByteCode::Linear => &self.muon_momentum_linear,
                    ByteCode::Int4 => &self.muon_momentum_int4,
                };
                kernel.dispatch(gpu, op, &binds, grid)
            }
        }
    }
}
