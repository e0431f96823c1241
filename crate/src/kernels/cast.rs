//! Launchers for 08_cast.wgsl: f32 <-> f16 in either f16 storage mode, and
//! the research modes' quantizers applied to a buffer (for their tests).
//!
//! f32 -> f16 saturates to ±65504 (±Inf included), rounds to nearest even,
//! and keeps NaN as NaN. f16 -> f32 is exact. `narrow_f16` takes values f16
//! holds (a recipe's f16 operands) to their bits, ±Inf kept, for the
//! matrix units' products.

use bytemuck::{Pod, Zeroable};

use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_kernels, f16_bytes};
use crate::shaders::CAST;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n: u32,
    _pad: [u32; 3],
}

const F32_TO_F16: KernelDesc = KernelDesc {
    entry: "cast_f32_to_f16",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "src"),      // src_f32: [n] f32
        Slot::ReadWrite(2, "dst"), // dst_h: [ceil(n/2)] half2
    ],
};
const F16_TO_F32: KernelDesc = KernelDesc {
    entry: "cast_f16_to_f32",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "src"),      // src_h: [ceil(n/2)] half2
        Slot::ReadWrite(2, "dst"), // dst_f32: [n] f32
    ],
};

const NARROW: KernelDesc = KernelDesc {
    entry: "narrow_f16",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "src"),      // src_f32: [n] f32, values f16 holds
        Slot::ReadWrite(2, "dst"), // narrow_dst: [ceil(n/2)] u32, f16 pairs
    ],
};

const SIMULATE: KernelDesc = KernelDesc {
    entry: "simulate_precision",
    slots: &[
        Slot::Uniform(0),             // sim: n, mode
        Slot::Read(1, "src"),         // sim_src: [n] f32
        Slot::ReadWrite(2, "dst"),    // sim_dst: [n] f32
        Slot::ReadWrite(3, "counts"), // sim_counts: [2] u32 (clamped or saturated, flushed to zero)
    ],
};

/// A research mode's round trip (00_common.wgsl, twins in `reference::quantize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantizer {
    /// Q1.15, clamp ±0.999: sf16's storage boundary.
    Q115,
    /// Q1.31 then Q1.15: sf16's matmul output.
    Sf16Matmul,
    /// FP8 E4M3, saturating at ±448.
    E4m3,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct SimulateParams {
    n: u32,
    mode: u32,
    _pad: [u32; 2],
}

pub struct Cast {
    f32_to_f16: Kernel,
    f16_to_f32: Kernel,
    narrow: Kernel,
    simulate: Kernel,
}

impl Cast {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [f32_to_f16, f16_to_f32, narrow, simulate] =
            build_kernels(gpu, CAST, [F32_TO_F16, F16_TO_F32, NARROW, SIMULATE]).await?;
        Ok(Cast {
            f32_to_f16,
            f16_to_f32,
            narrow,
            simulate,
        })
    }

    /// `dst[..n] = f16(src[..n])`, one invocation per output word.
    pub fn f32_to_f16(
        &self,
        gpu: &Gpu,
        src: BufferRange,
        dst: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        halves(gpu, (&self.f32_to_f16, "cast_f32_to_f16"), src, dst, n)
    }

    /// `dst[..n]` = the f16 bits of `src[..n]`, values f16 holds exactly
    /// (or ±Inf, NaN), nothing saturated; one invocation per output word.
    pub fn narrow_f16(
        &self,
        gpu: &Gpu,
        src: BufferRange,
        dst: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        halves(gpu, (&self.narrow, "narrow_f16"), src, dst, n)
    }

    /// `dst[..n] = f32(src[..n])`, one invocation per element.
    pub fn f16_to_f32(
        &self,
        gpu: &Gpu,
        src: BufferRange,
        dst: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        let op = "cast_f16_to_f32";
        let params = gpu.uniform(op, &Params { n, _pad: [0; 3] });
        let binds = [
            (&params).into(),
            src.needs(f16_bytes(n as u64)),
            dst.needs(4 * n as u64),
        ];
        self.f16_to_f32
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }

    /// `dst[..n] = q(src[..n])`; adds to `counts` (2 u32, zeroed by the
    /// caller) the values clamped or saturated and the nonzero ones flushed to 0.
    pub fn simulate(
        &self,
        gpu: &Gpu,
        q: Quantizer,
        src: BufferRange,
        dst: BufferRange,
        counts: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        let op = "simulate_precision";
        let mode = match q {
            Quantizer::Q115 => 0,
            Quantizer::Sf16Matmul => 1,
            Quantizer::E4m3 => 2,
        };
        let params = gpu.uniform(
            op,
            &SimulateParams {
                n,
                mode,
                _pad: [0; 2],
            },
        );
        let binds = [
            (&params).into(),
            src.needs(4 * n as u64),
            dst.needs(4 * n as u64),
            counts.needs(8),
        ];
        self.simulate
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }
}

/// `kernel` from f32 `src[..n]` into f16 words `dst`, one invocation per
/// output word (two halves).
fn halves(
    gpu: &Gpu,
    (kernel, op): (&Kernel, &'static str),
    src: BufferRange,
    dst: BufferRange,
    n: u32,
) -> Result<Dispatch> {
    let params = gpu.uniform(op, &Params { n, _pad: [0; 3] });
    let binds = [
        (&params).into(),
        src.needs(4 * n as u64),
        dst.needs(f16_bytes(n as u64)),
    ];
    kernel.dispatch(gpu, op, &binds, gpu.grid_1d(op, (n as u64).div_ceil(2))?)
}
