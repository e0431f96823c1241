//! The format on the CPU: round trips, and every kind of damage refused
//! with its reason, never a panic.

use serde_json::Value;

use super::*;
use crate::model::{BatchShape, Config, ParamLayout, Recipe};
use crate::optim::{
    LossScale, LossScaling, LrSchedule, MasterWeights, OptimConfig, OptimState, OptimizerKind,
};
use crate::rng::SplitMix64;

const TEXT: &str = "the cat sat on the mat. the dog sat on the log. a model learns a language one token at a time.";

fn config(state: OptimState) -> TrainConfig {
    let schedule = LrSchedule {
        peak: 3e-3,
        warmup: 2,
        total: 6,
        min_ratio: 0.1,
    };
    let optim = OptimConfig {
        state,
        schedule,
        ..OptimConfig::default()
    };
    TrainConfig {
        model: Config::preset("tiny").unwrap(),
        shape: BatchShape { batch: 2, seq: 16 },
        precision: Recipe::f16(),
        optim,
        seed: 7,
    }
}

/// A tiny checkpoint as a trainer would hold it: seeded weights, moments
/// that are not zero (only inside tensors: padding stays 0 on the GPU).
fn tiny(state: OptimState, tokenizer: bool) -> Checkpoint {
    let config = config(state);
    let layout = ParamLayout::new(&config.model);
    let weights = layout.initial_weights(config.seed);
    let mut rng = SplitMix64(11);
    let mut unit = move || (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
    let mut in_tensors = |scale: f32| {
        let mut v = vec![0.0f32; layout.total as usize];
        for t in &layout.tensors {
            v[t.offset as usize..(t.offset + t.len()) as usize]
                .iter_mut()
                .for_each(|x| *x = scale * unit());
        }
        v
    };
    let state = match state {
        OptimState::Fp32 => HostState::Fp32 {
            m: in_tensors(1e-3),
            v: in_tensors(1e-6),
        },
        OptimState::Bf16 => {
            let bits = |v: Vec<f32>| v.into_iter().map(crate::ops::adam::bf16_bits).collect();
            HostState::Bf16 {
                m: bits(in_tensors(1e-3)),
                v: bits(in_tensors(1e-6)),
            }
        }
        OptimState::Fp8 | OptimState::Int8 | OptimState::Int8Linear | OptimState::Int4 => {
            let code = state.byte_code().unwrap();
            let (codes, scales) = (
                code.code_bytes(layout.total),
                code.scale_bytes(layout.total) / 4,
            );
            // any byte (fp8: but E4M3's NaN codes, 0x7f and 0xff)
            let end = if state == OptimState::Fp8 {
                0x7f
            } else {
                0x100
            };
            let bytes = |seed| {
                let mut r = SplitMix64(seed);
                (0..codes).map(|_| (r.next_u64() % end) as u8).collect()
            };
            let m_scales = in_tensors(1.0)[..scales as usize].to_vec();
            HostState::Bytes {
                code,
                m_codes: bytes(1),
                v_codes: bytes(2),
                v_scales: m_scales.iter().map(|x| x * x).collect(),
                m_scales,
            }
        }
    };
    let tokenizer_json = tokenizer.then(|| {
        Tokenizer::train(&[TEXT, TEXT], 280, |_| {})
            .unwrap()
            .to_json()
            .unwrap()
    });
    let tokenizer_fingerprint = tokenizer_json
        .as_deref()
        .map(|j| Tokenizer::from_json(j).unwrap().fingerprint().to_string());
    let run = RunState {
        rng: 0xdead_beef_1234_5678,
        tokenizer_json,
        data: Some(r#"{"source":"synthetic"}"#.into()),
    };
    Checkpoint {
        config,
        step: 3,
        run,
        tokenizer_fingerprint,
        weights,
        state,
        loss_scale: None,
    }
}

/// The error text of reading `bytes`, which must be a checkpoint error.
fn refused(bytes: &[u8]) -> String {
    match Checkpoint::from_bytes(bytes) {
        Err(e @ Error::Checkpoint(_)) => e.to_string(),
        Err(e) => panic!("a damaged checkpoint must be Error::Checkpoint, got {e:?}"),
        Ok(_) => panic!("a damaged checkpoint was accepted"),
    }
}

fn header(bytes: &[u8]) -> (serde_json::Map<String, Value>, &[u8]) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (
        serde_json::from_slice(&bytes[8..8 + n]).unwrap(),
        &bytes[8 + n..],
    )
}

/// `bytes` with its header changed by `edit` (re-padded, its length rewritten).
fn edited(bytes: &[u8], edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Vec<u8> {
    let (mut h, data) = header(bytes);
    edit(&mut h);
    let mut text = serde_json::to_vec(&h).unwrap();
    text.resize(text.len().next_multiple_of(8), b' ');
    [&(text.len() as u64).to_le_bytes()[..], &text, data].concat()
}

fn with_meta(bytes: &[u8], key: &str, value: &str) -> Vec<u8> {
    edited(bytes, |h| {
        h["__metadata__"][key] = value.into();
    })
}

#[test]
fn checkpoint_round_trips_exactly_and_deterministically() {
    for (state, tokenizer) in [
        (OptimState::Fp32, true),
        (OptimState::Bf16, false),
        (OptimState::Fp8, false),
        (OptimState::Int8, false),
        (OptimState::Int8Linear, false),
        (OptimState::Int4, false),
    ] {
        let c = tiny(state, tokenizer);
        let bytes = c.to_bytes().unwrap();
        let back = Checkpoint::from_bytes(&bytes).unwrap();
        assert!(
            back == c,
            "{} state: the read checkpoint differs",
            state.name()
        );
        assert_eq!(
            back.to_bytes().unwrap(),
            bytes,
            "the same state writes the same bytes"
        );
        assert_eq!(back.run.tokenizer().unwrap().is_some(), tokenizer);
    }
}

/// bf16-sr master weights are in the config (f32's left out, as files
/// written before the choice have it) and come back.
#[test]
fn master_weights_round_trip_and_old_configs_read_as_f32() {
    let mut c = tiny(OptimState::Int8, false);
    let f32_config = serde_json::to_value(&c.config).unwrap();
    assert!(
        f32_config["optim"].get("master").is_none(),
        "f32 is left out"
    );
    c.config.optim.master = MasterWeights::Bf16Sr;
    c.weights = bf16_values(&c.weights);
    assert_eq!(
        serde_json::to_value(&c.config).unwrap()["optim"]["master"],
        "bf16-sr"
    );
    let back = Checkpoint::from_bytes(&c.to_bytes().unwrap()).unwrap();
    assert_eq!(back.config.optim.master, MasterWeights::Bf16Sr);
    let old: TrainConfig = serde_json::from_value(f32_config).unwrap();
    assert_eq!(old.optim.master, MasterWeights::F32);
}

/// The weights' values rounded to bf16 (nearest), as a bf16-sr trainer holds them.
fn bf16_values(weights: &[f32]) -> Vec<f32> {
    use crate::ops::adam::{bf16_bits, bf16_value};
    weights.iter().map(|&x| bf16_value(bf16_bits(x))).collect()
}

/// bf16-sr weights are stored as BF16, two bytes a weight, and read back
/// bit for bit; a value bf16 does not hold is refused, not rounded; files
/// written before 2026-12-02 (F32 weights, bf16-sr config) still load.
#[test]
fn bf16_sr_weights_are_stored_as_bf16() {
    let f32_master = tiny(OptimState::Fp32, false);
    let mut c = f32_master.clone();
    c.config.optim.master = MasterWeights::Bf16Sr;
    c.weights = bf16_values(&c.weights);
    let bytes = c.to_bytes().unwrap();
    let (h, _) = header(&bytes);
    for t in &ParamLayout::new(&c.config.model).tensors {
        assert_eq!(h[&t.name]["dtype"], "BF16", "{}", t.name);
    }
    assert_eq!(h["m.embed_tokens"]["dtype"], "F32");
    let total = c.weights.len();
    let f32_bytes = f32_master.to_bytes().unwrap();
    assert!(f32_bytes.len() - bytes.len() >= 2 * total - 4096);
    let back = Checkpoint::from_bytes(&bytes).unwrap();
    let bits = |w: &[f32]| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&back.weights), bits(&c.weights));
    assert_eq!(back.state, c.state);

    let mut inexact = c.clone();
    inexact.weights[100] = 1.0 + f32::EPSILON;
    let e = inexact.to_bytes().unwrap_err().to_string();
    assert!(e.contains("1 values that are not bf16"), "{e}");

    // an older bf16-sr file: F32 weights under a bf16-sr config
    let f32_weights = Checkpoint {
        config: f32_master.config.clone(),
        ..c.clone()
    }
    .to_bytes()
    .unwrap();
    let old = edited(&f32_weights, |h| {
        let meta = h["__metadata__"].as_object_mut().unwrap();
        let mut config: Value = serde_json::from_str(meta["config"].as_str().unwrap()).unwrap();
        config["optim"]["master"] = "bf16-sr".into();
        meta["config"] = config.to_string().into();
    });
    let back = Checkpoint::from_bytes(&old).unwrap();
    assert_eq!(back.config.optim.master, MasterWeights::Bf16Sr);
    assert_eq!(bits(&back.weights), bits(&c.weights));
}

