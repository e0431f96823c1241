//! Launcher for 13_histogram.wgsl: how many values of an f32 tensor fall
//! in each binade (bins in `ops::histogram`), for the inspector's value
//! ranges. Built only when someone looks.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, WG, build_kernels};
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

pub struct Histogram {
    log2: Kernel,
}

impl Histogram {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [log2] = build_kernels(gpu, HISTOGRAM, [LOG2]).await?;
        Ok(Histogram { log2 })
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
        let op = "log2_histogram";
        let n32 = u32::try_from(n).map_err(|_| Error::shape(op, "n", "below 2^32", n))?;
        let groups = Self::groups(n);
        let params = gpu.uniform(op, &Params { n: n32 });
        let binds = [
            (&params).into(),
            x.needs(4 * n),
            counts.needs(4 * BINS as u64),
            sums.needs(4 * groups),
        ];
        self.log2
            .dispatch(gpu, op, &binds, gpu.grid_groups(op, groups)?)
    }
}
