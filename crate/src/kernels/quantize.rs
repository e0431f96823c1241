//! Launchers for 14_quantize.wgsl and 14_quantize_recipes.wgsl: a tensor
//! through a format and back (plain casts, per-tensor scaling, OCP MX
//! blocks, NVFP4, the last two with their tensor-amax pass), with the format's counters; the random Hadamard
//! transform. Twins in `reference::formats`; what the formats are in
//! `ops::formats`.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, WG, build_kernels};
use crate::ops::formats::{
    Blocks, Counts, HADAMARD_BLOCK, HADAMARD_MAX, MX_BLOCK, NoiseSums, Quantization, Scaling,
    Stream, hadamard_scale,
};
use crate::shaders::QUANTIZE_MODULE;

/// u32 words of the stats buffer: four counters and the tensor amax.
pub const STATS_WORDS: u64 = 5;
/// Workgroups summing a tensor's noise (`encode_noise`), at most.
const NOISE_GROUPS: u64 = 64;
/// The trainer sums the noise at steps 1 and every `NOISE_EVERY`-th
/// (`measures_noise`; and at a trainer's first step): at every step, its two
/// passes over each gradient took 4 % of a tiny fp8 step on lavapipe
/// (`bench --what profile`).
pub const NOISE_EVERY: u32 = 10;
/// u32 words of a stats buffer `encode_noise` also writes: the counters',
/// Σx² and Σ(y − x)² (f32 bits), the partials' count and their pairs.
pub const NOISE_STATS_WORDS: u64 = 8 + 2 * NOISE_GROUPS;
/// Bytes of a step uniform (`encode_stepped`): the step, whether
/// `encode_noise` sums (`write_noise`), then padding.
pub const STEP_BYTES: u64 = 16;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    n: u32,
    cols: u32,
    element: u32,
    scaling: u32,
    blocks: u32,
    stochastic: u32,
    seed: u32,
    tensor: u32,
    parts: [u32; 2],
    count: u32,
    lanes: u32,
    group: u32,
    _pad: [u32; 3],
}

const SLOTS: &[Slot] = &[
    Slot::Uniform(0),            // qp
    Slot::Uniform(1),            // qstep: [4] u32, the step stochastic rounding draws at
    Slot::Read(2, "x"),          // qx: [n] f32
    Slot::ReadWrite(3, "y"),     // qy: [n] f32
    Slot::ReadWrite(4, "stats"), // [5] u32: saturated, flushed, blocks saturated, underflowed, amax
];
const CAST: KernelDesc = KernelDesc::of("quantize_cast", SLOTS);
const RESET: KernelDesc = KernelDesc::of("quantize_reset", SLOTS);
const AMAX: KernelDesc = KernelDesc::of("quantize_amax", SLOTS);
const BLOCKS: KernelDesc = KernelDesc::of("quantize_blocks", SLOTS);
const EDEN: KernelDesc = KernelDesc::of("quantize_eden", SLOTS);
const QUEST: KernelDesc = KernelDesc::of("quantize_quest", SLOTS);

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct NoiseParams {
    n: u32,
    _pad: [u32; 3],
}

const NOISE_SLOTS: &[Slot] = &[
    Slot::Uniform(0),            // np
    Slot::Uniform(1),            // qstep: whether to sum (y)
    Slot::Read(2, "x"),          // qx: [n] f32, what was quantized
    Slot::ReadWrite(3, "y"),     // qy: [n] f32, its quantization
    Slot::ReadWrite(4, "stats"), // [NOISE_STATS_WORDS] u32
];
const NOISE_PARTIALS: KernelDesc = KernelDesc::of("quantize_noise_partials", NOISE_SLOTS);
const NOISE_TOTAL: KernelDesc = KernelDesc::of("quantize_noise_total", NOISE_SLOTS);

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct HadamardParams {
    n: u32,
    cols: u32,
    blocks: u32,
    /// Bit 0: the inverse; bit 1: no signs (`HADAMARD_UNSIGNED`).
    flags: u32,
    seed: u32,
    tensor: u32,
    size: u32,
    scale: f32,
}

