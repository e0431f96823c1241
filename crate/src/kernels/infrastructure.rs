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
        Slot::Uniform(0),   // params
        Slot::ReadWrite(2), // y: [n] f32
    ],
};
const SCALE: KernelDesc = KernelDesc {
    entry: "scale",
    slots: &[
        Slot::Uniform(0),   // params
        Slot::ReadWrite(2), // y: [n] f32, scaled in place
    ],
};
const AXPY: KernelDesc = KernelDesc {
    entry: "axpy",
    slots: &[
        Slot::Uniform(0),   // params
        Slot::Read(1),      // x: [n] f32
        Slot::ReadWrite(2), // y: [n] f32, accumulated in place
    ],
};
const COPY: KernelDesc = KernelDesc {
    entry: "copy",
    slots: &[
        Slot::Uniform(0),   // params
        Slot::Read(1),      // x: [n] f32
        Slot::ReadWrite(2), // y: [n] f32
    ],
};
const COPY_WORDS: KernelDesc = KernelDesc {
    entry: "copy_words",
    slots: &[
        Slot::Uniform(0),   // params
        Slot::Read(3),      // x_words: [n] vec4<f32>
        Slot::ReadWrite(4), // y_words: [n] vec4<f32>
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
        gpu.check_binding("fill", "y", &y, 4 * n as u64)?;
        let params = gpu.uniform(
            "fill",
            &Params {
                n,
                alpha: value,
                _pad: [0; 2],
            },
        );
        self.fill.dispatch(
            gpu,
            &[params.as_entire_binding(), y.binding()],
            gpu.grid_1d("fill", n as u64)?,
        )
    }

    /// `y[..n] *= alpha`
    pub fn scale(&self, gpu: &Gpu, y: BufferRange, n: u32, alpha: f32) -> Result<Dispatch> {
        gpu.check_binding("scale", "y", &y, 4 * n as u64)?;
        let params = gpu.uniform(
            "scale",
            &Params {
                n,
                alpha,
                _pad: [0; 2],
            },
        );
        self.scale.dispatch(
            gpu,
            &[params.as_entire_binding(), y.binding()],
            gpu.grid_1d("scale", n as u64)?,
        )
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
        gpu.check_binding("axpy", "x", &x, 4 * n as u64)?;
        gpu.check_binding("axpy", "y", &y, 4 * n as u64)?;
        let params = gpu.uniform(
            "axpy",
            &Params {
                n,
                alpha,
                _pad: [0; 2],
            },
        );
        let bindings = [params.as_entire_binding(), x.binding(), y.binding()];
        self.axpy
            .dispatch(gpu, &bindings, gpu.grid_1d("axpy", n as u64)?)
    }

    /// `y[..n] = x[..n]`
    pub fn copy(&self, gpu: &Gpu, x: BufferRange, y: BufferRange, n: u32) -> Result<Dispatch> {
        gpu.check_binding("copy", "x", &x, 4 * n as u64)?;
        gpu.check_binding("copy", "y", &y, 4 * n as u64)?;
        let params = gpu.uniform(
            "copy",
            &Params {
                n,
                alpha: 0.0,
                _pad: [0; 2],
            },
        );
        let bindings = [params.as_entire_binding(), x.binding(), y.binding()];
        self.copy
            .dispatch(gpu, &bindings, gpu.grid_1d("copy", n as u64)?)
    }

    /// `y[..4·words] = x[..4·words]`, 16 bytes per invocation.
    pub fn copy_words(
        &self,
        gpu: &Gpu,
        x: BufferRange,
        y: BufferRange,
        words: u32,
    ) -> Result<Dispatch> {
        gpu.check_binding("copy_words", "x", &x, 16 * words as u64)?;
        gpu.check_binding("copy_words", "y", &y, 16 * words as u64)?;
        let params = gpu.uniform(
            "copy_words",
            &Params {
                n: words,
                alpha: 0.0,
                _pad: [0; 2],
            },
        );
        let bindings = [params.as_entire_binding(), x.binding(), y.binding()];
        self.copy_words
            .dispatch(gpu, &bindings, gpu.grid_1d("copy_words", words as u64)?)
    }
}
