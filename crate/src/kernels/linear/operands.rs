//! A recipe's operands on their way into a product: each through its
//! format (and a Hadamard transform first where the recipe says), once per
//! product, into a scratch buffer the GEMM then reads as f32: the formats
//! of `ops::formats` through the quantizers of 14_quantize.wgsl
//! (`kernels::quantize`), blocks along each operand's K or square. Weights
//! that both products read alike are quantized once per optimizer step
//! instead (`quantize_into`, `model::Mirror::Quantized`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu};
use crate::kernels::quantize::{NOISE_STATS_WORDS, Quantize};
use crate::ops::formats::{Blocks, Quantization, Scaling, Stream};
use crate::ops::products::{BlockShape, HadamardSigns, Operand, OperandFormat, Products, Rounding};

/// Which scratch an operand goes to: the product's first or second
/// operand, or the Hadamard transform's output on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    A = 0,
    B = 1,
    H = 2,
}

/// Which product an operand feeds (its counters' slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Product {
    Forward = 0,
    Dgrad = 1,
    Wgrad = 2,
}

/// Bytes between two operands' counters: room for the noise sums' words,
/// at a storage binding's offset alignment (WebGPU's is at most 256).
const STATS_STRIDE: u64 = 4 * NOISE_STATS_WORDS.next_multiple_of(64);

/// An operand `[rows, cols]` (row-major) whose K runs along the rows
/// (`k_down`: dW's operands, dX's weights) or along the columns, cut where
/// stacked weights' second and third parts begin (`rows`/`cols` if none).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub rows: u32,
    pub cols: u32,
    pub k_down: bool,
    pub row_parts: [u32; 2],
    pub col_parts: [u32; 2],
}

impl Shape {
    pub fn plain(rows: u32, cols: u32, k_down: bool) -> Shape {
        Shape {
            rows,
            cols,
            k_down,
            row_parts: [rows; 2],
            col_parts: [cols; 2],
        }
    }

    fn bytes(&self) -> u64 {
        4 * self.rows as u64 * self.cols as u64
    }
}

/// The recipe's operands, the kernels they need and their scratch.
pub struct Operands {
    pub products: Products,
    quantize: Quantize,
    /// Seeds stochastic rounding and the Hadamard signs.
    seed: u32,
    /// The step stochastic rounding draws for: 16 bytes the host rewrites
    /// before each step (`write_step`).
    step: wgpu::Buffer,
    /// Each (product, operand)'s counters, `STATS_STRIDE` apart.
    stats: wgpu::Buffer,
    scratch: [Mutex<Option<wgpu::Buffer>>; 3],
    /// Numbers each operand put through a format, for its random draws, in
    /// record order; a weight read from the copy quantized once per step
    /// keeps its number (`skip_number`), so that every product draws as it
    /// would were the weights quantized there.
    tensors: AtomicU32,
}

impl Operands {
    /// `None` where every operand reaches its product as it is.
    pub async fn new(gpu: &Gpu, products: Products, seed: u32) -> Result<Option<Operands>> {
        if products.is_exact() {
            return Ok(None);
        }
        Ok(Some(Operands {
            products,
            quantize: Quantize::new(gpu).await?,
            seed,
            step: Quantize::step_buffer(gpu, 0),
            stats: gpu.storage_buffer("quantize.stats", 6 * STATS_STRIDE)?,
            scratch: Default::default(),
            tensors: AtomicU32::new(0),
        }))
    }

    /// The step the next submission's stochastic rounding draws for, and
    /// whether it sums the gradients' noise.
    pub fn write_step(&self, gpu: &Gpu, step: u32, measure_noise: bool) {
        Quantize::write_step(gpu, (&self.step).into(), step);
        Quantize::write_noise(gpu, (&self.step).into(), measure_noise);
    }

    /// Zeroes every operand's counters, in `encoder`'s order.
    pub fn clear_counts(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.clear_buffer(&self.stats, 0, None);
    }

