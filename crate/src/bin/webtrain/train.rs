//! `webtrain train`: a training run from the command line. One JSON line
//! per step (`step, loss, grad_norm, lr, tokens_per_s, …`), one per
//! validation, and a final summary; progress in words on stderr. `--out`
//! writes a checkpoint at the end (and every `--save-every` steps);
//! `--resume` continues one: its config, weights, optimizer state, step
//! count and batch RNG, on the same data. The loop is `run::Session`'s
//! (a lost GPU device is replaced and the run goes on from its snapshot);
//! `events` prints what it does.

use std::path::PathBuf;

use clap::Args;
use webtrain::data::tasks::TaskSpec;
use webtrain::data::{Corpus, Tokenizer};
use webtrain::inspect::Inspector;
use webtrain::model::{Config, PRESETS, Recipe};
use webtrain::optim::{MasterWeights, OptimState, OptimizerKind};
use webtrain::run::{
    self, Cadence, Changes, DataState, Opening, Origin, Run, RunSpec, Session, Snapshot, Source,
    TextIn, VALIDATION_BATCHES, settings,
};
use webtrain::train::Memory;
use webtrain::{Error, Gpu, GpuOptions, Result};

use crate::events::{CliDevices, Printer};
use crate::files::{self, TextFile};

/// What a checkpoint's config fixes: not to be given with `--resume`.
const FIXED_BY_CHECKPOINT: [&str; 22] = [
    "preset",
    "synthetic",
    "task",
    "task_option",
    "precision",
    "recipe",
    "optimizer",
    "optim_state",
    "master_weights",
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
    #[arg(long, num_args = 1.., conflicts_with_all = ["synthetic", "task"])]
    corpus: Vec<PathBuf>,
    /// Train on an algorithmic task instead of text: copy, reverse, sort, add or modadd. Its
    /// preset sets the model, batch and schedule (other flags change them); validations report
    /// accuracy. See docs/TASKS.md.
    #[arg(long, conflicts_with_all = ["synthetic", "preset", "from_hf"])]
    task: Option<String>,
    /// A task's option, as NAME=VALUE (repeatable): len for copy, reverse and sort; digits for
    /// add; p and train_percent for modadd.
    #[arg(long, requires = "task", value_parser = task_option)]
    task_option: Vec<(String, u32)>,
    /// Use this tokenizer.json instead of learning one (its vocabulary must be the preset's).
    #[arg(long, requires = "corpus")]
    tokenizer: Option<PathBuf>,
    /// Train on a seeded synthetic token stream (tests, benchmarks) instead of text.
    #[arg(long)]
    synthetic: bool,
    /// Steps to train (with --resume: steps more; default 100, or a task's preset's).
    #[arg(long)]
    steps: Option<u32>,
    /// The step the learning-rate schedule ends at (default: --steps). Set it beyond
    /// --steps to stop early, save with --out and --resume later on the same schedule.
    #[arg(long)]
    schedule_steps: Option<u32>,
    #[arg(long, default_value = "fp32", value_parser = choices("precision"), help = help("precision", None))]
    precision: String,
    /// A custom precision recipe: a JSON file (docs/PRECISION.md), instead of --precision.
    #[arg(long, conflicts_with = "precision")]
    recipe: Option<PathBuf>,
    #[arg(long, value_parser = choices("optimizer"), help = help("optimizer", Some("the preset's")))]
    optimizer: Option<String>,
    #[arg(long, default_value = "fp32", value_parser = choices("optimState"), help = help("optimState", None))]
    optim_state: String,
    #[arg(long, default_value = "f32", value_parser = choices("masterWeights"), help = help("masterWeights", None))]
    master_weights: String,
    #[arg(long, default_value_t = 1, help = help("seed", None))]
    seed: u64,
    #[arg(long, help = help("batch", Some("the preset's")))]
    batch: Option<u32>,
    #[arg(long, help = help("seq", Some("the preset's")))]
    seq: Option<u32>,
    #[arg(long, help = help("lr", Some("the preset's; 1e-3 with --from-hf")))]
    lr: Option<f64>,
    #[arg(long, help = help("warmup", Some("a tenth of the schedule's steps")))]
    warmup: Option<u32>,
    #[arg(long, help = help("minLrRatio", Some("0.1")))]
    min_lr_ratio: Option<f64>,
    #[arg(long, help = help("weightDecay", Some("0.1")))]
    weight_decay: Option<f64>,
    #[arg(long, help = help("clip", Some("1")))]
    clip: Option<f32>,
    #[arg(long, help = help("beta1", Some("0.9")))]
    beta1: Option<f64>,
    #[arg(long, help = help("beta2", Some("0.95")))]
    beta2: Option<f64>,
    #[arg(long, help = help("eps", Some("1e-8")))]
    eps: Option<f64>,
    #[arg(long, help = help("valFraction", Some("0.05")))]
    val_fraction: Option<f64>,
    /// Evaluate every N steps (0: only at the end).
    #[arg(long, default_value_t = 0)]
    val_every: u32,
    /// At most this many validation batches per evaluation.
    #[arg(long, default_value_t = VALIDATION_BATCHES)]
    val_batches: usize,
    /// Every N steps, also print what bf16, f16 or E4M3 master weights and moments would
    /// have lost in that step: one JSON line {"step", "inspect": [per tensor]} (0: never).
    #[arg(long, default_value_t = 0)]
    inspect_every: u32,
    /// Write a checkpoint (.safetensors) here at the end (and every --save-every steps).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write it every N steps (0: only at the end). Where the GPU device is lost, the
    /// run goes on from the last one written, on a new device.
    #[arg(long, default_value_t = 0, requires = "out")]
    save_every: u32,
    /// Tests: destroy the GPU device after each of these steps is submitted, as if it were lost.
    #[arg(long, hide = true, value_delimiter = ',')]
    lose_device_at: Vec<u32>,
    /// Continue the run in this checkpoint (saved here or by the page): its model, precision,
    /// optimizer, batch shape, seed, schedule and batch order, on the same text: the files it
    /// names where they are found, else those --corpus gives, checked by their tokens.
    #[arg(long, conflicts_with_all = FIXED_BY_CHECKPOINT)]
    resume: Option<PathBuf>,
    /// Fine-tune a Hugging Face Llama folder (config.json, model.safetensors, tokenizer.json)
    /// instead of a preset from scratch: its config, weights and tokenizer.
    #[arg(long, conflicts_with_all = ["preset", "resume", "tokenizer"])]
    from_hf: Option<PathBuf>,
}

