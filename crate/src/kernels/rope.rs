//! Launchers for 04_rope.wgsl: rotary position embedding in place, and its
//! inverse for the backward.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_kernels};
use crate::shaders::ROPE;

pub use crate::ops::shapes::{MAX_POSITION, RopeShape, inv_freq};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    shape: RopeShape,
    _pad: u32,
}

const SLOTS: &[Slot] = &[
    Slot::Uniform(0),          // params
    Slot::Read(1, "inv_freq"), // [Dh/2] f32
    Slot::ReadWrite(2, "x"),   // [R, row_stride] f32, rotated in place
];
const FORWARD: KernelDesc = KernelDesc::of("rope_forward", SLOTS);
const BACKWARD: KernelDesc = KernelDesc::of("rope_backward", SLOTS);

pub struct Rope {
    forward: Kernel,
    backward: Kernel,
}

impl Rope {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [forward, backward] = build_kernels(gpu, ROPE, [FORWARD, BACKWARD]).await?;
        Ok(Rope { forward, backward })
    }

    /// Rotates `x` in place by each row's position.
    pub fn forward(
        &self,
        gpu: &Gpu,
        shape: RopeShape,
        inv_freq: BufferRange,
        x: BufferRange,
    ) -> Result<Dispatch> {
        self.dispatch(&self.forward, gpu, shape, inv_freq, x)
    }

    /// Rotates the gradient `dx` in place the other way (the transpose).
    pub fn backward(
        &self,
        gpu: &Gpu,
        shape: RopeShape,
        inv_freq: BufferRange,
        dx: BufferRange,
    ) -> Result<Dispatch> {
        self.dispatch(&self.backward, gpu, shape, inv_freq, dx)
    }

    fn dispatch(
        &self,
        kernel: &Kernel,
        gpu: &Gpu,
        s: RopeShape,
        inv_freq: BufferRange,
        x: BufferRange,
    ) -> Result<Dispatch> {
        let op = kernel.entry;
        if !s.head_dim.is_multiple_of(2) || s.seq_len == 0 {
            return Err(Error::shape(
                op,
                "head_dim, seq_len",
                "even, non-zero",
                format!("{}, {}", s.head_dim, s.seq_len),
            ));
        }
        let width = s.col0 as u64 + s.heads as u64 * s.head_dim as u64;
        if width > s.row_stride as u64 {
            return Err(Error::shape(
                op,
                "heads",
                format!("within a row of {}", s.row_stride),
                format!("up to column {width}"),
            ));
        }
        let last = s.pos_offset as u64 + s.seq_len as u64 - 1;
        if last > MAX_POSITION as u64 {
            return Err(Error::Limit {
                op,
                what: "position".into(),
                needed: last,
                limit: MAX_POSITION as u64,
            });
        }
        let params = gpu.uniform(op, &Params { shape: s, _pad: 0 });
        let pairs = s.rows as u64 * s.heads as u64 * (s.head_dim as u64 / 2);
        let binds = [
            (&params).into(),
            inv_freq.needs(4 * (s.head_dim as u64 / 2)),
            x.needs(4 * s.rows as u64 * s.row_stride as u64),
        ];
        kernel.dispatch(gpu, op, &binds, gpu.grid_1d(op, pairs)?)
    }
}
