//! Value ranges, the precision map live: for every tensor of one step —
//! the weights, each layer's forward boundaries, the gradients, Adam's m
//! and v — a histogram of log2|x| by binade (13_histogram.wgsl) and its
//! RMS, with the share of values each narrow format could not hold. One
//! forward and backward on a batch, without the update: nothing of the run
//! changes (its gradients are zeroed again), and it costs nothing until
//! someone looks.
//!
//! Weights, activations and gradients also go through each block format
//! of `BLOCK_FORMATS` (the GPU quantizers, blocks along each tensor's rows,
//! as `webtrain quantize`): the share of blocks whose scale saturated or
//! underflowed and the mean relative error, what a recipe putting that
//! tensor through the format would lose. Adam's moments are no product's
//! operand and are not.
//!
//! Shares are read at binade resolution: a binade counts as out of a
//! format's range when all of it is (f16's top binade, [32768, 65536),
//! holds values up to 65504 and counts as in range; Q1.15's [0.5, 1) too,
//! though it clamps at 0.999).

use serde::Serialize;

pub use super::grid::{FORMATS, FormatRange};
use crate::data::Batch;
use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch, Gpu};
use crate::kernels::histogram::{BINS, Histogram};
use crate::kernels::quantize::STATS_WORDS;
use crate::kernels::{Kernels, Quantize};
use crate::model::{Model, Pass, f32_range};
use crate::ops::formats::{Blocks, Counts, Format, Quantization};
use crate::ops::histogram::{BINADES, INF_BIN, NAN_BIN, ZERO_BIN, binade};
use crate::optim::{HostState, OptimState, StateBuffers};
use crate::train::Trainer;

/// Which values a tensor holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Weight,
    Activation,
    Gradient,
    AdamM,
    AdamV,
}

impl Kind {
    /// Whether the tensor is a product's operand, put through `BLOCK_FORMATS`.
    fn blocked(self) -> bool {
        matches!(self, Kind::Weight | Kind::Activation | Kind::Gradient)
    }
}

/// The block formats weights, activations and gradients are put through.
/// Not nvfp4-ms-eden: its scales' correction is defined over a Hadamard
/// group and rounded stochastically (a backward's format, of rotated
/// gradients), and it refuses lines that are no multiple of 16.
pub const BLOCK_FORMATS: [&str; 9] = [
    "mxfp8-e4m3",
    "mxfp8-e5m2",
    "mxfp6-e2m3",
    "mxfp6-e3m2",
    "mxfp4",
    "mxfp4-quest",
    "mxfp4-tseng",
    "nvfp4",
    "nvfp4-4over6",
];

/// One block format on one tensor, blocks along its rows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlockRange {
    pub format: &'static str,
    pub blocks: u64,
    /// Shares of the blocks whose scale saturated (the block held ±Inf or
    /// NaN) or underflowed (MX's clamped at 2^-127, NVFP4's rounded to 0).
    pub scale_saturated: f64,
    pub scale_underflowed: f64,
    /// Shares of the values beyond the element's largest after scaling,
    /// and of those flushed to 0.
    pub saturated: f64,
    pub flushed: f64,
    /// Mean |q(x) − x| / |x| over the finite nonzero x whose q(x) is finite.
    pub mean_relative_error: f64,
}

impl BlockRange {
    fn of(format: &'static str, blocks: u64, n: u64, c: &Counts, mean_relative_error: f64) -> Self {
        let share = |k: u32, of: u64| if of == 0 { 0.0 } else { k as f64 / of as f64 };
        BlockRange {
            format,
            blocks,
            scale_saturated: share(c.blocks_scale_saturated, blocks),
            scale_underflowed: share(c.blocks_scale_underflowed, blocks),
            saturated: share(c.saturated, n),
            flushed: share(c.flushed, n),
            mean_relative_error,
        }
    }
}

/// Shares (of all the tensor's values) a format would not hold.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outside {
    pub format: &'static str,
    /// Beyond its largest value (infinities included).
    pub overflow: f64,
    /// Nonzero, below its smallest positive value.
    pub underflow: f64,
    /// Between its smallest positive and smallest normal value: held with
    /// fewer significant bits.
    pub subnormal: f64,
}

