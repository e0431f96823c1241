//! The bytes of a checkpoint: safetensors' layout (u64 header length, JSON
//! header, tensor data), written here in a fixed order so the same state
//! always gives the same file, and read back through the `safetensors`
//! crate's checks of offsets and sizes. Everything a file says is checked
//! before anything is allocated from it: a damaged or foreign file is an
//! `Error::Checkpoint` naming what is wrong, never a panic.
//! The bytes themselves: `file.rs`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::file::{check_tensors, encode, metadata, safetensors_metadata, split};
use super::{Checkpoint, RunState};
use crate::data::Tokenizer;
use crate::error::{Error, Result, name_list as list};
use crate::model::{ParamLayout, Role};
use crate::ops::adam::{ByteCode, bf16_bits, bf16_value};
use crate::optim::{HostState, LossScale, LossScaling, MasterWeights, OptimState, OptimizerKind};
use crate::train::TrainConfig;

/// The metadata's `format`.
pub const FORMAT: &str = "webtrain-checkpoint";
/// The metadata's `version`: raised on any change an older reader would misread.
pub const VERSION: u32 = 1;

// tensor values are written and read as little-endian bytes
const _: () = assert!(cfg!(target_endian = "little"));

pub(super) fn bad(problem: impl Into<String>) -> Error {
    Error::Checkpoint(problem.into())
}

/// Which host vector a tensor's values come from and go to.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    Weights,
    M,
    V,
    MScales,
    VScales,
    MCodes,
    VCodes,
}

/// One tensor of the file: its name, dtype and shape, and where its values
/// sit (elements `offset..offset + len` of its `Place`).
pub(super) struct Spec {
    pub(super) name: String,
    pub(super) dtype: &'static str,
    pub(super) shape: Vec<u64>,
    place: Place,
    offset: u64,
    len: u64,
}

/// The weights' dtype in a file of `master` weights: bf16-sr weights are
/// bf16 values, stored as such.
fn weights_dtype(master: MasterWeights) -> &'static str {
    match master {
        MasterWeights::F32 => "F32",
        MasterWeights::Bf16Sr => "BF16",
    }
}

/// The weights' dtype a file's header says, where it may say either:
/// bf16-sr files written before 2026-12-02 hold F32 weights.
fn stored_weights_dtype(
    header: &serde_json::Map<String, Value>,
    layout: &ParamLayout,
    master: MasterWeights,
) -> &'static str {
    let first = layout.tensors.first().map(|t| t.name.as_str());
    let stored = first.and_then(|n| header.get(n)?.get("dtype")?.as_str());
    match (master, stored) {
        (MasterWeights::Bf16Sr, Some("F32")) => "F32",
        _ => weights_dtype(master),
    }
}

/// The tensors a checkpoint of `layout` with `state` moments and weights
/// of `weights_dtype` holds, in file order.
fn specs(layout: &ParamLayout, state: OptimState, weights_dtype: &'static str) -> Vec<Spec> {
    let tensor = |prefix: &'static str, place, dtype| {
        layout.tensors.iter().map(move |t| {
            let gain = matches!(
                t.role,
                Role::AttnNorm(_) | Role::MlpNorm(_) | Role::FinalNorm
            );
            let shape = if gain {
                vec![t.cols as u64]
            } else {
                vec![t.rows as u64, t.cols as u64]
            };
            Spec {
                name: format!("{prefix}{}", t.name),
                dtype,
                shape,
                place,
                offset: t.offset,
                len: t.len(),
            }
        })
    };
    let mut out: Vec<Spec> = tensor("", Place::Weights, weights_dtype).collect();
    match state {
        OptimState::Fp32 | OptimState::Bf16 => {
            let dtype = if state == OptimState::Bf16 {
                "BF16"
            } else {
                "F32"
            };
            out.extend(tensor("m.", Place::M, dtype).chain(tensor("v.", Place::V, dtype)))
        }
        OptimState::Fp8 | OptimState::Int8 | OptimState::Int8Linear | OptimState::Int4 => {
            let code = state.byte_code().expect("block-wise state");
            // int4: two codes per byte, TorchAO's packing; linear m: signed
            let (m_dtype, v_dtype) = match code {
                ByteCode::E4m3 => ("F8_E4M3", "F8_E4M3"),
                ByteCode::Linear => ("I8", "U8"),
                ByteCode::Dynamic | ByteCode::Int4 => ("U8", "U8"),
            };
            let (scales, codes) = (
                code.scale_bytes(layout.total) / 4,
                code.code_bytes(layout.total),
            );
            let whole = |name: &str, dtype, len, place| Spec {
                name: name.into(),
                dtype,
                shape: vec![len],
                place,
                offset: 0,
                len,
            };
            out.push(whole("m_scales", "F32", scales, Place::MScales));
            out.push(whole("v_scales", "F32", scales, Place::VScales));
            out.push(whole("m_codes", m_dtype, codes, Place::MCodes));
            out.push(whole("v_codes", v_dtype, codes, Place::VCodes));
        }
    }
    out
}

