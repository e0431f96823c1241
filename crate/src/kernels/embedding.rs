//! Launchers for 01_embedding.wgsl: lookup from an f32 or f16 table, and
//! the scatter-add backward, deterministic over [`TokenRuns`].
//! Legend: S tokens, D d_model, V vocabulary, U distinct in-range tokens.

use bytemuck::{Pod, Zeroable};

use super::Weights;
use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_kernels};
use crate::shaders::EMBEDDING;

#[derive(Clone, Copy, Debug)]
pub struct EmbeddingShape {
    pub tokens: u32, // S
    pub d: u32,      // D
    pub vocab: u32,  // V
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    tokens: u32,
    d: u32,
    vocab: u32,
    _pad: u32,
}

const LOOKUP_SLOTS: &[Slot] = &[
    Slot::Uniform(0),                 // params
    Slot::Read(1, "tokens"),          // [S] u32
    Slot::Read(2, "table"),           // [V, D] f32, or table_h: [V, D] f16
    Slot::ReadWrite(3, "out"),        // [S, D] f32
    Slot::ReadWrite(4, "bad_tokens"), // atomic u32, += tokens >= V
    Slot::BoundaryCounts,
];
const LOOKUP: KernelDesc = KernelDesc::of("embed_lookup", LOOKUP_SLOTS);
const LOOKUP_W16: KernelDesc = KernelDesc::of("embed_lookup_w16", LOOKUP_SLOTS);
const BACKWARD_SORTED: KernelDesc = KernelDesc {
    entry: "embed_backward_sorted",
    slots: &[
        Slot::Uniform(0),             // params
        Slot::Read(1, "index"),       // runs: [3S + 2] u32, TokenRuns::to_words
        Slot::Read(2, "dout"),        // [S, D] f32
        Slot::ReadWrite(3, "dtable"), // [V, D] f32, accumulated
    ],
};

pub struct Embedding {
    lookup: Kernel,
    lookup_w16: Kernel,
    backward_sorted: Kernel,
}

impl Embedding {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [lookup, lookup_w16, backward_sorted] =
            build_kernels(gpu, EMBEDDING, [LOOKUP, LOOKUP_W16, BACKWARD_SORTED]).await?;
        Ok(Embedding {
            lookup,
            lookup_w16,
            backward_sorted,
        })
    }

    /// `out[s] = table[tokens[s]]`; tokens >= V give zero rows and add to
    /// `bad_tokens` (one u32, not reset here).
    pub fn lookup(
        &self,
        gpu: &Gpu,
        shape: EmbeddingShape,
        tokens: BufferRange,
        table: Weights,
        out: BufferRange,
        bad_tokens: BufferRange,
    ) -> Result<Dispatch> {
        let op = "embed_lookup";
        let (s, d, v) = (shape.tokens as u64, shape.d as u64, shape.vocab as u64);
        let kernel = match table.is_f16() {
            false => &self.lookup,
            true => &self.lookup_w16,
        };
        let params = gpu.uniform(op, &params(shape));
        let binds = [
            (&params).into(),
            tokens.needs(4 * s),
            table.range().needs(table.bytes(v * d)),
            out.needs(4 * s * d),
            bad_tokens.needs(4),
        ];
        kernel.dispatch(gpu, op, &binds, gpu.grid_1d(op, s * d)?)
    }

    /// `dtable[t] += Σ dout[s]` over the positions s of each token t of
    /// `index` (the words of a [`TokenRuns`] built for `shape.tokens`
    /// tokens), summed in ascending position order, skipping non-finite
    /// values: the same bits every run. The grid is the worst case S·D, so
    /// the dispatch serves every batch of S tokens: between steps rewrite
    /// only `index` (`queue.write_buffer`).
    pub fn backward_sorted(
        &self,
        gpu: &Gpu,
        shape: EmbeddingShape,
        index: BufferRange,
        dout: BufferRange,
        dtable: BufferRange,
    ) -> Result<Dispatch> {
        let op = "embed_backward_sorted";
        let (s, d, v) = (shape.tokens as u64, shape.d as u64, shape.vocab as u64);
        let params = gpu.uniform(op, &params(shape));
        let binds = [
            (&params).into(),
            index.needs(4 * TokenRuns::words(shape.tokens)),
            dout.needs(4 * s * d),
            dtable.needs(4 * v * d),
        ];
        self.backward_sorted
            .dispatch(gpu, op, &binds, gpu.grid_1d(op, s * d)?)
    }
}

/// A batch's positions grouped by token: the index of
/// `embed_backward_sorted`. Runs are in ascending token order, positions
/// ascending within a run; tokens >= V are left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRuns {
    /// S: the batch's length, which fixes the serialised length.
    pub tokens: u32,
    /// [U + 1]: run r is `order[starts[r]..starts[r + 1]]`.
    pub starts: Vec<u32>,
    /// [U]: the token of each run.
    pub ids: Vec<u32>,
    /// [N ≤ S]: the in-range positions, grouped by token.
    pub order: Vec<u32>,
}