/// fp8 codes are safetensors' F8_E4M3 (what torch reads as
/// float8_e4m3fn), int8-linear's m codes I8, and bf16 moments BF16; E4M3's NaN code and a bf16 NaN in
/// a file are refused by name, as an f32 NaN is.
#[test]
fn low_precision_state_has_its_dtypes_and_refuses_nan() {
    let fp8 = tiny(OptimState::Fp8, false);
    let bytes = fp8.to_bytes().unwrap();
    let (h, _) = header(&bytes);
    assert_eq!(h["m_codes"]["dtype"], "F8_E4M3");
    let (h, _) = header(&tiny(OptimState::Int8Linear, false).to_bytes().unwrap());
    assert_eq!(
        (&h["m_codes"]["dtype"], &h["v_codes"]["dtype"]),
        (&"I8".into(), &"U8".into())
    );
    let mut bad = fp8.clone();
    let HostState::Bytes { m_codes, .. } = &mut bad.state else {
        unreachable!()
    };
    m_codes[5] = 0xff;
    let e = refused(&bad.to_bytes().unwrap());
    assert!(
        e.contains("non-finite values (NaN or ±Inf) in m_codes (1)"),
        "{e}"
    );
    let mut bf16 = tiny(OptimState::Bf16, false);
    let bytes = bf16.to_bytes().unwrap();
    assert_eq!(header(&bytes).0["v.lm_head"]["dtype"], "BF16");
    let HostState::Bf16 { v, .. } = &mut bf16.state else {
        unreachable!()
    };
    let at = ParamLayout::new(&bf16.config.model).tensors[0].offset as usize;
    v[at] = 0x7fc0; // NaN
    let e = bf16.to_bytes().unwrap_err().to_string();
    assert!(
        e.contains("non-finite values (NaN or ±Inf) in v.embed_tokens (1)"),
        "{e}"
    );
}

