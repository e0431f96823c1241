//! Algorithmic tasks as a text source: examples generated on the fly from a
//! seed (no files) in a character vocabulary, the loss counted on the
//! answer characters only, and a held-out set no training example is drawn
//! from. A small model solves them in minutes, and accuracy says plainly
//! whether it has.
//!
//! An example is `prompt answer \n` (`31415>11345\n` for `sort`), all of
//! one length per task, so a row holds a whole number of them. modadd's
//! numbers are tokens of their own (`05`, `+`, `13`, `=`, `18`), as in the
//! grokking papers: read in digits, the residues' sums are a different,
//! harder problem that memorizes and then creeps up (docs/TASKS.md).

mod batches;
mod metrics;

pub use batches::TaskSet;
pub use metrics::{Accuracy, answers};

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::data::Tokenizer;
use crate::error::{Error, Result};
use crate::rng::SplitMix64;

/// Every task's characters; a character's index is its token id. modadd's
/// residues follow them: `ALPHABET.len() + n` is `n`.
pub const ALPHABET: &str = "\n0123456789+=>";

/// Tokens of `ALPHABET` (one byte each).
const CHARS: u32 = ALPHABET.len() as u32;

/// Ends every example; also pads a row's tail.
const END: u32 = 0;

/// A task as a person names it: `{"name": "add", "options": {"digits": 3}}`.
/// Options left out take their defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub name: String,
    #[serde(default)]
    pub options: BTreeMap<String, u32>,
}

/// `task add (digits 3)`: for messages.
impl std::fmt::Display for TaskSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let options: Vec<String> = self
            .options
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        write!(f, "task {} ({})", self.name, options.join(", "))
    }
}

/// One option of a task, for the CLI's help and the page's form.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TaskOption {
    pub name: &'static str,
    pub summary: &'static str,
    pub default: u32,
    pub min: u32,
    pub max: u32,
}

/// What the page lists for a task.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TaskInfo {
    pub name: &'static str,
    pub title: &'static str,
    pub summary: &'static str,
    pub options: &'static [TaskOption],
}

const LEN: TaskOption = TaskOption {
    name: "len",
    summary: "digits in the string",
    default: 5,
    min: 1,
    max: 32,
};

/// Every task, in the order the page offers them.
pub const TASKS: [TaskInfo; 5] = [
    TaskInfo {
        name: "copy",
        title: "Copy",
        summary: "repeat a digit string: 40913>40913",
        options: &[LEN],
    },
    TaskInfo {
        name: "reverse",
        title: "Reverse",
        summary: "reverse a digit string: 40913>31904",
        options: &[LEN],
    },
    TaskInfo {
        name: "sort",
        title: "Sort",
        summary: "sort the digits of a string: 40913>01349",
        options: &[LEN],
    },
    TaskInfo {
        name: "add",
        title: "Addition",
        summary: "add two numbers of n digits, zero-padded: 042+917=0959",
        options: &[TaskOption {
            name: "digits",
            summary: "digits of each number",
            default: 3,
            min: 1,
            max: 9,
        }],
    },
    TaskInfo {
        name: "modadd",
        title: "Modular addition",
        summary: "a + b mod p over a fixed split of all pairs, each residue one token: 05+13=18 (p = 31); shows grokking",
        options: &[
            TaskOption {
                name: "p",
                summary: "the modulus",
                default: 31,
                min: 2,
                max: 997,
            },
            TaskOption {
                name: "train_percent",
                summary: "share of all p² pairs trained on; the rest are held out",
                default: 50,
                min: 10,
                max: 90,
            },
        ],
    },
];

/// A task with every option set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Copy { len: u32 },
    Reverse { len: u32 },
    Sort { len: u32 },
    Add { digits: u32 },
    ModAdd { p: u32, train_percent: u32 },
}