/// A place's host vector: f32 values, bf16 bits or bytes.
enum Values<'a> {
    F32(&'a [f32]),
    Bf16(&'a [u16]),
    U8(&'a [u8]),
}

enum ValuesMut<'a> {
    F32(&'a mut [f32]),
    Bf16(&'a mut [u16]),
    U8(&'a mut [u8]),
}

/// A place's values to write; `weights_bf16`: the weights' bits, for BF16 weights.
fn values<'a>(
    weights: &'a [f32],
    weights_bf16: Option<&'a [u16]>,
    state: &'a HostState,
    place: Place,
) -> Option<Values<'a>> {
    use HostState::*;
    Some(match (place, state) {
        (Place::Weights, _) => match weights_bf16 {
            Some(bits) => Values::Bf16(bits),
            None => Values::F32(weights),
        },
        (Place::M, Fp32 { m, .. }) => Values::F32(m),
        (Place::V, Fp32 { v, .. }) => Values::F32(v),
        (Place::M, Bf16 { m, .. }) => Values::Bf16(m),
        (Place::V, Bf16 { v, .. }) => Values::Bf16(v),
        (Place::MScales, Bytes { m_scales, .. }) => Values::F32(m_scales),
        (Place::VScales, Bytes { v_scales, .. }) => Values::F32(v_scales),
        (Place::MCodes, Bytes { m_codes, .. }) => Values::U8(m_codes),
        (Place::VCodes, Bytes { v_codes, .. }) => Values::U8(v_codes),
        _ => return None,
    })
}

fn values_mut<'a>(
    weights: &'a mut [f32],
    state: &'a mut HostState,
    place: Place,
) -> Option<ValuesMut<'a>> {
    use HostState::*;
    Some(match (place, state) {
        (Place::Weights, _) => ValuesMut::F32(weights),
        (Place::M, Fp32 { m, .. }) => ValuesMut::F32(m),
        (Place::V, Fp32 { v, .. }) => ValuesMut::F32(v),
        (Place::M, Bf16 { m, .. }) => ValuesMut::Bf16(m),
        (Place::V, Bf16 { v, .. }) => ValuesMut::Bf16(v),
        (Place::MScales, Bytes { m_scales, .. }) => ValuesMut::F32(m_scales),
        (Place::VScales, Bytes { v_scales, .. }) => ValuesMut::F32(v_scales),
        (Place::MCodes, Bytes { m_codes, .. }) => ValuesMut::U8(m_codes),
        (Place::VCodes, Bytes { v_codes, .. }) => ValuesMut::U8(v_codes),
        _ => return None,
    })
}

/// Zeroed moments of `kind` for `total` parameters, as `Adam` allocates them.
fn zero_state(kind: OptimState, total: u64) -> HostState {
    let n = total as usize;
    match kind {
        OptimState::Fp32 => HostState::Fp32 {
            m: vec![0.0; n],
            v: vec![0.0; n],
        },
        OptimState::Bf16 => HostState::Bf16 {
            m: vec![0; n],
            v: vec![0; n],
        },
        OptimState::Fp8 | OptimState::Int8 | OptimState::Int8Linear | OptimState::Int4 => {
            let code = kind.byte_code().expect("block-wise state");
            let (codes, scales) = (code.code_bytes(total), code.scale_bytes(total) / 4);
            HostState::Bytes {
                code,
                m_codes: vec![0; codes as usize],
                v_codes: vec![0; codes as usize],
                m_scales: vec![0.0; scales as usize],
                v_scales: vec![0.0; scales as usize],
            }
        }
    }
}