impl TokenRuns {
    pub fn new(tokens: &[u32], vocab: u32) -> Self {
        let mut order: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&s| tokens[s as usize] < vocab)
            .collect();
        order.sort_by_key(|&s| tokens[s as usize]); // stable: positions stay ascending
        let (mut starts, mut ids) = (Vec::new(), Vec::new());
        for (k, &s) in order.iter().enumerate() {
            let t = tokens[s as usize];
            if ids.last() != Some(&t) {
                starts.push(k as u32);
                ids.push(t);
            }
        }
        starts.push(order.len() as u32);
        TokenRuns {
            tokens: tokens.len() as u32,
            starts,
            ids,
            order,
        }
    }

    /// U: distinct in-range tokens.
    pub fn runs(&self) -> u32 {
        self.ids.len() as u32
    }

    /// u32 words of the serialised index for S tokens, whatever the batch:
    /// `[U, starts[0..=S], ids[0..S], order[0..S]]`, 3S + 2.
    pub fn words(s: u32) -> u64 {
        3 * s as u64 + 2
    }

    /// The serialised index, `words(S)` long. Past the U runs, starts repeat
    /// N (runs are empty) and ids and order are zero; the kernel reads none
    /// of it.
    pub fn to_words(&self) -> Vec<u32> {
        let s = self.tokens as usize;
        let mut w = Vec::with_capacity(Self::words(self.tokens) as usize);
        w.push(self.runs());
        w.extend(&self.starts);
        w.resize(s + 2, self.order.len() as u32);
        w.extend(&self.ids);
        w.resize(2 * s + 2, 0);
        w.extend(&self.order);
        w.resize(3 * s + 2, 0);
        w
    }
}

fn params(shape: EmbeddingShape) -> Params {
    Params {
        tokens: shape.tokens,
        d: shape.d,
        vocab: shape.vocab,
        _pad: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_group_positions_by_token_in_ascending_order() {
        let runs = TokenRuns::new(&[5, 2, 5, 9, 2, 5, 0], 6);
        assert_eq!(runs.ids, [0, 2, 5]);
        assert_eq!(runs.starts, [0, 1, 3, 6]);
        assert_eq!(runs.order, [6, 1, 4, 0, 2, 5]); // token 9 >= V left out
        assert_eq!(
            runs.to_words(),
            [
                3, /* starts */ 0, 1, 3, 6, 6, 6, 6, 6, /* ids */ 0, 2, 5, 0, 0, 0, 0,
                /* order */ 6, 1, 4, 0, 2, 5, 0
            ]
        );
    }

    #[test]
    fn the_serialised_length_depends_only_on_the_batch_length() {
        let s = 37u32;
        let batches: [Vec<u32>; 4] = [
            (0..s).collect(),                // U = S
            vec![3; s as usize],             // U = 1
            (0..s).map(|i| i % 4).collect(), // U = 4
            vec![99; s as usize],            // all out of range: U = 0
        ];
        for tokens in &batches {
            let runs = TokenRuns::new(tokens, 50);
            let words = runs.to_words();
            assert_eq!(words.len() as u64, TokenRuns::words(s));
            assert_eq!(words[0], runs.runs());
            assert_eq!(runs.starts.len(), runs.ids.len() + 1);
            assert_eq!(*runs.starts.last().unwrap() as usize, runs.order.len());
        }
        assert_eq!(TokenRuns::new(&batches[3], 50).runs(), 0);
        assert_eq!(TokenRuns::new(&[], 50).to_words(), [0, 0]);
    }

    #[test]
    fn every_in_range_position_is_in_exactly_one_run_of_its_token() {
        let tokens: Vec<u32> = (0..1000u32).map(|i| (i * 7919 + 13) % 61).collect();
        let runs = TokenRuns::new(&tokens, 50);
        let mut seen = vec![false; tokens.len()];
        for r in 0..runs.runs() as usize {
            let run = &runs.order[runs.starts[r] as usize..runs.starts[r + 1] as usize];
            assert!(
                !run.is_empty() && run.windows(2).all(|p| p[0] < p[1]),
                "run {r} ascending"
            );
            for &s in run {
                assert_eq!(tokens[s as usize], runs.ids[r]);
                assert!(!seen[s as usize]);
                seen[s as usize] = true;
            }
        }
        assert!(runs.ids.windows(2).all(|p| p[0] < p[1]));
        assert!((0..tokens.len()).all(|s| seen[s] == (tokens[s] < 50)));
    }
}
