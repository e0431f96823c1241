use safetensors::SafeTensors;

use super::*;
use crate::data::Tokenizer;

fn model(tied: bool) -> HfModel {
    let config = Config {
        tie_word_embeddings: tied,
        ..Config::preset("tiny").unwrap()
    };
    let weights = ParamLayout::new(&config).initial_weights(5);
    HfModel {
        config,
        weights,
        tokenizer_json: None,
    }
}

/// The exported weights as (name, dtype, shape, bytes), to rebuild variants.
fn tensors(files: &HfFiles) -> Vec<(String, Dtype, Vec<usize>, Vec<u8>)> {
    let st = SafeTensors::deserialize(&files.weights[0]).unwrap();
    st.iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                v.dtype(),
                v.shape().to_vec(),
                v.data().to_vec(),
            )
        })
        .collect()
}

fn with_tensors(files: &HfFiles, list: &[(String, Dtype, Vec<usize>, Vec<u8>)]) -> HfFiles {
    let views = list
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()));
    HfFiles {
        weights: vec![safetensors::serialize(views, None).unwrap()],
        ..files.clone()
    }
}

fn at(list: &[(String, Dtype, Vec<usize>, Vec<u8>)], name: &str) -> usize {
    list.iter().position(|t| t.0 == name).unwrap()
}

fn refusal(files: &HfFiles) -> String {
    HfModel::import(files).unwrap_err().to_string()
}

#[test]
fn export_then_import_gives_the_same_model() {
    for tied in [false, true] {
        let m = model(tied);
        let files = m.export(ExportDtype::F32).unwrap();
        assert_eq!(HfModel::import(&files).unwrap(), m);
        let names: Vec<String> = tensors(&files).into_iter().map(|t| t.0).collect();
        assert_eq!(names.len(), 1 + 2 * 9 + 1 + usize::from(!tied));
        assert!(
            files.config_json.contains("LlamaForCausalLM")
                && files.generation_config_json.is_some()
        );
    }
}

/// A bf16 export: every tensor BF16, each weight rounded to nearest even,
/// config.json saying bfloat16; bf16 values (a bf16-sr run's) come back
/// bit for bit.
#[test]
fn bf16_export_rounds_to_nearest_and_keeps_bf16_values() {
    let m = model(false);
    let files = m.export(ExportDtype::Bf16).unwrap();
    assert!(tensors(&files).iter().all(|t| t.1 == Dtype::BF16));
    let config: serde_json::Value = serde_json::from_str(&files.config_json).unwrap();
    assert_eq!(config["torch_dtype"], "bfloat16");
    let f32_bytes = m.export(ExportDtype::F32).unwrap().weights[0].len();
    assert!(files.weights[0].len() < f32_bytes / 2 + 4096);
    let rounded: Vec<f32> = (m.weights.iter())
        .map(|&x| half::bf16::from_f32(x).to_f32())
        .collect();
    assert_ne!(
        rounded, m.weights,
        "the seeded weights are not all bf16 values"
    );
    let back = HfModel::import(&files).unwrap();
    assert_eq!(back.weights, rounded);
    let bf16_model = HfModel {
        weights: rounded,
        ..m
    };
    let again = HfModel::import(&bf16_model.export(ExportDtype::Bf16).unwrap()).unwrap();
    assert_eq!(again, bf16_model);
}

#[test]
fn half_precision_tensors_are_widened() {
    let m = model(false);
    let files = m.export(ExportDtype::F32).unwrap();
    let mut list = tensors(&files);
    for (name, dtype) in [
        ("model.embed_tokens.weight", Dtype::F16),
        ("model.layers.0.self_attn.q_proj.weight", Dtype::BF16),
    ] {
        let i = at(&list, name);
        let values: Vec<f32> = bytemuck::pod_collect_to_vec(&list[i].3);
        list[i].3 = match dtype {
            Dtype::F16 => values
                .iter()
                .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
                .collect(),
            _ => values
                .iter()
                .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
                .collect(),
        };
        list[i].1 = dtype;
    }
    let back = HfModel::import(&with_tensors(&files, &list)).unwrap();
    let layout = ParamLayout::new(&m.config);
    let p = parts(&m.config, &layout);
    let (embed, q) = (p[0].range(&layout), p[1].range(&layout));
    // each value is the rounded one, widened exactly
    assert!(
        back.weights[embed.clone()]
            .iter()
            .zip(&m.weights[embed])
            .all(|(&a, &b)| a == half::f16::from_f32(b).to_f32())
    );
    assert!(
        back.weights[q.clone()]
            .iter()
            .zip(&m.weights[q])
            .all(|(&a, &b)| a == half::bf16::from_f32(b).to_f32())
    );
}

