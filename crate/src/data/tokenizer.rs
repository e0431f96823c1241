//! Byte-level BPE with the HF `tokenizers` crate: trained on the user's text,
//! saved and loaded as a standard tokenizer.json, identified by a fingerprint.

use tokenizers::Model;
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

    /// One token per character of `alphabet`, in its order (a BPE without
    /// merges, decoded without spaces), then one per word of `words`, as
    /// added tokens, which encoding matches first: the tasks' vocabulary.
    /// Characters outside it are dropped.
    pub fn characters(alphabet: &str, words: &[String]) -> Result<Tokenizer> {
        let vocab: tokenizers::models::bpe::Vocab = alphabet
            .chars()
            .enumerate()
            .map(|(i, c)| (c.to_string(), i as u32))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, vec![])
            .build()
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        inner.with_decoder(Some(tokenizers::decoders::fuse::Fuse::new()));
        let words: Vec<tokenizers::AddedToken> = words
            .iter()
            .map(|w| tokenizers::AddedToken::from(w.clone(), false))
            .collect();
        inner.add_tokens(&words);
        Self::wrap(inner)
    }

    /// Loads a tokenizer.json (webtrain's or any HF byte-level BPE), its
    /// truncation and padding settings ignored. Checked first for what
    /// `tokenizers` would panic on rather than refuse (a panic kills the
    /// page's worker): the whole file must be JSON (a syntax error inside
    /// `decoder` panics there), no part may be one `hazard` names, and its
    /// ids must be 0..vocab_size.
    pub fn from_json(json: &str) -> Result<Tokenizer> {
        let unusable = |e: &dyn std::fmt::Display| {
            Error::Tokenizer(format!("not a usable tokenizer.json: {e}"))
        };
        let value: serde_json::Value = serde_json::from_str(json).map_err(|e| unusable(&e))?;
        if let Some(problem) = hazard(&value) {
            return Err(unusable(&problem));
        }
        let mut inner = json
            .parse::<tokenizers::Tokenizer>()
            .map_err(|e| unusable(&e))?;
        // Whole texts, as transformers' fast tokenizers encode unless asked
        // otherwise: no truncation (a file's stride ≥ max_length panics) and
        // no padding (to any length the file names).
        inner.with_truncation(None).map_err(|e| unusable(&e))?;
        inner.with_padding(None);
        // Ids 0..vocab_size: `tokenizers` writes (and fingerprints) a vocabulary
        // by walking every id up to the largest, so one id of 4e9 costs
        // minutes and gigabytes; and a model's embedding has vocab_size rows.
        let size = inner.get_vocab_size(true);
        let added = inner.get_added_tokens_decoder();
        let largest = inner
            .get_model()
            .get_vocab()
            .into_values()
            .chain(added.keys().copied())
            .max();
        if let Some(id) = largest.filter(|&id| id as usize >= size) {
            return Err(unusable(&format!(
                "it has token id {id} but {size} tokens: ids must be 0..{size}"
            )));
        }
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

/// The first part of a tokenizer.json (at any depth) that `tokenizers`
/// reads but then panics on, found by the tokenizer_json fuzz target:
/// SentencePiece's `Precompiled` normalizer (its tables are trusted: a
/// damaged one panics when read or when it normalizes), and a `Replace`
/// (normalizer or decoder) whose pattern can match the empty string (it
/// panics where it inserts text at an empty match). A literal pattern
/// matches nothing empty but `""`; a regex may, so regex patterns are
/// refused (webtrain's tokenizers have none, Llama-family ones replace
/// literals). Found by their fields, not their `type`: `tokenizers` reads
/// an object of an unknown type as whichever kind its fields fit.
fn hazard(part: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match part {
        Value::Object(o) => {
            if o.contains_key("precompiled_charsmap") {
                return Some("SentencePiece's Precompiled normalizer is not supported".into());
            }
            // a Replace: pattern and content (a Split has a pattern, no content)
            let replaced = o.get("pattern").filter(|_| o.contains_key("content"));
            if let Some(pattern) = replaced.and_then(Value::as_object) {
                if pattern.contains_key("Regex") {
                    return Some("a Replace with a regex pattern is not supported".into());
                }
                if pattern.get("String").and_then(Value::as_str) == Some("") {
                    return Some("a Replace with an empty pattern".into());
                }
            }
            o.values().find_map(hazard)
        }
        Value::Array(a) => a.iter().find_map(hazard),
        _ => None,
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

    /// Found by the tokenizer_json fuzz target: `tokenizers` panicked on
    /// these instead of refusing them.
    #[test]
    fn damaged_tokenizer_json_is_refused_not_a_panic() {
        let json = small().to_json().unwrap();
        // a syntax error inside the decoder (a truncated or damaged file)
        let at = json.find("\"decoder\"").unwrap();
        let damaged = r#"{"decoder": {"type": "ByteLevel" "x"}}"#;
        for bad in [damaged, &json[..at + 40]] {
            let err = Tokenizer::from_json(bad).unwrap_err().to_string();
            assert!(err.contains("not a usable tokenizer.json"), "{err}");
        }
        // SentencePiece's normalizer, damaged, alone or in a sequence;
        // a Replace that can insert its content at an empty match
        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
        let replace = |pattern: &str| {
            format!(r#"{{"type": "Replace", "pattern": {pattern}, "content": " "}}"#)
        };
        for (part, normalizer, why) in [
            (
                "normalizer",
                r#"{"type": "Precompiled", "precompiled_charsmap": null}"#.to_string(),
                "Precompiled",
            ),
            (
                "normalizer",
                format!(
                    r#"{{"type": "Sequence", "normalizers": [{{"type": "NFC"}}, {}]}}"#,
                    replace(r#"{"String": ""}"#)
                ),
                "empty pattern",
            ),
            ("normalizer", replace(r#"{"Regex": "a*"}"#), "regex"),
            (
                "normalizer",
                replace(r#"{"String": ""}"#).replace("Replace", "ReplacC"),
                "empty pattern",
            ),
            ("decoder", replace(r#"{"Regex": "\\b"}"#), "regex"),
        ] {
            let before = value[part].clone();
            value[part] = serde_json::from_str(&normalizer).unwrap();
            let err = Tokenizer::from_json(&value.to_string())
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{err}");
            value[part] = before;
        }
        // an id far beyond the vocabulary: minutes and gigabytes to fingerprint
        let mut far: serde_json::Value = serde_json::from_str(&json).unwrap();
        far["model"]["vocab"]["a"] = u32::MAX.into();
        let err = Tokenizer::from_json(&far.to_string())
            .unwrap_err()
            .to_string();
        assert!(err.contains("token id 4294967295 but 300 tokens"), "{err}");
        // truncation (its stride beyond its length) and padding (to 4e9
        // tokens) are ignored: whole texts, as transformers encodes them
        let mut batching = value.clone();
        batching["truncation"] = serde_json::json!({"direction": "Right", "max_length": 7,
            "strategy": "LongestFirst", "stride": 8});
        batching["padding"] = serde_json::json!({"strategy": {"Fixed": u32::MAX}, "direction": "Right",
            "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "!"});
        let t = Tokenizer::from_json(&batching.to_string()).unwrap();
        assert_eq!(t.encode(TEXT).unwrap(), small().encode(TEXT).unwrap());
        assert_eq!(t.fingerprint(), small().fingerprint());
        // a literal pattern, as Llama-family tokenizers replace spaces
        value["normalizer"] = serde_json::from_str(&replace(r#"{"String": "  "}"#)).unwrap();
        let t = Tokenizer::from_json(&value.to_string()).unwrap();
        assert!(t.decode(&t.encode("ça  va 🐈").unwrap()).is_ok());
    }

    #[test]
    fn vocabulary_sizes_outside_the_range_are_refused() {
        assert!(Tokenizer::train(&[TEXT], 255, |_| {}).is_err());
        assert!(Tokenizer::train(&[TEXT], 65_537, |_| {}).is_err());
        assert!(Tokenizer::from_json("{\"not\": \"a tokenizer\"}").is_err());
    }
}