    /// Copies every (product, operand)'s four counters to `dst` at `offset`,
    /// packed (`OperandCounts::from_words`' 6 × 4 words), in `encoder`'s order.
    pub fn copy_counts(&self, encoder: &mut wgpu::CommandEncoder, dst: &wgpu::Buffer, offset: u64) {
        for slot in 0..6 {
            encoder.copy_buffer_to_buffer(
                &self.stats,
                slot * STATS_STRIDE,
                dst,
                offset + 16 * slot,
                16,
            );
        }
    }

    /// The noise sums of the gradient operands (dY into dgrad and into
    /// wgrad: `NoiseSums::from_words`' words 5 and 6 each) to `dst` at
    /// `offset`, packed, in `encoder`'s order.
    pub fn copy_noise(&self, encoder: &mut wgpu::CommandEncoder, dst: &wgpu::Buffer, offset: u64) {
        for (i, product) in [Product::Dgrad, Product::Wgrad].into_iter().enumerate() {
            let slot = Operands::slot(product, Side::A);
            encoder.copy_buffer_to_buffer(&self.stats, slot + 20, dst, offset + 8 * i as u64, 8);
        }
    }

    fn slot(product: Product, side: Side) -> u64 {
        (product as u64 * 2 + side as u64) * STATS_STRIDE
    }

    /// `x` as `o` says it reaches `product`, as operand `side`: the
    /// dispatches onto `d` and the scratch that holds it, or `None` where
    /// the product reads `x` itself (f32).
    pub fn prepare(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (product, side, o): (Product, Side, Operand),
        x: BufferRange,
        shape: Shape,
    ) -> Result<Option<wgpu::Buffer>> {
        if o.is_identity() {
            return Ok(None);
        }
        let out = self.scratch(gpu, side, shape.bytes())?;
        self.quantize_into(gpu, d, (product, side, o), x, (&out).into(), shape)?;
        Ok(Some(out))
    }

    /// `x` as `o` says it reaches `product`, as operand `side`, into `y`
    /// (dispatches onto `d`); counted in that (product, operand)'s slot,
    /// a gradient's noise summed there too (`copy_noise`).
    pub fn quantize_into(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (product, side, o): (Product, Side, Operand),
        x: BufferRange,
        y: BufferRange,
        shape: Shape,
    ) -> Result<()> {
        match o.format {
            OperandFormat::F32 => {
                d.push(self.hadamard(gpu, &o, false, (x, y), shape)?);
            }
            OperandFormat::Format(format) => {
                let rotated = match o.hadamard {
                    true => {
                        let h = self.scratch(gpu, Side::H, shape.bytes())?;
                        let xh = (x, (&h).into());
                        d.push(self.hadamard(gpu, &o, false, xh, shape)?);
                        Some(h)
                    }
                    false => None,
                };
                let src = rotated.as_ref().map_or(x, BufferRange::from);
                let blocks = match (o.blocks, shape.k_down) {
                    (BlockShape::Square, _) => Blocks::Square,
                    (BlockShape::Line, false) => Blocks::Rows,
                    (BlockShape::Line, true) => Blocks::Columns,
                };
                let stream = Stream {
                    seed: self.seed,
                    step: 0,
                    tensor: self.tensors.fetch_add(1, Ordering::Relaxed),
                };
                // MS-EDEN draws its scales' rounding whatever the values' is
                let draws = o.rounding == Rounding::Stochastic || format.scaling == Scaling::MsEden;
                let stochastic = draws.then_some(stream);
                let quantization = Quantization {
                    format,
                    blocks,
                    stochastic,
                    // blocks start afresh where a stacked weight's part does
                    parts: match blocks {
                        Blocks::Rows => shape.col_parts,
                        Blocks::Columns | Blocks::Square => shape.row_parts,
                    },
                };
                let stats = BufferRange {
                    buffer: &self.stats,
                    offset: Operands::slot(product, side),
                    size: 4 * NOISE_STATS_WORDS,
                };
                let [rows, cols] = [shape.rows as u64, shape.cols as u64];
                d.extend(self.quantize.encode_stepped(
                    gpu,
                    &quantization,
                    src,
                    y,
                    stats,
                    [rows, cols],
                    (&self.step).into(),
                )?);
                if product != Product::Forward && side == Side::A {
                    let step = (&self.step).into();
                    let n = rows * cols;
                    d.extend(self.quantize.encode_noise(gpu, (src, y), stats, n, step)?);
                }
            }
        }
        Ok(())
    }

