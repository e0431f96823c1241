//! `webtrain study`: every precision (× optimizer state × optimizer) ×
//! seed of one preset trained as `webtrain train` trains it, each run a
//! `train` of this binary whose JSON lines are kept in the output folder;
//! then the table (`study.md`: the final validation loss, mean ± standard
//! deviation over the seeds, and its gap to fp32's at the same seed) and
//! the figure (`study.svg`: the gaps with their spread), and a JSON line
//! per row on stdout. A run whose log already ends in its summary is kept,
//! so a study stopped midway (or split over calls) goes on where it was.

mod report;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::Args;
use webtrain::{Error, Result};

use crate::files;
use report::{Outcome, Row};

#[derive(Args)]
pub struct StudyArgs {
    /// Named precision recipes, or recipe files (FILE.json), e.g.
    /// fp32,nvfp4,nvfp4-4over6: gaps are taken to fp32's where it is one.
    #[arg(long, value_delimiter = ',', required = true)]
    precisions: Vec<String>,
    /// The seeds each is trained with (weights and batches).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    seeds: Vec<u64>,
    /// Model preset: tiny, small or base.
    #[arg(long, default_value = "tiny")]
    preset: String,
    /// Steps per run.
    #[arg(long, default_value_t = 300)]
    steps: u32,
    /// Validate every this many steps (the last validation is the table's).
    #[arg(long, default_value_t = 50)]
    val_every: u32,
    /// Optimizer states, e.g. fp32,bf16,fp8,int8,int8-linear,int4.
    #[arg(long, value_delimiter = ',', default_value = "fp32")]
    optim_states: Vec<String>,
    /// Optimizers, e.g. adamw,muon.
    #[arg(long, value_delimiter = ',', default_value = "adamw")]
    optimizers: Vec<String>,
    /// The folder the logs, study.md and study.svg go to.
    #[arg(long)]
    out: PathBuf,
    /// Flags for every `train` run after `--`, e.g. `-- --adapter llvmpipe`.
    #[arg(last = true)]
    train: Vec<String>,
}

/// One run of the study: what it trains and where its log goes.
struct Planned {
    row: Row,
    seed: u64,
    log: PathBuf,
}

pub fn run(args: &StudyArgs) -> Result<()> {
    if args.seeds.is_empty() || args.steps == 0 || args.val_every == 0 {
        return Err(Error::Unsupported(
            "a study needs at least one seed, one step and a validation".into(),
        ));
    }
    std::fs::create_dir_all(&args.out).map_err(|e| files::io(&args.out, "be created", e))?;
    let planned = plan(args);
    let mut outcomes = Vec::new();
    for (i, p) in planned.iter().enumerate() {
        let what = format!("{} seed {}", p.row.label(), p.seed);
        let outcome = match Outcome::read(&p.log)? {
            Some(kept) => {
                eprintln!("study: {}/{} {what}: kept", i + 1, planned.len());
                kept
            }
            None => {
                eprintln!("study: {}/{} {what}…", i + 1, planned.len());
                let o = train(args, p)?;
                eprintln!(
                    "study: {what}: validation loss {} in {:.0} s",
                    o.val_loss.map_or("—".into(), |v| format!("{v:.4}")),
                    o.seconds
                );
                o
            }
        };
        outcomes.push((p.row.clone(), p.seed, outcome));
    }
    let rows = report::rows(&outcomes);
    let table = report::table(args, &rows);
    let svg = report::figure(&rows, &args.preset);
    for (name, text) in [("study.md", table), ("study.svg", svg)] {
        let path = args.out.join(name);
        std::fs::write(&path, text).map_err(|e| files::io(&path, "be written", e))?;
    }
    for row in &rows {
        println!("{}", row.json());
    }
    eprintln!(
        "study: {} rows × {} seeds: {}",
        rows.len(),
        args.seeds.len(),
        args.out.join("study.md").display()
    );
    Ok(())
}

fn plan(args: &StudyArgs) -> Vec<Planned> {
    let mut planned = Vec::new();
    for optimizer in &args.optimizers {
        for state in &args.optim_states {
            for precision in &args.precisions {
                for &seed in &args.seeds {
                    let row = Row::new(&args.preset, optimizer, state, precision);
                    let log = args
                        .out
                        .join(format!("{}-seed{seed}.jsonl", row.file_stem()));
                    planned.push(Planned { row, seed, log });
                }
            }
        }
    }
    planned
}

/// Runs `webtrain train` for `p`, its stdout into `p.log` once it ends well.
fn train(args: &StudyArgs, p: &Planned) -> Result<Outcome> {
    let exe = std::env::current_exe().map_err(|e| Error::Unsupported(e.to_string()))?;
    let part = p.log.with_extension("jsonl.part");
    let stdout = std::fs::File::create(&part).map_err(|e| files::io(&part, "be created", e))?;
    let precision = match Path::new(&p.row.precision).extension() {
        Some(e) if e == "json" => ["--recipe", &p.row.precision],
        _ => ["--precision", &p.row.precision],
    };
    let (steps, val_every, seed) = (
        args.steps.to_string(),
        args.val_every.to_string(),
        p.seed.to_string(),
    );
    let out = Command::new(exe)
        .args(["train", "--preset", &args.preset, "--steps", &steps])
        .args(["--val-every", &val_every, "--seed", &seed])
        .args(precision)
        .args(["--optimizer", &p.row.optimizer])
        .args(["--optim-state", &p.row.state])
        .args(&args.train)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| Error::Unsupported(format!("study: could not run train: {e}")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(Error::Unsupported(format!(
            "study: {} seed {} failed: {}",
            p.row.label(),
            p.seed,
            last.unwrap_or("no message")
        )));
    }
    std::fs::rename(&part, &p.log).map_err(|e| files::io(&p.log, "be written", e))?;
    Outcome::read(&p.log)?.ok_or_else(|| {
        Error::Unsupported(format!(
            "study: {} ended without its summary",
            p.log.display()
        ))
    })
}
