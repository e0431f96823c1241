//! Any bytes given to the checkpoint reader: a checked refusal or a
//! checkpoint, never a panic, an overflow or an allocation the file does
//! not back.
#![no_main]

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let _ = webtrain::fuzzing::checkpoint_reader(bytes);
});
