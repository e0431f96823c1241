//! Launcher for 13_histogram.wgsl: how many values of an f32 tensor fall
//! in each binade (bins in `ops::histogram`), for the inspector's value
//! ranges. Built only when someone looks.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{Bind, BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, WG, build_kernels};
use crate::shaders::HISTOGRAM;

pub use crate::ops::histogram::BINS;

/// Workgroups at most: each adds its bins to the output once, so fewer
/// means fewer global atomics; 256 keep a GPU's cores busy.
const MAX_GROUPS: u64 = 256;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n: u32,
}

const LOG2: KernelDesc = KernelDesc {
    entry: "log2_histogram",
    slots: &[
        Slot::Uniform(0),             // params
        Slot::Read(1, "x"),           // [n] f32
        Slot::ReadWrite(2, "counts"), // [BINS] u32, accumulated
        Slot::ReadWrite(3, "sums"),   // [Histogram::groups(n)] f32, sums of squares
    ],
};

const RELATIVE_ERROR: KernelDesc = KernelDesc {
    entry: "relative_error",
    slots: &[
        Slot::Uniform(0),             // params
        Slot::Read(1, "x"),           // [n] f32
        Slot::Read(4, "y"),           // [n] f32, x quantized
        Slot::ReadWrite(5, "errors"), // [2 · Histogram::groups(n)] f32: Σ|y − x|/|x|, terms
    ],
};

pub struct Histogram {
    log2: Kernel,
    relative_error: Kernel,
}

impl Histogram {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [log2, relative_error] = build_kernels(gpu, HISTOGRAM, [LOG2, RELATIVE_ERROR]).await?;
        Ok(Histogram {
            log2,
            relative_error,
        })
    }

    /// Workgroups (and partial sums) of a histogram of `n` values.
    pub fn groups(n: u64) -> u64 {
        n.div_ceil(WG as u64).clamp(1, MAX_GROUPS)
    }

    /// Adds the binade counts of the `n` f32 values of `x` to `counts`
    /// (`BINS` u32); writes the partial sums of squares of its finite
    /// values to `sums` (`groups(n)` f32, summed in order on the host).
    pub fn log2(
        &self,
        gpu: &Gpu,
        x: BufferRange,
        n: u64,
        counts: BufferRange,
        sums: BufferRange,
    ) -> Result<Dispatch> {
        over_values(gpu, (&self.log2, "log2_histogram"), x, n, |groups| {
            [counts.needs(4 * BINS as u64), sums.needs(4 * groups)]
        })
    }

    /// Writes to `errors` (`2 · groups(n)` f32) each workgroup's
    /// Σ|y − x|/|x| and its terms, over the finite nonzero x whose y is
    /// finite: `y`'s mean relative error as a quantization of `x` is
    /// `mean_relative_error` of them.
    pub fn relative_error(
        &self,
        gpu: &Gpu,
        x: BufferRange,
        y: BufferRange,
        n: u64,
        errors: BufferRange,
    ) -> Result<Dispatch> {
        over_values(
            gpu,
            (&self.relative_error, "relative_error"),
            x,
            n,
            |groups| [y.needs(4 * n), errors.needs(8 * groups)],
        )
    }

    /// The mean relative error from `relative_error`'s partials (0 with no terms).
    pub fn mean_relative_error(errors: &[f32]) -> f64 {
        let (sum, terms) = errors
            .chunks(2)
            .fold((0.0, 0.0), |(s, t), p| (s + p[0] as f64, t + p[1] as f64));
        if terms == 0.0 { 0.0 } else { sum / terms }
    }
}

/// `kernel` (entry `op`) over the `n` f32 values of `x`, in
/// `Histogram::groups(n)` workgroups; its two other bindings given the
/// workgroups.
fn over_values<'a>(
    gpu: &Gpu,
    (kernel, op): (&Kernel, &'static str),
    x: BufferRange<'a>,
    n: u64,
    others: impl FnOnce(u64) -> [Bind<'a>; 2],
) -> Result<Dispatch> {
    let n32 = u32::try_from(n).map_err(|_| Error::shape(op, "n", "below 2^32", n))?;
    let groups = Histogram::groups(n);
    let params = gpu.uniform(op, &Params { n: n32 });
    let [first, second] = others(groups);
    let binds = [(&params).into(), x.needs(4 * n), first, second];
    kernel.dispatch(gpu, op, &binds, gpu.grid_groups(op, groups)?)
}