/// Steps a run trains unless `--steps` says (a task's preset has its own).
const DEFAULT_STEPS: u32 = 100;

impl TrainArgs {
    /// `--steps`, else a new task run's preset's steps, else `DEFAULT_STEPS`.
    fn steps_to_train(&self) -> u32 {
        let preset = || {
            let task = self.task.as_ref()?;
            let options = self.task_option.iter().cloned().collect();
            let spec = RunSpec::task(&TaskSpec {
                name: task.clone(),
                options,
            });
            Some(spec.ok()?.steps)
        };
        self.steps.or_else(preset).unwrap_or(DEFAULT_STEPS)
    }

    /// For `webtrain inspect`: every step inspected unless asked otherwise.
    pub fn inspecting(mut self) -> Self {
        if self.inspect_every == 0 {
            self.inspect_every = 1;
        }
        self
    }
}

/// A run setting's help (`run::settings`), and its default where clap
/// does not show one.
fn help(field: &str, default: Option<&str>) -> String {
    let help = settings::setting(field).help;
    match default {
        Some(d) => format!("{help} (default: {d})"),
        None => help.to_string(),
    }
}

/// A choice setting's values with their notes, as clap offers them.
fn choices(field: &str) -> clap::builder::PossibleValuesParser {
    let s = settings::setting(field);
    let values = s
        .choices
        .iter()
        .zip(s.notes)
        .map(|(&v, &note)| clap::builder::PossibleValue::new(v).help(note));
    clap::builder::PossibleValuesParser::new(values)
}

fn task_option(s: &str) -> std::result::Result<(String, u32), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: give NAME=VALUE"))?;
    let v = v
        .parse()
        .map_err(|_| format!("{s:?}: the value must be a whole number"))?;
    Ok((k.to_string(), v))
}

/// The settings the flags change (`run::Changes`); `--steps` sets the
/// schedule's length unless `--schedule-steps` does.
fn changes(args: &TrainArgs) -> Result<Changes> {
    Ok(Changes {
        steps: Some(args.schedule_steps.unwrap_or(args.steps_to_train())),
        warmup: args.warmup,
        precision: Some(match &args.recipe {
            Some(path) => files::read_recipe(path)?,
            None => Recipe::named(&args.precision)?,
        }),
        optimizer: args
            .optimizer
            .as_deref()
            .map(OptimizerKind::parse)
            .transpose()?,
        optim_state: Some(OptimState::parse(&args.optim_state)?),
        master_weights: Some(MasterWeights::parse(&args.master_weights)?),
        seed: Some(args.seed),
        batch: args.batch,
        seq: args.seq,
        lr: args.lr,
        min_lr_ratio: args.min_lr_ratio,
        weight_decay: args.weight_decay,
        clip: args.clip,
        beta1: args.beta1,
        beta2: args.beta2,
        eps: args.eps,
        val_fraction: args.val_fraction,
    })
}

