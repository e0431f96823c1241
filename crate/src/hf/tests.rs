use super::*;

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
        let files = m.export().unwrap();
        assert_eq!(HfModel::import(&files).unwrap(), m);
        let names: Vec<String> = tensors(&files).into_iter().map(|t| t.0).collect();
        assert_eq!(names.len(), 1 + 2 * 9 + 1 + usize::from(!tied));
        assert!(
            files.config_json.contains("LlamaForCausalLM")
                && files.generation_config_json.is_some()
        );
    }
}

#[test]
fn half_precision_tensors_are_widened() {
    let m = model(false);
    let files = m.export().unwrap();
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
    let files = model(false).export().unwrap();
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
    let files = model(true).export().unwrap();
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
        m.export()
            .unwrap_err()
            .to_string()
            .contains("non-finite weights (a diverged run) in model.layers.1.mlp.down_proj.weight")
    );
}