#[test]
fn checkpoint_keeps_the_loss_scale_and_reads_files_without_it() {
    let mut c = tiny(OptimState::Fp32, false);
    c.config.precision = c
        .config
        .precision
        .with_loss_scaling(Some(LossScaling::default()))
        .unwrap();
    c.loss_scale = Some(LossScale {
        scale: 2f32.powi(-3),
        clean: 17,
        skipped: 4,
        changes: 9,
    });
    let bytes = c.to_bytes().unwrap();
    assert!(Checkpoint::from_bytes(&bytes).unwrap() == c);
    let before = edited(&bytes, |h| {
        h["__metadata__"]
            .as_object_mut()
            .unwrap()
            .remove("loss_scale");
    });
    let old = Checkpoint::from_bytes(&before).unwrap();
    assert_eq!(
        old.loss_scale, None,
        "a file from before: the run restarts from init"
    );
    let e = refused(&with_meta(
        &bytes,
        "loss_scale",
        r#"{"scale":3.0,"clean":0,"skipped":0,"changes":0}"#,
    ));
    assert!(e.contains("power of two"), "{e}");
}

#[test]
fn checkpoint_is_a_plain_safetensors_file() {
    let c = tiny(OptimState::Fp32, false);
    let bytes = c.to_bytes().unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let embed = st.tensor("embed_tokens").unwrap();
    assert_eq!(
        (embed.dtype(), embed.shape()),
        (safetensors::Dtype::F32, &[301, 64][..])
    );
    assert_eq!(st.tensor("norm").unwrap().shape(), [64], "gains are 1-D");
    assert_eq!(
        st.tensor("m.layers.1.gate_up_proj").unwrap().shape(),
        [352, 64]
    );
    assert_eq!(
        st.len(),
        3 * ParamLayout::new(&c.config.model).tensors.len()
    );
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let meta = meta.metadata().clone().unwrap();
    assert_eq!(
        (
            meta["format"].as_str(),
            meta["version"].as_str(),
            meta["step"].as_str()
        ),
        (FORMAT, "1", "3")
    );
    assert_eq!(meta["rng"], 0xdead_beef_1234_5678u64.to_string());

    // written by the safetensors crate (another order, as Python would): read the same
    let int8 = tiny(OptimState::Int8, true);
    let bytes = int8.to_bytes().unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let other = safetensors::serialize(st.tensors(), meta.metadata().clone()).unwrap();
    assert_ne!(other, bytes);
    assert!(Checkpoint::from_bytes(&other).unwrap() == int8);
}

