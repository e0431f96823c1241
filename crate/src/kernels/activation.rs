//! Launchers for 06_activation.wgsl: SwiGLU and tanh-GeLU over f32, forward
//! and backward. Backwards write (not accumulate) their input gradients.

use bytemuck::{Pod, Zeroable};

use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_kernels};
use crate::shaders::ACTIVATION;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n: u32,
    ffn: u32,
    _pad: [u32; 2],
}

const SWIGLU_FORWARD_GU: KernelDesc = KernelDesc {
    entry: "swiglu_forward_gu",
    slots: &[
        Slot::Uniform(0),        // params
        Slot::Read(1, "gu"),     // [R, 2F] f32, gate | up per row
        Slot::ReadWrite(2, "h"), // [R, F] f32
        Slot::BoundaryCounts,
    ],
};
const SWIGLU_BACKWARD_GU: KernelDesc = KernelDesc {
    entry: "swiglu_backward_gu",
    slots: &[
        Slot::Uniform(0),          // params
        Slot::Read(1, "dh"),       // [R, F] f32
        Slot::Read(2, "gu"),       // [R, 2F] f32
        Slot::ReadWrite(3, "dgu"), // [R, 2F] f32, written
    ],
};
const GELU_FORWARD: KernelDesc = KernelDesc {
    entry: "gelu_forward",
    slots: &[
        Slot::Uniform(0),        // params
        Slot::Read(1, "x"),      // [n] f32
        Slot::ReadWrite(2, "y"), // [n] f32
    ],
};
const GELU_BACKWARD: KernelDesc = KernelDesc {
    entry: "gelu_backward",
    slots: &[
        Slot::Uniform(0),         // params
        Slot::Read(1, "dy"),      // [n] f32
        Slot::Read(2, "x"),       // [n] f32
        Slot::ReadWrite(3, "dx"), // [n] f32, written
    ],
};

pub struct Activation {
    swiglu_forward_gu: Kernel,
    swiglu_backward_gu: Kernel,
    gelu_forward: Kernel,
    gelu_backward: Kernel,
}

impl Activation {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [
            swiglu_forward_gu,
            swiglu_backward_gu,
            gelu_forward,
            gelu_backward,
        ] = build_kernels(
            gpu,
            ACTIVATION,
            [
                SWIGLU_FORWARD_GU,
                SWIGLU_BACKWARD_GU,
                GELU_FORWARD,
                GELU_BACKWARD,
            ],
        )
        .await?;
        Ok(Activation {
            swiglu_forward_gu,
            swiglu_backward_gu,
            gelu_forward,
            gelu_backward,
        })
    }

    /// `h = silu(gate) * up` over `rows` rows of a fused `gu = [gate | up]`
    /// (`[rows, 2·ffn]`, as one GEMM writes it) into `h` `[rows, ffn]`.
    pub fn swiglu_forward_gu(
        &self,
        gpu: &Gpu,
        gu: BufferRange,
        h: BufferRange,
        rows: u32,
        ffn: u32,
    ) -> Result<Dispatch> {
        let op = "swiglu_forward_gu";
        let n = rows_times(op, rows, ffn)?;
        let params = params(gpu, op, n, ffn);
        let binds = [
            (&params).into(),
            gu.needs(8 * n as u64),
            h.needs(4 * n as u64),
        ];
        self.swiglu_forward_gu
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }

    /// `dgu = [dgate | dup]` per row (written, not added) from `dh` `[rows, ffn]`.
    pub fn swiglu_backward_gu(
        &self,
        gpu: &Gpu,
        dh: BufferRange,
        gu: BufferRange,
        dgu: BufferRange,
        rows: u32,
        ffn: u32,
    ) -> Result<Dispatch> {
        let op = "swiglu_backward_gu";
        let n = rows_times(op, rows, ffn)?;
        let params = params(gpu, op, n, ffn);
        let binds = [
            (&params).into(),
            dh.needs(4 * n as u64),
            gu.needs(8 * n as u64),
            dgu.needs(8 * n as u64),
        ];
        self.swiglu_backward_gu
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }

    /// `y = gelu(x)`, tanh approximation, over n elements.
    pub fn gelu_forward(
        &self,
        gpu: &Gpu,
        x: BufferRange,
        y: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        let op = "gelu_forward";
        let params = params(gpu, op, n, 0);
        let bytes = 4 * n as u64;
        let binds = [(&params).into(), x.needs(bytes), y.needs(bytes)];
        self.gelu_forward
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }

    /// `dx = dy·gelu'(x)`: written, not added.
    pub fn gelu_backward(
        &self,
        gpu: &Gpu,
        dy: BufferRange,
        x: BufferRange,
        dx: BufferRange,
        n: u32,
    ) -> Result<Dispatch> {
        let op = "gelu_backward";
        let params = params(gpu, op, n, 0);
        let bytes = 4 * n as u64;
        let binds = [
            (&params).into(),
            dy.needs(bytes),
            x.needs(bytes),
            dx.needs(bytes),
        ];
        self.gelu_backward
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, n as u64)?)
    }
}

/// rows·ffn as the kernels' element count, refusing 0 and u32 overflow.
fn rows_times(op: &'static str, rows: u32, ffn: u32) -> Result<u32> {
    match rows
        .checked_mul(ffn)
        .and_then(|n| n.checked_mul(2).map(|_| n))
    {
        Some(n) if n > 0 => Ok(n),
        _ => Err(crate::error::Error::shape(
            op,
            "rows × ffn",
            "1 ..= 2^31",
            format!("{rows} × {ffn}"),
        )),
    }
}

/// The params uniform over n elements (`ffn` 0 for GeLU).
fn params(gpu: &Gpu, op: &'static str, n: u32, ffn: u32) -> wgpu::Buffer {
    let _pad = [0; 2];
    gpu.uniform(op, &Params { n, ffn, _pad })
}