#[test]
fn damaged_or_foreign_folders_are_refused_with_the_reason() {
    let files = model(false).export(ExportDtype::F32).unwrap();
    let list = tensors(&files);

    let truncated = HfFiles {
        weights: vec![files.weights[0][..files.weights[0].len() - 10].to_vec()],
        ..files.clone()
    };
    assert!(
        refusal(&truncated).contains("model.safetensors: not a readable safetensors file"),
        "{}",
        refusal(&truncated)
    );

    let mut wrong_rows = list.clone();
    wrong_rows[at(&list, "model.layers.0.self_attn.k_proj.weight")].2 = vec![16, 128];
    assert!(
        refusal(&with_tensors(&files, &wrong_rows))
            .contains("k_proj.weight has shape [16, 128], config.json says [32, 64]")
    );

    let mut ints = list.clone();
    ints[at(&list, "model.embed_tokens.weight")].1 = Dtype::I32;
    assert!(
        refusal(&with_tensors(&files, &ints)).contains("model.embed_tokens.weight has dtype I32")
    );

    let mut nan = list.clone();
    nan[at(&list, "model.layers.0.self_attn.v_proj.weight")].3[..4]
        .copy_from_slice(&f32::NAN.to_le_bytes());
    assert!(
        refusal(&with_tensors(&files, &nan))
            .contains("non-finite values (NaN or ±Inf) in model.layers.0.self_attn.v_proj.weight")
    );

    let missing: Vec<_> = list
        .iter()
        .filter(|t| !t.0.contains("up_proj"))
        .cloned()
        .collect();
    let e = refusal(&with_tensors(&files, &missing));
    assert!(
        e.contains(
            "missing tensors: model.layers.0.mlp.up_proj.weight, model.layers.1.mlp.up_proj.weight"
        ),
        "{e}"
    );

    let mut extra = list.clone();
    extra.push((
        "model.layers.0.self_attn.q_proj.bias".into(),
        Dtype::F32,
        vec![64],
        vec![0; 256],
    ));
    assert!(
        refusal(&with_tensors(&files, &extra))
            .contains("does not have: model.layers.0.self_attn.q_proj.bias")
    );

    let mut old = list.clone();
    old.push((
        "model.layers.0.self_attn.rotary_emb.inv_freq".into(),
        Dtype::F32,
        vec![8],
        vec![0; 32],
    ));
    HfModel::import(&with_tensors(&files, &old))
        .expect("RoPE frequencies of older exports are ignored");

    let huge = HfFiles {
        config_json: files.config_json.replace(
            "\"num_hidden_layers\": 2",
            "\"num_hidden_layers\": 4000000000",
        ),
        ..files.clone()
    };
    assert!(
        refusal(&huge)
            .contains("config.json: num_hidden_layers 4000000000, but the weights hold 21 tensors"),
        "{}",
        refusal(&huge)
    );
    let wide = HfFiles {
        config_json: files.config_json.replace(
            "\"intermediate_size\": 176",
            "\"intermediate_size\": 1000000",
        ),
        ..files.clone()
    };
    assert!(
        refusal(&wide).contains("config.json: it describes"),
        "{}",
        refusal(&wide)
    );

    let bad_config = HfFiles {
        config_json: files.config_json.replace("\"silu\"", "\"gelu\""),
        ..files.clone()
    };
    assert!(refusal(&bad_config).contains("hidden_act \"gelu\""));

    let text: Vec<String> = (0..5000)
        .map(|i| format!("w{}x{}", i * 7919 % 5003, i % 97))
        .collect();
    let big = Tokenizer::train(&[text.join(" ").as_str()], 400, |_| ()).unwrap();
    let too_big = HfFiles {
        tokenizer_json: Some(big.to_json().unwrap()),
        ..files.clone()
    };
    assert!(big.vocab_size() > 301);
    assert!(
        refusal(&too_big).contains("more than the model's vocab_size 301"),
        "{}",
        refusal(&too_big)
    );
}

#[test]
fn a_tied_lm_head_copy_must_equal_the_embeddings() {
    let files = model(true).export(ExportDtype::F32).unwrap();
    let mut list = tensors(&files);
    let mut head = list[at(&list, "model.embed_tokens.weight")].clone();
    head.0 = "lm_head.weight".into();
    list.push(head.clone());
    HfModel::import(&with_tensors(&files, &list)).expect("transformers may save the tied copy");
    list.last_mut().unwrap().3[0] ^= 1;
    assert!(
        refusal(&with_tensors(&files, &list)).contains("differs from model.embed_tokens.weight")
    );
}

#[test]
fn a_diverged_model_is_not_exported() {
    let mut m = model(false);
    let layout = ParamLayout::new(&m.config);
    m.weights[layout.get(crate::model::Role::Down(1)).offset as usize] = f32::INFINITY;
    assert!(
        m.export(ExportDtype::F32)
            .unwrap_err()
            .to_string()
            .contains("non-finite weights (a diverged run) in model.layers.1.mlp.down_proj.weight")
    );
}

