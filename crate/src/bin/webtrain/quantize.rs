//! `webtrain quantize`: every tensor of a safetensors file through a format
//! on the GPU (kernels::Quantize), written back dequantized as f32 under
//! the same names, with one JSON line of counts and errors per tensor and
//! a summary. Every tensor is read and checked before the GPU runs, and
//! the output is written only when all of them went through. `--check`
//! also runs the CPU twin (`reference::formats::quantize`) on every tensor
//! and compares the bits.

use std::path::PathBuf;

use clap::Args;
use safetensors::Dtype;
use safetensors::tensor::TensorView;
use serde_json::{Value, json};
use webtrain::kernels::Quantize;
use webtrain::kernels::quantize::{QuantError, quantization_error};
use webtrain::ops::formats::{Blocks, Counts, Format, Quantization, Scaling, Stream};
use webtrain::{Error, Gpu, Result};

use crate::files;

#[derive(Args)]
pub struct QuantizeArgs {
    #[command(flatten)]
    device: crate::cli::DeviceArgs,
    /// bf16, f16, e4m3, e5m2, e4m3-tensor, e5m2-tensor (one power-of-two
    /// scale per tensor), mxfp8-e4m3, mxfp8-e5m2, mxfp8-e4m3-rceil (the
    /// scale rounded up: nothing saturates; TorchAO's RCEIL, formerly
    /// mxfp8-e4m3-ceil), mxfp6-e2m3, mxfp6-e3m2, mxfp4, nvfp4,
    /// nvfp4-4over6 (Four Over Six: each block's scale maps its amax to 6
    /// or to 4, whichever errs less), nvfp4-4over6-mae (by the absolute
    /// error, Transformer Engine's metric), e4m3-blockwise (DeepSeek-V3's
    /// FP8: 128 values per power-of-two scale) or e4m3-row (TorchAO's
    /// rowwise float8: a power-of-two scale per row) (docs/PRECISION.md,
    /// "Formats").
    #[arg(long)]
    format: String,
    /// `2d`: square blocks (weights), NVFP4's 16×16 or e4m3-blockwise's
    /// 128×128, instead of lines along the last dimension.
    #[arg(long, value_parser = ["2d"])]
    block: Option<String>,
    /// Round the elements stochastically, drawing from this seed (tensor i
    /// of the file, in name order, is stream i).
    #[arg(long, value_name = "SEED")]
    stochastic: Option<u32>,
    /// A safetensors file of F32, F16 or BF16 tensors.
    #[arg(long = "in")]
    input: PathBuf,
    /// Where to write the dequantized tensors (F32, same names and shapes).
    #[arg(long)]
    out: PathBuf,
    /// Also run the CPU twin on every tensor and count the values whose
    /// bits differ from the GPU's (and whether the counters agree); the
    /// output is still written, and the exit status is 1 on any difference.
    #[arg(long)]
    check: bool,
}

/// One tensor of the input: its name, shape and values as f32.
struct Tensor {
    name: String,
    shape: Vec<usize>,
    dtype: Dtype,
    values: Vec<f32>,
}

