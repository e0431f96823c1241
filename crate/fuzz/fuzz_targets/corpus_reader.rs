//! Any bytes given as a user's text file (UTF-8, UTF-16, binary, empty):
//! the text, or the file refused with the reason, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = webtrain::fuzzing::corpus_reader(bytes);
});
