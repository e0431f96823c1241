//! A task's examples as training batches: a fixed held-out set drawn from
//! the seed, training examples drawn from the rest, packed a whole number
//! to a row, and targets only where the next token is an answer character.

use std::collections::HashSet;

use super::{END, Example, Task};
use crate::data::Batch;
use crate::error::{Error, Result};
use crate::kernels::loss::IGNORE_INDEX;
use crate::rng::SplitMix64;

/// Held-out examples at most (modadd holds out its whole share of pairs).
const HELD_OUT: usize = 2048;

/// Keeps the held-out draw apart from the weights' and the batches'.
const SPLIT_SEED: u64 = 0x7a5c_5e1d;

/// Keeps the fixed sample of training examples apart from the rest.
const SAMPLE_SEED: u64 = 0x5a3b_1e5e;

/// One task's examples for one run: the split, and the rows they pack into.
#[derive(Debug)]
pub struct TaskSet {
    pub task: Task,
    seed: u64,
    seq: usize,
    /// Whole examples in a row of `seq + 1` tokens.
    per_row: usize,
    held_out: Vec<Example>,
    /// Training never draws these prompts (all tasks but modadd).
    held_out_prompts: HashSet<Vec<u32>>,
    /// modadd: the pairs trained on, as indices of `0..p²`.
    pub(super) train_pairs: Vec<u32>,
}

impl TaskSet {
    /// `task`'s split for `seed` (the same seed, the same split), in rows
    /// of `seq` inputs, which must hold at least one example.
    pub fn new(task: Task, seed: u64, seq: usize) -> Result<TaskSet> {
        let len = task.example_len();
        let per_row = (seq + 1) / len;
        if per_row == 0 {
            return Err(Error::Unsupported(format!(
                "task {}'s examples are {len} tokens: a sequence of at least {} is needed",
                task.spec().name,
                len - 1
            )));
        }
        let mut rng = SplitMix64(seed ^ SPLIT_SEED);
        let (held_out, train_pairs) = match task {
            Task::ModAdd { p, train_percent } => {
                let pairs = (p as u64).pow(2);
                let mut order: Vec<u32> = (0..pairs as u32).collect();
                for i in (1..order.len()).rev() {
                    order.swap(i, rng.below(i as u64 + 1) as usize);
                }
                let train = (pairs * train_percent as u64 / 100).clamp(1, pairs - 1) as usize;
                let held_out = order[train..].iter().map(|&i| task.pair(i as u64));
                (held_out.collect(), order[..train].to_vec())
            }
            _ => {
                let wanted = HELD_OUT.min((task.space() / 5).max(1) as usize);
                let mut seen = HashSet::new();
                let mut held_out = Vec::with_capacity(wanted);
                while held_out.len() < wanted {
                    let e = task.example(&mut rng);
                    if seen.insert(e.prompt.clone()) {
                        held_out.push(e);
                    }
                }
                (held_out, vec![])
            }
        };
        let held_out_prompts = match task {
            Task::ModAdd { .. } => HashSet::new(),
            _ => held_out.iter().map(|e| e.prompt.clone()).collect(),
        };
        Ok(TaskSet {
            task,
            seed,
            seq,
            per_row,
            held_out,
            held_out_prompts,
            train_pairs,
        })
    }

    /// The held-out examples, in the order the validation batches hold them.
    pub fn held_out(&self) -> &[Example] {
        &self.held_out
    }

    /// Tokens of the examples training draws from (saturating).
    pub fn train_tokens(&self) -> usize {
        let examples = match self.task {
            Task::ModAdd { .. } => self.train_pairs.len() as u64,
            _ => self.task.space() - self.held_out.len() as u64,
        };
        examples.saturating_mul(self.task.example_len() as u64) as usize
    }

    pub fn validation_tokens(&self) -> usize {
        self.held_out.len() * self.task.example_len()
    }

    /// Every held-out token in order: what tells one split from another.
    pub fn held_out_tokens(&self) -> Vec<u32> {
        self.held_out
            .iter()
            .flat_map(|e| e.prompt.iter().chain(&e.answer).chain([&END]))
            .copied()
            .collect()
    }

    /// `batch` rows of training examples drawn uniformly from the training split.
    pub fn train_batch(&self, rng: &mut SplitMix64, batch: usize) -> Batch {
        let examples: Vec<Example> = (0..batch * self.per_row)
            .map(|_| self.train_example(rng))
            .collect();
        self.pack(&examples)
    }

    fn train_example(&self, rng: &mut SplitMix64) -> Example {
        if let Task::ModAdd { .. } = self.task {
            let i = rng.below(self.train_pairs.len() as u64) as usize;
            return self.task.pair(self.train_pairs[i] as u64);
        }
        // the held-out share is at most a fifth: few draws are redrawn
        loop {
            let e = self.task.example(rng);
            if !self.held_out_prompts.contains(&e.prompt) {
                return e;
            }
        }
    }

    /// `batches` batches of training examples, the same every time: what
    /// the model is scored on for its training accuracy (grokking shows as
    /// this at 100% long before the held-out accuracy rises).
    pub fn training_sample(&self, batch: usize, batches: usize) -> Vec<Batch> {
        let mut rng = SplitMix64(self.seed ^ SAMPLE_SEED);
        (0..batches)
            .map(|_| self.train_batch(&mut rng, batch))
            .collect()
    }

    /// The held-out examples in order, in batches of `batch` rows (the
    /// last filled with rows of no answer): the same every time.
    pub fn validation_batches(&self, batch: usize) -> Vec<Batch> {
        let rows = batch.max(1);
        self.held_out
            .chunks(rows * self.per_row)
            .map(|c| {
                let mut b = self.pack(c);
                b.inputs.resize(rows * self.seq, END);
                b.targets.resize(rows * self.seq, IGNORE_INDEX);
                b
            })
            .collect()
    }

    /// Rows of `per_row` examples each (the last row may have fewer), each
    /// ending in `END` padding; a target only where the next token answers.
    fn pack(&self, examples: &[Example]) -> Batch {
        let rows = examples.len().div_ceil(self.per_row);
        let mut b = Batch {
            inputs: Vec::with_capacity(rows * self.seq),
            targets: Vec::with_capacity(rows * self.seq),
        };
        for row in examples.chunks(self.per_row) {
            let mut tokens = Vec::with_capacity(self.seq + 1);
            let mut answers = Vec::with_capacity(self.seq + 1);
            for e in row {
                let parts = [
                    (&e.prompt[..], false),
                    (&e.answer[..], true),
                    (&[END], false),
                ];
                for (part, is_answer) in parts {
                    tokens.extend_from_slice(part);
                    answers.extend(std::iter::repeat_n(is_answer, part.len()));
                }
            }
            tokens.resize(self.seq + 1, END);
            answers.resize(self.seq + 1, false);
            b.inputs.extend_from_slice(&tokens[..self.seq]);
            b.targets
                .extend((1..=self.seq).map(|i| if answers[i] { tokens[i] } else { IGNORE_INDEX }));
        }
        b
    }
}