/// The dequantized `outputs` under `tensors`' names and shapes, as f32,
/// with the input's metadata and what was done (`meta`).
fn write(
    path: &std::path::Path,
    tensors: &[Tensor],
    outputs: &[Vec<f32>],
    meta: hashbrown::HashMap<String, String>,
) -> Result<()> {
    let views = tensors
        .iter()
        .zip(outputs)
        .map(|(t, y)| {
            TensorView::new(Dtype::F32, t.shape.clone(), bytemuck::cast_slice(y))
                .map(|v| (t.name.as_str(), v))
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Unsupported(e.to_string()))?;
    let out = safetensors::serialize(views, Some(meta.into_iter().collect()))
        .map_err(|e| Error::Unsupported(e.to_string()))?;
    files::write_atomically(path, &out)
}

/// A tensor's JSON line: its counts and errors, and its blocks' where the
/// format is scaled (a per-tensor scale is one block).
fn tensor_line(t: &Tensor, q: &Quantization, c: &Counts, err: &QuantError) -> Value {
    let mut line = json!({
        "name": t.name, "shape": t.shape, "dtype": format!("{:?}", t.dtype),
        "saturated": c.saturated, "flushed": c.flushed,
        "mean_relative_error": err.mean_relative, "relative_rms_error": err.relative_rms,
    });
    if q.format.scaling != Scaling::None {
        let blocks = match q.format.scaling {
            Scaling::Tensor => 1,
            _ => {
                let cols = t.shape.last().copied().unwrap_or(1).max(1);
                q.block_count([t.values.len() / cols, cols])
            }
        };
        line["blocks"] = json!(blocks);
        line["blocks_scale_saturated"] = json!(c.blocks_scale_saturated);
        line["blocks_scale_underflowed"] = json!(c.blocks_scale_underflowed);
    }
    line
}

pub async fn run(args: &QuantizeArgs) -> Result<()> {
    let format = Format::parse(&args.format)?;
    let blocks = match args.block.as_deref() {
        Some(_) => Blocks::Square,
        None => Blocks::Rows,
    };
    let file = args.input.display().to_string();
    let bytes = std::fs::read(&args.input).map_err(|e| files::io(&args.input, "be read", e))?;
    let tensors = read(&file, &bytes, &Quantization::new(format, blocks, None))?;
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| Error::Unsupported(format!("{file}: {e}")))?;

    let gpu = Gpu::new(&args.device.options()?).await?;
    let k = Quantize::new(&gpu).await?;
    let mut outputs = Vec::with_capacity(tensors.len());
    let (mut total, mut rel_sum, mut values) = (Counts::default(), 0.0, 0u64);
    let (mut differing, mut mismatched) = (0u64, 0usize);
    for (i, t) in tensors.iter().enumerate() {
        let stream = args.stochastic.map(|seed| Stream {
            seed,
            step: 0,
            tensor: i as u32,
        });
        let q = Quantization::new(format, blocks, stream);
        let cols = t.shape.last().copied().unwrap_or(1).max(1);
        let (y, c) = match t.values.is_empty() {
            true => (Vec::new(), Counts::default()),
            false => k.run(&gpu, &q, &t.values, cols).await?,
        };
        let err = quantization_error(&t.values, &y);
        let mut line = tensor_line(t, &q, &c, &err);
        if args.check {
            let (d, agree, check) = check_against_twin(&q, t, cols, &y, &c);
            line["check"] = check;
            differing += d as u64;
            mismatched += (d > 0 || !agree) as usize;
        }
        println!("{line}");
        total.saturated += c.saturated;
        total.flushed += c.flushed;
        total.blocks_scale_saturated += c.blocks_scale_saturated;
        total.blocks_scale_underflowed += c.blocks_scale_underflowed;
        rel_sum += err.mean_relative * t.values.len() as f64;
        values += t.values.len() as u64;
        outputs.push(y);
    }

    let mut meta = metadata.metadata().clone().unwrap_or_default();
    meta.insert(
        "webtrain_quantize".into(),
        describe(&format, blocks, args.stochastic),
    );
    write(&args.out, &tensors, &outputs, meta)?;
    let mut summary = json!({
        "summary": true, "format": format.name,
        "block": if blocks == Blocks::Square { "2d" } else { "1d" },
        "stochastic": args.stochastic, "tensors": tensors.len(), "values": values,
        "saturated": total.saturated, "flushed": total.flushed,
        "blocks_scale_saturated": total.blocks_scale_saturated,
        "blocks_scale_underflowed": total.blocks_scale_underflowed,
        "mean_relative_error": if values == 0 { 0.0 } else { rel_sum / values as f64 },
        "out": args.out,
    });
    if args.check {
        summary["check"] = json!({
            "adapter": gpu.info.name, "all_match": mismatched == 0,
            "tensors_differing": mismatched, "values_differing": differing,
        });
    }
    println!("{summary}");
    eprintln!(
        "quantize: {} tensors ({values} values) through {} written to {}",
        tensors.len(),
        describe(&format, blocks, args.stochastic),
        args.out.display()
    );
    if mismatched > 0 {
        return Err(Error::Unsupported(format!(
            "quantize --check: {mismatched} of {} tensors differ from the CPU twin \
             ({differing} values' bits; see each tensor's \"check\")",
            tensors.len()
        )));
    }
    Ok(())
}

/// `--check`: the CPU twin on tensor `t` against the GPU's `y` and counts:
/// (values whose bits differ, whether the counts agree, the line's `check`
/// object, with the first differing value's bits).
fn check_against_twin(
    q: &Quantization,
    t: &Tensor,
    cols: usize,
    y: &[f32],
    c: &Counts,
) -> (usize, bool, serde_json::Value) {
    let (want, wc) = webtrain::reference::formats::quantize(q, &t.values, cols);
    let differ = |i: &usize| y[*i].to_bits() != want[*i].to_bits();
    let count = (0..y.len()).filter(differ).count();
    let mut check = json!({ "values_differing": count, "counts_agree": wc == *c });
    if let Some(i) = (0..y.len()).find(differ) {
        let hex = |v: f32| format!("{:#010x}", v.to_bits());
        check["first"] = json!({
            "index": i, "x": hex(t.values[i]), "gpu": hex(y[i]), "twin": hex(want[i]),
        });
    }
    if wc != *c {
        check["twin_counts"] = json!([
            wc.saturated,
            wc.flushed,
            wc.blocks_scale_saturated,
            wc.blocks_scale_underflowed
        ]);
    }
    (count, wc == *c, check)
}

fn describe(format: &Format, blocks: Blocks, stochastic: Option<u32>) -> String {
    let mut s = format.name.to_string();
    if blocks == Blocks::Square {
        s += &format!(", {0}×{0} blocks", format.block());
    }
    if let Some(seed) = stochastic {
        s += &format!(", stochastic rounding (seed {seed})");
    }
    s
}

/// Every tensor of the file in name order, as f32, its blocks checked.
fn read(file: &str, bytes: &[u8], q: &Quantization) -> Result<Vec<Tensor>> {
    let st = webtrain::hf::open_safetensors(file, bytes)?;
    let mut names: Vec<String> = st.names().into_iter().map(str::to_string).collect();
    names.sort();
    if names.is_empty() {
        return Err(Error::Unsupported(format!("{file}: holds no tensors")));
    }
    names
        .into_iter()
        .map(|name| {
            let view = st
                .tensor(&name)
                .map_err(|e| Error::Unsupported(format!("{file}: {e}")))?;
            let shape = view.shape().to_vec();
            let n: usize = shape.iter().product();
            let cols = shape.last().copied().unwrap_or(1);
            if n > 0 {
                let what = format!("{file}: tensor {name} {shape:?}");
                q.check([n / cols.max(1), cols], &what)?;
            }
            Ok(Tensor {
                values: webtrain::hf::to_f32(file, &name, &view)?,
                dtype: view.dtype(),
                name,
                shape,
            })
        })
        .collect()
}
