//! `webtrain train`: a training run from the command line. One JSON line
//! per step (`step, loss, grad_norm, lr, tokens_per_s, …`), one per
//! validation, and a final summary; progress in words on stderr. `--out`
//! writes a checkpoint at the end; `--resume` continues one: its config,
//! weights, optimizer state, step count and batch RNG, on the same data.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};
use webtrain::checkpoint::{self, Checkpoint, RunState};
use webtrain::data::{Batch, Corpus, Dataset, SplitMix64, Tokenizer};
use webtrain::hf::HfModel;
use webtrain::model::{BatchShape, Config, PRESETS, Precision};
use webtrain::optim::HostState;
use webtrain::optim::{LrSchedule, OptimConfig, OptimState};
use webtrain::train::{TrainConfig, Trainer, softmax_tail, survival, synthetic};
use webtrain::{Error, Gpu, Result};

/// What a checkpoint's config fixes: not to be given with `--resume`.
const FIXED_BY_CHECKPOINT: [&str; 17] = [
    "preset",
    "synthetic",
    "precision",
    "optim_state",
    "seed",
    "batch",
    "seq",
    "lr",
    "warmup",
    "schedule_steps",
    "min_lr_ratio",
    "weight_decay",
    "clip",
    "beta1",
    "beta2",
    "eps",
    "val_fraction",
];

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
    /// Steps to train (with --resume: steps more).
    #[arg(long, default_value_t = 100)]
    steps: u32,
    /// The step the learning-rate schedule ends at (default: --steps). Set it beyond
    /// --steps to stop early, save with --out and --resume later on the same schedule.
    #[arg(long)]
    schedule_steps: Option<u32>,
    #[arg(long, default_value = "fp32", value_parser = ["fp32", "f16", "sf16", "sf16-wide-head", "fp8"])]
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
    /// Warm-up steps (default: a tenth of the schedule's steps).
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
    /// Every N steps, also print what bf16, f16 or E4M3 master weights and moments would
    /// have lost in that step: one JSON line {"step", "inspect": [per tensor]} (0: never).
    #[arg(long, default_value_t = 0)]
    inspect_every: u32,
    /// Write a checkpoint (.safetensors) here at the end.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the run in this checkpoint: its model, precision, optimizer, batch shape,
    /// seed and schedule, on the same data (its corpus files unless --corpus is given).
    #[arg(long, conflicts_with_all = FIXED_BY_CHECKPOINT)]
    resume: Option<PathBuf>,
    /// Fine-tune a Hugging Face Llama folder (config.json, model.safetensors, tokenizer.json)
    /// instead of a preset from scratch: its config, weights and tokenizer.
    #[arg(long, conflicts_with_all = ["preset", "resume", "tokenizer"])]
    from_hf: Option<PathBuf>,
}

impl TrainArgs {
    /// For `webtrain inspect`: every step inspected unless asked otherwise.
    pub fn inspecting(mut self) -> Self {
        if self.inspect_every == 0 {
            self.inspect_every = 1;
        }
        self
    }
}

/// What the checkpoint's `data` says about the token stream, so a resumed
/// run draws its batches from the same one.
#[derive(Serialize, Deserialize)]
struct DataState {
    /// "synthetic" or "corpus"
    source: String,
    files: Vec<String>,
    val_fraction: f64,
    tokens: usize,
    /// FNV-1a of the token ids: the same text through the same tokenizer
    tokens_fingerprint: String,
}

