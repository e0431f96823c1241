//! From text to training batches: the tokenizer (HF `tokenizers`, saved as
//! a standard tokenizer.json), corpus checks, token files that remember
//! their tokenizer, seeded batching with a held-out validation tail, and
//! the algorithmic tasks generated in place of text.

pub mod batches;
pub mod corpus;
pub mod tasks;
pub mod token_file;
pub mod tokenizer;

pub use batches::{Batch, Dataset};
pub use corpus::Corpus;
pub use tokenizer::Tokenizer;
