//! Launchers for 00_infrastructure.wgsl: fill, scale, axpy, copy over f32,
//! and copy_words, the bandwidth yardstick of `webtrain bench`.

use bytemuck::{Pod, Zeroable};

use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_kernels};
use crate::shaders::INFRASTRUCTURE;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n: u32,
    alpha: f32,
    _pad: [u32; 2],
}

const FILL: KernelDesc = KernelDesc {
    entry: "fill",
    slots: &[
        Slot::Uniform(0),        // params
        Slot::ReadWrite(2, "y"), // [n] f32
    ],
};
const SCALE: KernelDesc = KernelDesc {
    entry: "scale",
    slots: &[
        Slot::Uniform(0),        // params
        Slot::ReadWrite(2, "y"), // [n] f32, scaled in place
    ],
};
const AXPY: KernelDesc = KernelDesc {
    entry: "axpy",
    slots: &[
        Slot::Uniform(0),        // params
        Slot::Read(1, "x"),      // [n] f32
        Slot::ReadWrite(2, "y"), // [n] f32, accumulated in place
    ],
};
const COPY: KernelDesc = KernelDesc {
    entry: "copy",
    slots: &[
        Slot::Uniform(0),        // params
        Slot::Read(1, "x"),      // [n] f32
        Slot::ReadWrite(2, "y"), // [n] f32
    ],
};
const COPY_WORDS: KernelDesc = KernelDesc {
    entry: "copy_words",
    slots: &[
        Slot::Uniform(0),        // params
        Slot::Read(3, "x"),      // x_words: [n] vec4<f32>
        Slot::ReadWrite(4, "y"), // y_words: [n] vec4<f32>
    ],
};

pub struct Infrastructure {
    fill: Kernel,
    scale: Kernel,
    axpy: Kernel,
    copy: Kernel,
    copy_words: Kernel,
}

impl Infrastructure {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [fill, scale, axpy, copy, copy_words] =
            build_kernels(gpu, INFRASTRUCTURE, [FILL, SCALE, AXPY, COPY, COPY_WORDS]).await?;
        Ok(Infrastructure {
            fill,
            scale,
            axpy,
            copy,
            copy_words,
        })
    }

    /// `y[..n] = value`
    pub fn fill(&self, gpu: &Gpu, y: BufferRange, n: u32, value: f32) -> Result<Dispatch> {
        let op = "fill";
        let params = params(gpu, op, n, value);
        let binds = [(&params).into(), y.needs(4 * n as u64)];
        self.fill
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }

    /// `y[..n] *= alpha`
    pub fn scale(&self, gpu: &Gpu, y: BufferRange, n: u32, alpha: f32) -> Result<Dispatch> {
        let op = "scale";
        let params = params(gpu, op, n, alpha);
        let binds = [(&params).into(), y.needs(4 * n as u64)];
        self.scale
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }

    /// `y[..n] += alpha * x[..n]`, one rounding per element (fused multiply-add).
    pub fn axpy(
        &self,
        gpu: &Gpu,
        x: BufferRange,
        y: BufferRange,
        n: u32,
        alpha: f32,
    ) -> Result<Dispatch> {
        let op = "axpy";
        let params = params(gpu, op, n, alpha);
        let binds = [
            (&params).into(),
            x.needs(4 * n as u64),
            y.needs(4 * n as u64),
        ];
        self.axpy
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }

    /// `y[..n] = x[..n]`
    pub fn copy(&self, gpu: &Gpu, x: BufferRange, y: BufferRange, n: u32) -> Result<Dispatch> {
        let op = "copy";
        let params = params(gpu, op, n, 0.0);
        let binds = [
            (&params).into(),
            x.needs(4 * n as u64),
            y.needs(4 * n as u64),
        ];
        self.copy
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }

    /// `y[..4·words] = x[..4·words]`, 16 bytes per invocation.
    pub fn copy_words(
        &self,
        gpu: &Gpu,
        x: BufferRange,
        y: BufferRange,
        words: u32,
    ) -> Result<Dispatch> {
        let op = "copy_words";
        let params = params(gpu, op, words, 0.0);
        let bytes = 16 * words as u64;
        let binds = [(&params).into(), x.needs(bytes), y.needs(bytes)];
        self.copy_words
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, words as u64)?)
    }
}

/// The params uniform of `n` elements (or words) and `alpha`.
fn params(gpu: &Gpu, op: &'static str, n: u32, alpha: f32) -> wgpu::Buffer {
    let _pad = [0; 2];
    gpu.uniform(op, &Params { n, alpha, _pad })
}
