//! `webtrain train`: a training run from the command line. One JSON line
//! per step (`step, loss, grad_norm, lr, tokens_per_s, …`), one per
//! validation, and a final summary; progress in words on stderr.

use std::path::PathBuf;

use clap::Args;
use webtrain::data::{Batch, Corpus, Dataset, SplitMix64, Tokenizer};
use webtrain::model::{BatchShape, Config, Precision};
use webtrain::optim::{LrSchedule, OptimConfig, OptimState};
use webtrain::train::{synthetic, TrainConfig, Trainer};
use webtrain::{Error, Gpu, Result};

#[derive(Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub device: crate::cli::DeviceArgs,
    /// Model preset: tiny, small or base.
    #[arg(long, default_value = "tiny")]
    preset: String,
    /// UTF-8 text files to train on (a BPE tokenizer of the preset's vocabulary is learned from them);
    /// default: the built-in Brown corpus.
    #[arg(long, num_args = 1.., conflicts_with = "synthetic")]
    corpus: Vec<PathBuf>,
    /// Use this tokenizer.json instead of learning one (its vocabulary must be the preset's).
    #[arg(long, requires = "corpus")]
    tokenizer: Option<PathBuf>,
    /// Train on a seeded synthetic token stream (tests, benchmarks) instead of text.
    #[arg(long)]
    synthetic: bool,
    #[arg(long, default_value_t = 100)]
    steps: u32,
    #[arg(long, default_value = "fp32", value_parser = ["fp32", "f16", "sf16", "fp8"])]
    precision: String,
    #[arg(long, default_value = "fp32", value_parser = ["fp32", "int8"])]
    optim_state: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Sequences per batch (default: the preset's).
    #[arg(long)]
    batch: Option<u32>,
    /// Tokens per sequence (default: the preset's).
    #[arg(long)]
    seq: Option<u32>,
    /// Peak learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Warm-up steps (default: a tenth of the steps).
    #[arg(long)]
    warmup: Option<u32>,
    /// The cosine's floor, as a fraction of the peak.
    #[arg(long, default_value_t = 0.1)]
    min_lr_ratio: f64,
    #[arg(long, default_value_t = 0.1)]
    weight_decay: f64,
    /// Global gradient-norm clip (0: none).
    #[arg(long, default_value_t = 1.0)]
    clip: f32,
    #[arg(long, default_value_t = 0.9)]
    beta1: f64,
    #[arg(long, default_value_t = 0.95)]
    beta2: f64,
    #[arg(long, default_value_t = 1e-8)]
    eps: f64,
    /// Share of the tokens held out for validation (the tail).
    #[arg(long, default_value_t = 0.05)]
    val_fraction: f64,
    /// Evaluate every N steps (0: only at the end).
    #[arg(long, default_value_t = 0)]
    val_every: u32,
    /// At most this many validation batches per evaluation.
    #[arg(long, default_value_t = 8)]
    val_batches: usize,
}

/// The Brown corpus as `scripts/brown-corpus.mjs` writes it: the default text.
const BUILTIN_CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../public/corpus/brown.txt");

/// Batch shapes that suit each preset.
fn default_shape(preset: &str) -> BatchShape {
    match preset {
        "tiny" => BatchShape { batch: 8, seq: 64 },
        "small" => BatchShape { batch: 8, seq: 256 },
        _ => BatchShape { batch: 8, seq: 512 },
    }
}

