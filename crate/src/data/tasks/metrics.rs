//! Accuracy on a task's answers: an answer is a maximal run of targets that
//! count within a row (answers are parted by their prompts), right when
//! every character is the model's most likely one.

use std::ops::Range;

use crate::kernels::loss::IGNORE_INDEX;

/// Exact-match and per-character accuracy, summed over batches.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Accuracy {
    pub answers: usize,
    pub right_answers: usize,
    pub chars: usize,
    pub right_chars: usize,
}

impl Accuracy {
    /// The answers in `targets` (`[rows, seq]`) against the `predicted` token at each position.
    pub fn of(targets: &[u32], predicted: &[u32], seq: usize) -> Accuracy {
        let mut a = Accuracy::default();
        for span in answers(targets, seq) {
            let right = span.clone().filter(|&i| predicted[i] == targets[i]).count();
            a.answers += 1;
            a.right_answers += (right == span.len()) as usize;
            a.chars += span.len();
            a.right_chars += right;
        }
        a
    }

    pub fn add(&mut self, other: Accuracy) {
        self.answers += other.answers;
        self.right_answers += other.right_answers;
        self.chars += other.chars;
        self.right_chars += other.right_chars;
    }

    /// The share of answers wholly right (0 with none).
    pub fn exact(&self) -> f64 {
        share(self.right_answers, self.answers)
    }

    /// The share of answer characters right (0 with none).
    pub fn per_char(&self) -> f64 {
        share(self.right_chars, self.chars)
    }
}

fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The position ranges of the answers in `targets` (`[rows, seq]`), in order.
pub fn answers(targets: &[u32], seq: usize) -> Vec<Range<usize>> {
    let mut spans = Vec::new();
    for (r, row) in targets.chunks(seq).enumerate() {
        let mut start = None;
        for (i, &t) in row.iter().chain([&IGNORE_INDEX]).enumerate() {
            match (start, t != IGNORE_INDEX) {
                (None, true) => start = Some(i),
                (Some(s), false) => {
                    spans.push(r * seq + s..r * seq + i);
                    start = None;
                }
                _ => {}
            }
        }
    }
    spans
}
