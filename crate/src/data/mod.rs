//! From text to training batches: the tokenizer (HF `tokenizers`, saved as
//! a standard tokenizer.json), corpus checks, token files that remember
//! their tokenizer, and seeded batching with a held-out validation tail.

pub mod batches;
pub mod corpus;
pub mod token_file;
pub mod tokenizer;

pub use batches::{Batch, Dataset, SplitMix64};
pub use corpus::Corpus;
pub use tokenizer::Tokenizer;