impl Checkpoint {
    /// The checkpoint as `.safetensors` bytes. Refuses non-finite values
    /// (a diverged run) rather than write a file `from_bytes` would refuse.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let layout = ParamLayout::new(&self.config.model);
        let kind = self.config.optim.state;
        let mut pieces: Vec<(&Spec, &[u8])> = Vec::new();
        let dtype = weights_dtype(self.config.optim.master);
        let weights_bf16 = (dtype == "BF16")
            .then(|| exact_bf16(&self.weights))
            .transpose()?;
        let specs = specs(&layout, kind, dtype);
        let mut nonfinite = Vec::new();
        for s in &specs {
            let (start, end) = (s.offset as usize, (s.offset + s.len) as usize);
            let wrong = || {
                bad(format!(
                    "its {} optimizer state does not hold {} values for {}",
                    kind.name(),
                    end,
                    s.name
                ))
            };
            let bytes: &[u8] =
                match values(&self.weights, weights_bf16.as_deref(), &self.state, s.place)
                    .ok_or_else(wrong)?
                {
                    Values::F32(v) => {
                        let v = v.get(start..end).ok_or_else(wrong)?;
                        let count = v.iter().filter(|x| !x.is_finite()).count();
                        if count > 0 {
                            nonfinite.push(format!("{} ({count})", s.name));
                        }
                        bytemuck::cast_slice(v)
                    }
                    Values::Bf16(v) => {
                        let v = v.get(start..end).ok_or_else(wrong)?;
                        let count = v.iter().filter(|&&x| bf16_nonfinite(x)).count();
                        if count > 0 {
                            nonfinite.push(format!("{} ({count})", s.name));
                        }
                        bytemuck::cast_slice(v)
                    }
                    Values::U8(v) => v.get(start..end).ok_or_else(wrong)?,
                };
            pieces.push((s, bytes));
        }
        if !nonfinite.is_empty() {
            return Err(bad(format!(
                "the run has diverged: non-finite values (NaN or ±Inf) in {}; not saved",
                list(&nonfinite)
            )));
        }
        let config = serde_json::to_string(&self.config)
            .map_err(|e| bad(format!("its training config cannot be written: {e}")))?;
        let mut meta = BTreeMap::from([
            ("format", FORMAT.to_string()),
            ("version", VERSION.to_string()),
            ("writer", format!("webtrain {}", env!("CARGO_PKG_VERSION"))),
            ("config", config),
            ("step", self.step.to_string()),
            ("rng", self.run.rng.to_string()),
        ]);
        if let Some(json) = &self.run.tokenizer_json {
            let t = Tokenizer::from_json(json)?;
            meta.insert("tokenizer", json.clone());
            meta.insert("tokenizer_fingerprint", t.fingerprint().to_string());
        }
        if let Some(data) = &self.run.data {
            meta.insert("data", data.clone());
        }
        if let Some(scale) = &self.loss_scale {
            let json = serde_json::to_string(scale)
                .map_err(|e| bad(format!("its loss scale cannot be written: {e}")))?;
            meta.insert("loss_scale", json);
        }
        encode(&meta, &pieces)
    }

    /// Reads and checks a checkpoint: the safetensors structure, the format
    /// and version, the config, every tensor's presence, dtype and shape,
    /// and that every value is finite.
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint> {
        let (mut header, data_start) = split(bytes)?;
        let meta = metadata(header.remove("__metadata__"))?;
        let (config, step, rng) = run_meta(&meta)?;
        let loss_scale = loss_scale(&meta, &config)?;
        let (tokenizer_json, tokenizer_fingerprint) = tokenizer(&meta, config.model.vocab)?;
        check_config(&config, header.len())?;

        let layout = ParamLayout::new(&config.model);
        let dtype = stored_weights_dtype(&header, &layout, config.optim.master);
        let specs = specs(&layout, config.optim.state, dtype);
        check_tensors(&header, &specs)?;
        let st = safetensors_metadata(bytes, &header)?;
        let data = bytes.get(data_start..).unwrap_or_default();
        let (weights, state) = read_values(&st, data, &specs, &layout, config.optim.state)?;
        let run = RunState {
            rng,
            tokenizer_json,
            data: meta.get("data").cloned(),
        };
        Ok(Checkpoint {
            config,
            step,
            run,
            tokenizer_fingerprint,
            weights,
            state,
            loss_scale,
        })
    }
}

/// The metadata's loss scale state, for a config that scales (a file
/// written before loss scaling has none: the run restarts from `init`).
fn loss_scale(meta: &BTreeMap<String, String>, c: &TrainConfig) -> Result<Option<LossScale>> {
    let (Some(s), Some(json)) = (&c.precision.loss_scaling(), meta.get("loss_scale")) else {
        return Ok(None);
    };
    let state: LossScale = serde_json::from_str(json)
        .map_err(|e| bad(format!("its loss scale {json:?} is unreadable: {e}")))?;
    let settings = LossScaling {
        init: state.scale,
        ..*s
    };
    settings
        .validate()
        .map_err(|e| bad(format!("its loss scale is unusable: {e}")))?;
    Ok(Some(state))
}
/// Refuses a config whose optimizer this version does not know (one
/// written before optimizers had a name reads as AdamW).
fn known_optimizer(config_json: &str) -> Result<()> {
    let value: Value = serde_json::from_str(config_json)
        .map_err(|e| bad(format!("its training config is unreadable: {e}")))?;
    match value.pointer("/optim/optimizer") {
        None => Ok(()),
        Some(Value::String(name)) if OptimizerKind::parse(name).is_ok() => Ok(()),
        Some(other) => Err(bad(format!(
            "its optimizer {other} is not one this version knows (adamw, muon): \
             open it with the webtrain that wrote it"
        ))),
    }
}

