//! `webtrain attention` and `webtrain predict` on the parity fixtures
//! against what transformers computes for the same text
//! (tests/parity/make_fixtures.py inspect: eager attention with
//! output_attentions=True, the softmax of the logits).
#![cfg(not(target_arch = "wasm32"))]

use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use webtrain::inspect::ranges;
use webtrain::kernels::quantize::quantization_error;
use webtrain::ops::formats::{Blocks, Format, Quantization};

#[path = "support/webtrain.rs"]
mod support;
use support::{refused, scratch_dir, webtrain_stdout};

// transformers' eager attention and webtrain's both in f32: scores of
// 16-64 terms and an exp. Measured worst, lavapipe: 4.2e-7.
const ATTENTION_ATOL: f32 = 2e-5;
// The bar. Measured worst, lavapipe: 1.5e-6 (gqa). Ranks and top
// tokens are identical but where transformers' own probabilities tie within
// it (tied's rows hold pairs 1e-7 apart), which either order may list.
const PROB_RTOL: f64 = 1e-4;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/parity/fixtures")
        .join(name)
}

fn f32s(t: &safetensors::tensor::TensorView) -> Vec<f32> {
    t.data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// `webtrain COMMAND --hf <fixture NAME> --tokens TOKENS MORE…`'s arguments.
fn on_fixture(command: &str, name: &str, tokens: &Path, more: &[&str]) -> Vec<String> {
    let (hf, tokens) = (fixture(name), tokens.to_str().unwrap().to_string());
    let hf = hf.to_str().unwrap().to_string();
    [command, "--hf", &hf, "--tokens", &tokens]
        .iter()
        .chain(more)
        .map(|a| a.to_string())
        .collect()
}

/// The fixture's expected tensors and its token ids, written to a file.
fn expected(name: &str, dir: &Path) -> (Vec<u8>, PathBuf, Vec<u32>) {
    let bytes =
        std::fs::read(fixture(name).join("inspect.safetensors")).expect("inspect.safetensors");
    let ids: Vec<u32> = {
        let st = SafeTensors::deserialize(&bytes).unwrap();
        let t = st.tensor("input_ids").unwrap();
        t.data()
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as u32)
            .collect()
    };
    let tokens = dir.join(format!("{name}.tokens"));
    let text: Vec<String> = ids.iter().map(u32::to_string).collect();
    std::fs::write(&tokens, text.join(" ")).unwrap();
    (bytes, tokens, ids)
}

fn scratch(name: &str) -> PathBuf {
    scratch_dir(&format!("probe-{name}"))
}

