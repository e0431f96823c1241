//! The bytes of a checkpoint file: safetensors' layout (u64 header
//! length, JSON header, tensor data), encoded in a fixed order and split
//! again, each part checked before anything is allocated from it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::format::{FORMAT, Spec, VERSION, bad};
use crate::error::{Result, name_list as list};

/// The largest header the `safetensors` crate reads.
const MAX_HEADER: u64 = 100_000_000;

/// The tensors' offsets, sizes and coverage: the safetensors crate's own
/// checks, a short or long file named as such.
pub(super) fn safetensors_metadata(
    bytes: &[u8],
    header: &serde_json::Map<String, Value>,
) -> Result<safetensors::tensor::Metadata> {
    let (_, st) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| match e {
        safetensors::SafeTensorError::MetadataIncompleteBuffer => {
            let described = 8 + n_of(bytes) + data_len(header);
            bad(format!("truncated, or with bytes appended: its header describes {described} bytes, the file has {}", bytes.len()))
        }
        e => bad(format!("not a valid safetensors file: {e}")),
    })?;
    Ok(st)
}

/// safetensors bytes: the header (metadata, then each tensor's dtype, shape
/// and offsets, keys in serde_json's fixed order), padded with spaces to a
/// multiple of 8 bytes as the `safetensors` crate pads, then the data in `pieces` order.
pub(super) fn encode(meta: &BTreeMap<&str, String>, pieces: &[(&Spec, &[u8])]) -> Result<Vec<u8>> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!(meta));
    let mut at = 0u64;
    for (s, bytes) in pieces {
        let end = at + bytes.len() as u64;
        header.insert(
            s.name.clone(),
            json!({"dtype": s.dtype, "shape": s.shape, "data_offsets": [at, end]}),
        );
        at = end;
    }
    let mut h = serde_json::to_vec(&Value::Object(header))
        .map_err(|e| bad(format!("its header cannot be written: {e}")))?;
    h.resize(h.len().next_multiple_of(8), b' ');
    if h.len() as u64 > MAX_HEADER {
        return Err(bad(format!(
            "its header would take {} bytes, beyond safetensors' {MAX_HEADER}",
            h.len()
        )));
    }
    let mut out = Vec::with_capacity(8 + h.len() + at as usize);
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(&h);
    pieces
        .iter()
        .for_each(|(_, bytes)| out.extend_from_slice(bytes));
    Ok(out)
}

/// The header length the first 8 bytes give (0 where there are not 8).
pub(super) fn n_of(bytes: &[u8]) -> u64 {
    bytes.get(..8).map_or(0, |b| {
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    })
}

/// The header's JSON object, and where the tensor data starts.
pub(super) fn split(bytes: &[u8]) -> Result<(serde_json::Map<String, Value>, usize)> {
    if bytes.len() < 8 {
        return Err(bad(format!(
            "{} bytes: truncated, or not a safetensors file",
            bytes.len()
        )));
    }
    let n = n_of(bytes);
    if n > MAX_HEADER {
        return Err(bad(format!(
            "not a safetensors file: its first 8 bytes give a header of {n} bytes"
        )));
    }
    let end = 8 + n as usize;
    let text = bytes.get(8..end).ok_or_else(|| {
        bad(format!(
            "truncated, or not a safetensors file: its header needs {n} bytes, {} follow",
            bytes.len() - 8
        ))
    })?;
    let text = std::str::from_utf8(text)
        .map_err(|_| bad("not a safetensors file: its header is not UTF-8"))?;
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok((map, end)),
        Ok(_) => Err(bad(
            "not a safetensors file: its header is not a JSON object",
        )),
        Err(e) => Err(bad(format!(
            "not a safetensors file: its header is not JSON ({e})"
        ))),
    }
}

/// The `__metadata__` strings, once they say this is a checkpoint of a
/// version this reader knows.
pub(super) fn metadata(meta: Option<Value>) -> Result<BTreeMap<String, String>> {
    let Some(Value::Object(meta)) = meta else {
        return Err(bad(
            "not a webtrain checkpoint: its header has no metadata (a safetensors file of other tensors?)",
        ));
    };
    let meta: BTreeMap<String, String> = meta
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.as_str()?.to_string())))
        .collect();
    match meta.get("format").map(String::as_str) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(bad(format!(
                "not a webtrain checkpoint: its format is {other:?}, not {FORMAT:?}"
            )));
        }
        None => {
            return Err(bad(format!(
                "not a webtrain checkpoint: its metadata has no format (want {FORMAT:?})"
            )));
        }
    }
    let version = meta.get("version").map(String::as_str).unwrap_or("none");
    match version.parse::<u32>() {
        Ok(VERSION) => Ok(meta),
        Ok(v) if v > VERSION => Err(bad(format!(
            "format version {v} is newer than this webtrain reads ({VERSION}): update webtrain"
        ))),
        _ => Err(bad(format!(
            "format version {version:?} is not one this webtrain reads ({VERSION})"
        ))),
    }
}

/// Every tensor of `specs` is in `header` with its dtype and shape, and no other.
pub(super) fn check_tensors(header: &serde_json::Map<String, Value>, specs: &[Spec]) -> Result<()> {
    let (mut missing, mut wrong) = (Vec::new(), Vec::new());
    for s in specs {
        let Some(entry) = header.get(&s.name) else {
            missing.push(s.name.clone());
            continue;
        };
        let dtype = entry.get("dtype").and_then(Value::as_str).unwrap_or("?");
        let shape: Option<Vec<u64>> = entry
            .get("shape")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_u64).collect());
        if dtype != s.dtype || shape.as_ref() != Some(&s.shape) {
            let shape = shape.map_or("?".to_string(), |v| format!("{v:?}"));
            wrong.push(format!(
                "{} is {dtype} {shape}, expected {} {:?}",
                s.name, s.dtype, s.shape
            ));
        }
    }
    let mut extra: Vec<String> = header
        .keys()
        .filter(|k| !specs.iter().any(|s| &s.name == *k))
        .cloned()
        .collect();
    extra.sort();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!(
            "missing tensor{} {}",
            if missing.len() == 1 { "" } else { "s" },
            list(&missing)
        ));
    }
    if !extra.is_empty() {
        problems.push(format!(
            "unexpected tensor{} {}",
            if extra.len() == 1 { "" } else { "s" },
            list(&extra)
        ));
    }
    if !wrong.is_empty() {
        problems.push(format!("tensor {}", list(&wrong)));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(bad(format!(
        "its tensors do not match its config: {}",
        problems.join("; ")
    )))
}

/// The data length the header's offsets describe.
pub(super) fn data_len(header: &serde_json::Map<String, Value>) -> u64 {
    let end = |v: &Value| v.get("data_offsets")?.get(1)?.as_u64();
    header.values().filter_map(end).max().unwrap_or(0)
}
