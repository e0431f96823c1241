//! The fuzz targets' corpora, replayed on stable Rust: every file of
//! crate/fuzz/corpus/TARGET/ (seeds, and what the campaigns found that
//! reached new code; docs/INTEROP.md) through the same function the target
//! calls (`webtrain::fuzzing`). A panic fails the test naming the file; a
//! corpus that is missing, or never reaches an acceptance and a refusal,
//! fails too. The seeds are written by `write_seed_corpora` (ignored).
#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use webtrain::fuzzing::TARGETS;

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)")
}

/// Runs every file of `target`'s corpus through it: never a panic, and at
/// least one file accepted and one refused.
fn replay(target: &str) {
    let (_, run) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .expect("a target of webtrain::fuzzing");
    let dir = corpus(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "{}: an empty corpus replays nothing",
        dir.display()
    );
    let (mut accepted, mut refused) = (0, 0);
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        match std::panic::catch_unwind(|| run(&bytes)) {
            Ok(Ok(())) => accepted += 1,
            Ok(Err(_)) => refused += 1,
            Err(payload) => panic!(
                "{target}: {} made the reader panic: {}",
                path.display(),
                panic_text(payload.as_ref())
            ),
        }
    }
    println!(
        "{target}: {} files, {accepted} accepted, {refused} refused",
        files.len()
    );
    assert!(
        accepted > 0 && refused > 0,
        "{target}: {accepted} files accepted, {refused} refused: the corpus must reach both"
    );
}

#[test]
fn checkpoint_reader_corpus_replays_without_panic() {
    replay("checkpoint_reader");
}

#[test]
fn hf_import_corpus_replays_without_panic() {
    replay("hf_import");
}

#[test]
fn tokenizer_json_corpus_replays_without_panic() {
    replay("tokenizer_json");
}

#[test]
fn corpus_reader_corpus_replays_without_panic() {
    replay("corpus_reader");
}

#[test]
fn every_target_has_a_corpus() {
    for (target, _) in TARGETS {
        assert!(corpus(target).is_dir(), "{target} has no corpus directory");
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/fuzz_targets")
            .join(format!("{target}.rs"));
        assert!(source.is_file(), "{target} has no fuzz target");
    }
}

/// The seed files (`seed-*`), written anew:
/// `cargo test --test fuzz_corpora -- --ignored write_seed_corpora`.
/// Small on purpose: the whole corpus set stays well under 1 MiB.
#[test]
#[ignore = "writes crate/fuzz/corpus/*/seed-*"]
fn write_seed_corpora() {
    let write = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("seed-{name}")), bytes).unwrap();
    };
    for (name, bytes) in seeds::checkpoints() {
        write("checkpoint_reader", &name, &bytes);
    }
    for (name, bytes) in seeds::hf_weights() {
        write("hf_import", &name, &bytes);
    }
    for (name, bytes) in seeds::tokenizers() {
        write("tokenizer_json", &name, &bytes);
    }
    for (name, bytes) in seeds::texts() {
        write("corpus_reader", &name, &bytes);
    }
}

mod seeds {
    use half::{bf16, f16};
    use safetensors::SafeTensors;
    use safetensors::tensor::{Dtype, TensorView};
    use serde_json::{Value, json};
    use webtrain::checkpoint::{Checkpoint, RunState};
    use webtrain::data::Tokenizer;
    use webtrain::fuzzing::{self, HF_CONFIGS};
    use webtrain::hf::{ExportDtype, HfModel, config};
    use webtrain::model::{BatchShape, Config, ParamLayout, Recipe};
    use webtrain::optim::{HostState, OptimConfig, OptimState};
    use webtrain::train::TrainConfig;

    type Seeds = Vec<(String, Vec<u8>)>;

    const TEXT: &str = "the cat sat on the mat. the dog sat on the log. a model learns a language one token at a time.";

    /// The smallest model the kernels run: one layer, one head of 16.
    fn tiny_config(vocab: u32) -> Config {
        Config {
            vocab,
            d_model: 16,
            n_layers: 1,
            n_heads: 1,
            n_kv_heads: 1,
            ffn: 8,
            max_seq: 16,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
            tie_word_embeddings: true,
        }
    }