/// One tensor's values.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Range {
    pub tensor: String,
    pub kind: Kind,
    pub layer: Option<u32>,
    pub count: u64,
    pub zeros: u64,
    pub infinite: u64,
    pub nan: u64,
    /// Root mean square of the finite values.
    pub rms: f64,
    /// (binade e, values with 2^e ≤ |x| < 2^(e+1)), the nonzero ones, ascending.
    pub binades: Vec<(i32, u64)>,
    pub outside: Vec<Outside>,
    /// Weights, activations and gradients: each of `BLOCK_FORMATS` (none
    /// where the measurement skipped them).
    pub blocks: Vec<BlockRange>,
}

impl Range {
    /// From a tensor's `BINS` counts and the partial sums of squares.
    pub fn of(
        tensor: String,
        kind: Kind,
        layer: Option<u32>,
        counts: &[u32],
        sums: &[f32],
    ) -> Range {
        let count: u64 = counts.iter().map(|&c| c as u64).sum();
        let binades: Vec<(i32, u64)> = counts[..BINADES]
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(b, &c)| (binade(b), c as u64))
            .collect();
        let infinite = counts[INF_BIN] as u64;
        let finite = count - infinite - counts[NAN_BIN] as u64;
        let share = |n: u64| {
            if count == 0 {
                0.0
            } else {
                n as f64 / count as f64
            }
        };
        let within = |keep: &dyn Fn(i32) -> bool| {
            binades
                .iter()
                .filter(|(e, _)| keep(*e))
                .map(|(_, c)| c)
                .sum::<u64>()
        };
        let outside = FORMATS
            .iter()
            .map(|f| Outside {
                format: f.name,
                overflow: share(within(&|e| e > f.largest) + infinite),
                underflow: share(within(&|e| e < f.smallest)),
                subnormal: share(within(&|e| {
                    e >= f.smallest && f.normal.is_some_and(|n| e < n)
                })),
            })
            .collect();
        let sum_sq: f64 = sums.iter().map(|&s| s as f64).sum();
        Range {
            tensor,
            kind,
            layer,
            count,
            zeros: counts[ZERO_BIN] as u64,
            infinite,
            nan: counts[NAN_BIN] as u64,
            rms: if finite == 0 {
                0.0
            } else {
                (sum_sq / finite as f64).sqrt()
            },
            binades,
            outside,
            blocks: Vec::new(),
        }
    }
}

/// One tensor to measure: where its values are.
#[derive(Clone)]
struct Source<'a> {
    tensor: String,
    kind: Kind,
    layer: Option<u32>,
    values: BufferRange<'a>,
    n: u64,
    /// Its rows' length: blocks run along them.
    cols: u64,
}

/// Every parameter tensor's values in `buffer` (a `ParamLayout` vector).
fn param_sources<'a>(m: &'a Model, kind: Kind, buffer: &'a wgpu::Buffer) -> Vec<Source<'a>> {
    m.layout
        .tensors
        .iter()
        .map(|p| Source {
            tensor: p.name.clone(),
            kind,
            layer: p.role.layer(),
            values: f32_range(buffer, p.offset, p.len()),
            n: p.len(),
            cols: p.cols as u64,
        })
        .collect()
}

/// Every layer's forward boundaries, then the final norm's output.
fn activation_sources(m: &Model) -> Vec<Source<'_>> {
    let rows = m.shape.rows() as u64;
    let mut activations = Vec::new();
    for (l, layer) in m.acts.layers.iter().enumerate() {
        for (name, buffer) in layer.boundaries() {
            activations.push(Source {
                tensor: format!("layers.{l}.{name}"),
                kind: Kind::Activation,
                layer: Some(l as u32),
                values: buffer.into(),
                n: buffer.size() / 4,
                cols: buffer.size() / 4 / rows,
            });
        }
    }
    activations.push(Source {
        tensor: "final_norm.out".into(),
        kind: Kind::Activation,
        layer: None,
        values: (&m.acts.xnf).into(),
        n: m.acts.xnf.size() / 4,
        cols: m.acts.xnf.size() / 4 / rows,
    });
    activations
}

