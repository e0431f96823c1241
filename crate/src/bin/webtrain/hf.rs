//! `webtrain export-hf`, `eval` and `generate`: a checkpoint as a Hugging
//! Face Llama folder; the loss of an HF folder on a token sequence, computed
//! as transformers computes it with `labels = input_ids`, so anyone can
//! compare the two on their own model (docs/INTEROP.md); and text from one.

use std::ops::ControlFlow;
use std::path::PathBuf;

use clap::Args;
use webtrain::hf::{ExportDtype, HfModel};
use webtrain::kernels::Kernels;
use webtrain::kernels::loss::IGNORE_INDEX;

use webtrain::data::Tokenizer;
use webtrain::model::decode::{Decoder, Generation, Sampling};
use webtrain::model::{BatchShape, MasterStorage, Model, Recipe};
use webtrain::{Error, Gpu, Result};

use crate::files;

#[derive(Args)]
pub struct ExportArgs {
    /// A webtrain checkpoint (.safetensors), e.g. from `train --out`.
    #[arg(long)]
    checkpoint: PathBuf,
    /// The folder to write config.json, model.safetensors, tokenizer.json and generation_config.json to.
    #[arg(long)]
    out: PathBuf,
    /// The weights' dtype (bf16: rounded to nearest); by default the run's:
    /// bf16 for bf16-sr master weights, else f32.
    #[arg(long, value_parser = ExportDtype::ALL.map(ExportDtype::name))]
    dtype: Option<String>,
}

#[derive(Args)]
pub struct EvalArgs {
    #[command(flatten)]
    device: crate::cli::DeviceArgs,
    /// A Hugging Face Llama folder (config.json, model.safetensors).
    #[arg(long)]
    hf: PathBuf,
    /// A text file of whitespace-separated token ids: one sequence, at most max_position_embeddings long.
    #[arg(long)]
    tokens: PathBuf,
    /// Also write the [N, vocab] logits here, as a safetensors file with one tensor "logits".
    #[arg(long)]
    logits: Option<PathBuf>,
    #[arg(long, default_value = "fp32", value_parser = ["fp32", "f16"])]
    precision: String,
}

#[derive(Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    device: crate::cli::DeviceArgs,
    /// A Hugging Face Llama folder with its tokenizer.json (e.g. from export-hf).
    #[arg(long)]
    hf: PathBuf,
    /// The text to continue.
    #[arg(long)]
    prompt: String,
    /// New tokens, at most (prompt + new tokens stay within max_position_embeddings).
    #[arg(long, default_value_t = 64)]
    max_new: u32,
    /// 0 takes the most likely token.
    #[arg(long, default_value_t = 0.8)]
    temperature: f32,
    /// Draw among the k most likely tokens (0: all).
    #[arg(long, default_value_t = 40)]
    top_k: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value = "fp32", value_parser = ["fp32", "f16"])]
    precision: String,
}

pub fn export(args: &ExportArgs) -> Result<()> {
    let c = files::read_checkpoint(&args.checkpoint)?;
    let dtype = match &args.dtype {
        Some(name) => ExportDtype::parse(name)?,
        None => ExportDtype::trained(c.config.optim.master),
    };
    let model = HfModel {
        config: c.config.model.clone(),
        weights: c.weights,
        tokenizer_json: c.run.tokenizer_json,
    };
    files::write_folder(&args.out, &model.export(dtype)?)?;
    eprintln!(
        "export-hf: step {} of {} written to {} ({})",
        c.step,
        args.checkpoint.display(),
        args.out.display(),
        dtype.name()
    );
    Ok(())
}

pub async fn eval(args: &EvalArgs) -> Result<()> {
    let model = files::read_hf(&args.hf)?;
    let ids = files::read_token_ids(&args.tokens, model.config.vocab)?;
    if ids.len() < 2 || ids.len() > model.config.max_seq as usize {
        return Err(Error::Unsupported(format!(
            "{}: {} tokens; the loss needs 2 to max_position_embeddings = {}",
            args.tokens.display(),
            ids.len(),
            model.config.max_seq
        )));
    }
    let gpu = Gpu::new(&args.device.options()?).await?;
    let k = Kernels::new(&gpu, &[model.config.head_dim()]).await?;
    let shape = BatchShape {
        batch: 1,
        seq: ids.len() as u32,
    };
    let precision = Recipe::named(&args.precision)?;
    let m = Model::new(
        &gpu,
        &k,
        (model.config.clone(), shape, precision.clone()),
        (&model.weights, MasterStorage::F32),
    )
    .await?;
    // position t predicts token t+1; the last predicts nothing (transformers' shift)
    let targets: Vec<u32> = ids[1..].iter().copied().chain([IGNORE_INDEX]).collect();
    let loss = m.evaluate(&gpu, &ids, &targets).await?.mean;
    if let Some(path) = &args.logits {
        let logits = m.logits(&gpu, &k).await?;
        let view = safetensors::tensor::TensorView::new(
            safetensors::Dtype::F32,
            vec![ids.len(), model.config.vocab as usize],
            bytemuck::cast_slice(&logits),
        )
        .map_err(|e| Error::Unsupported(e.to_string()))?;
        let bytes = safetensors::serialize([("logits", view)], None)
            .map_err(|e| Error::Unsupported(e.to_string()))?;
        std::fs::write(path, bytes).map_err(|e| files::io(path, "be written", e))?;
    }
    println!(
        "{}",
        serde_json::json!({"loss": loss, "tokens": ids.len(), "precision": precision.name(), "adapter": gpu.info.name})
    );
    Ok(())
}

/// Continues a prompt with an HF folder's model through the KV-cache
/// decoder; prints {"prompt", "text", "tokens"}.
pub async fn generate(args: &GenerateArgs) -> Result<()> {
    let model = files::read_hf(&args.hf)?;
    let json = model
        .tokenizer_json
        .as_deref()
        .ok_or_else(|| Error::Tokenizer(format!("{} has no tokenizer.json", args.hf.display())))?;
    let tokenizer = Tokenizer::from_json(json)?;
    let prompt = tokenizer.encode(&args.prompt)?;
    if prompt.is_empty() {
        return Err(Error::Unsupported(
            "the prompt is empty: give some text to continue".into(),
        ));
    }
    let gpu = Gpu::new(&args.device.options()?).await?;
    let k = Kernels::new(&gpu, &[model.config.head_dim()]).await?;
    let m = Model::new(
        &gpu,
        &k,
        (
            model.config.clone(),
            BatchShape { batch: 1, seq: 1 },
            Recipe::named(&args.precision)?,
        ),
        (&model.weights, MasterStorage::F32),
    )
    .await?;
    // a cache for this generation only, not the whole context
    let needed = (prompt.len() as u64 + (args.max_new as u64).saturating_sub(1))
        .min(model.config.max_seq as u64) as u32;
    let mut decoder = Decoder::new(&gpu, &k, &m, 1, needed)?;
    let g = Generation {
        max_new: args.max_new,
        sampling: Sampling {
            temperature: args.temperature,
            top_k: args.top_k,
        },
        seed: args.seed,
    };
    let out = decoder
        .generate(
            &gpu,
            &k,
            &m,
            &[prompt],
            &g,
            |_, _| ControlFlow::Continue(()),
        )
        .await?;
    println!(
        "{}",
        serde_json::json!({"prompt": args.prompt, "text": tokenizer.decode(&out[0])?, "tokens": out[0]})
    );
    Ok(())
}
