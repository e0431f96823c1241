//! Any bytes given as a tokenizer.json (lossy UTF-8), and a text encoded
//! and decoded with what loads: a refusal with a reason or a tokenizer,
//! never a panic or an allocation the file does not back.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = webtrain::fuzzing::tokenizer_json(bytes);
});