/// Low-precision moments read back, turned to f32 and uploaded (m, v):
/// the histogram reads f32. None in fp32 state: the GPU's own are read.
async fn moments_as_f32(t: &Trainer) -> Result<Option<(wgpu::Buffer, wgpu::Buffer)>> {
    let gpu = &t.gpu;
    if t.config.optim.state == OptimState::Fp32 {
        return Ok(None);
    }
    match t.optimizer.read_state(gpu).await?.convert(OptimState::Fp32) {
        HostState::Fp32 { m, v } => Ok(Some((
            gpu.upload("adam_m (f32)", &m)?,
            gpu.upload("adam_v (f32)", &v)?,
        ))),
        _ => unreachable!("converted to fp32"),
    }
}

/// Adam's f32 m and v: its own buffers, or the f32 copies of low-precision ones.
fn moment_buffers<'a>(
    state: &'a StateBuffers,
    copies: &'a Option<(wgpu::Buffer, wgpu::Buffer)>,
) -> (&'a wgpu::Buffer, &'a wgpu::Buffer) {
    match (state, copies) {
        (StateBuffers::Fp32 { m, v }, _) => (m, v),
        (_, Some((m, v))) => (m, v),
        _ => unreachable!("low-precision moments are read back above"),
    }
}

/// Each tensor's counts and partial sums, at binding-aligned offsets of
/// two buffers: slot `i` is tensor `i`'s.
struct Slots {
    counts: wgpu::Buffer,
    sums: wgpu::Buffer,
    counts_slot: u64,
    sums_slot: u64,
}

impl Slots {
    fn new(gpu: &Gpu, tensors: usize) -> Result<Slots> {
        let align = gpu.limits.min_storage_buffer_offset_alignment as u64;
        let slot = |bytes: u64| bytes.div_ceil(align) * align;
        let counts_slot = slot(4 * BINS as u64);
        let sums_slot = slot(4 * Histogram::groups(u32::MAX as u64));
        Ok(Slots {
            counts: gpu.storage_buffer("range counts", counts_slot * tensors as u64)?,
            sums: gpu.storage_buffer("range sums", sums_slot * tensors as u64)?,
            counts_slot,
            sums_slot,
        })
    }

    /// Zeroes every count: the histogram adds to them.
    fn zero_counts(&self, gpu: &Gpu, k: &Kernels) -> Result<Dispatch> {
        k.infra.fill(
            gpu,
            (&self.counts).into(),
            (self.counts.size() / 4) as u32,
            0.0,
        )
    }

    /// The histogram of tensor `i`, `s`, into its slot.
    fn histogram(&self, gpu: &Gpu, hist: &Histogram, i: usize, s: &Source) -> Result<Dispatch> {
        let range = |buffer, stride: u64, len: u64| BufferRange {
            buffer,
            offset: i as u64 * stride,
            size: 4 * len,
        };
        let c = range(&self.counts, self.counts_slot, BINS as u64);
        let p = range(&self.sums, self.sums_slot, Histogram::groups(s.n));
        hist.log2(gpu, s.values, s.n, c, p)
    }

    /// Every tensor's range, from the slots read back.
    async fn ranges(&self, gpu: &Gpu, all: &[&Source<'_>]) -> Result<Vec<Range>> {
        let counts: Vec<u32> = gpu.read_back((&self.counts).into()).await?;
        let sums: Vec<f32> = gpu.read_back((&self.sums).into()).await?;
        Ok(all
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let c = &counts[i * (self.counts_slot / 4) as usize..][..BINS];
                let p =
                    &sums[i * (self.sums_slot / 4) as usize..][..Histogram::groups(s.n) as usize];
                Range::of(s.tensor.clone(), s.kind, s.layer, c, p)
            })
            .collect())
    }
}

/// Each blocked tensor through each of `BLOCK_FORMATS`, into one scratch,
/// with its counts and relative error at binding-aligned slots: slot
/// `i · formats + f` is tensor `i`'s in format `f`.
struct BlockSlots {
    quantize: Quantize,
    formats: Vec<Format>,
    scratch: wgpu::Buffer,
    step: wgpu::Buffer,
    stats: wgpu::Buffer,
    errors: wgpu::Buffer,
    stats_slot: u64,
    errors_slot: u64,
}