/// A config.json whose matrices are 2^30 wide, with any small weights: the
/// layout's u64 offsets of two such layers would overflow (a panic in a
/// debug build), so the files' bytes bound the model before it is laid out.
#[test]
fn a_config_larger_than_its_files_is_refused_before_it_is_laid_out() {
    let files = model(false).export(ExportDtype::F32).unwrap();
    let wide = HfFiles {
        config_json: r#"{"model_type": "llama", "vocab_size": 2, "hidden_size": 1073741824,
            "num_hidden_layers": 2, "num_attention_heads": 16777216,
            "num_key_value_heads": 16777216, "intermediate_size": 2147483647}"#
            .into(),
        ..files.clone()
    };
    let e = refusal(&wide);
    assert!(
        e.contains(
            "config.json: it describes 23058430095358164992 parameters, but the weights files hold"
        ),
        "{e}"
    );
}

/// The page's wasm module takes a model folder's files up to its caps,
/// each refused by name with its size and the cap before anything is read;
/// a model the app makes fits them with room to spare.
#[test]
fn the_page_refuses_files_and_models_beyond_its_caps() {
    let page = Limits::PAGE;
    let e = page
        .check_files([("model.safetensors", 1000), ("config.json", 3 << 30)])
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "config.json: is 3 GiB, beyond the cap of 64 MiB for a JSON file of a model folder: \
         the page's wasm module (4 GiB of memory for the files, the model and the run) takes no \
         more; the CLI (webtrain train --from-hf) has no such cap"
    );
    let e = page
        .check_files([("model-00001-of-00002.safetensors", 5 << 30)])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("model-00001-of-00002.safetensors: is 5 GiB, beyond the cap of 1 GiB"),
        "{e}"
    );
    let e = page
        .check_files([("a.safetensors", 600 << 20), ("b.safetensors", 600 << 20)])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("the model folder: its files take 1.2 GiB in all, beyond the cap of 1 GiB"),
        "{e}"
    );
    // a file whose size wraps u64 when summed is still refused
    assert!(
        page.check_files([("config.json", 10), ("model.safetensors", u64::MAX)])
            .is_err()
    );
    assert!(Limits::NONE.check_files([("config.json", 3 << 30)]).is_ok());

    // the weights an import would allocate, refused before they are
    let files = model(false).export(ExportDtype::F32).unwrap();
    let small = Limits {
        weights: 64 << 10,
        ..Limits::NONE
    };
    let e = HfModel::import_within(&files, &small)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("config.json: its 131008 parameters take 517 KiB as f32 weights, beyond the cap of 64 KiB"),
        "{e}"
    );
    // and the files it was given, by name
    let e = HfModel::import_within(
        &files,
        &Limits {
            json_file: 100,
            ..Limits::NONE
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("config.json: is "), "{e}");
    HfModel::import_within(&files, &page).expect("the tiny model fits the page");

    // the base preset: its export and its f32 weights, each under half its cap
    let base = Config::preset("base").unwrap();
    let layout = ParamLayout::new(&base);
    let weights = 4 * layout.total;
    let file = 4 * layout.parameters() + (1 << 20); // the header: far under 1 MiB
    assert!(
        2 * weights < page.weights && 2 * file < page.files,
        "{weights} {file}"
    );
}

/// A model.safetensors whose header places its tensors past the end of the
/// file, their offsets adding up to just under 2^64: the `safetensors`
/// crate would overflow adding the header's length (a panic where overflow
/// is checked); refused first, naming the tensor.
#[test]
fn tensors_placed_past_the_end_of_the_file_are_refused() {
    let size: u64 = (1 << 61) - 1; // the most bytes a U8 tensor may declare
    let header: serde_json::Map<String, serde_json::Value> = (0..8u64)
        .map(|i| {
            let offsets = [i * size, (i + 1) * size];
            let tensor =
                serde_json::json!({"dtype": "U8", "shape": [size], "data_offsets": offsets});
            (format!("t{i}"), tensor)
        })
        .collect();
    let mut text = serde_json::to_vec(&header).unwrap();
    text.resize(text.len().next_multiple_of(8), b' ');
    let files = HfFiles {
        weights: vec![[&(text.len() as u64).to_le_bytes()[..], &text, b"data"].concat()],
        ..model(false).export(ExportDtype::F32).unwrap()
    };
    assert_eq!(
        refusal(&files),
        "model.safetensors: not a readable safetensors file (tensor t0 ends at byte \
         2305843009213693951 of the data, which is 4 bytes: truncated, or its header is damaged)"
    );
}