const HADAMARD_SLOTS: &[Slot] = &[
    Slot::Uniform(0),        // hp
    Slot::Read(1, "x"),      // hx: [n] f32
    Slot::ReadWrite(2, "y"), // hy: [n] f32
    Slot::Uniform(3),        // hstep: the step the signs are drawn at
];
const HADAMARD: KernelDesc = KernelDesc::of("hadamard16", HADAMARD_SLOTS);
const HADAMARD_WIDE: KernelDesc = KernelDesc::of("hadamard_wide", HADAMARD_SLOTS);
const QUEST_MASK: KernelDesc = KernelDesc::of(
    "quest_mask",
    &[
        Slot::Uniform(0),        // hp: n and cols
        Slot::Read(1, "h"),      // hx: [n] f32, the forward operand as quantized
        Slot::ReadWrite(2, "g"), // hy: [n] f32, its gradient, masked in place
    ],
);

pub struct Quantize {
    cast: Kernel,
    reset: Kernel,
    amax: Kernel,
    blocks: Kernel,
    eden: Kernel,
    quest: Kernel,
    hadamard: Kernel,
    hadamard_wide: Kernel,
    quest_mask: Kernel,
    noise_partials: Kernel,
    noise_total: Kernel,
    spread: Spread,
}

impl Quantize {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let descs = [
            CAST,
            RESET,
            AMAX,
            BLOCKS,
            EDEN,
            QUEST,
            HADAMARD,
            HADAMARD_WIDE,
            QUEST_MASK,
            NOISE_PARTIALS,
            NOISE_TOTAL,
        ];
        let [
            cast,
            reset,
            amax,
            blocks,
            eden,
            quest,
            hadamard,
            hadamard_wide,
            quest_mask,
            noise_partials,
            noise_total,
        ] = build_kernels(gpu, QUANTIZE_MODULE, descs).await?;
        Ok(Quantize {
            cast,
            reset,
            amax,
            blocks,
            eden,
            quest,
            hadamard,
            hadamard_wide,
            quest_mask,
            noise_partials,
            noise_total,
            spread: Spread::for_adapter(gpu),
        })
    }

    /// Blocks spread as `spread` says, not as the adapter's kind chose
    /// (the tests run both on every adapter).
    pub fn with_spread(self, spread: Spread) -> Self {
        Quantize { spread, ..self }
    }

    /// `y = q(x)` for a `[rows, cols]` tensor, its blocks cut at
    /// `q.parts`, in dispatches to run in order; stochastic rounding draws at `q`'s step. `stats`
    /// (`STATS_WORDS` u32) gets the counts added, as `Counts::from_words`
    /// reads them.
    pub fn encode(
        &self,
        gpu: &Gpu,
        q: &Quantization,
        x: BufferRange,
        y: BufferRange,
        stats: BufferRange,
        shape: [u64; 2],
    ) -> Result<Vec<Dispatch>> {
        let step = Quantize::step_buffer(gpu, q.stochastic.map_or(0, |s| s.step));
        self.encode_stepped(gpu, q, x, y, stats, shape, (&step).into())
    }

    /// `encode` for a schedule recorded once and replayed: stochastic
    /// rounding draws at the step in `step` (`STEP_BYTES`, first u32; see
    /// `write_step`), not `q`'s. Several quantizations may share `stats`:
    /// the counters add up, and each takes its own tensor amax (word 4,
    /// reset by its first dispatch).
    #[allow(clippy::too_many_arguments)] // the kernels' bindings, and the shape
    pub fn encode_stepped(
        &self,
        gpu: &Gpu,
        q: &Quantization,
        x: BufferRange,
        y: BufferRange,
        stats: BufferRange,
        [rows, cols]: [u64; 2],
        step: BufferRange,
    ) -> Result<Vec<Dispatch>> {
        let op = "quantize";
        let n = rows * cols;
        let n32 = u32::try_from(n).map_err(|_| Error::shape(op, "n", "below 2^32", n))?;
        let shape = [rows as usize, cols as usize];
        q.check(shape, "the tensor")?;
        let group = q.eden_group(shape) as u64;
        let count = match group {
            0 => q.block_count(shape) as u64,
            g => n / g,
        };
        let align = gpu.limits.min_uniform_buffer_offset_alignment as u64;
        if step.size < STEP_BYTES || !step.offset.is_multiple_of(align) {
            let want = format!("{STEP_BYTES} bytes at an offset a multiple of {align}");
            let got = format!("{} bytes at {}", step.size, step.offset);
            return Err(Error::shape(op, "step", want, got));
        }
        let s = q.stochastic;
        let params = gpu.uniform(
            op,
            &Params {
                n: n32,
                cols: cols as u32,
                element: q.format.element.code(),
                scaling: q.format.scaling.code(),
                blocks: q.blocks.code(),
                stochastic: s.is_some() as u32,
                seed: s.map_or(0, |s| s.seed),
                tensor: s.map_or(0, |s| s.tensor),
                parts: q.parts,
                count: count as u32,
                lanes: self.spread.lanes(q, shape),
                group: group as u32,
                _pad: [0; 3],
            },
        );
        let binds = [
            (&params).into(),
            step.needs(STEP_BYTES),
            x.needs(4 * n),
            y.needs(4 * n),
            stats.needs(4 * STATS_WORDS),
        ];
        let mut d = Vec::new();
        if q.format.scaling.is_nvfp4() || q.format.scaling == Scaling::Tensor {
            d.push(
                self.reset
                    .dispatch(gpu, op, &binds, gpu.grid_groups(op, 1)?)?,
            );
            d.push(self.amax.dispatch(gpu, op, &binds, gpu.grid_1d(op, n)?)?);
        }
        d.push(match q.format.scaling {
            Scaling::None | Scaling::Tensor => {
                self.cast.dispatch(gpu, op, &binds, gpu.grid_1d(op, n)?)?
            }
            Scaling::MsEden => self
                .eden
                .dispatch(gpu, op, &binds, gpu.grid_1d(op, count)?)?,
            Scaling::Quest => self
                .quest
                .dispatch(gpu, op, &binds, gpu.grid_1d(op, count)?)?,
            _ => {
                let per_workgroup = (WG / self.spread.lanes(q, shape)) as u64;
                let groups = gpu.grid_groups(op, count.div_ceil(per_workgroup))?;
                self.blocks.dispatch(gpu, op, &binds, groups)?
            }
        });
        Ok(d)
    }

    /// Adds Σx² and Σ(y − x)² over the `n` pairs whose x and y − x are
    /// finite to `stats`' words 5 and 6 (`NOISE_STATS_WORDS`;
    /// `NoiseSums::from_words`), in a fixed order: `y` a quantization of `x`.
    /// Only where `step`'s second word is nonzero when they run
    /// (`write_noise`).
    pub fn encode_noise(
        &self,
        gpu: &Gpu,
        (x, y): (BufferRange, BufferRange),
        stats: BufferRange,
        n: u64,
        step: BufferRange,
    ) -> Result<[Dispatch; 2]> {
        let op = "quantize noise";
        let n32 = u32::try_from(n).map_err(|_| Error::shape(op, "n", "below 2^32", n))?;
        let params = gpu.uniform(
            op,
            &NoiseParams {
                n: n32,
                _pad: [0; 3],
            },
        );
        let binds = [
            (&params).into(),
            step.needs(STEP_BYTES),
            x.needs(4 * n),
            y.needs(4 * n),
            stats.needs(4 * NOISE_STATS_WORDS),
        ];
        let groups = Quantize::noise_groups(n);
        let partials =
            self.noise_partials
                .dispatch(gpu, op, &binds, gpu.grid_groups(op, groups)?)?;
        let total = self
            .noise_total
            .dispatch(gpu, op, &binds, gpu.grid_groups(op, 1)?)?;
        Ok([partials, total])
    }

    /// Whether the trainer sums the noise at `step`.
    pub fn measures_noise(step: u32) -> bool {
        step <= 1 || step.is_multiple_of(NOISE_EVERY)
    }

    /// Whether `encode_noise`'s dispatches reading `step` sum, from the
    /// next submission on.
    pub fn write_noise(gpu: &Gpu, step: BufferRange, measure: bool) {
        let flag = measure as u32;
        gpu.queue
            .write_buffer(step.buffer, step.offset + 4, bytemuck::bytes_of(&flag));
    }

    /// The workgroups `encode_noise` sums `n` values with.
    pub fn noise_groups(n: u64) -> u64 {
        n.div_ceil(WG as u64).clamp(1, NOISE_GROUPS)
    }

    /// A step uniform for `encode_stepped`, holding `step`.
    pub fn step_buffer(gpu: &Gpu, step: u32) -> wgpu::Buffer {
        gpu.uniform("quantize.step", &[step, 0, 0, 0])
    }

    /// Sets the step that `encode_stepped`'s dispatches reading `step`
    /// draw at, from the next submission on.
    pub fn write_step(gpu: &Gpu, step: BufferRange, t: u32) {
        gpu.queue
            .write_buffer(step.buffer, step.offset, bytemuck::bytes_of(&t));
    }

    /// The random Hadamard transform of a `[rows, cols]` tensor `x` in
    /// blocks of `size` (16, 32, 64 or 128) along its rows or down its
    /// columns (or its inverse) into `y`, signs from `s` (none: the plain
    /// Walsh–Hadamard matrix).
    #[allow(clippy::too_many_arguments)] // the kernel's bindings, the shape and the blocks
    pub fn hadamard(
        &self,
        gpu: &Gpu,
        s: Option<Stream>,
        inverse: bool,
        x: BufferRange,
        y: BufferRange,
        shape: [u64; 2],
        (blocks, size): (Blocks, usize),
    ) -> Result<Dispatch> {
        let step = Quantize::step_buffer(gpu, s.map_or(0, |s| s.step));
        let at = (blocks, size, (&step).into());
        self.hadamard_at(gpu, s, inverse, (x, y), shape, at)
    }

    /// The transform (or its inverse) with the signs drawn at the step in
    /// `step` when it runs (`STEP_BYTES`, first u32: `write_step`), `s.step`
    /// unused: signs drawn afresh every optimizer step.
    #[allow(clippy::too_many_arguments)] // the kernel's bindings, the shape and the blocks
    pub fn hadamard_stepped(
        &self,
        gpu: &Gpu,
        s: Stream,
        inverse: bool,
        (x, y): (BufferRange, BufferRange),
        shape: [u64; 2],
        (blocks, size): (Blocks, usize),
        step: BufferRange,
    ) -> Result<Dispatch> {
        self.hadamard_at(gpu, Some(s), inverse, (x, y), shape, (blocks, size, step))
    }

    fn hadamard_at(
        &self,
        gpu: &Gpu,
        s: Option<Stream>,
        inverse: bool,
        (x, y): (BufferRange, BufferRange),
        [rows, cols]: [u64; 2],
        (blocks, size, step): (Blocks, usize, BufferRange),
    ) -> Result<Dispatch> {
        let op = "hadamard";
        let n = rows * cols;
        let n32 = u32::try_from(n).map_err(|_| Error::shape(op, "n", "below 2^32", n))?;
        if !(HADAMARD_BLOCK..=HADAMARD_MAX).contains(&size) || !size.is_power_of_two() {
            let want = format!("16, 32, 64 or {HADAMARD_MAX}");
            return Err(Error::shape(op, "size", want, size));
        }
        let h = size as u64;
        let multiple = format!("a multiple of {h}");
        match blocks {
            Blocks::Rows if !cols.is_multiple_of(h) => {
                return Err(Error::shape(op, "cols", multiple, cols));
            }
            Blocks::Columns if !rows.is_multiple_of(h) => {
                return Err(Error::shape(op, "rows", multiple, rows));
            }
            Blocks::Square => {
                return Err(Error::shape(op, "blocks", "Rows or Columns", "Square"));
            }
            _ => {}
        }
        let params = gpu.uniform(
            op,
            &HadamardParams {
                n: n32,
                cols: cols as u32,
                blocks: blocks.code(),
                flags: inverse as u32 | (s.is_none() as u32) << 1,
                seed: s.map_or(0, |s| s.seed),
                tensor: s.map_or(0, |s| s.tensor),
                size: size as u32,
                scale: hadamard_scale(size),
            },
        );
        let binds = [
            (&params).into(),
            x.needs(4 * n),
            y.needs(4 * n),
            step.needs(STEP_BYTES),
        ];
        let kernel = match size {
            HADAMARD_BLOCK => &self.hadamard,
            _ => &self.hadamard_wide,
        };
        kernel.dispatch(gpu, op, &binds, gpu.grid_1d(op, n / h)?)
    }

    /// QuEST's gradient mask: the gradient `g` of a `[rows, cols]` operand,
    /// both in the operand's Hadamard basis, zeroed in place where `h` (the
    /// operand there, as `mxfp4-quest` quantized it along its rows, uncut)
    /// clipped.
    pub fn quest_mask(
        &self,
        gpu: &Gpu,
        (h, g): (BufferRange, BufferRange),
        [rows, cols]: [u64; 2],
    ) -> Result<Dispatch> {
        let op = "quest mask";
        let n = rows * cols;
        let n32 = u32::try_from(n).map_err(|_| Error::shape(op, "n", "below 2^32", n))?;
        let params = gpu.uniform(
            op,
            &HadamardParams {
                n: n32,
                cols: cols as u32,
                blocks: Blocks::Rows.code(),
                flags: 0,
                seed: 0,
                tensor: 0,
                size: MX_BLOCK as u32,
                scale: 1.0,
            },
        );
        let binds = [(&params).into(), h.needs(4 * n), g.needs(4 * n)];
        let groups = rows * cols.div_ceil(MX_BLOCK as u64);
        self.quest_mask
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, groups)?)
    }

    /// `x` ([_, cols]) through `q` on the GPU: the values back and the counts.
    pub async fn run(
        &self,
        gpu: &Gpu,
        q: &Quantization,
        x: &[f32],
        cols: usize,
    ) -> Result<(Vec<f32>, Counts)> {
        let n = x.len() as u64;
        let src = gpu.upload("quantize.x", x)?;
        let dst = gpu.storage_buffer("quantize.y", 4 * n)?;
        let stats = gpu.upload("quantize.stats", &[0u32; STATS_WORDS as usize])?;
        let shape = [n / cols.max(1) as u64, cols as u64];
        let d = self.encode(gpu, q, (&src).into(), (&dst).into(), (&stats).into(), shape)?;
        gpu.run(&d.iter().collect::<Vec<_>>()).await?;
        let y: Vec<f32> = gpu.read_back((&dst).into()).await?;
        let words: Vec<u32> = gpu.read_back((&stats).into()).await?;
        Ok((y, Counts::from_words(&words)))
    }
}

