//! Byte-level BPE with the HF `tokenizers` crate: trained on the user's text,
//! saved and loaded as a standard tokenizer.json, identified by a fingerprint.

use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;

use crate::error::{Error, Result};

/// Smallest vocabulary: the 256 byte symbols, no merges.
pub const MIN_VOCAB: u32 = 256;
pub const MAX_VOCAB: u32 = 65_536;

/// Bytes of text counted between progress reports.
const PROGRESS_CHUNK: usize = 256 * 1024;

/// `text` in pieces of about `max` bytes, each ending after a newline
/// (or at the end), so no line — and no word — is cut.
fn line_chunks(text: &str, max: usize) -> impl Iterator<Item = &str> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        // a newline byte is always a char boundary, whatever byte `max` is
        let cut = match rest
            .as_bytes()
            .get(max..)
            .and_then(|tail| tail.iter().position(|&b| b == b'\n'))
        {
            Some(i) => max + i + 1,
            None => rest.len(),
        };
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

#[derive(Clone, Debug)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    fingerprint: String,
}

impl Tokenizer {
    /// Trains a byte-level BPE of `vocab` tokens on `texts`. `progress`
    /// receives the fraction of text counted (0..=1); merging follows and is
    /// reported as 1 when done. Any UTF-8 round-trips exactly: bytes are the
    /// alphabet, there is no normalizer and no added prefix space.
    pub fn train(
        texts: &[&str],
        vocab: u32,
        progress: impl Fn(f64) + Send + Sync,
    ) -> Result<Tokenizer> {
        if !(MIN_VOCAB..=MAX_VOCAB).contains(&vocab) {
            return Err(Error::Tokenizer(format!(
                "vocabulary size {vocab} is outside {MIN_VOCAB}..={MAX_VOCAB}"
            )));
        }
        let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
            .vocab_size(vocab as usize)
            .min_frequency(2)
            .show_progress(false)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build()
            .into();
        let mut inner = tokenizers::Tokenizer::new(BPE::default());
        inner.with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false)));
        inner.with_decoder(Some(ByteLevel::default()));
        let total: usize = texts.iter().map(|t| t.len()).sum::<usize>().max(1);
        let mut seen = 0usize;
        // pieces of whole lines, so one large file still reports progress
        let counted = texts
            .iter()
            .flat_map(|t| line_chunks(t, PROGRESS_CHUNK))
            .inspect(|piece| {
                seen += piece.len();
                progress(seen as f64 / total as f64);
            });
        inner
            .train(&mut trainer, counted)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        progress(1.0);
        Self::wrap(inner)
    }

    /// Loads a tokenizer.json (webtrain's or any HF byte-level BPE).
    pub fn from_json(json: &str) -> Result<Tokenizer> {
        let inner = json
            .parse::<tokenizers::Tokenizer>()
            .map_err(|e| Error::Tokenizer(format!("not a usable tokenizer.json: {e}")))?;
        Self::wrap(inner)
    }

    fn wrap(inner: tokenizers::Tokenizer) -> Result<Tokenizer> {
        let canonical = inner
            .to_string(false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(Tokenizer {
            inner,
            fingerprint: fingerprint(&canonical),
        })
    }

    /// The tokenizer.json text, pretty-printed.
    pub fn to_json(&self) -> Result<String> {
        self.inner
            .to_string(true)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }

    pub fn vocab_size(&self) -> u32 {
        self.inner.get_vocab_size(true) as u32
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode_fast(text, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Ok(encoding.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// 16 hex digits naming this exact vocabulary and configuration: stored
    /// in token files and checkpoints, compared on load.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Refuses `what`, made with the tokenizer `made_with`, unless it is this one.
    pub fn check_fingerprint(&self, what: &str, made_with: &str) -> Result<()> {
        if made_with == self.fingerprint {
            return Ok(());
        }
        Err(Error::TokenizerMismatch {
            what: what.to_string(),
            made_with: made_with.to_string(),
            in_use: self.fingerprint.clone(),
        })
    }
}

/// The fingerprint of the compact tokenizer.json, which `tokenizers` writes
/// in a fixed order (vocabulary by id, merges by rank).
fn fingerprint(canonical_json: &str) -> String {
    crate::fingerprint::fnv1a(canonical_json.bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_chunks_cut_after_newlines_and_lose_nothing() {
        let text = "ab\ncd\nef\ngh";
        let pieces: Vec<&str> = line_chunks(text, 4).collect();
        assert_eq!(pieces, ["ab\ncd\n", "ef\ngh"]);
        assert_eq!(
            line_chunks("no newline at all", 3).collect::<Vec<_>>(),
            ["no newline at all"]
        );
        assert_eq!(line_chunks("", 3).count(), 0);
        let multibyte = "çok güzel\nİyi 🐈\n".repeat(10);
        assert_eq!(line_chunks(&multibyte, 7).collect::<String>(), multibyte);
    }

    const TEXT: &str =
        "the cat sat on the mat. the dog sat on the log. çok güzel, İstanbul! 🐈‍⬛ naïve café";

    fn small() -> Tokenizer {
        Tokenizer::train(&[TEXT, TEXT], 300, |_| {}).unwrap()
    }

    #[test]
    fn round_trips_any_utf8_exactly() {
        let t = small();
        for s in [
            TEXT,
            "",
            " leading and trailing ",
            "ıiİI şğü ÇÖ",
            "🧪🔬 emoji ZWJ 👩‍👩‍👧",
            "\t\n\r mixed\u{0}nul",
            "Ω≈ç√∫˜µ≤≥÷",
        ] {
            assert_eq!(t.decode(&t.encode(s).unwrap()).unwrap(), s);
        }
    }

    #[test]
    fn json_round_trip_keeps_ids_and_fingerprint() {
        let t = small();
        let back = Tokenizer::from_json(&t.to_json().unwrap()).unwrap();
        assert_eq!(back.fingerprint(), t.fingerprint());
        assert_eq!(back.encode(TEXT).unwrap(), t.encode(TEXT).unwrap());
        assert!(t.vocab_size() > 256 && t.vocab_size() <= 300);
    }

    #[test]
    fn different_vocabularies_have_different_fingerprints_and_are_refused() {
        let (a, b) = (small(), Tokenizer::train(&[TEXT], 270, |_| {}).unwrap());
        assert_ne!(a.fingerprint(), b.fingerprint());
        let err = a
            .check_fingerprint("tokens.bin", b.fingerprint())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(a.fingerprint()) && err.contains(b.fingerprint()),
            "{err}"
        );
        assert!(a.check_fingerprint("tokens.bin", a.fingerprint()).is_ok());
    }

    #[test]
    fn vocabulary_sizes_outside_the_range_are_refused() {
        assert!(Tokenizer::train(&[TEXT], 255, |_| {}).is_err());
        assert!(Tokenizer::train(&[TEXT], 65_537, |_| {}).is_err());
        assert!(Tokenizer::from_json("{\"not\": \"a tokenizer\"}").is_err());
    }
}