pub async fn run(args: TrainArgs) -> Result<()> {
    let model = Config::preset(&args.preset)?;
    let d = default_shape(&args.preset);
    let shape = BatchShape { batch: args.batch.unwrap_or(d.batch), seq: args.seq.unwrap_or(d.seq) };
    shape.validate(&model)?;
    let data = dataset(&args, &model, shape)?;
    let schedule = LrSchedule { peak: args.lr, warmup: args.warmup.unwrap_or(args.steps / 10), total: args.steps, min_ratio: args.min_lr_ratio };
    let optim = OptimConfig {
        state: OptimState::parse(&args.optim_state)?,
        schedule,
        beta1: args.beta1,
        beta2: args.beta2,
        eps: args.eps,
        weight_decay: args.weight_decay,
        max_grad_norm: args.clip,
    };
    let config = TrainConfig { model, shape, precision: Precision::parse(&args.precision)?, optim, seed: args.seed };
    let gpu = Gpu::new(&args.device.options()).await?;
    let mut trainer = Trainer::new(&gpu, config.clone()).await?;
    let memory = trainer.memory()?;
    eprintln!(
        "train: {} ({} parameters, {:.1} MiB on the GPU) on {}, {} precision, {} optimizer state, batch {} × {}, {} train / {} validation tokens",
        args.preset,
        memory.parameters,
        memory.total as f64 / (1 << 20) as f64,
        gpu.info.name,
        args.precision,
        args.optim_state,
        shape.batch,
        shape.seq,
        data.train_tokens(),
        data.validation_tokens()
    );

    let validation: Vec<Batch> = data.validation_batches(shape.batch as usize).into_iter().filter(|b| b.inputs.len() == shape.rows() as usize).take(args.val_batches).collect();
    let mut rng = SplitMix64(args.seed ^ 0x5eed_da7a);
    let started = std::time::Instant::now();
    let mut last = None;
    let mut val_loss = None;
    for step in 1..=args.steps {
        let done = trainer.step(&data.train_batch(&mut rng, shape.batch as usize)).await?;
        let flush = step == args.steps || (args.val_every > 0 && step % args.val_every == 0);
        let done = if flush { done.into_iter().chain(trainer.flush().await?).collect() } else { done };
        for s in done {
            println!("{}", json(&s)?);
            if s.step % 10 == 0 || s.step == 1 {
                eprintln!("step {:>5}  loss {:.4}  grad norm {:.3}  lr {:.2e}  {:.0} tokens/s", s.step, s.loss, s.grad_norm, s.lr, s.tokens_per_s);
            }
            last = Some(s);
        }
        if flush && !validation.is_empty() {
            let loss = trainer.evaluate(&validation).await?;
            println!("{}", serde_json::json!({"step": step, "val_loss": loss}));
            eprintln!("step {step:>5}  validation loss {loss:.4}");
            val_loss = Some(loss);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let summary = serde_json::json!({"summary": {
        "adapter": gpu.info.name,
        "preset": args.preset,
        "precision": args.precision,
        "optim_state": args.optim_state,
        "steps": args.steps,
        "loss": last.map(|s| s.loss),
        "val_loss": val_loss,
        "skipped_steps": trainer.skipped(),
        "seconds": seconds,
        "tokens_per_s": (args.steps as f64 * shape.rows() as f64) / seconds,
        "optimizer_dispatches": trainer.optimizer_dispatches(),
        "memory": memory,
    }});
    println!("{summary}");
    Ok(())
}

fn json(s: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(s).map_err(|e| Error::Unsupported(e.to_string()))
}

/// The token stream: the user's text through a tokenizer of the preset's
/// vocabulary, or the synthetic stream.
fn dataset(args: &TrainArgs, model: &Config, shape: BatchShape) -> Result<Dataset> {
    let seq = shape.seq as usize;
    if args.synthetic {
        let tokens = synthetic::markov_tokens(model.vocab, 1 << 20, args.seed);
        return Dataset::new(tokens, seq, args.val_fraction);
    }
    let builtin = [PathBuf::from(BUILTIN_CORPUS)];
    let files = if args.corpus.is_empty() { &builtin[..] } else { &args.corpus[..] };
    if args.corpus.is_empty() && !builtin[0].exists() {
        return Err(Error::Unsupported(format!(
            "no --corpus given and the built-in corpus {BUILTIN_CORPUS} is not built: run `node scripts/brown-corpus.mjs` (npm run build does), or give --corpus FILE… or --synthetic"
        )));
    }
    let mut corpus = Corpus::default();
    for path in files {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| Error::Corpus { file: name.clone(), problem: format!("cannot be read: {e}") })?;
        corpus.add(&name, &bytes)?;
    }
    let tokenizer = match &args.tokenizer {
        Some(path) => {
            let json = std::fs::read_to_string(path).map_err(|e| Error::Tokenizer(format!("cannot read {}: {e}", path.display())))?;
            Tokenizer::from_json(&json)?
        }
        None => {
            let texts: Vec<&str> = corpus.files().map(|(_, t)| t).collect();
            Tokenizer::train(&texts, model.vocab, |_| {})?
        }
    };
    if tokenizer.vocab_size() != model.vocab {
        return Err(Error::Unsupported(format!(
            "the tokenizer has {} tokens but the {} preset's vocabulary is {}",
            tokenizer.vocab_size(),
            args.preset,
            model.vocab
        )));
    }
    Dataset::new(corpus.tokenize(&tokenizer, seq)?, seq, args.val_fraction)
}