/// The token stream and what a checkpoint keeps of it.
struct Data {
    set: Dataset,
    run: RunState,
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

/// The run's config from the flags (and the model of `--from-hf`).
fn config(args: &TrainArgs, hf: Option<&HfModel>) -> Result<TrainConfig> {
    let model = match hf {
        Some(m) => m.config.clone(),
        None => Config::preset(&args.preset)?,
    };
    let d = match hf {
        Some(m) => BatchShape {
            batch: 8,
            seq: m.config.max_seq.min(512),
        },
        None => default_shape(&args.preset),
    };
    let shape = BatchShape {
        batch: args.batch.unwrap_or(d.batch),
        seq: args.seq.unwrap_or(d.seq),
    };
    shape.validate(&model)?;
    let total = args.schedule_steps.unwrap_or(args.steps);
    let schedule = LrSchedule {
        peak: args.lr,
        warmup: args.warmup.unwrap_or(total / 10),
        total,
        min_ratio: args.min_lr_ratio,
    };
    let optim = OptimConfig {
        state: OptimState::parse(&args.optim_state)?,
        schedule,
        beta1: args.beta1,
        beta2: args.beta2,
        eps: args.eps,
        weight_decay: args.weight_decay,
        max_grad_norm: args.clip,
    };
    Ok(TrainConfig {
        model,
        shape,
        precision: Precision::parse(&args.precision)?,
        optim,
        seed: args.seed,
    })
}

/// The checkpoint at `path`, checked; its errors name the file.
pub fn read_checkpoint(path: &Path) -> Result<Checkpoint> {
    let named = |problem: String| Error::Checkpoint(format!("{}: {problem}", path.display()));
    let bytes = std::fs::read(path).map_err(|e| named(format!("cannot be read: {e}")))?;
    Checkpoint::from_bytes(&bytes).map_err(|e| match e {
        Error::Checkpoint(problem) => named(problem),
        e => e,
    })
}

/// The model in an HF folder, checked; its errors name the folder.
pub fn read_hf(dir: &Path) -> Result<HfModel> {
    HfModel::import(&crate::hf::read_folder(dir)?).map_err(|e| match e {
        Error::Unsupported(problem) => Error::Unsupported(format!("{}: {problem}", dir.display())),
        e => e,
    })
}

/// Writes `bytes` to `path` through a temporary file beside it, so an
/// existing checkpoint is never left half-written.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let named = |e: std::io::Error| {
        Error::Checkpoint(format!("{}: cannot be written: {e}", path.display()))
    };
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            std::fs::remove_file(&tmp).ok();
            named(e)
        })
}

