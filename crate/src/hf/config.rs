//! config.json of a `LlamaForCausalLM`: written from a webtrain config, and
//! read back with transformers' defaults for the fields a file may leave
//! out. Anything webtrain's kernels do not compute the same way (biases,
//! RoPE scaling, another activation, a head size other than
//! hidden/heads) is refused with the field that says so.

use serde_json::{Map, Value, json};

use super::ExportDtype;
use crate::error::{Error, Result};
use crate::model::Config;
use crate::model::layout::INIT_STD;

fn refuse(problem: impl std::fmt::Display) -> Error {
    Error::Format {
        file: super::CONFIG.into(),
        problem: problem.to_string(),
    }
}

/// The config.json text of a webtrain model: its own fields (HF's names,
/// `Config`'s serde) and what transformers needs to know of the rest.
pub fn to_json(c: &Config, dtype: ExportDtype) -> String {
    let mut v = serde_json::to_value(c).expect("a config serializes");
    let fixed = json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "head_dim": c.head_dim(),
        "rope_scaling": null,
        "hidden_act": "silu",
        "attention_bias": false,
        "mlp_bias": false,
        "attention_dropout": 0.0,
        "initializer_range": INIT_STD,
        "torch_dtype": dtype.torch_dtype(),
        "use_cache": true,
    });
    v.as_object_mut()
        .expect("a config is an object")
        .extend(fixed.as_object().expect("an object").clone());
    serde_json::to_string_pretty(&v).expect("a JSON object serializes")
}

/// A webtrain config from config.json, or the reason it cannot be one.
pub fn from_json(text: &str) -> Result<Config> {
    let v: Value = serde_json::from_str(text).map_err(|e| refuse(format!("not JSON ({e})")))?;
    let o = v.as_object().ok_or_else(|| refuse("not a JSON object"))?;
    check_llama(o)?;
    let c = read_fields(o)?;
    check_computed_alike(o, &c)?;
    c.validate().map_err(refuse)?;
    check_widths(&c)?;
    Ok(c)
}

/// A Llama model, by its model_type or its architectures.
fn check_llama(o: &Map<String, Value>) -> Result<()> {
    let architectures: Vec<&str> = o
        .get("architectures")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let model_type = o.get("model_type").and_then(Value::as_str);
    if model_type != Some("llama") && !architectures.contains(&"LlamaForCausalLM") {
        return Err(refuse(format!(
            "model_type {model_type:?}, architectures {architectures:?}: only Llama (LlamaForCausalLM) models are supported"
        )));
    }
    Ok(())
}

/// `Config`'s fields, transformers' defaults for those left out, in the
/// order their errors are reported.
fn read_fields(o: &Map<String, Value>) -> Result<Config> {
    let n_heads = size(o, "num_attention_heads")?;
    let d_model = size(o, "hidden_size")?;
    Ok(Config {
        vocab: size(o, "vocab_size")?,
        d_model,
        n_layers: size(o, "num_hidden_layers")?,
        n_heads,
        n_kv_heads: size_or(o, "num_key_value_heads", n_heads)?,
        ffn: size(o, "intermediate_size")?,
        max_seq: size_or(o, "max_position_embeddings", 2048)?,
        rope_theta: rope_theta(o)?,
        norm_eps: number(o, "rms_norm_eps", 1e-6)?,
        tie_word_embeddings: o
            .get("tie_word_embeddings")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// Refuses what webtrain's kernels would compute differently: another
/// activation, biases, another head size, sliced projections.
fn check_computed_alike(o: &Map<String, Value>, c: &Config) -> Result<()> {
    let act = o
        .get("hidden_act")
        .and_then(Value::as_str)
        .unwrap_or("silu");
    if act != "silu" {
        return Err(refuse(format!(
            "hidden_act {act:?}: webtrain's MLP is SwiGLU with silu"
        )));
    }
    for key in ["attention_bias", "mlp_bias"] {
        if o.get(key).and_then(Value::as_bool) == Some(true) {
            return Err(refuse(format!(
                "{key} is true: webtrain's projections have no biases"
            )));
        }
    }
    if !is_null(o, "head_dim") && size(o, "head_dim")? != c.head_dim() {
        return Err(refuse(format!(
            "head_dim {} is not hidden_size / num_attention_heads = {}",
            size(o, "head_dim")?,
            c.head_dim()
        )));
    }
    if o.get("pretraining_tp")
        .and_then(Value::as_u64)
        .is_some_and(|tp| tp > 1)
    {
        return Err(refuse(
            "pretraining_tp > 1 (sliced projections) is not supported",
        ));
    }
    Ok(())
}

/// The layout's widths are u32: (H + 2·Hkv)·Dh, 2·F, V·D.
fn check_widths(c: &Config) -> Result<()> {
    let too_wide = [
        (c.n_heads as u64 + 2 * c.n_kv_heads as u64) * c.head_dim() as u64,
        2 * c.ffn as u64,
        c.vocab as u64 * c.d_model as u64,
    ];
    if too_wide.iter().any(|&w| w > u32::MAX as u64) {
        return Err(refuse(
            "sizes beyond 32 bits (the q|k|v width, 2·intermediate_size or vocab_size·hidden_size)",
        ));
    }
    Ok(())
}

/// A u32 field that must be there.
fn size(o: &Map<String, Value>, key: &str) -> Result<u32> {
    let x = o.get(key).ok_or_else(|| refuse(format!("no {key}")))?;
    x.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| refuse(format!("{key} {x} is not a size")))
}

/// A u32 field, `default` where it is absent or null.
fn size_or(o: &Map<String, Value>, key: &str, default: u32) -> Result<u32> {
    if is_null(o, key) {
        Ok(default)
    } else {
        size(o, key)
    }
}

fn is_null(o: &Map<String, Value>, key: &str) -> bool {
    o.get(key).is_none_or(Value::is_null)
}

fn number(o: &Map<String, Value>, key: &str, default: f64) -> Result<f64> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(x) => x
            .as_f64()
            .ok_or_else(|| refuse(format!("{key} {x} is not a number"))),
    }
}

