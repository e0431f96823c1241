//! Blocks and quantizations: how a matrix's values are grouped (rows,
//! columns, square tiles, cut at stacked weights' parts), where stochastic
//! rounding draws from, what a quantization counts and its noise.

use super::{BLOCKWISE_BLOCK, EDEN_GROUP_MAX, Format, NVFP4_BLOCK, Scaling, line_group};
use crate::error::{Error, Result};

/// How the values of a [rows, cols] matrix are grouped into blocks: along
/// a row (the last dimension), down a column (a GEMM operand whose K is
/// its rows), or in square tiles (weights' 2-D blocks, so that W and Wᵀ
/// quantize alike; those at the right and bottom edges, and at the end of
/// a part down the rows, are cut short).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Blocks {
    Rows,
    Columns,
    Square,
}

impl Blocks {
    /// The WGSL code (`BLOCKS_*`, composed by `wgsl_constants`).
    pub fn code(self) -> u32 {
        self as u32
    }

    /// How many blocks `side` values long (square: side × side) a [rows,
    /// cols] matrix holds, cut at `parts` along the blocks (`part_block`).
    pub fn count(self, side: usize, [rows, cols]: [usize; 2], parts: [usize; 2]) -> usize {
        match self {
            Blocks::Rows => rows * line_blocks(parts, cols, side),
            Blocks::Columns => cols * line_blocks(parts, rows, side),
            Blocks::Square => line_blocks(parts, rows, side) * cols.div_ceil(side),
        }
    }

    /// Block b of a [rows, cols] matrix, as 14_quantize.wgsl `block_at`:
    /// along a row, numbered row by row; down a column, numbered across
    /// the columns first (block b is column b mod cols), so that
    /// neighbouring blocks (the kernels' neighbouring invocations) read
    /// neighbouring words; or a side × side tile, numbered row by row. Cut
    /// at `parts` along the blocks (square: down the rows).
    pub fn block(
        self,
        side: usize,
        b: usize,
        [rows, cols]: [usize; 2],
        parts: [usize; 2],
    ) -> Block {
        match self {
            Blocks::Rows => {
                let across = line_blocks(parts, cols, side);
                let (start, len) = part_block(b % across, parts, cols, side);
                Block {
                    first: (b / across) * cols + start,
                    len,
                    width: len,
                }
            }
            Blocks::Columns => {
                let (start, len) = part_block(b / cols, parts, rows, side);
                Block {
                    first: start * cols + b % cols,
                    len,
                    width: 1,
                }
            }
            Blocks::Square => {
                let across = cols.div_ceil(side);
                let (top, height) = part_block(b / across, parts, rows, side);
                let left = (b % across) * side;
                let width = side.min(cols - left);
                Block {
                    first: top * cols + left,
                    len: height * width,
                    width,
                }
            }
        }
    }

    /// The flat index of value j of a block of a [_, cols] matrix (square:
    /// j row-major in the tile), as `block_index`.
    pub fn index(self, block: Block, j: usize, cols: usize) -> usize {
        match self {
            Blocks::Rows => block.first + j,
            Blocks::Columns => block.first + j * cols,
            Blocks::Square => block.first + (j / block.width) * cols + j % block.width,
        }
    }
}

/// A block: the flat index of its first value, how many values it has,
/// and how many of them lie along a row (a square block's width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub first: usize,
    pub len: usize,
    pub width: usize,
}

/// Block b of a line `len` long cut at `parts` (p1 ≤ p2 ≤ len): its start
/// and length. [0, p1), [p1, p2) and [p2, len) each go in blocks of `side`
/// from their own start, the last one shorter where `side` does not
/// divide them, so that no block spans two stacked weights. As
/// 14_quantize.wgsl `part_block`.
pub fn part_block(b: usize, [p1, p2]: [usize; 2], len: usize, side: usize) -> (usize, usize) {
    let mut left = b;
    for (start, end) in [(0, p1), (p1, p2), (p2, len)] {
        let blocks = (end - start).div_ceil(side);
        if left < blocks {
            let s = start + left * side;
            return (s, side.min(end - s));
        }
        left -= blocks;
    }
    (len, 0)
}

/// How many blocks `part_block` cuts a line into (`line_blocks`).
pub fn line_blocks([p1, p2]: [usize; 2], len: usize, side: usize) -> usize {
    p1.div_ceil(side) + (p2 - p1).div_ceil(side) + (len - p2).div_ceil(side)
}

/// Where stochastic rounding draws from: (seed, step, tensor), element by
/// element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    pub seed: u32,
    pub step: u32,
    pub tensor: u32,
}

/// A quantization: a format, its blocks, and stochastic rounding or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantization {
    pub format: Format,
    pub blocks: Blocks,
    pub stochastic: Option<Stream>,
    /// Where blocks start afresh along them (along a row for row blocks,
    /// down the rows for the others): cut points p1 ≤ p2 where stacked
    /// weights' second and third parts begin, so that no block spans two
    /// (`part_block`). [0, 0] or [len, len] cuts nothing.
    pub parts: [u32; 2],
}

/// What a quantization counted (14_quantize.wgsl's stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Values beyond the format's largest finite value (±Inf included).
    pub saturated: u32,
    /// Nonzero values rounded to 0.
    pub flushed: u32,
    /// Blocks whose scale saturated: blocks holding ±Inf or NaN, whose
    /// values become NaN (E8M0's NaN scale).
    pub blocks_scale_saturated: u32,
    /// Blocks whose scale underflowed: MX's (and a per-tensor scale's)
    /// clamped at 2^-127, NVFP4's rounded to 0 (the block becomes zeros).
    pub blocks_scale_underflowed: u32,
}

