//! `Data`: the text a run trains on (the built-in corpus or the user's
//! files, each checked before it joins) and the tokenizer learned from it.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::{js_error, to_js};
use crate::data::{Corpus, Tokenizer};

#[wasm_bindgen]
#[derive(Default)]
pub struct Data {
    corpus: Corpus,
    tokenizer: Option<Tokenizer>,
}

#[derive(Serialize)]
struct FileInfo<'a> {
    name: &'a str,
    bytes: usize,
}

#[derive(Serialize)]
pub(super) struct TokenizerInfo<'a> {
    pub vocab_size: u32,
    pub fingerprint: &'a str,
    /// Tokens of the whole corpus.
    pub tokens: usize,
}

/// A JS progress callback for `Tokenizer::train`, which wants `Send + Sync`.
struct Progress(js_sys::Function);
// SAFETY: wasm32-unknown-unknown without atomics has one thread; the
// callback never leaves it.
unsafe impl Send for Progress {}
unsafe impl Sync for Progress {}

#[wasm_bindgen]
impl Data {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Data {
        Data::default()
    }

    /// Adds a file after checking it; a refused file (empty, binary, not
    /// UTF-8) throws an Error naming it and leaves the others as they were.
    #[wasm_bindgen(js_name = addFile)]
    pub fn add_file(&mut self, name: &str, bytes: &[u8]) -> Result<JsValue, JsError> {
        self.corpus.add(name, bytes).map_err(js_error)?;
        self.tokenizer = None; // learned from other text
        to_js(&FileInfo {
            name,
            bytes: bytes.len(),
        })
    }

    /// Makes the built-in Brown corpus the text (`bytes`: the page's
    /// /corpus/brown.txt), under the name runs record it by.
    #[wasm_bindgen(js_name = setBuiltin)]
    pub fn set_builtin(&mut self, bytes: &[u8]) -> Result<JsValue, JsError> {
        *self = Data::default();
        self.add_file(crate::run::BUILTIN_CORPUS, bytes)
    }

    pub fn clear(&mut self) {
        *self = Data::default();
    }

    /// `[{name, bytes}]` of the files loaded.
    pub fn files(&self) -> Result<JsValue, JsError> {
        let files: Vec<FileInfo> = self
            .corpus
            .files()
            .map(|(name, text)| FileInfo {
                name,
                bytes: text.len(),
            })
            .collect();
        to_js(&files)
    }

    /// Learns a byte-level BPE of `vocab` tokens from the files; calls
    /// `progress(fraction)` as it counts the text.
    #[wasm_bindgen(js_name = trainTokenizer)]
    pub fn train_tokenizer(
        &mut self,
        vocab: u32,
        progress: js_sys::Function,
    ) -> Result<JsValue, JsError> {
        if self.corpus.is_empty() {
            return Err(JsError::new(
                "add text (the built-in corpus or your files) before training a tokenizer",
            ));
        }
        let texts: Vec<&str> = self.corpus.files().map(|(_, t)| t).collect();
        let report = Progress(progress);
        let tokenizer = Tokenizer::train(&texts, vocab, move |f| {
            let _ = report.0.call1(&JsValue::NULL, &JsValue::from_f64(f));
        })
        .map_err(js_error)?;
        self.tokenizer = Some(tokenizer);
        self.tokenizer_info()
    }

    /// Uses a saved tokenizer.json (e.g. from a checkpoint).
    #[wasm_bindgen(js_name = setTokenizer)]
    pub fn set_tokenizer(&mut self, json: &str) -> Result<JsValue, JsError> {
        self.tokenizer = Some(Tokenizer::from_json(json).map_err(js_error)?);
        self.tokenizer_info()
    }

    #[wasm_bindgen(js_name = tokenizerJson)]
    pub fn tokenizer_json(&self) -> Result<String, JsError> {
        self.tokenizer()?.to_json().map_err(js_error)
    }

    fn tokenizer_info(&self) -> Result<JsValue, JsError> {
        let t = self.tokenizer()?;
        let tokens = self
            .corpus
            .files()
            .map(|(_, text)| t.encode(text).map(|ids| ids.len()))
            .sum::<crate::Result<usize>>()
            .map_err(js_error)?;
        to_js(&TokenizerInfo {
            vocab_size: t.vocab_size(),
            fingerprint: t.fingerprint(),
            tokens,
        })
    }
}

impl Data {
    pub(super) fn tokenizer(&self) -> Result<&Tokenizer, JsError> {
        self.tokenizer
            .as_ref()
            .ok_or_else(|| JsError::new("train or load a tokenizer first"))
    }

    pub(super) fn corpus(&self) -> &Corpus {
        &self.corpus
    }
}