/// The metadata's training config, step count and batch RNG state.
fn run_meta(meta: &BTreeMap<String, String>) -> Result<(TrainConfig, u32, u64)> {
    let get = |key: &str| {
        meta.get(key)
            .ok_or_else(|| bad(format!("its metadata has no {key:?}")))
    };
    let config_json = get("config")?;
    known_optimizer(config_json)?;
    let config: TrainConfig = serde_json::from_str(config_json)
        .map_err(|e| bad(format!("its training config is unreadable: {e}")))?;
    let step = get("step")?;
    let step: u32 = step
        .parse()
        .map_err(|_| bad(format!("its step count {step:?} is not a number of steps")))?;
    if step == u32::MAX {
        return Err(bad(format!(
            "its step count {step} leaves no room for another step"
        )));
    }
    let rng = get("rng")?;
    let rng: u64 = rng
        .parse()
        .map_err(|_| bad(format!("its batch RNG state {rng:?} is not a u64")))?;
    Ok((config, step, rng))
}

/// The weights and moments, every tensor copied from `data` to its place;
/// refuses non-finite values.
fn read_values(
    st: &safetensors::tensor::Metadata,
    data: &[u8],
    specs: &[Spec],
    layout: &ParamLayout,
    kind: OptimState,
) -> Result<(Vec<f32>, HostState)> {
    // every tensor's bytes are in the file, so these sizes are bounded by it
    let mut weights = vec![0.0f32; layout.total as usize];
    let mut state = zero_state(kind, layout.total);
    let mut nonfinite = Vec::new();
    for s in specs {
        let info = st
            .info(&s.name)
            .ok_or_else(|| bad(format!("tensor {} is missing", s.name)))?;
        let (a, b) = info.data_offsets;
        let src = data
            .get(a..b)
            .ok_or_else(|| bad(format!("tensor {} lies outside the file", s.name)))?;
        let count = copy_tensor(s, src, &mut weights, &mut state)?;
        if count > 0 {
            nonfinite.push(format!("{} ({count})", s.name));
        }
    }
    if !nonfinite.is_empty() {
        return Err(bad(format!(
            "non-finite values (NaN or ±Inf) in {}",
            list(&nonfinite)
        )));
    }
    Ok((weights, state))
}

/// bf16-sr weights as their bf16 bits; refuses a finite value bf16 does
/// not hold (the trainer keeps none: a value it would lose).
fn exact_bf16(weights: &[f32]) -> Result<Vec<u16>> {
    let bits: Vec<u16> = weights.iter().map(|&x| bf16_bits(x)).collect();
    let inexact = (weights.iter().zip(&bits))
        .filter(|&(&x, &b)| x.is_finite() && bf16_value(b).to_bits() != x.to_bits())
        .count();
    if inexact > 0 {
        return Err(bad(format!(
            "its bf16-sr weights hold {inexact} values that are not bf16, which a BF16 file \
             would lose; not saved"
        )));
    }
    Ok(bits)
}

/// Whether bf16 bits `x` are NaN or ±Inf.
fn bf16_nonfinite(x: u16) -> bool {
    x & 0x7f80 == 0x7f80
}

