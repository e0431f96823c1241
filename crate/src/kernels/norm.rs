//! Launchers for 02_norm.wgsl: RMSNorm forward (f32 or f16 gain) and its
//! backward (dx accumulated and dgain's partials in one dispatch, then a
//! fixed-order finish: deterministic).

use bytemuck::{Pod, Zeroable};

use super::Weights;
use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_kernels};
use crate::shaders::NORM;

/// Rows per workgroup, and so per dgain partial: `ROWS` in 02_norm.wgsl.
const ROWS: u64 = 8;
/// Columns per workgroup of the dgain finish: `WG / FINISH_LANES`.
const FINISH_COLUMNS: u64 = 4;

#[derive(Clone, Copy, Debug)]
pub struct NormShape {
    pub rows: u32, // R
    pub d: u32,    // D
    pub eps: f32,
}

impl NormShape {
    /// Bytes of the scratch `backward` needs for the dgain partials.
    pub fn backward_scratch_bytes(&self) -> u64 {
        4 * (self.rows as u64).div_ceil(ROWS) * self.d as u64
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    rows: u32,
    d: u32,
    eps: f32,
    _pad: u32,
}

const FORWARD_SLOTS: &[Slot] = &[
    Slot::Uniform(0),           // params
    Slot::Read(1, "x"),         // [R, D] f32
    Slot::Read(2, "gain"),      // [D] f32, or gain_h: [D] f16
    Slot::ReadWrite(3, "y"),    // [R, D] f32
    Slot::ReadWrite(4, "rrms"), // [R] f32, saved for backward
    Slot::BoundaryCounts,
];
const BACKWARD_SLOTS: &[Slot] = &[
    Slot::Uniform(0),              // params
    Slot::Read(1, "x"),            // [R, D] f32
    Slot::Read(2, "gain"),         // [D] f32, or gain_h: [D] f16
    Slot::Read(3, "rrms"),         // rrms_saved: [R] f32
    Slot::Read(4, "dy"),           // [R, D] f32
    Slot::ReadWrite(5, "dx"),      // [R, D] f32, accumulated
    Slot::ReadWrite(6, "scratch"), // partials: [⌈R/8⌉, D] f32, dgain's
];
const FORWARD: KernelDesc = KernelDesc::of("rmsnorm_forward", FORWARD_SLOTS);
const FORWARD_W16: KernelDesc = KernelDesc::of("rmsnorm_forward_w16", FORWARD_SLOTS);
const BACKWARD: KernelDesc = KernelDesc::of("rmsnorm_backward", BACKWARD_SLOTS);
const BACKWARD_W16: KernelDesc = KernelDesc::of("rmsnorm_backward_w16", BACKWARD_SLOTS);
const DGAIN_FINISH: KernelDesc = KernelDesc {
    entry: "rmsnorm_dgain_finish",
    slots: &[
        Slot::Uniform(0),            // params
        Slot::Read(1, "scratch"),    // partials_in: [⌈R/8⌉, D] f32
        Slot::ReadWrite(2, "dgain"), // [D] f32, accumulated
    ],
};

/// What RMSNorm's backward reads and writes.
pub struct NormBackward<'a> {
    pub x: BufferRange<'a>,
    pub gain: Weights<'a>,
    pub rrms: BufferRange<'a>,
    pub dy: BufferRange<'a>,
    /// Accumulated: holds the residual's gradient already, or zeros.
    pub dx: BufferRange<'a>,
    /// Accumulated.
    pub dgain: BufferRange<'a>,
    /// `NormShape::backward_scratch_bytes` bytes.
    pub scratch: BufferRange<'a>,
}

pub struct RmsNorm {
    forward: Kernel,
    forward_w16: Kernel,
    backward: Kernel,
    backward_w16: Kernel,
    dgain_finish: Kernel,
}

impl RmsNorm {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [forward, forward_w16, backward, backward_w16, dgain_finish] = build_kernels(
            gpu,
            NORM,
            [FORWARD, FORWARD_W16, BACKWARD, BACKWARD_W16, DGAIN_FINISH],
        )
        .await?;
        Ok(RmsNorm {
            forward,
            forward_w16,
            backward,
            backward_w16,
            dgain_finish,
        })
    }

    /// `y = x · rrms · gain` per row, saving `rrms = 1/sqrt(mean(x²) + eps)`.
    pub fn forward(
        &self,
        gpu: &Gpu,
        shape: NormShape,
        x: BufferRange,
        gain: Weights,
        y: BufferRange,
        rrms: BufferRange,
    ) -> Result<Dispatch> {
        let op = "rmsnorm_forward";
        let (r, d) = (shape.rows as u64, shape.d as u64);
        let kernel = match gain.is_f16() {
            false => &self.forward,
            true => &self.forward_w16,
        };
        let params = gpu.uniform(op, &params(shape));
        let binds = [
            (&params).into(),
            x.needs(4 * r * d),
            gain.range().needs(gain.bytes(d)),
            y.needs(4 * r * d),
            rrms.needs(4 * r),
        ];
        kernel.dispatch(gpu, op, &binds, gpu.grid_groups(op, r.div_ceil(ROWS))?)
    }

    /// dx and dgain, in two dispatches to record in order.
    pub fn backward(&self, gpu: &Gpu, shape: NormShape, b: &NormBackward) -> Result<[Dispatch; 2]> {
        let op = "rmsnorm_backward";
        let (r, d) = (shape.rows as u64, shape.d as u64);
        let kernel = match b.gain.is_f16() {
            false => &self.backward,
            true => &self.backward_w16,
        };
        let params = gpu.uniform(op, &params(shape));
        let scratch = b.scratch.needs(shape.backward_scratch_bytes());
        let dx_and_partials = kernel.dispatch(
            gpu,
            op,
            &[
                (&params).into(),
                b.x.needs(4 * r * d),
                b.gain.range().needs(b.gain.bytes(d)),
                b.rrms.needs(4 * r),
                b.dy.needs(4 * r * d),
                b.dx.needs(4 * r * d),
                scratch,
            ],
            gpu.grid_groups(op, r.div_ceil(ROWS))?,
        )?;
        let finish = self.dgain_finish.dispatch(
            gpu,
            op,
            &[(&params).into(), scratch, b.dgain.needs(4 * d)],
            gpu.grid_groups(op, d.div_ceil(FINISH_COLUMNS))?,
        )?;
        Ok([dx_and_partials, finish])
    }
}

fn params(shape: NormShape) -> Params {
    Params {
        rows: shape.rows,
        d: shape.d,
        eps: shape.eps,
        _pad: 0,
    }
}
