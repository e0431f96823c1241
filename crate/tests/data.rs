//! The data path end to end, natively and in the browser: webtrain's
//! tokenizer.json gives the ids HF tokenizers (Python) gives, and the
//! built-in corpus trains a full-size vocabulary.

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

use webtrain::data::Tokenizer;

/// tests/fixtures/tokenizer: a tokenizer.json written by `webtrain tokenizer`,
/// and the ids Python's `tokenizers` gave for each test string
/// (tests/parity/tokenizer_fixture.py).
fn tokenizer_matches_hf_python() {
    let t = Tokenizer::from_json(include_str!(
        "../../tests/fixtures/tokenizer/tokenizer.json"
    ))
    .expect("fixture loads");
    let expected: serde_json::Value =
        serde_json::from_str(include_str!("../../tests/fixtures/tokenizer/expected.json"))
            .expect("fixture parses");
    let cases = expected["cases"].as_array().expect("cases");
    assert!(cases.len() >= 5);
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let want: Vec<u32> = case["ids"]
            .as_array()
            .expect("ids")
            .iter()
            .map(|v| v.as_u64().expect("id") as u32)
            .collect();
        assert_eq!(t.encode(text).expect("encodes"), want, "ids for {text:?}");
        assert_eq!(t.decode(&want).expect("decodes"), text);
    }
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn tokenizer_json_matches_hf_python() {
    tokenizer_matches_hf_python();
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test::wasm_bindgen_test]
fn tokenizer_json_matches_hf_python_in_the_browser() {
    tokenizer_matches_hf_python();
}

/// The built-in corpus (public/corpus/brown.txt, made by
/// scripts/brown-corpus.mjs) trains a 16 384-token vocabulary, reporting
/// progress that only goes forward and ends at 1.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn built_in_corpus_trains_a_16k_vocabulary() {
    use std::sync::Mutex;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../public/corpus/brown.txt");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!("{path}: {e} — generate it with `node scripts/brown-corpus.mjs` (npm test does)")
    });
    let paragraphs: Vec<&str> = text.split("\n\n").collect();
    let seen = Mutex::new(Vec::new());
    let started = std::time::Instant::now();
    let t =
        Tokenizer::train(&paragraphs, 16_384, |p| seen.lock().unwrap().push(p)).expect("trains");
    println!(
        "16 384-token BPE on {} MB of Brown in {:.1} s",
        text.len() / 1_000_000,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(t.vocab_size(), 16_384);
    let seen = seen.into_inner().unwrap();
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]) && seen.last() == Some(&1.0),
        "progress must rise to 1"
    );
    let sample = &text[..2000];
    let ids = t.encode(sample).unwrap();
    assert_eq!(t.decode(&ids).unwrap(), sample);
    assert!(
        ids.len() < sample.len() / 3,
        "a trained vocabulary compresses English ({} ids for {} bytes)",
        ids.len(),
        sample.len()
    );
}
