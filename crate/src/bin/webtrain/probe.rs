//! `webtrain attention`, `predict` and `ranges`: one text through a model
//! (an HF folder or a checkpoint) in a precision mode, for scripts and
//! tests; what the page's attention, prediction and value-range views show.

use std::path::PathBuf;

use clap::Args;
use webtrain::checkpoint::Checkpoint;
use webtrain::data::{Batch, Tokenizer};
use webtrain::inspect::{Probe, ranges};
use webtrain::kernels::Kernels;
use webtrain::model::{BatchShape, Config, Recipe};
use webtrain::optim::OptimConfig;
use webtrain::train::{TrainConfig, Trainer};
use webtrain::{Error, Gpu, Result};

use crate::files;

/// The model to look into, and the text.
#[derive(Args)]
pub struct ProbeArgs {
    #[command(flatten)]
    device: crate::cli::DeviceArgs,
    /// A Hugging Face Llama folder (config.json, model.safetensors; tokenizer.json for --text).
    #[arg(
        long,
        required_unless_present = "checkpoint",
        conflicts_with = "checkpoint"
    )]
    hf: Option<PathBuf>,
    /// A webtrain checkpoint (.safetensors).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// A file of whitespace-separated token ids: one sequence.
    #[arg(long, required_unless_present = "text", conflicts_with = "text")]
    tokens: Option<PathBuf>,
    /// Text, through the model's tokenizer.
    #[arg(long)]
    text: Option<String>,
    /// fp32, f16, sf16, sf16-wide-head or fp8 (default: the checkpoint's, fp32 for a folder).
    #[arg(long)]
    precision: Option<String>,
}

#[derive(Args)]
pub struct AttentionArgs {
    #[command(flatten)]
    probe: ProbeArgs,
    /// Where to write one F32 tensor per layer, `attention.{layer}` [heads, T, T].
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
pub struct PredictArgs {
    #[command(flatten)]
    probe: ProbeArgs,
    /// Most likely tokens listed per position.
    #[arg(long, default_value_t = 5)]
    top_k: usize,
}

#[derive(Args)]
pub struct RangesArgs {
    #[command(flatten)]
    probe: ProbeArgs,
}

/// The model's config, weights and tokenizer, and the precision asked for;
/// a checkpoint's optimizer state and settings.
struct Source {
    config: Config,
    weights: Vec<f32>,
    tokenizer_json: Option<String>,
    precision: Recipe,
    checkpoint: Option<Checkpoint>,
}

impl ProbeArgs {
    fn source(&self) -> Result<Source> {
        let asked = self.precision.as_deref().map(Recipe::named).transpose()?;
        if let Some(dir) = &self.hf {
            let m = files::read_hf(dir)?;
            return Ok(Source {
                config: m.config,
                weights: m.weights,
                tokenizer_json: m.tokenizer_json,
                precision: asked.unwrap_or_else(Recipe::fp32),
                checkpoint: None,
            });
        }
        let path = self
            .checkpoint
            .as_ref()
            .expect("clap requires --hf or --checkpoint");
        let c = files::read_checkpoint(path)?;
        Ok(Source {
            precision: asked.unwrap_or_else(|| c.config.precision.clone()),
            config: c.config.model.clone(),
            weights: c.weights.clone(),
            tokenizer_json: c.run.tokenizer_json.clone(),
            checkpoint: Some(c),
        })
    }

    /// The text's token ids.
    fn tokens(&self, s: &Source) -> Result<Vec<u32>> {
        if let Some(path) = &self.tokens {
            return files::read_token_ids(path, s.config.vocab);
        }
        let text = self
            .text
            .as_deref()
            .expect("clap requires --tokens or --text");
        let json = s.tokenizer_json.as_deref().ok_or_else(|| {
            Error::Tokenizer(
                "this model carries no tokenizer (a synthetic run's): give --tokens FILE".into(),
            )
        })?;
        Tokenizer::from_json(json)?.encode(text)
    }