impl BlockSlots {
    async fn new(gpu: &Gpu, all: &[&Source<'_>]) -> Result<BlockSlots> {
        let formats = BLOCK_FORMATS
            .iter()
            .map(|name| Format::parse(name))
            .collect::<Result<Vec<_>>>()?;
        let align = gpu.limits.min_storage_buffer_offset_alignment as u64;
        let slot = |bytes: u64| bytes.div_ceil(align) * align;
        let (stats_slot, errors_slot) = (
            slot(4 * STATS_WORDS),
            slot(8 * Histogram::groups(u32::MAX as u64)),
        );
        let slots = (all.len() * formats.len()) as u64;
        let largest = all.iter().filter(|s| s.kind.blocked()).map(|s| s.n);
        Ok(BlockSlots {
            quantize: Quantize::new(gpu).await?,
            formats,
            scratch: gpu.storage_buffer("range blocks", 4 * largest.max().unwrap_or(1))?,
            step: Quantize::step_buffer(gpu, 0),
            stats: gpu.storage_buffer("range block counts", stats_slot * slots)?,
            errors: gpu.storage_buffer("range block errors", errors_slot * slots)?,
            stats_slot,
            errors_slot,
        })
    }

    fn quantization(&self, f: usize) -> Quantization {
        Quantization::new(self.formats[f], Blocks::Rows, None)
    }

    /// Tensor `i`, `s`, through every format: quantized into the scratch,
    /// then measured against itself (none for tensors not blocked).
    fn dispatches(
        &self,
        gpu: &Gpu,
        hist: &Histogram,
        i: usize,
        s: &Source,
    ) -> Result<Vec<Dispatch>> {
        if !s.kind.blocked() {
            return Ok(Vec::new());
        }
        let scratch = BufferRange {
            buffer: &self.scratch,
            offset: 0,
            size: 4 * s.n,
        };
        let mut d = Vec::new();
        for f in 0..self.formats.len() {
            let at = (i * self.formats.len() + f) as u64;
            let stats = BufferRange {
                buffer: &self.stats,
                offset: at * self.stats_slot,
                size: 4 * STATS_WORDS,
            };
            let errors = BufferRange {
                buffer: &self.errors,
                offset: at * self.errors_slot,
                size: 8 * Histogram::groups(s.n),
            };
            let shape = [s.n / s.cols, s.cols];
            let q = self.quantization(f);
            d.extend(self.quantize.encode_stepped(
                gpu,
                &q,
                s.values,
                scratch,
                stats,
                shape,
                (&self.step).into(),
            )?);
            d.push(hist.relative_error(gpu, s.values, scratch, s.n, errors)?);
        }
        Ok(d)
    }

    /// Each tensor's block ranges (none for those not blocked), from the slots read back.
    async fn read(&self, gpu: &Gpu, all: &[&Source<'_>]) -> Result<Vec<Vec<BlockRange>>> {
        let words: Vec<u32> = gpu.read_back((&self.stats).into()).await?;
        let errors: Vec<f32> = gpu.read_back((&self.errors).into()).await?;
        let per = |slot: u64| (slot / 4) as usize;
        Ok(all
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if !s.kind.blocked() {
                    return Vec::new();
                }
                (0..self.formats.len())
                    .map(|f| {
                        let at = i * self.formats.len() + f;
                        let c = Counts::from_words(&words[at * per(self.stats_slot)..]);
                        let e = &errors[at * per(self.errors_slot)..]
                            [..2 * Histogram::groups(s.n) as usize];
                        let blocks = self
                            .quantization(f)
                            .block_count([(s.n / s.cols) as usize, s.cols as usize]);
                        BlockRange::of(
                            self.formats[f].name,
                            blocks as u64,
                            s.n,
                            &c,
                            Histogram::mean_relative_error(e),
                        )
                    })
                    .collect()
            })
            .collect())
    }
}

/// Whether a measurement puts tensors through `BLOCK_FORMATS` too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockFormats {
    Measured,
    /// The histograms alone (a measurement every N steps while training).
    Skipped,
}

