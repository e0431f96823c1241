//! Any weights file (and a config picked by the first byte) given to the
//! HF import: a refusal with a reason or a model, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = webtrain::fuzzing::hf_import(bytes);
});