#[test]
fn checkpoint_truncated_anywhere_is_refused_as_truncated() {
    let bytes = tiny(OptimState::Int8, false).to_bytes().unwrap();
    let n = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut lengths: Vec<usize> = (0..24)
        .chain([n - 1, n, n + 1, n + 4, bytes.len() - 4, bytes.len() - 1])
        .collect();
    lengths.extend((1..60).map(|i| i * bytes.len() / 60));
    for len in lengths {
        let e = refused(&bytes[..len]);
        assert!(
            e.contains("truncated"),
            "{len} of {} bytes: {e}",
            bytes.len()
        );
    }
    let e = refused(&[&bytes[..], b"more"].concat());
    assert!(e.contains("bytes appended"), "{e}");
}

#[test]
fn checkpoint_flipped_header_bytes_never_panic() {
    let c = tiny(OptimState::Fp32, false);
    let bytes = c.to_bytes().unwrap();
    let n = 8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut refusals = 0;
    for at in (0..n).step_by(3) {
        for mask in [0x01u8, 0x80] {
            let mut b = bytes.clone();
            b[at] ^= mask;
            match Checkpoint::from_bytes(&b) {
                Err(Error::Checkpoint(_)) => refusals += 1,
                Err(e) => panic!("flip at {at}: {e:?}"),
                // a digit of a value (the writer's version, the seed) can change and stay valid
                Ok(_) => {}
            }
        }
    }
    assert!(
        refusals > n / 2,
        "{refusals} refusals of {} flips",
        2 * n.div_ceil(3)
    );
    assert!(
        refused(&[b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", &[0u8; 64][..]].concat())
            .contains("not a safetensors file")
    );
    assert!(refused(b"\x10\0\0\0\0\0\0\0[1, 2, 3]       ").contains("not a JSON object"));
    assert!(refused(b"\x10\0\0\0\0\0\0\0{\"a\": oops}     ").contains("not JSON"));
    assert!(refused(b"").contains("truncated"));
}

#[test]
fn checkpoint_of_another_kind_or_version_is_refused() {
    let bytes = tiny(OptimState::Fp32, false).to_bytes().unwrap();
    let e = refused(&with_meta(&bytes, "version", "2"));
    assert!(
        e.contains("version 2 is newer") && e.contains("update webtrain"),
        "{e}"
    );
    assert!(refused(&with_meta(&bytes, "version", "0")).contains("version \"0\" is not one"));
    assert!(refused(&with_meta(&bytes, "version", "one")).contains("version \"one\""));
    assert!(
        refused(&with_meta(&bytes, "format", "pt"))
            .contains("not a webtrain checkpoint: its format is \"pt\"")
    );
    let plain = safetensors::serialize(
        safetensors::SafeTensors::deserialize(&bytes)
            .unwrap()
            .tensors(),
        None,
    )
    .unwrap();
    assert!(refused(&plain).contains("no metadata"));
    assert!(refused(&with_meta(&bytes, "step", "-1")).contains("step count \"-1\""));
    assert!(refused(&with_meta(&bytes, "step", &u32::MAX.to_string())).contains("no room"));
    assert!(refused(&with_meta(&bytes, "rng", "0x12")).contains("RNG state"));
    assert!(
        refused(&edited(&bytes, |h| drop(
            h["__metadata__"].as_object_mut().unwrap().remove("config")
        )))
        .contains("no \"config\"")
    );
    assert!(
        refused(&with_meta(&bytes, "config", "{\"model\": 1}"))
            .contains("training config is unreadable")
    );
}

/// The optimizer travels in the config: Muon's comes back as Muon, a file
/// from before optimizers had a name reads as AdamW, and one this version
/// does not know is refused by name.
#[test]
fn checkpoint_records_its_optimizer() {
    let mut c = tiny(OptimState::Int8, false);
    c.config.optim.optimizer = OptimizerKind::Muon;
    let bytes = c.to_bytes().unwrap();
    assert!(Checkpoint::from_bytes(&bytes).unwrap() == c);
    let config = |bytes: &[u8]| -> Value {
        let (h, _) = header(bytes);
        serde_json::from_str(h["__metadata__"]["config"].as_str().unwrap()).unwrap()
    };
    let mut before = config(&bytes);
    let optim = before["optim"].as_object_mut().unwrap();
    optim.remove("optimizer");
    optim.remove("momentum");
    let old = with_meta(&bytes, "config", &before.to_string());
    let read = Checkpoint::from_bytes(&old).unwrap();
    assert_eq!(
        (read.config.optim.optimizer, read.config.optim.momentum),
        (OptimizerKind::Adamw, OptimConfig::default().momentum)
    );
    let mut lion = config(&bytes);
    lion["optim"]["optimizer"] = "lion".into();
    let e = refused(&with_meta(&bytes, "config", &lion.to_string()));
    assert!(
        e.contains("\"lion\"") && e.contains("adamw, muon") && e.contains("wrote it"),
        "{e}"
    );
}

/// A modadd run from before residues were tokens (its model reads 14
/// characters) is refused with the reason, not resumed on a stream its
/// embedding has no rows for.
#[test]
fn checkpoint_of_a_task_spelled_otherwise_is_refused() {
    use crate::data::tasks::{Task, TaskSet, TaskSpec};
    use crate::run::{DataState, Text};
    let spec = TaskSpec {
        name: "modadd".into(),
        options: [("p".to_string(), 23), ("train_percent".to_string(), 60)].into(),
    };
    let mut c = tiny(OptimState::Fp32, false);
    c.run.data = Some(DataState::of_task(spec.clone(), &[]).to_json().unwrap());
    c.config.model.vocab = 14;
    let e = Text::of_checkpoint(&c, None).err().unwrap().to_string();
    assert!(
        e.contains("in 14 tokens, this version in 37") && e.contains("start a new run"),
        "{e}"
    );
    // the same run as this version writes it resumes
    let task = Task::parse(&spec).unwrap();
    let held_out = TaskSet::new(task, c.config.seed, 59)
        .unwrap()
        .held_out_tokens();
    c.run.data = Some(DataState::of_task(spec, &held_out).to_json().unwrap());
    (c.config.model.vocab, c.config.shape.seq) = (task.vocab(), 59);
    assert!(Text::of_checkpoint(&c, None).is_ok());
}

#[test]
fn checkpoint_with_wrong_tensors_names_them() {
    let bytes = tiny(OptimState::Fp32, false).to_bytes().unwrap();
    let set = |name: &str, key: &str, value: Value| {
        edited(&bytes, |h| {
            h[name][key] = value;
        })
    };
    let e = refused(&set("layers.0.o_proj", "dtype", "F16".into()));
    assert!(
        e.contains("layers.0.o_proj is F16 [64, 64], expected F32 [64, 64]"),
        "{e}"
    );
    assert!(
        refused(&set("m.norm", "dtype", "Q4".into()))
            .contains("m.norm is Q4 [64], expected F32 [64]")
    );
    assert!(
        refused(&set("embed_tokens", "shape", serde_json::json!([64, 301])))
            .contains("embed_tokens is F32 [64, 301], expected F32 [301, 64]")
    );
    let e = refused(&edited(&bytes, |h| drop(h.remove("v.lm_head"))));
    assert!(e.contains("missing tensor v.lm_head"), "{e}");
    let e = refused(&edited(&bytes, |h| {
        let entry = h["norm"].clone();
        h.insert("extra".into(), entry);
    }));
    assert!(e.contains("unexpected tensor extra"), "{e}");
    // int8 state in the config, fp32 moments in the file
    let cfg = serde_json::to_string(&config(OptimState::Int8)).unwrap();
    let e = refused(&with_meta(&bytes, "config", &cfg));
    assert!(
        e.contains("missing tensors m_scales, v_scales, m_codes, v_codes")
            && e.contains("unexpected tensors m.embed_tokens"),
        "{e}"
    );
    // right names and shapes, offsets that do not fit: the safetensors crate's checks
    let e = refused(&set("norm", "data_offsets", serde_json::json!([0, 256])));
    assert!(e.contains("not a valid safetensors file"), "{e}");
}

#[test]
fn checkpoint_with_nonfinite_values_names_the_tensor_and_count() {
    let c = tiny(OptimState::Fp32, false);
    let bytes = c.to_bytes().unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let start =
        bytes.len() - meta.data_len() + meta.info("layers.1.o_proj").unwrap().data_offsets.0;
    let mut b = bytes.clone();
    b[start + 40..start + 44].copy_from_slice(&f32::NAN.to_le_bytes());
    b[start + 400..start + 404].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let e = refused(&b);
    assert!(
        e.contains("non-finite values (NaN or ±Inf) in layers.1.o_proj (2)"),
        "{e}"
    );
    // and a diverged run is not written
    let mut nan = c.clone();
    let t = ParamLayout::new(&c.config.model).tensors[3].clone();
    nan.weights[t.offset as usize] = f32::NAN;
    let e = nan.to_bytes().unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "diverged: non-finite values (NaN or ±Inf) in {} (1)",
            t.name
        )),
        "{e}"
    );
}