/// Every tensor's range for a forward and backward of the trainer's
/// weights on `batch`, after every step submitted so far, with each
/// weight's, activation's and gradient's block formats where `blocks`
/// says. Adam's moments are the GPU's own in fp32 state; int8 state is
/// read back, dequantized and measured from a host copy.
pub async fn measure(t: &mut Trainer, batch: &Batch, blocks: BlockFormats) -> Result<Vec<Range>> {
    t.flush().await?;
    let (gpu, m) = (&t.gpu, &t.model);
    let hist = Histogram::new(gpu).await?;
    let moment_copies = moments_as_f32(t).await?;
    let (adam_m, adam_v) = moment_buffers(&t.optimizer.state, &moment_copies);
    let params = |kind, buffer| param_sources(m, kind, buffer);
    let weights = m.f32_weights(gpu, &t.k).await?;
    let before = [params(Kind::Weight, &weights), activation_sources(m)].concat();
    let after = [
        params(Kind::Gradient, &m.params.grads),
        params(Kind::AdamM, adam_m),
        params(Kind::AdamV, adam_v),
    ]
    .concat();
    let all: Vec<&Source> = before.iter().chain(&after).collect();
    let slots = Slots::new(gpu, all.len())?;
    let blocks = match blocks {
        BlockFormats::Measured => Some(BlockSlots::new(gpu, &all).await?),
        BlockFormats::Skipped => None,
    };
    let zero_counts = slots.zero_counts(gpu, &t.k)?;
    let histograms = |first: usize, sources: &[Source]| -> Result<Vec<Dispatch>> {
        let mut d = Vec::new();
        for (i, s) in sources.iter().enumerate() {
            d.push(slots.histogram(gpu, &hist, first + i, s)?);
            if let Some(b) = &blocks {
                d.extend(b.dispatches(gpu, &hist, first + i, s)?);
            }
        }
        Ok(d)
    };
    let on_forward = histograms(0, &before)?;
    let on_backward = histograms(before.len(), &after)?;
    m.write_batch(gpu, &batch.inputs, &batch.targets)?;
    // the run goes on as if nothing happened: AdamW expects zero gradients
    let order: Vec<&Dispatch> = [
        vec![&zero_counts],
        m.pass(Pass::Forward),
        on_forward.iter().collect(),
        m.pass(Pass::Backward),
        on_backward.iter().collect(),
        m.pass(Pass::ZeroGrads),
    ]
    .concat();
    gpu.run(&order).await?;
    let mut ranges = slots.ranges(gpu, &all).await?;
    if let Some(blocks) = blocks {
        for (r, b) in ranges.iter_mut().zip(blocks.read(gpu, &all).await?) {
            r.blocks = b;
        }
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::histogram::MIN_BINADE;

    #[test]
    fn shares_are_read_by_binade() {
        let mut counts = vec![0u32; BINS];
        let bin = |e: i32| (e - MIN_BINADE) as usize;
        counts[bin(16)] = 1; // 65536 ≤ |x|: beyond f16 and E4M3, not bf16
        counts[bin(-20)] = 2; // f16 subnormal, E4M3 and Q1.15 underflow
        counts[bin(-1)] = 3; // in every range
        counts[ZERO_BIN] = 3;
        counts[INF_BIN] = 1;
        let r = Range::of("t".into(), Kind::Weight, None, &counts, &[4.0, 5.0]);
        assert_eq!((r.count, r.zeros, r.infinite, r.nan), (10, 3, 1, 0));
        assert_eq!(r.binades, [(-20, 2), (-1, 3), (16, 1)]);
        assert!(
            (r.rms - (9.0f64 / 9.0).sqrt()).abs() < 1e-12,
            "over the 9 finite values"
        );
        let f = |name| r.outside.iter().find(|o| o.format == name).unwrap();
        assert_eq!(
            (f("bf16").overflow, f("bf16").underflow, f("bf16").subnormal),
            (0.1, 0.0, 0.0)
        );
        assert_eq!(
            (f("f16").overflow, f("f16").underflow, f("f16").subnormal),
            (0.2, 0.0, 0.2)
        );
        assert_eq!((f("e4m3").overflow, f("e4m3").underflow), (0.2, 0.2));
        assert_eq!(
            (
                f("q1.15").overflow,
                f("q1.15").underflow,
                f("q1.15").subnormal
            ),
            (0.2, 0.2, 0.0)
        );
    }
}