    /// The model, the text's ids, the device and the precision's kernels.
    async fn load(&self) -> Result<(Source, Vec<u32>, Gpu, Kernels)> {
        let s = self.source()?;
        let tokens = self.tokens(&s)?;
        let gpu = Gpu::new(&self.device.options()?).await?;
        let k = s.precision.kernels(&gpu, &[s.config.head_dim()], 0).await?;
        Ok((s, tokens, gpu, k))
    }
}

pub async fn attention(args: &AttentionArgs) -> Result<()> {
    let (s, tokens, gpu, k) = args.probe.load().await?;
    let precision = s.precision;
    let probe = Probe::run(&gpu, &k, &s.config, precision.clone(), &s.weights, &tokens).await?;
    let maps = probe.attention().await?;
    let t = tokens.len();
    let heads = maps.first().map_or(0, |m| m.len() / (t * t));
    let names: Vec<String> = (0..maps.len()).map(|l| format!("attention.{l}")).collect();
    let views = names
        .iter()
        .zip(&maps)
        .map(|(name, map)| {
            safetensors::tensor::TensorView::new(
                safetensors::Dtype::F32,
                vec![heads, t, t],
                bytemuck::cast_slice(map),
            )
            .map(|view| (name.as_str(), view))
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Unsupported(e.to_string()))?;
    let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
    let metadata = std::collections::HashMap::from([
        ("tokens".to_string(), ids.join(" ")),
        ("precision".to_string(), precision.name().to_string()),
    ]);
    let bytes = safetensors::serialize(views, Some(metadata.into_iter().collect()))
        .map_err(|e| Error::Unsupported(e.to_string()))?;
    files::write_atomically(&args.out, &bytes)?;
    eprintln!(
        "attention: {} layers × {heads} heads over {t} tokens ({}) written to {}",
        maps.len(),
        precision.name(),
        args.out.display()
    );
    Ok(())
}

pub async fn predict(args: &PredictArgs) -> Result<()> {
    let (s, tokens, gpu, k) = args.probe.load().await?;
    let probe = Probe::run(&gpu, &k, &s.config, s.precision, &s.weights, &tokens).await?;
    for p in probe.predictions(args.top_k).await? {
        let line = serde_json::to_string(&p).map_err(|e| Error::Unsupported(e.to_string()))?;
        println!("{line}");
    }
    Ok(())
}

/// Every tensor's value range (`inspect::ranges`) for one forward and
/// backward over the text, without the update: one JSON line per tensor.
pub async fn ranges(args: &RangesArgs) -> Result<()> {
    let a = &args.probe;
    let s = a.source()?;
    let tokens = a.tokens(&s)?;
    if tokens.len() < 2 {
        return Err(Error::Unsupported(
            "ranges needs a text of 2 tokens or more: a gradient needs a target".into(),
        ));
    }
    let shape = BatchShape {
        batch: 1,
        seq: tokens.len() as u32 - 1,
    };
    let gpu = Gpu::new(&a.device.options()?).await?;
    let mut trainer = match s.checkpoint {
        // the run's weights and Adam moments, over the text's shape
        Some(mut c) => {
            (c.config.shape, c.config.precision) = (shape, s.precision);
            c.restore(&gpu).await?
        }
        None => {
            let config = TrainConfig {
                model: s.config,
                shape,
                precision: s.precision,
                optim: OptimConfig::default(),
                seed: 0,
            };
            Trainer::with_weights(&gpu, config, &s.weights).await?
        }
    };
    let batch = Batch {
        inputs: tokens[..tokens.len() - 1].to_vec(),
        targets: tokens[1..].to_vec(),
    };
    for r in ranges::measure(&mut trainer, &batch, ranges::BlockFormats::Measured).await? {
        let line = serde_json::to_string(&r).map_err(|e| Error::Unsupported(e.to_string()))?;
        println!("{line}");
    }
    Ok(())
}