/// One tensor's bytes `src` into its place; how many of its values are
/// not finite (E4M3's NaN codes; 0 for other bytes).
fn copy_tensor(s: &Spec, src: &[u8], weights: &mut [f32], state: &mut HostState) -> Result<usize> {
    let (start, end) = (s.offset as usize, (s.offset + s.len) as usize);
    let short = || {
        bad(format!(
            "tensor {} does not fit the layout of its config",
            s.name
        ))
    };
    match values_mut(weights, state, s.place).ok_or_else(short)? {
        ValuesMut::F32(dst) => {
            let dst = dst.get_mut(start..end).ok_or_else(short)?;
            // bf16-sr weights: bf16 in the file, widened on the host
            let size = if s.dtype == "BF16" { 2 } else { 4 };
            if src.len() != size * dst.len() {
                return Err(short());
            }
            for (d, c) in dst.iter_mut().zip(src.chunks_exact(size)) {
                *d = match size {
                    2 => bf16_value(u16::from_le_bytes([c[0], c[1]])),
                    _ => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                };
            }
            Ok(dst.iter().filter(|x| !x.is_finite()).count())
        }
        ValuesMut::Bf16(dst) => {
            let dst = dst.get_mut(start..end).ok_or_else(short)?;
            if src.len() != 2 * dst.len() {
                return Err(short());
            }
            dst.iter_mut()
                .zip(src.chunks_exact(2))
                .for_each(|(d, c)| *d = u16::from_le_bytes([c[0], c[1]]));
            Ok(dst.iter().filter(|&&x| bf16_nonfinite(x)).count())
        }
        ValuesMut::U8(dst) => {
            let dst = dst.get_mut(start..end).ok_or_else(short)?;
            if src.len() != dst.len() {
                return Err(short());
            }
            dst.copy_from_slice(src);
            let e4m3_nan = |c: &&u8| *c & 0x7f == 0x7f;
            Ok(match s.dtype {
                "F8_E4M3" => dst.iter().filter(e4m3_nan).count(),
                _ => 0,
            })
        }
    }
}

/// The tokenizer.json and its fingerprint, which must agree; both or neither.
fn tokenizer(
    meta: &BTreeMap<String, String>,
    vocab: u32,
) -> Result<(Option<String>, Option<String>)> {
    let (json, stored) = (meta.get("tokenizer"), meta.get("tokenizer_fingerprint"));
    let Some(json) = json else {
        return match stored {
            None => Ok((None, None)),
            Some(_) => Err(bad(
                "its metadata has a tokenizer fingerprint but no tokenizer",
            )),
        };
    };
    let t =
        Tokenizer::from_json(json).map_err(|e| bad(format!("its tokenizer is unreadable: {e}")))?;
    if stored.map(String::as_str) != Some(t.fingerprint()) {
        return Err(bad(format!(
            "its tokenizer's fingerprint is {}, but it records {:?}: the tokenizer is damaged",
            t.fingerprint(),
            stored
        )));
    }
    if t.vocab_size() > vocab {
        return Err(bad(format!(
            "its tokenizer has {} tokens, more than the model's vocabulary {vocab}",
            t.vocab_size()
        )));
    }
    Ok((Some(json.clone()), Some(t.fingerprint().to_string())))
}

/// Refuses a config the kernels cannot run or whose sizes the file cannot
/// hold, before any size is computed from it.
fn check_config(c: &TrainConfig, tensors: usize) -> Result<()> {
    let unusable = |e: Error| bad(format!("its training config is unusable: {e}"));
    c.model.validate().map_err(unusable)?;
    c.shape.validate(&c.model).map_err(unusable)?;
    let m = &c.model;
    if 6 * m.n_layers as u64 + 2 > tensors as u64 {
        return Err(bad(format!(
            "its config has {} layers, more than its {tensors} tensors can hold",
            m.n_layers
        )));
    }
    // Counted in u128, before the layout sums its u64 offsets, which two
    // layers of 2^30-wide matrices overflow: a checkpoint holds at most 12
    // bytes a parameter (f32 weights, m and v), so under 2^63 bytes no
    // offset, length or sum of them overflows. A config the file's tensors
    // do not match is told by the tensors' check below, by name; the
    // values are read only once the file is known to hold them.
    if 16 * m.parameters() > 1 << 63 {
        return Err(bad(format!(
            "its config describes {} parameters: a checkpoint of them would pass 2^63 bytes",
            m.parameters()
        )));
    }
    let qkv = (m.n_heads as u64 + 2 * m.n_kv_heads as u64) * m.head_dim() as u64;
    let rows = c.shape.batch as u64 * c.shape.seq as u64;
    if qkv > u32::MAX as u64 || 2 * m.ffn as u64 > u32::MAX as u64 || rows > u32::MAX as u64 {
        return Err(bad(
            "its training config has sizes beyond 32 bits (qkv width, 2·ffn or batch·seq)",
        ));
    }
    let o = &c.optim;
    let s = &o.schedule;
    let ok = (0.0..1.0).contains(&o.beta1)
        && (0.0..1.0).contains(&o.beta2)
        && o.eps > 0.0
        && o.eps.is_finite()
        && o.weight_decay.is_finite()
        && s.peak.is_finite()
        && s.min_ratio.is_finite()
        && !o.max_grad_norm.is_nan();
    if !ok {
        return Err(bad(format!("its optimizer settings are unusable: {o:?}")));
    }
    Ok(())
}
