//! `webtrain attention` and `webtrain predict`: one text through a model
//! (an HF folder or a checkpoint) in a precision mode, for scripts and
//! tests; what the page's attention and prediction views show.

use std::path::PathBuf;

use clap::Args;
use webtrain::data::Tokenizer;
use webtrain::inspect::Probe;
use webtrain::model::{Config, Precision};
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

/// The model's config, weights and tokenizer, and the precision asked for.
struct Source {
    config: Config,
    weights: Vec<f32>,
    tokenizer_json: Option<String>,
    precision: Precision,
}

impl ProbeArgs {
    fn source(&self) -> Result<Source> {
        let asked = self
            .precision
            .as_deref()
            .map(Precision::parse)
            .transpose()?;
        if let Some(dir) = &self.hf {
            let m = files::read_hf(dir)?;
            return Ok(Source {
                config: m.config,
                weights: m.weights,
                tokenizer_json: m.tokenizer_json,
                precision: asked.unwrap_or(Precision::Fp32),
            });
        }
        let path = self
            .checkpoint
            .as_ref()
            .expect("clap requires --hf or --checkpoint");
        let c = files::read_checkpoint(path)?;
        Ok(Source {
            precision: asked.unwrap_or(c.config.precision),
            config: c.config.model,
            weights: c.weights,
            tokenizer_json: c.run.tokenizer_json,
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

    /// The forward over the text, and the ids it read.
    async fn run(&self) -> Result<(Probe, Vec<u32>, Precision)> {
        let s = self.source()?;
        let tokens = self.tokens(&s)?;
        let gpu = Gpu::new(&self.device.options()?).await?;
        let probe = Probe::run(&gpu, &s.config, s.precision, &s.weights, &tokens).await?;
        Ok((probe, tokens, s.precision))
    }
}

pub async fn attention(args: &AttentionArgs) -> Result<()> {
    let (probe, tokens, precision) = args.probe.run().await?;
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
    let (probe, _, _) = args.probe.run().await?;
    for p in probe.predictions(args.top_k).await? {
        let line = serde_json::to_string(&p).map_err(|e| Error::Unsupported(e.to_string()))?;
        println!("{line}");
    }
    Ok(())
}