#[test]
fn checkpoint_with_an_unusable_config_is_refused_before_allocating() {
    let bytes = tiny(OptimState::Fp32, false).to_bytes().unwrap();
    let mut bad = config(OptimState::Fp32);
    bad.model.n_heads = 3;
    assert!(
        refused(&with_meta(
            &bytes,
            "config",
            &serde_json::to_string(&bad).unwrap()
        ))
        .contains("n_heads 3 must divide d_model 64")
    );
    let mut huge = config(OptimState::Fp32);
    huge.model.n_layers = 1 << 30;
    assert!(
        refused(&with_meta(
            &bytes,
            "config",
            &serde_json::to_string(&huge).unwrap()
        ))
        .contains("1073741824 layers")
    );
    let mut wide = config(OptimState::Fp32);
    wide.shape.batch = u32::MAX;
    assert!(
        refused(&with_meta(
            &bytes,
            "config",
            &serde_json::to_string(&wide).unwrap()
        ))
        .contains("beyond 32 bits")
    );
    let mut vocab = config(OptimState::Fp32);
    vocab.model.vocab = 1 << 31; // shapes no longer match, long before 2^31 rows are allocated
    assert!(
        refused(&with_meta(
            &bytes,
            "config",
            &serde_json::to_string(&vocab).unwrap()
        ))
        .contains("embed_tokens is F32 [301, 64], expected F32 [2147483648, 64]")
    );
    let mut beta = config(OptimState::Fp32);
    beta.optim.beta2 = 1.5;
    assert!(
        refused(&with_meta(
            &bytes,
            "config",
            &serde_json::to_string(&beta).unwrap()
        ))
        .contains("optimizer settings are unusable")
    );
}