pub async fn run(args: TrainArgs) -> Result<()> {
    let resumed = args.resume.as_deref().map(read_checkpoint).transpose()?;
    let hf = args.from_hf.as_deref().map(read_hf).transpose()?;
    let config = match &resumed {
        Some(c) => c.config.clone(),
        None => config(&args, hf.as_ref())?,
    };
    let shape = config.shape;
    let data = dataset(&args, &config, resumed.as_ref(), hf.as_ref()).map_err(|e| {
        match (e, &args.resume) {
            (Error::Checkpoint(problem), Some(path)) => {
                Error::Checkpoint(format!("{}: {problem}", path.display()))
            }
            (e, _) => e,
        }
    })?;
    let gpu = Gpu::new(&args.device.options()?).await?;
    let mut trainer = match (&resumed, &hf) {
        (Some(c), _) => c.restore(&gpu).await?,
        (None, Some(m)) => Trainer::with_weights(&gpu, config.clone(), &m.weights).await?,
        (None, None) => Trainer::new(&gpu, config.clone()).await?,
    };
    let memory = trainer.memory()?;
    let preset = match &args.from_hf {
        Some(dir) => dir.to_str().unwrap_or("hf"),
        None => PRESETS
            .iter()
            .find(|p| Config::preset(p).is_ok_and(|m| m == config.model))
            .copied()
            .unwrap_or("custom"),
    };
    let (precision, optim_state) = (config.precision.name(), config.optim.state.name());
    eprintln!(
        "train: {preset} ({} parameters, {:.1} MiB on the GPU) on {}, {precision} precision, {optim_state} optimizer state, batch {} × {}, {} train / {} validation tokens",
        memory.parameters,
        memory.total as f64 / (1 << 20) as f64,
        gpu.info.name,
        shape.batch,
        shape.seq,
        data.set.train_tokens(),
        data.set.validation_tokens()
    );
    let first = trainer.steps() + 1;
    let end = first.checked_add(args.steps).ok_or_else(|| {
        Error::Unsupported(format!(
            "{} more steps after step {} overflow the step count",
            args.steps,
            first - 1
        ))
    })? - 1;
    if let Some(path) = &args.resume {
        eprintln!("train: resuming {} at step {first}", path.display());
        let total = config.optim.schedule.total;
        if end > total {
            eprintln!(
                "train: the schedule ends at step {total}; steps after it train at the floor rate {:.2e}",
                config.optim.schedule.lr(end)
            );
        }
    }

    let validation: Vec<Batch> = data
        .set
        .validation_batches(shape.batch as usize)
        .into_iter()
        .filter(|b| b.inputs.len() == shape.rows() as usize)
        .take(args.val_batches)
        .collect();
    let mut rng = SplitMix64(
        resumed
            .as_ref()
            .map_or(config.seed ^ 0x5eed_da7a, |c| c.run.rng),
    );
    let started = std::time::Instant::now();
    let mut last = None;
    let mut val_loss = None;
    for step in first..=end {
        let inspected = args.inspect_every > 0 && step % args.inspect_every == 0;
        let before = if inspected {
            Some(trainer.model.read_weights(&gpu).await?)
        } else {
            None
        };
        let done = trainer
            .step(&data.set.train_batch(&mut rng, shape.batch as usize))
            .await?;
        if let Some(before) = before {
            let after = trainer.model.read_weights(&gpu).await?;
            let HostState::Fp32 { v, .. } = trainer
                .adam
                .read_state(&gpu)
                .await?
                .convert(OptimState::Fp32)
            else {
                unreachable!("converted to f32")
            };
            let report = survival::inspect(&trainer.model.layout, &before, &after, &v);
            let softmax = softmax_tail::read(&gpu, &trainer.model).await?;
            println!(
                "{}",
                serde_json::json!({"step": step, "inspect": report, "softmax": softmax})
            );
        }
        let flush = step == end || (args.val_every > 0 && step % args.val_every == 0);
        let done = if flush {
            done.into_iter().chain(trainer.flush().await?).collect()
        } else {
            done
        };
        for s in done {
            println!("{}", json(&s)?);
            if s.step % 10 == 0 || s.step == 1 {
                eprintln!(
                    "step {:>5}  loss {:.4}  grad norm {:.3}  lr {:.2e}  {:.0} tokens/s",
                    s.step, s.loss, s.grad_norm, s.lr, s.tokens_per_s
                );
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
    if let Some(path) = &args.out {
        let bytes = checkpoint::save(
            &trainer,
            &RunState {
                rng: rng.0,
                ..data.run
            },
        )
        .await?;
        write_atomically(path, &bytes)?;
        eprintln!(
            "train: step {end} saved to {} ({:.1} MiB)",
            path.display(),
            bytes.len() as f64 / (1 << 20) as f64
        );
    }
    let summary = serde_json::json!({"summary": {
        "adapter": gpu.info.name,
        "preset": preset,
        "precision": precision,
        "optim_state": optim_state,
        "steps": end,
        "resumed_from": args.resume.as_ref().map(|_| first - 1),
        "checkpoint": args.out.as_ref().map(|p| p.display().to_string()),
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

/// The token stream: the synthetic stream, or text through a tokenizer of
/// the model's vocabulary. Resumed, the checkpoint's: the same source,
/// files (unless --corpus names others), tokenizer and held-out share, and
/// refused unless the tokens are the ones it trained on.
fn dataset(
    args: &TrainArgs,
    config: &TrainConfig,
    resumed: Option<&Checkpoint>,
    hf: Option<&HfModel>,
) -> Result<Data> {
    let (seq, vocab) = (config.shape.seq as usize, config.model.vocab);
    let stored: Option<DataState> = resumed
        .map(|c| {
            let unusable = || {
                Error::Checkpoint(
                    "it does not say which data it trained on (not made by webtrain train?)".into(),
                )
            };
            serde_json::from_str(c.run.data.as_deref().ok_or_else(unusable)?)
                .map_err(|_| unusable())
        })
        .transpose()?;
    let synthetic = stored
        .as_ref()
        .map_or(args.synthetic, |d| d.source == "synthetic");
    let val_fraction = stored
        .as_ref()
        .map_or(args.val_fraction, |d| d.val_fraction);
    let (tokens, files, tokenizer) = if synthetic {
        (
            synthetic::markov_tokens(vocab, 1 << 20, config.seed),
            vec![],
            None,
        )
    } else {
        let files: Vec<PathBuf> = match &stored {
            Some(d) if args.corpus.is_empty() => d.files.iter().map(PathBuf::from).collect(),
            _ if args.corpus.is_empty() => {
                if !Path::new(BUILTIN_CORPUS).exists() {
                    return Err(Error::Unsupported(format!(
                        "no --corpus given and the built-in corpus {BUILTIN_CORPUS} is not built: run `node scripts/brown-corpus.mjs` (npm run build does), or give --corpus FILE… or --synthetic"
                    )));
                }
                vec![PathBuf::from(BUILTIN_CORPUS)]
            }
            _ => args.corpus.clone(),
        };
        let mut corpus = Corpus::default();
        for path in &files {
            let name = path.display().to_string();
            let bytes = std::fs::read(path).map_err(|e| Error::Corpus {
                file: name.clone(),
                problem: format!("cannot be read: {e}"),
            })?;
            corpus.add(&name, &bytes)?;
        }
        let tokenizer = match (&args.tokenizer, resumed) {
            _ if hf.is_some() => {
                let json = hf.and_then(|m| m.tokenizer_json.as_deref());
                Tokenizer::from_json(json.ok_or_else(|| {
                    Error::Tokenizer(
                        "the --from-hf folder has no tokenizer.json to read the text with".into(),
                    )
                })?)?
            }
            (Some(path), _) => {
                let json = std::fs::read_to_string(path).map_err(|e| {
                    Error::Tokenizer(format!("cannot read {}: {e}", path.display()))
                })?;
                let t = Tokenizer::from_json(&json)?;
                resumed
                    .map(|c| c.check_tokenizer(t.fingerprint()))
                    .transpose()?;
                t
            }
            (None, Some(c)) => c.run.tokenizer()?.ok_or_else(|| {
                Error::Checkpoint("it trained on text but holds no tokenizer".into())
            })?,
            (None, None) => {
                let texts: Vec<&str> = corpus.files().map(|(_, t)| t).collect();
                Tokenizer::train(&texts, vocab, |_| {})?
            }
        };
        // a model may have more embedding rows than its tokenizer has tokens
        // (HF models pad them; a run fine-tuned from one is resumed so)
        if tokenizer.vocab_size() > vocab {
            return Err(Error::Unsupported(format!(
                "the tokenizer has {} tokens but the model's vocabulary is {vocab}",
                tokenizer.vocab_size()
            )));
        }
        let names = files.iter().map(|p| p.display().to_string()).collect();
        (corpus.tokenize(&tokenizer, seq)?, names, Some(tokenizer))
    };
    let source = if synthetic { "synthetic" } else { "corpus" };
    let state = DataState {
        source: source.into(),
        files,
        val_fraction,
        tokens: tokens.len(),
        tokens_fingerprint: fingerprint(&tokens),
    };
    if let Some(d) = &stored {
        if (d.tokens, &d.tokens_fingerprint) != (state.tokens, &state.tokens_fingerprint) {
            return Err(Error::Checkpoint(format!(
                "it trained on {} tokens (fingerprint {}) but this data gives {} (fingerprint {}): resume on the same text (--corpus FILE…)",
                d.tokens, d.tokens_fingerprint, state.tokens, state.tokens_fingerprint
            )));
        }
    }
    let run = RunState {
        rng: 0,
        tokenizer_json: tokenizer.map(|t| t.to_json()).transpose()?,
        data: Some(json(&state)?),
    };
    Ok(Data {
        set: Dataset::new(tokens, seq, val_fraction)?,
        run,
    })
}

/// FNV-1a (64-bit) of the token ids: tells two token streams apart.
fn fingerprint(tokens: &[u32]) -> String {
    let hash = tokens
        .iter()
        .flat_map(|t| t.to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{hash:016x}")
}