    fn checkpoint(state: OptimState, tokenizer: Option<Tokenizer>) -> Vec<u8> {
        let vocab = tokenizer.as_ref().map_or(5, Tokenizer::vocab_size);
        let config = TrainConfig {
            model: tiny_config(vocab),
            shape: BatchShape { batch: 1, seq: 8 },
            precision: Recipe::fp32(),
            optim: OptimConfig {
                state,
                ..OptimConfig::default()
            },
            seed: 3,
        };
        let layout = ParamLayout::new(&config.model);
        let n = layout.total as usize;
        let state = match state {
            OptimState::Fp32 => HostState::Fp32 {
                m: vec![1e-3; n],
                v: vec![1e-6; n],
            },
            OptimState::Bf16 => HostState::Bf16 {
                m: vec![0x3a83; n], // ≈ 1e-3
                v: vec![0x3586; n], // ≈ 1e-6
            },
            OptimState::Fp8 | OptimState::Int8 | OptimState::Int8Linear | OptimState::Int4 => {
                let code = state.byte_code().unwrap();
                let codes = code.code_bytes(layout.total) as usize;
                let scales = code.scale_bytes(layout.total) as usize / 4;
                HostState::Bytes {
                    code,
                    m_codes: vec![7; codes],
                    v_codes: vec![9; codes],
                    m_scales: vec![0.5; scales],
                    v_scales: vec![0.25; scales],
                }
            }
        };
        let tokenizer_fingerprint = tokenizer.as_ref().map(|t| t.fingerprint().to_string());
        Checkpoint {
            weights: layout.initial_weights(config.seed),
            config,
            step: 2,
            run: RunState {
                rng: 12345,
                tokenizer_json: tokenizer.map(|t| t.to_json().unwrap()),
                data: Some(r#"{"source":"fuzz seed"}"#.into()),
            },
            tokenizer_fingerprint,
            loss_scale: None,
            state,
        }
        .to_bytes()
        .unwrap()
    }

    pub fn checkpoints() -> Seeds {
        let bytes_tokenizer = Tokenizer::train(&[TEXT], 256, |_| {}).unwrap();
        let fp32 = checkpoint(OptimState::Fp32, None);
        let int8 = checkpoint(OptimState::Int8, Some(bytes_tokenizer));
        let header = 8 + u64::from_le_bytes(fp32[..8].try_into().unwrap()) as usize;
        let seeds = vec![
            ("fp32.safetensors".into(), fp32.clone()),
            ("int8-tokenizer.safetensors".into(), int8),
            ("header-only.safetensors".into(), fp32[..header].to_vec()),
            ("empty".into(), vec![]),
            ("seven-bytes".into(), b"\x10\0\0\0\0\0\0".to_vec()),
            ("huge-header".into(), (1u64 << 40).to_le_bytes().to_vec()),
        ];
        for (name, bytes) in &seeds[..2] {
            fuzzing::checkpoint_reader(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        seeds
    }

    /// `weights` (safetensors) with every F32 tensor stored as `dtype`.
    fn converted(weights: &[u8], dtype: Dtype) -> Vec<u8> {
        let st = SafeTensors::deserialize(weights).unwrap();
        let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = st
            .iter()
            .map(|(name, view)| {
                let data = view.data().chunks_exact(4).flat_map(|c| {
                    let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    match dtype {
                        Dtype::F16 => f16::from_f32(x).to_le_bytes(),
                        _ => bf16::from_f32(x).to_le_bytes(),
                    }
                });
                (name.to_string(), view.shape().to_vec(), data.collect())
            })
            .collect();
        let views = tensors
            .iter()
            .map(|(n, s, b)| (n.clone(), TensorView::new(dtype, s.clone(), b).unwrap()));
        safetensors::serialize(views, None).unwrap()
    }

    /// The exported weights of `HF_CONFIGS[pick]`, seeded.
    fn exported(pick: usize) -> Vec<u8> {
        let config = config::from_json(HF_CONFIGS[pick]).unwrap();
        let weights = ParamLayout::new(&config).initial_weights(1);
        let model = HfModel {
            config,
            weights,
            tokenizer_json: None,
        };
        model.export(ExportDtype::F32).unwrap().weights.remove(0)
    }

    pub fn hf_weights() -> Seeds {
        let picked = |pick: u8, weights: &[u8]| [&[pick][..], weights].concat();
        let tiny = exported(2);
        let tied = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/parity/fixtures/tied/model.safetensors"
        ))
        .unwrap();
        let seeds: Seeds = vec![
            ("tiny-f32".into(), picked(2, &tiny)),
            ("tiny-f16".into(), picked(2, &converted(&tiny, Dtype::F16))),
            (
                "tiny-bf16".into(),
                picked(2, &converted(&tiny, Dtype::BF16)),
            ),
            (
                "tied-bf16".into(),
                picked(1, &converted(&tied, Dtype::BF16)),
            ),
            ("gqa-config-tiny-weights".into(), picked(0, &tiny)),
            ("empty".into(), vec![]),
            ("config-only".into(), vec![2]),
        ];
        for (name, bytes) in &seeds[..4] {
            fuzzing::hf_import(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        seeds
    }

    /// HF tokenizer.json files of other models and settings, small.
    fn hf_style(webtrain: &str) -> Vec<(&'static str, Value)> {
        let mut full: Value = serde_json::from_str(webtrain).unwrap();
        full["added_tokens"] = json!([
            {"id": 0, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
            {"id": 300, "content": "<pad>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
        ]);
        full["normalizer"] = json!({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"String": "  "}, "content": " "}]});
        full["post_processor"] = json!({"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}});
        full["truncation"] =
            json!({"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0});
        full["padding"] = json!({"strategy": {"Fixed": 64}, "direction": "Right", "pad_to_multiple_of": null,
            "pad_id": 300, "pad_type_id": 0, "pad_token": "<pad>"});
        let wordpiece = json!({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": null,
            "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                "vocab": {"[UNK]": 0, "the": 1, "ju": 2, "##ry": 3, "said": 4, "a": 5, "##s": 6, "t": 7}}});
        let unigram = json!({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null,
            "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
            "post_processor": null,
            "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
            "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": true,
                "vocab": [["<unk>", 0.0], ["▁the", -1.5], ["▁", -2.0], ["a", -3.0], ["e", -3.1], ["<0x41>", -9.0]]}});
        let wordlevel = json!({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
            "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"<unk>": 0, "the": 1, "jury": 2}, "unk_token": "<unk>"}});
        vec![
            ("hf-full.json", full),
            ("wordpiece.json", wordpiece),
            ("unigram.json", unigram),
            ("wordlevel.json", wordlevel),
        ]
    }

    pub fn tokenizers() -> Seeds {
        let webtrain = Tokenizer::train(&[TEXT, TEXT], 300, |_| {})
            .unwrap()
            .to_json()
            .unwrap();
        let mut seeds: Seeds = vec![("webtrain.json".into(), webtrain.clone().into_bytes())];
        for (name, value) in hf_style(&webtrain) {
            seeds.push((name.into(), serde_json::to_vec(&value).unwrap()));
        }
        for (name, bytes) in &seeds {
            fuzzing::tokenizer_json(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let utf16: Vec<u8> = [0xff, 0xfe]
            .into_iter()
            .chain(webtrain.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        let mut precompiled: Value = serde_json::from_str(&webtrain).unwrap();
        precompiled["normalizer"] = json!({"type": "Precompiled", "precompiled_charsmap": null});
        seeds.extend([
            (
                "precompiled-null.json".into(),
                serde_json::to_vec(&precompiled).unwrap(),
            ),
            ("utf16le.json".into(), utf16),
            (
                "truncated.json".into(),
                webtrain.as_bytes()[..webtrain.len() / 2].to_vec(),
            ),
            ("empty.json".into(), vec![]),
            ("array.json".into(), b"[]".to_vec()),
            ("object.json".into(), b"{}".to_vec()),
        ]);
        seeds
    }

    pub fn texts() -> Seeds {
        let text = "The jury said «ça va». İyi akşamlar! 🐈\n\tTabbed\x0cpage\r\n";
        let utf16 = |big: bool| -> Vec<u8> {
            let bom: [u8; 2] = if big { [0xfe, 0xff] } else { [0xff, 0xfe] };
            let units = text.encode_utf16().flat_map(move |u| {
                if big {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                }
            });
            bom.into_iter().chain(units).collect()
        };
        let seeds: Seeds = vec![
            ("utf8.txt".into(), text.into()),
            (
                "bom-utf8.md".into(),
                format!("\u{feff}# Title\r\n{text}").into(),
            ),
            ("utf16le.txt".into(), utf16(false)),
            ("utf16be.txt".into(), utf16(true)),
            ("latin1.txt".into(), b"caf\xe9 au lait, na\xefve\n".to_vec()),
            ("cut-utf8.txt".into(), "akşam 🐈".as_bytes()[..9].to_vec()),
            (
                "png.bin".into(),
                b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10".to_vec(),
            ),
            ("controls.txt".into(), b"a\x01b\x02c\x1bd\x7fe".to_vec()),
            ("empty.txt".into(), vec![]),
            ("blank.txt".into(), b" \n\t\r\n\x0c ".to_vec()),
        ];
        assert!(fuzzing::corpus_reader(&seeds[0].1).is_ok());
        seeds
    }
}