/// One example, as token ids: the prompt (ending in its separator) and the
/// answer (without the `\n` that ends the example).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Example {
    pub prompt: Vec<u32>,
    pub answer: Vec<u32>,
}

impl Task {
    /// The task `spec` names, its options checked against their ranges.
    pub fn parse(spec: &TaskSpec) -> Result<Task> {
        let info = TASKS.iter().find(|t| t.name == spec.name).ok_or_else(|| {
            let names: Vec<&str> = TASKS.iter().map(|t| t.name).collect();
            Error::Unsupported(format!(
                "unknown task {:?}: use one of {}",
                spec.name,
                names.join(", ")
            ))
        })?;
        if let Some(k) = spec
            .options
            .keys()
            .find(|k| !info.options.iter().any(|o| o.name == k.as_str()))
        {
            let known: Vec<&str> = info.options.iter().map(|o| o.name).collect();
            return Err(Error::Unsupported(format!(
                "task {} has no option {k:?}: its options are {}",
                info.name,
                known.join(", ")
            )));
        }
        let option = |name: &str| -> Result<u32> {
            let o = info
                .options
                .iter()
                .find(|o| o.name == name)
                .expect("listed");
            let v = spec.options.get(name).copied().unwrap_or(o.default);
            if !(o.min..=o.max).contains(&v) {
                return Err(Error::Unsupported(format!(
                    "task {} option {name} = {v} is outside {}..={}",
                    info.name, o.min, o.max
                )));
            }
            Ok(v)
        };
        Ok(match info.name {
            "copy" => Task::Copy {
                len: option("len")?,
            },
            "reverse" => Task::Reverse {
                len: option("len")?,
            },
            "sort" => Task::Sort {
                len: option("len")?,
            },
            "add" => Task::Add {
                digits: option("digits")?,
            },
            _ => Task::ModAdd {
                p: option("p")?,
                train_percent: option("train_percent")?,
            },
        })
    }

    /// The spec with every option written out: what a checkpoint records.
    pub fn spec(&self) -> TaskSpec {
        let (name, options): (&str, &[(&str, u32)]) = match *self {
            Task::Copy { len } => ("copy", &[("len", len)]),
            Task::Reverse { len } => ("reverse", &[("len", len)]),
            Task::Sort { len } => ("sort", &[("len", len)]),
            Task::Add { digits } => ("add", &[("digits", digits)]),
            Task::ModAdd { p, train_percent } => {
                ("modadd", &[("p", p), ("train_percent", train_percent)])
            }
        };
        TaskSpec {
            name: name.into(),
            options: options.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        }
    }

    /// Tokens of one example, its ending `\n` included.
    pub fn example_len(&self) -> usize {
        let e = self.example(&mut SplitMix64(0));
        e.prompt.len() + e.answer.len() + 1
    }

    /// How many distinct prompts there are, saturating.
    fn space(&self) -> u64 {
        match *self {
            Task::Copy { len } | Task::Reverse { len } | Task::Sort { len } => {
                10u64.saturating_pow(len)
            }
            Task::Add { digits } => 10u64.saturating_pow(2 * digits),
            Task::ModAdd { p, .. } => (p as u64).pow(2),
        }
    }

    /// A uniformly random example (modadd: of all pairs; the split is `TaskSet`'s).
    pub fn example(&self, rng: &mut SplitMix64) -> Example {
        match *self {
            Task::Copy { len } | Task::Reverse { len } | Task::Sort { len } => {
                let s: Vec<u32> = (0..len).map(|_| rng.below(10) as u32).collect();
                self.of_string(s)
            }
            Task::Add { digits } => {
                let top = 10u64.pow(digits);
                self.of_pair(rng.below(top), rng.below(top))
            }
            Task::ModAdd { p, .. } => {
                let p = p as u64;
                self.of_pair(rng.below(p), rng.below(p))
            }
        }
    }