#[test]
fn attention_equals_transformers() {
    for name in ["gqa", "tied"] {
        let dir = scratch(name);
        let (bytes, tokens, ids) = expected(name, &dir);
        let want = SafeTensors::deserialize(&bytes).unwrap();
        let out = dir.join("attention.safetensors");
        webtrain_stdout(&on_fixture(
            "attention",
            name,
            &tokens,
            &["--out", out.to_str().unwrap()],
        ));
        let got_bytes = std::fs::read(&out).unwrap();
        let got = SafeTensors::deserialize(&got_bytes).unwrap();
        let layers = want
            .names()
            .iter()
            .filter(|n| n.starts_with("attention."))
            .count();
        assert_eq!(got.len(), layers, "{name}: one tensor per layer");
        for l in 0..layers {
            let key = format!("attention.{l}");
            let (g, w) = (got.tensor(&key).unwrap(), want.tensor(&key).unwrap());
            assert_eq!(g.shape(), w.shape(), "{name} {key}: [heads, T, T]");
            assert_eq!(g.shape()[1], ids.len());
            let (g, w) = (f32s(&g), f32s(&w));
            let (worst, at) = g
                .iter()
                .zip(&w)
                .map(|(a, b)| (a - b).abs())
                .enumerate()
                .fold((0.0f32, 0), |m, (i, d)| if d > m.0 { (d, i) } else { m });
            assert!(
                worst <= ATTENTION_ATOL,
                "{name} {key}: worst |diff| {worst:e} at {at} (got {}, want {})",
                g[at],
                w[at]
            );
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn predictions_equal_transformers() {
    for name in ["gqa", "tied"] {
        let dir = scratch(&format!("{name}-predict"));
        let (bytes, tokens, ids) = expected(name, &dir);
        let want = SafeTensors::deserialize(&bytes).unwrap();
        let probs = want.tensor("probs").unwrap();
        let vocab = probs.shape()[1];
        let probs = f32s(&probs);
        let top_k = 5;
        let out = webtrain_stdout(&on_fixture(
            "predict",
            name,
            &tokens,
            &["--top-k", &top_k.to_string()],
        ));
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines.len(),
            ids.len() - 1,
            "{name}: a line per position but the last"
        );
        for (p, line) in lines.iter().enumerate() {
            let row = &probs[p * vocab..][..vocab];
            let target = ids[p + 1] as usize;
            assert_eq!(line["position"], p);
            assert_eq!(line["target"], target);
            let got = line["target_prob"].as_f64().unwrap();
            let want_p = row[target] as f64;
            assert!(
                (got - want_p).abs() <= PROB_RTOL * want_p,
                "{name} position {p}: target_prob {got} vs transformers {want_p}"
            );
            let above = |factor: f64| row.iter().filter(|&&q| q as f64 > want_p * factor).count();
            let rank = line["target_rank"].as_u64().unwrap() as usize;
            assert!(
                (above(1.0 + PROB_RTOL)..=above(1.0 - PROB_RTOL)).contains(&rank),
                "{name} position {p}: rank {rank}, transformers' {}",
                above(1.0)
            );
            let mut order: Vec<usize> = (0..vocab).collect();
            order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
            let top: Vec<usize> = line["top"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t[0].as_u64().unwrap() as usize)
                .collect();
            assert_eq!(top.len(), top_k);
            for (got, want) in top.iter().zip(&order) {
                let (g, w) = (row[*got] as f64, row[*want] as f64);
                assert!(
                    got == want || (g - w).abs() <= PROB_RTOL * w,
                    "{name} position {p}: top tokens {top:?}, transformers' {:?}",
                    &order[..top_k]
                );
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn attention_refuses_a_token_beyond_the_vocabulary() {
    let dir = scratch("refuse");
    let tokens = dir.join("bad.tokens");
    std::fs::write(&tokens, "1 2 99999").unwrap();
    let stderr = refused(&on_fixture(
        "attention",
        "gqa",
        &tokens,
        &["--out", dir.join("x.safetensors").to_str().unwrap()],
    ));
    assert!(
        stderr.contains("token 2 is 99999, beyond the vocabulary of 40"),
        "{stderr}"
    );
    assert!(!dir.join("x.safetensors").exists(), "nothing written");
    std::fs::remove_dir_all(&dir).ok();
}

/// F32 tensor `name` of a fixture's model.safetensors.
fn hf_tensor(name: &str, tensor: &str) -> Vec<f32> {
    let bytes = std::fs::read(fixture(name).join("model.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    f32s(&st.tensor(tensor).unwrap())
}

#[test]
fn ranges_histogram_every_tensor_of_a_step() {
    let dir = scratch("ranges");
    let (_, tokens, ids) = expected("gqa", &dir);
    let out = webtrain_stdout(&on_fixture("ranges", "gqa", &tokens, &[]));
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of_kind = |kind: &str| -> Vec<&serde_json::Value> {
        lines.iter().filter(|l| l["kind"] == kind).collect()
    };
    let weights = of_kind("weight");
    for kind in ["gradient", "adam_m", "adam_v"] {
        let names =
            |ls: &[&serde_json::Value]| ls.iter().map(|l| l["tensor"].clone()).collect::<Vec<_>>();
        assert_eq!(
            names(&of_kind(kind)),
            names(&weights),
            "{kind}: one line per parameter tensor"
        );
    }
    // an HF folder has no optimizer state: every moment is zero
    assert!(of_kind("adam_v").iter().all(|l| l["zeros"] == l["count"]));
    // 2 layers × 8 forward boundaries and the final norm, over T − 1 rows of d = 64
    let acts = of_kind("activation");
    assert_eq!(acts.len(), 2 * 8 + 1);
    let x0 = acts.iter().find(|l| l["tensor"] == "layers.0.x").unwrap();
    assert_eq!(x0["count"], (ids.len() - 1) * 64);
    assert!(
        of_kind("gradient")
            .iter()
            .all(|l| l["rms"].as_f64().unwrap() > 0.0),
        "every tensor has a gradient"
    );
    // the GPU's histogram and RMS of a weight, against the CPU twin of the file's values
    let embed = hf_tensor("gqa", "model.embed_tokens.weight");
    let line = weights
        .iter()
        .find(|l| l["tensor"] == "embed_tokens")
        .unwrap();
    let want = webtrain::reference::histogram::log2_histogram(&embed);
    let binades: Vec<(i64, u64)> = want[..webtrain::ops::histogram::BINADES]
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(b, &c)| (webtrain::ops::histogram::binade(b) as i64, c))
        .collect();
    let got: Vec<(i64, u64)> = line["binades"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_i64().unwrap(), p[1].as_u64().unwrap()))
        .collect();
    assert_eq!(got, binades, "embed_tokens' binades");
    let rms = (webtrain::reference::histogram::sum_of_squares(&embed) / embed.len() as f64).sqrt();
    let got_rms = line["rms"].as_f64().unwrap();
    assert!(
        (got_rms - rms).abs() <= 1e-6 * rms,
        "rms {got_rms} vs {rms}"
    );
    // weights of N(0, 0.1): within f16's and Q1.15's largest values; some
    // below E4M3's smallest (2^-9)
    let outside = |l: &serde_json::Value, f: &str| {
        l["outside"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["format"] == f)
            .unwrap()
            .clone()
    };
    assert_eq!(outside(line, "f16")["overflow"], 0.0);
    assert_eq!(outside(line, "q1.15")["overflow"], 0.0);
    assert!(outside(line, "e4m3")["underflow"].as_f64().unwrap() > 0.0);
    assert!(outside(line, "e2m1")["underflow"].as_f64().unwrap() > 0.0);
    assert_eq!(line["outside"].as_array().unwrap().len(), 8, "every format");
    // the block formats on the GPU, against the CPU twin of the same rows
    let cols = 64;
    let blocks = line["blocks"].as_array().unwrap();
    let names: Vec<&str> = blocks
        .iter()
        .map(|b| b["format"].as_str().unwrap())
        .collect();
    assert_eq!(names, ranges::BLOCK_FORMATS);
    for b in blocks {
        let format = Format::parse(b["format"].as_str().unwrap()).unwrap();
        let q = Quantization::new(format, Blocks::Rows, None);
        let (y, c) = webtrain::reference::formats::quantize(&q, &embed, cols);
        let count = q.block_count([embed.len() / cols, cols]) as f64;
        let n = embed.len() as f64;
        let shares = |k: &str| b[k].as_f64().unwrap();
        assert_eq!(
            [
                b["blocks"].as_f64().unwrap(),
                shares("scale_saturated"),
                shares("scale_underflowed")
            ],
            [
                count,
                c.blocks_scale_saturated as f64 / count,
                c.blocks_scale_underflowed as f64 / count
            ],
            "{}: blocks",
            format.name
        );
        assert_eq!(
            [shares("saturated"), shares("flushed")],
            [c.saturated as f64 / n, c.flushed as f64 / n],
            "{}: values",
            format.name
        );
        let want = quantization_error(&embed, &y).mean_relative;
        let got = shares("mean_relative_error");
        assert!(
            (got - want).abs() <= 1e-5 * want,
            "{}: error {got} vs {want}",
            format.name
        );
    }
    let error =
        |l: &serde_json::Value, f: usize| l["blocks"][f]["mean_relative_error"].as_f64().unwrap();
    assert!(
        error(line, 4) > error(line, 0),
        "mxfp4 loses more than mxfp8"
    );
    assert!(
        acts.iter()
            .chain(&of_kind("gradient"))
            .all(|l| l["blocks"].as_array().unwrap().len() == ranges::BLOCK_FORMATS.len())
    );
    assert!(
        of_kind("adam_m")
            .iter()
            .all(|l| l["blocks"].as_array().unwrap().is_empty())
    );
    std::fs::remove_dir_all(&dir).ok();
}
