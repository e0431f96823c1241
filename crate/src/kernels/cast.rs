//! Launchers for 08_cast.wgsl: f32 <-> f16 in either f16 storage mode, and
//! bf16 (pairs in words) to f32 or f16.
//!
//! To f16 saturates to ±65504 (±Inf included), rounds to nearest even,
//! and keeps NaN as NaN. f16 -> f32 and bf16 -> f32 are exact.

use bytemuck::{Pod, Zeroable};

use crate::error::Result;
use crate::gpu::{
    Bind, BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_kernels, f16_bytes,
};
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

const BF16_TO_F32: KernelDesc = KernelDesc {
    entry: "cast_bf16_to_f32",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "src"),      // src_bf16: [ceil(n/2)] u32
        Slot::ReadWrite(2, "dst"), // dst_f32: [n] f32
    ],
};
const BF16_TO_F16: KernelDesc = KernelDesc {
    entry: "cast_bf16_to_f16",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "src"),      // src_bf16: [ceil(n/2)] u32
        Slot::ReadWrite(2, "dst"), // dst_h: [ceil(n/2)] half2
    ],
};

pub struct Cast {
    f32_to_f16: Kernel,
    f16_to_f32: Kernel,
    bf16_to_f32: Kernel,
    bf16_to_f16: Kernel,
}

impl Cast {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let descs = [F32_TO_F16, F16_TO_F32, BF16_TO_F32, BF16_TO_F16];
        let [f32_to_f16, f16_to_f32, bf16_to_f32, bf16_to_f16] =
            build_kernels(gpu, CAST, descs).await?;
        Ok(Cast {
            f32_to_f16,
            f16_to_f32,
            bf16_to_f32,
            bf16_to_f16,
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
        let src = src.needs(4 * n as u64);
        halves(gpu, (&self.f32_to_f16, "cast_f32_to_f16"), src, dst, n)
    }

    /// `dst[..n] = f16(src[..n])` of bf16 values, one invocation per output word.
    pub fn bf16_to_f16(
        &self,
        gpu: &Gpu,
        src: BufferRange,
        dst: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        let src = src.needs(f16_bytes(n as u64));
        halves(gpu, (&self.bf16_to_f16, "cast_bf16_to_f16"), src, dst, n)
    }

    /// `dst[..n] = f32(src[..n])`, one invocation per element.
    pub fn f16_to_f32(
        &self,
        gpu: &Gpu,
        src: BufferRange,
        dst: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        widen(gpu, (&self.f16_to_f32, "cast_f16_to_f32"), src, dst, n)
    }

    /// `dst[..n] = f32(src[..n])` of bf16 values, one invocation per element.
    pub fn bf16_to_f32(
        &self,
        gpu: &Gpu,
        src: BufferRange,
        dst: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        widen(gpu, (&self.bf16_to_f32, "cast_bf16_to_f32"), src, dst, n)
    }
}

/// `kernel` from 16-bit `src[..n]` (two a word) into f32 `dst`, one
/// invocation per element.
fn widen(
    gpu: &Gpu,
    (kernel, op): (&Kernel, &'static str),
    src: BufferRange,
    dst: BufferRange,
    n: u32,
) -> Result<Dispatch> {
    let params = gpu.uniform(op, &Params { n, _pad: [0; 3] });
    let binds = [
        (&params).into(),
        src.needs(f16_bytes(n as u64)),
        dst.needs(4 * n as u64),
    ];
    kernel.dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
}

/// `kernel` from `src` (checked by the caller) into f16 words `dst`, one
/// invocation per output word (two halves).
fn halves(
    gpu: &Gpu,
    (kernel, op): (&Kernel, &'static str),
    src: Bind,
    dst: BufferRange,
    n: u32,
) -> Result<Dispatch> {
    let params = gpu.uniform(op, &Params { n, _pad: [0; 3] });
    let binds = [(&params).into(), src, dst.needs(f16_bytes(n as u64))];
    kernel.dispatch(gpu, op, &binds, gpu.grid_1d(op, (n as u64).div_ceil(2))?)
}
