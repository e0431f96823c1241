//! Any weights file (and a config picked by the first byte) given to the
//! HF import: a refusal with a reason or a model, never a panic.
#![no_main]

use webtrain::hf::{HfFiles, HfModel};

const CONFIGS: [&str; 2] = [
    include_str!("../../../tests/parity/fixtures/gqa/config.json"),
    include_str!("../../../tests/parity/fixtures/tied/config.json"),
];

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let Some((&pick, weights)) = bytes.split_first() else { return };
    let files = HfFiles { config_json: CONFIGS[pick as usize % 2].to_string(), weights: vec![weights.to_vec()], ..Default::default() };
    let _ = HfModel::import(&files);
});