#[test]
fn checkpoint_tokenizer_is_checked() {
    let c = tiny(OptimState::Fp32, true);
    let bytes = c.to_bytes().unwrap();
    let made_with = c.tokenizer_fingerprint.clone().unwrap();
    assert!(c.check_tokenizer(&made_with).is_ok());
    let e = c.check_tokenizer("0123456789abcdef").unwrap_err();
    assert!(
        matches!(e, Error::TokenizerMismatch { .. })
            && e.to_string().contains(&made_with)
            && e.to_string().contains("0123456789abcdef"),
        "{e}"
    );
    let e = tiny(OptimState::Fp32, false)
        .check_tokenizer("0123456789abcdef")
        .unwrap_err()
        .to_string();
    assert!(e.contains("none (synthetic tokens)"), "{e}");
    assert!(
        refused(&with_meta(
            &bytes,
            "tokenizer_fingerprint",
            "0000000000000000"
        ))
        .contains("the tokenizer is damaged")
    );
    assert!(refused(&with_meta(&bytes, "tokenizer", "{}")).contains("tokenizer is unreadable"));
    let synthetic = tiny(OptimState::Fp32, false).to_bytes().unwrap();
    assert!(
        refused(&with_meta(&synthetic, "tokenizer_fingerprint", &made_with))
            .contains("no tokenizer")
    );
}