impl NoiseSums {
    /// Words 5 and 6 of a stats buffer (`Quantize::encode_noise`).
    pub fn from_words(w: &[u32]) -> NoiseSums {
        NoiseSums {
            signal: f32::from_bits(w[5]),
            noise: f32::from_bits(w[6]),
        }
    }
}

impl Counts {
    /// The counters of a stats buffer (`Quantize::encode`).
    pub fn from_words(w: &[u32]) -> Counts {
        Counts {
            saturated: w[0],
            flushed: w[1],
            blocks_scale_saturated: w[2],
            blocks_scale_underflowed: w[3],
        }
    }
}

/// How far a quantized tensor is from the original, over its finite values.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QuantError {
    /// Mean of |y − x| / |x| over the finite nonzero x whose y is finite.
    pub mean_relative: f64,
    /// ‖y − x‖₂ / ‖x‖₂ over the finite x whose y is finite (0 if ‖x‖ = 0).
    pub relative_rms: f64,
}

/// The error of `y` as a quantization of `x`, in f64 on the host.
pub fn quantization_error(x: &[f32], y: &[f32]) -> QuantError {
    let (mut rel, mut count, mut diff2, mut norm2) = (0.0, 0u64, 0.0, 0.0);
    for (&a, &b) in x.iter().zip(y) {
        if !a.is_finite() || !b.is_finite() {
            continue;
        }
        let (a, b) = (a as f64, b as f64);
        diff2 += (b - a) * (b - a);
        norm2 += a * a;
        if a != 0.0 {
            rel += (b - a).abs() / a.abs();
            count += 1;
        }
    }
    QuantError {
        mean_relative: if count == 0 { 0.0 } else { rel / count as f64 },
        relative_rms: if norm2 == 0.0 {
            0.0
        } else {
            (diff2 / norm2).sqrt()
        },
    }
}