/// What the run begins from: `--resume`'s checkpoint, `--from-hf`'s model,
/// or the preset's (or the task's) defaults, changed by the flags.
fn origin(args: &TrainArgs) -> Result<Origin> {
    if let Some(path) = &args.resume {
        let (c, bytes) = files::read_checkpoint_bytes(path)?;
        return Ok(Origin::Resume(c, bytes));
    }
    if let Some(dir) = &args.from_hf {
        return Ok(Origin::HuggingFace(files::read_hf(dir)?, changes(args)?));
    }
    let base = match &args.task {
        Some(name) => RunSpec::task(&TaskSpec {
            name: name.clone(),
            options: args.task_option.iter().cloned().collect(),
        })?,
        None => RunSpec::preset(&args.preset)?,
    };
    Ok(Origin::New(base.with(&changes(args)?)))
}

/// The text files the run reads, where it reads any: `--corpus`, else
/// those a resumed run names where they are here (the built-in corpus
/// always is), else for a new run the built-in corpus.
fn corpus(args: &TrainArgs, origin: &Origin) -> Result<Option<Corpus>> {
    let given = || args.corpus.iter().map(|p| TextFile::given(p)).collect();
    let files: Vec<TextFile> = match origin {
        Origin::Resume(c, _) => {
            let saved = DataState::parse(c.run.data.as_deref())?;
            if saved.source != Source::Corpus {
                return Ok(None);
            }
            match args.corpus.is_empty() {
                false => given(),
                true => saved
                    .files
                    .iter()
                    .map(|name| TextFile::recorded(name))
                    .collect::<Result<Option<_>>>()?
                    .ok_or_else(|| {
                        Error::Checkpoint(format!(
                            "it trained on {}, not all of which are here: give those files with --corpus FILE…",
                            saved.describe()
                        ))
                    })?,
            }
        }
        _ if args.synthetic || args.task.is_some() => return Ok(None),
        _ if args.corpus.is_empty() => vec![TextFile::builtin()?],
        _ => given(),
    };
    files::read_corpus(&files).map(Some)
}

fn read_tokenizer(path: &std::path::Path) -> Result<Tokenizer> {
    let json = std::fs::read_to_string(path).map_err(|e| files::io(path, "be read", e))?;
    Tokenizer::from_json(&json)
}

/// The run the flags describe, checked and its text read (`run::open`);
/// a resumed run's failures name its file.
fn opening(args: &TrainArgs) -> Result<Opening> {
    let origin = origin(args)?;
    let text = |origin: Origin| {
        let corpus = corpus(args, &origin)?;
        let tokenizer = args.tokenizer.as_deref().map(read_tokenizer).transpose()?;
        let tokenizer = tokenizer.map(Box::new);
        let text = match (&corpus, args.synthetic) {
            (Some(corpus), _) => TextIn::Corpus(corpus, tokenizer),
            (None, true) => TextIn::Synthetic,
            (None, false) => TextIn::None,
        };
        run::open(origin, text)
    };
    match &args.resume {
        Some(path) => text(origin).map_err(|e| files::in_file(path, e)),
        None => text(origin),
    }
}

/// The run the flags describe on a device made as they say, and the
/// snapshot it starts from where it was resumed.
async fn open(args: &TrainArgs) -> Result<(Run, GpuOptions, Option<Snapshot>)> {
    let opening = opening(args)?;
    let options = args.device.options()?;
    let gpu = Gpu::new(&options).await?;
    let (run, snapshot) = opening.on(&gpu, args.val_batches).await?;
    Ok((run, options, snapshot))
}