/// A quantization's noise: Σx² of what was quantized and Σ(y − x)² of
/// what its quantization changed, over the pairs both finite.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NoiseSums {
    pub signal: f32,
    pub noise: f32,
}

impl NoiseSums {
    /// ‖x‖ / ‖y − x‖, which FP4 All the Way (arXiv 2505.19115) finds
    /// training needs above √3 to make progress; `None` where either sum
    /// is 0 (nothing quantized, or exactly) or not finite.
    pub fn ratio(self) -> Option<f32> {
        let r = (self.signal as f64 / self.noise as f64).sqrt() as f32;
        (self.signal > 0.0 && self.noise > 0.0 && r.is_finite()).then_some(r)
    }
}

impl Quantization {
    /// `format` in `blocks`, uncut.
    pub fn new(format: Format, blocks: Blocks, stochastic: Option<Stream>) -> Quantization {
        Quantization {
            format,
            blocks,
            stochastic,
            parts: [0, 0],
        }
    }

    /// A [rows, cols] tensor's layout in the blocks, checked: `parts` cut
    /// points of its length along them; square blocks NVFP4's (rows, cols
    /// and parts multiples of 16) or the blockwise FP8's (edges cut
    /// short). `what` names the tensor in the error.
    pub fn check(&self, [rows, cols]: [usize; 2], what: &str) -> Result<()> {
        let (b, name) = (self.format.block(), self.format.name);
        let square = self.blocks == Blocks::Square;
        if square && !self.format.has_square_blocks() {
            return Err(Error::Unsupported(format!(
                "2-D blocks are NVFP4's ({NVFP4_BLOCK}×{NVFP4_BLOCK}) and e4m3-blockwise's ({BLOCKWISE_BLOCK}×{BLOCKWISE_BLOCK}); {name} has 1-D blocks"
            )));
        }
        let block = format!("{name}'s 2-D block of {b}×{b}");
        // NVFP4's tiles are whole (its tensor cores' 16×16)
        let whole = square && self.format.scaling.is_nvfp4();
        if whole && !cols.is_multiple_of(b) {
            return Err(Error::Unsupported(format!(
                "{what}: its last dimension, {cols}, is not a multiple of {block}"
            )));
        }
        if whole && !rows.is_multiple_of(b) {
            return Err(Error::Unsupported(format!(
                "{what}: its {rows} rows are not a multiple of {block}"
            )));
        }
        let [p1, p2] = self.parts();
        let len = match self.blocks {
            Blocks::Rows => cols,
            Blocks::Columns | Blocks::Square => rows,
        };
        if p1 > p2 || p2 > len {
            return Err(Error::Unsupported(format!(
                "{what}: its parts {:?} are not cut points p1 ≤ p2 ≤ {len} along its blocks",
                self.parts
            )));
        }
        if whole && !(p1.is_multiple_of(b) && p2.is_multiple_of(b)) {
            return Err(Error::Unsupported(format!(
                "{what}: its parts {:?} down the rows are not multiples of {block}",
                self.parts
            )));
        }
        if self.format.scaling == Scaling::Quest && self.stochastic.is_some() {
            return Err(Error::Unsupported(format!(
                "{name} rounds to nearest (QuEST's clipping is its point); for stochastic rounding take mxfp4 or mxfp4-tseng"
            )));
        }
        if self.format.scaling == Scaling::MsEden {
            // groups of whole blocks along the line, cut where its parts are
            if line_group(len, EDEN_GROUP_MAX).is_none() {
                return Err(Error::Unsupported(format!(
                    "{what}: {name} corrects its scales over groups of 16 to {EDEN_GROUP_MAX} values along the line, and the line's {len} values are not a multiple of 16"
                )));
            }
            if !(p1.is_multiple_of(b) && p2.is_multiple_of(b)) {
                return Err(Error::Unsupported(format!(
                    "{what}: its parts {:?} are not multiples of {name}'s block of {b}",
                    self.parts
                )));
            }
        }
        Ok(())
    }

    /// MS-EDEN's group along a [rows, cols] tensor's lines (`line_group`),
    /// for a checked quantization; 0 for the other formats.
    pub fn eden_group(&self, [rows, cols]: [usize; 2]) -> usize {
        let len = match self.blocks {
            Blocks::Rows => cols,
            Blocks::Columns | Blocks::Square => rows,
        };
        match self.format.scaling {
            Scaling::MsEden => line_group(len, EDEN_GROUP_MAX).unwrap_or(0),
            _ => 0,
        }
    }

    /// How many blocks a [rows, cols] tensor holds (a shorter last block
    /// of a part counts as one).
    pub fn block_count(&self, shape: [usize; 2]) -> usize {
        self.blocks.count(self.side(shape), shape, self.parts())
    }

    /// Values per block of a [rows, cols] tensor: the format's, or for a
    /// scale per line, the line's length (a row's, or a column's down the
    /// columns; at least 1).
    pub fn side(&self, [rows, cols]: [usize; 2]) -> usize {
        match (self.format.block(), self.blocks) {
            (0, Blocks::Columns) => rows.max(1),
            (0, _) => cols.max(1),
            (b, _) => b,
        }
    }

    /// The flat indices of block b's values in a [rows, cols] tensor.
    pub fn block_values(&self, b: usize, shape: [usize; 2]) -> impl Iterator<Item = usize> {
        let side = self.side(shape);
        let block = self.blocks.block(side, b, shape, self.parts());
        let blocks = self.blocks;
        (0..block.len).map(move |j| blocks.index(block, j, shape[1]))
    }

    fn parts(&self) -> [usize; 2] {
        self.parts.map(|p| p as usize)
    }
}
