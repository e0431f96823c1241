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

/// FNV-1a (64-bit) of `bytes`, as 16 hex digits: tells tokenizers, token
/// streams and shader sources apart. Not cryptographic: it does not defend
/// against forgery.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> String {
    let hash = bytes.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}