pub async fn run(args: TrainArgs) -> Result<()> {
    let (run, options, resumed) = open(&args).await?;
    let (config, gpu) = (run.trainer.config.clone(), run.trainer.gpu.clone());
    let shape = config.shape;
    let memory = run.trainer.memory()?;
    let task = run.text.state.task.as_ref().map(|t| t.to_string());
    let preset = match (&args.from_hf, &task) {
        (Some(dir), _) => dir.to_str().unwrap_or("hf"),
        (None, Some(task)) => task,
        (None, None) => PRESETS
            .iter()
            .find(|p| Config::preset(p).is_ok_and(|m| m == config.model))
            .copied()
            .unwrap_or("custom"),
    };
    let (precision, optimizer, optim_state, master) = (
        config.precision.name(),
        config.optim.optimizer.name(),
        config.optim.state.name(),
        config.optim.master.name(),
    );
    let data = &run.text.data;
    eprintln!(
        "train: {preset} ({} parameters, {:.1} MiB on the GPU) on {}, {precision} precision, {optimizer} with {optim_state} state and {master} master weights, batch {} × {}, {} train / {} validation tokens",
        memory.parameters,
        memory.total as f64 / (1 << 20) as f64,
        gpu.info.name,
        shape.batch,
        shape.seq,
        data.train_tokens(),
        data.validation_tokens()
    );
    let first = run.trainer.steps() + 1;
    let end = first.checked_add(args.steps_to_train()).ok_or_else(|| {
        Error::Unsupported(format!(
            "{} more steps after step {} overflow the step count",
            args.steps_to_train(),
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

    let cadence = Cadence {
        validate_every: args.val_every,
        save_every: args.save_every,
        inspect_every: args.inspect_every,
        measure_every: 0,
        end: Some(end),
        save_at_end: args.out.is_some(),
    };
    let mut session = Session::new(run, Inspector::new(false), CliDevices(options));
    session.lose_device_after(args.lose_device_at.clone());
    if let Some(snapshot) = resumed {
        session = session.starting_from(snapshot);
    }
    let on_disk = args.resume.clone().map(|path| (first - 1, path));
    let mut printer = Printer::new(args.out.as_deref(), on_disk, end);
    let started = std::time::Instant::now();
    let driven = session.drive(&cadence, &mut printer).await;
    driven.inspect_err(|e| printer.resume_hint(e))?;
    let seconds = started.elapsed().as_secs_f64();
    let summary = Summary {
        args: &args,
        preset,
        first,
        end,
        memory,
        seconds,
    };
    let summary = summary.json(&session, &printer);
    println!("{summary}");
    Ok(())
}

/// What the summary line reports beside the session's own counts.
struct Summary<'a> {
    args: &'a TrainArgs,
    preset: &'a str,
    first: u32,
    end: u32,
    memory: Memory,
    seconds: f64,
}

impl Summary<'_> {
    fn json(&self, session: &Session<CliDevices>, printer: &Printer) -> serde_json::Value {
        let (args, run) = (self.args, &session.run);
        let (t, rows) = (&run.trainer, run.trainer.config.shape.rows() as f64);
        let (last, validation) = (printer.last, printer.validation.as_ref());
        serde_json::json!({"summary": {
            "adapter": t.gpu.info.name,
            "preset": self.preset,
            "precision": t.config.precision.name(),
            "matrix_units": t.k.matrix_units_report(&t.gpu),
            "products_on_units": last.map(|s| s.products_on_units),
            "optimizer": t.config.optim.optimizer.name(),
            "optim_state": t.config.optim.state.name(),
            "master_weights": t.config.optim.master.name(),
            "steps": self.end,
            "resumed_from": args.resume.as_ref().map(|_| self.first - 1),
            "checkpoint": args.out.as_ref().map(|p| p.display().to_string()),
            "loss": last.map(|s| s.loss),
            "val_loss": validation.map(|v| v.loss),
            "accuracy": validation.and_then(|v| v.accuracy),
            "char_accuracy": validation.and_then(|v| v.char_accuracy),
            "train_accuracy": validation.and_then(|v| v.train_accuracy),
            "task": run.text.state.task,
            "skipped_steps": t.skipped(),
            "seconds": self.seconds,
            "tokens_per_s": args.steps_to_train() as f64 * rows / self.seconds,
            "optimizer_dispatches": t.optimizer_dispatches(),
            "memory": self.memory,
            "device_losses": session.losses(),
        }})
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, Command};
    use webtrain::run::settings::SETTINGS;

    /// Every run setting is a flag of `train`, named as its field in
    /// kebab case (the schedule's length is `--schedule-steps`: `--steps`
    /// counts the steps to train), with the setting's help.
    #[test]
    fn every_run_setting_is_a_flag() {
        let command = super::TrainArgs::augment_args(Command::new("train"));
        for s in SETTINGS {
            let flag = match s.field {
                "steps" => "schedule-steps".to_string(),
                field => field
                    .chars()
                    .flat_map(|c| match c.is_ascii_uppercase() {
                        true => vec!['-', c.to_ascii_lowercase()],
                        false => vec![c],
                    })
                    .collect(),
            };
            let arg = command
                .get_arguments()
                .find(|a| a.get_long() == Some(flag.as_str()))
                .unwrap_or_else(|| panic!("no --{flag} for the run setting {}", s.field));
            if s.field != "steps" {
                let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                assert!(help.starts_with(s.help), "--{flag}: {help:?}");
            }
        }
    }
}