/// rope_theta, from the top level (transformers 4) or from
/// `rope_parameters` (transformers 5); only unscaled RoPE.
fn rope_theta(o: &Map<String, Value>) -> Result<f64> {
    for key in ["rope_scaling", "rope_parameters"] {
        if let Some(p) = o.get(key).filter(|p| !p.is_null()) {
            let kind = p
                .get("rope_type")
                .or_else(|| p.get("type"))
                .and_then(Value::as_str)
                .unwrap_or("default");
            if kind != "default" {
                return Err(refuse(format!(
                    "{key} of type {kind:?}: only plain RoPE is supported"
                )));
            }
            if let Some(theta) = p.get("rope_theta") {
                return theta
                    .as_f64()
                    .ok_or_else(|| refuse(format!("{key}.rope_theta {theta} is not a number")));
            }
        }
    }
    number(o, "rope_theta", 10_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_round_trip_and_defaults_are_transformers() {
        for name in crate::model::PRESETS {
            let c = Config::preset(name).unwrap();
            assert_eq!(from_json(&to_json(&c, ExportDtype::F32)).unwrap(), c);
        }
        let minimal = r#"{"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4}"#;
        let c = from_json(minimal).unwrap();
        assert_eq!(
            (
                c.n_kv_heads,
                c.max_seq,
                c.rope_theta,
                c.norm_eps,
                c.tie_word_embeddings
            ),
            (4, 2048, 10_000.0, 1e-6, false)
        );
        let v5 = minimal.replace(
            "\"vocab_size\"",
            r#""rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}, "vocab_size""#,
        );
        assert_eq!(from_json(&v5).unwrap().rope_theta, 500_000.0);
    }

    #[test]
    fn unsupported_configs_are_refused_with_the_field() {
        let base = to_json(&Config::preset("tiny").unwrap(), ExportDtype::F32);
        let with = |key: &str, value: Value| {
            let mut v: Value = serde_json::from_str(&base).unwrap();
            v[key] = value;
            from_json(&v.to_string()).unwrap_err().to_string()
        };
        let mut gpt: Value = serde_json::from_str(&base).unwrap();
        gpt["model_type"] = json!("gpt2");
        gpt["architectures"] = json!(["GPT2LMHeadModel"]);
        assert!(
            from_json(&gpt.to_string())
                .unwrap_err()
                .to_string()
                .contains("only Llama")
        );
        assert!(with("hidden_act", json!("gelu")).contains("hidden_act \"gelu\""));
        assert!(with("attention_bias", json!(true)).contains("attention_bias"));
        assert!(
            with(
                "rope_scaling",
                json!({"rope_type": "llama3", "factor": 8.0})
            )
            .contains("llama3")
        );
        assert!(with("head_dim", json!(32)).contains("head_dim 32"));
        assert!(with("hidden_size", json!("64")).contains("hidden_size \"64\" is not a size"));
        assert!(
            with("num_key_value_heads", json!(3))
                .contains("config.json: model config: n_kv_heads 3")
        );
        assert!(with("intermediate_size", json!(2_147_483_648u64)).contains("beyond 32 bits"));
        assert!(
            from_json("[1]")
                .unwrap_err()
                .to_string()
                .contains("not a JSON object")
        );
    }
}