/// How `quantize_blocks` spreads a block over invocations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// One invocation per block, looping over its values: on CPU adapters
    /// (lavapipe, SwiftShader), where a workgroup's barriers and atomics
    /// cost more than the loop (5× on lavapipe's tiny steps).
    Block,
    /// An invocation per value (up to WG per block), the block's amax a
    /// workgroup reduction: on GPUs, which read a block's words together.
    Values,
}

impl Spread {
    pub const ALL: [Spread; 2] = [Spread::Block, Spread::Values];

    pub fn for_adapter(gpu: &Gpu) -> Spread {
        match gpu.is_software() {
            true => Spread::Block,
            false => Spread::Values,
        }
    }

    /// Invocations per block of `q` (dividing WG): one, or one per value
    /// where a block holds at most WG (Four Over Six sums its errors in
    /// the values' order, so needs one of the two: NVFP4's blocks hold 256
    /// values at most).
    /// A line-scaled format's blocks are whole lines of any length: the
    /// largest power of two up to the line's values and WG.
    fn lanes(self, q: &Quantization, shape: [usize; 2]) -> u32 {
        let side = q.side(shape) as u32;
        let values = match q.blocks {
            Blocks::Square => side * side,
            Blocks::Rows | Blocks::Columns => side,
        };
        match self {
            Spread::Block => 1,
            Spread::Values => 1 << values.min(WG).ilog2(),
        }
    }
}