/// A config of two layers of 2^30-wide matrices: the layout's u64 offsets
/// would overflow (a panic in a debug build, the CLI's or the tests'), so
/// its size is counted in u128 before it is laid out.
#[test]
fn checkpoint_config_too_large_to_lay_out_is_refused_before_it_is() {
    let bytes = tiny(OptimState::Fp32, false).to_bytes().unwrap();
    let mut wide = config(OptimState::Fp32);
    wide.model = Config {
        vocab: u32::MAX,
        d_model: 1 << 30,
        n_heads: 1 << 24,
        n_kv_heads: 1 << 24,
        ffn: (1 << 31) - 1,
        ..wide.model
    };
    let e = refused(&with_meta(
        &bytes,
        "config",
        &serde_json::to_string(&wide).unwrap(),
    ));
    assert!(
        e.contains(
            "its config describes 32281802125770489856 parameters: a checkpoint of them would pass 2^63 bytes"
        ),
        "{e}"
    );
}

/// The page loads a checkpoint up to 1.5 GiB (its wasm module holds the
/// file and what is read from it): the base preset's run with fp32
/// moments fits; a larger file is refused with its size and the cap
/// before it is copied into the module.
#[test]
fn the_page_refuses_a_checkpoint_beyond_its_cap() {
    let base = ParamLayout::new(&Config::preset("base").unwrap());
    let fp32_run = 3 * 4 * base.total + (1 << 20); // weights, m and v, and a header under 1 MiB
    Checkpoint::check_page_size(fp32_run).expect("the base preset's run loads in the page");
    Checkpoint::check_page_size(super::PAGE_MAX_BYTES).unwrap();
    let e = Checkpoint::check_page_size(3 << 30).unwrap_err();
    assert!(matches!(e, Error::Checkpoint(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("checkpoint: the file is 3 GiB, beyond the cap of 1.5 GiB for a checkpoint the page loads"),
        "{e}"
    );
}