    /// Passes over the number of an operand the product reads as it is: a
    /// weight from the copy quantized once per step.
    pub fn skip_number(&self) {
        self.tensors.fetch_add(1, Ordering::Relaxed);
    }

    /// QuEST's gradient mask (`Operand::clips`): `g`, the gradient of the
    /// forward operand `v` (shape `shape`, K along its rows), taken into
    /// `o`'s Hadamard basis, zeroed where `o`'s quantizer clipped `v` there,
    /// and taken back (dispatches onto `d`; the scratch of the products
    /// before, which have run by then). As Quartet's
    /// `QuestMXFP4QuantizerFn.backward`: (dY·mask)·Hᵀ.
    pub fn clip_mask(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        o: Operand,
        (v, g): (BufferRange, BufferRange),
        shape: Shape,
    ) -> Result<()> {
        let dims = [shape.rows as u64, shape.cols as u64];
        if shape.k_down {
            return Err(Error::Unsupported(
                "QuEST's mask runs along rows: a forward operand's K".into(),
            ));
        }
        if !o.hadamard {
            d.push(self.quantize.quest_mask(gpu, (v, g), dims)?);
            return Ok(());
        }
        let (h, a) = (
            self.scratch(gpu, Side::H, shape.bytes())?,
            self.scratch(gpu, Side::A, shape.bytes())?,
        );
        d.push(self.hadamard(gpu, &o, false, (v, (&h).into()), shape)?);
        d.push(self.hadamard(gpu, &o, false, (g, (&a).into()), shape)?);
        d.push(
            self.quantize
                .quest_mask(gpu, ((&h).into(), (&a).into()), dims)?,
        );
        d.push(self.hadamard(gpu, &o, true, ((&a).into(), g), shape)?);
        Ok(())
    }

    /// The random Hadamard transform (or its inverse) along `shape`'s K in
    /// `o`'s blocks (`Operand::hadamard_block`), signs from the seed: drawn
    /// once for the run (at step 0), at each step, or none. Every operand
    /// draws the same, so both of a product's cancel.
    fn hadamard(
        &self,
        gpu: &Gpu,
        o: &Operand,
        inverse: bool,
        (x, y): (BufferRange, BufferRange),
        shape: Shape,
    ) -> Result<Dispatch> {
        let (blocks, k) = match shape.k_down {
            true => (Blocks::Columns, shape.rows),
            false => (Blocks::Rows, shape.cols),
        };
        let size = o.hadamard_block(k as usize).ok_or_else(|| {
            Error::Unsupported(format!(
                "a Hadamard transform along K = {k}, which is not a multiple of 16"
            ))
        })?;
        let s = Stream {
            seed: self.seed,
            step: 0,
            tensor: 0,
        };
        let shape = [shape.rows as u64, shape.cols as u64];
        let at = (blocks, size);
        match o.hadamard_signs {
            HadamardSigns::Fixed => self
                .quantize
                .hadamard(gpu, Some(s), inverse, x, y, shape, at),
            HadamardSigns::None => self.quantize.hadamard(gpu, None, inverse, x, y, shape, at),
            HadamardSigns::PerStep => {
                let step = (&self.step).into();
                self.quantize
                    .hadamard_stepped(gpu, s, inverse, (x, y), shape, at, step)
            }
        }
    }

    /// A scratch buffer for `side` of at least `bytes`, never grown past
    /// what one binding may hold (a product binds it whole). Products run
    /// in the order they were recorded, so each reads what its own
    /// pre-pass just wrote.
    fn scratch(&self, gpu: &Gpu, side: Side, bytes: u64) -> Result<wgpu::Buffer> {
        let limit = gpu.limits.max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(Error::Limit {
                op: "linear operands",
                what: "scratch".into(),
                needed: bytes,
                limit,
            });
        }
        let mut slot = self.scratch[side as usize]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(b) = slot.as_ref().filter(|b| b.size() >= bytes) {
            return Ok(b.clone());
        }
        let label = ["operand_a", "operand_b", "operand_h"][side as usize];
        let b = gpu.storage_buffer(label, bytes)?;
        *slot = Some(b.clone());
        Ok(b)
    }
}