    /// copy, reverse, sort: the example of the digit string `s`.
    fn of_string(&self, s: Vec<u32>) -> Example {
        let mut answer = s.clone();
        match self {
            Task::Reverse { .. } => answer.reverse(),
            Task::Sort { .. } => answer.sort_unstable(),
            _ => {}
        }
        let mut prompt: Vec<u32> = s.iter().map(|&d| digit(d)).collect();
        prompt.push(symbol('>'));
        Example {
            prompt,
            answer: answer.iter().map(|&d| digit(d)).collect(),
        }
    }

    /// add, modadd: the example of `a + b`.
    fn of_pair(&self, a: u64, b: u64) -> Example {
        match *self {
            Task::Add { digits } => {
                let width = digits as usize;
                let mut prompt = padded(a, width);
                prompt.push(symbol('+'));
                prompt.extend(padded(b, width));
                prompt.push(symbol('='));
                Example {
                    prompt,
                    answer: padded(a + b, width + 1),
                }
            }
            Task::ModAdd { p, .. } => Example {
                prompt: vec![residue(a), symbol('+'), residue(b), symbol('=')],
                answer: vec![residue((a + b) % p as u64)],
            },
            _ => unreachable!("of_pair is add's and modadd's"),
        }
    }

    /// modadd's pair `i` of `0..p²`: `(i / p, i % p)`.
    fn pair(&self, i: u64) -> Example {
        let Task::ModAdd { p, .. } = *self else {
            unreachable!("pairs are modadd's")
        };
        self.of_pair(i / p as u64, i % p as u64)
    }
}

impl Task {
    /// The task's tokenizer: one token per `ALPHABET` character, as an HF
    /// tokenizer.json (BPE without merges, joined back without spaces), so
    /// exports and the page read task text like any other; modadd's
    /// residues after them as added tokens (`05` for 5; `005` when p > 100).
    pub fn tokenizer(&self) -> Result<Tokenizer> {
        let residues: Vec<String> = (0..self.residues()).map(|n| self.residue_text(n)).collect();
        Tokenizer::characters(ALPHABET, &residues)
    }

    /// Vocabulary size of the task's model.
    pub fn vocab(&self) -> u32 {
        CHARS + self.residues()
    }

    /// `ids` as text.
    pub fn text(&self, ids: &[u32]) -> String {
        ids.iter()
            .map(|&i| match i.checked_sub(CHARS) {
                None => ALPHABET
                    .chars()
                    .nth(i as usize)
                    .expect("below chars")
                    .to_string(),
                Some(n) if n < self.residues() => self.residue_text(n),
                Some(_) => "?".to_string(),
            })
            .collect()
    }

    /// Tokens of their own after the alphabet's: modadd's p residues.
    fn residues(&self) -> u32 {
        match *self {
            Task::ModAdd { p, .. } => p,
            _ => 0,
        }
    }

    /// Residue `n` as text: zero-padded to p − 1's digits, so every
    /// example reads in columns, and to two at least, so no residue's text
    /// is a character's.
    fn residue_text(&self, n: u32) -> String {
        let width = self.residues().saturating_sub(1).to_string().len().max(2);
        format!("{n:0width$}")
    }
}

fn residue(n: u64) -> u32 {
    CHARS + n as u32
}

fn symbol(c: char) -> u32 {
    ALPHABET
        .chars()
        .position(|a| a == c)
        .expect("in the alphabet") as u32
}

fn digit(d: u32) -> u32 {
    symbol('0') + d
}

fn decimal(n: u64) -> Vec<u32> {
    n.to_string()
        .bytes()
        .map(|b| digit((b - b'0') as u32))
        .collect()
}

/// `n` in `width` digits, zeros in front.
fn padded(n: u64, width: usize) -> Vec<u32> {
    let d = decimal(n);
    let mut out = vec![digit(0); width.saturating_sub(d.len())];
    out.extend(d);
    out
}

#[cfg(test)]
mod tests;
