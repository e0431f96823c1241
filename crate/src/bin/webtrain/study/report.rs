//! A study's runs read back from their logs, and what is made of them:
//! per row (preset, optimizer, state, precision) the final validation
//! loss over the seeds, its gap to fp32's at the same seed, whether that
//! gap stands beyond the seeds' spread; the table and the figure.

use std::fmt::Write;
use std::path::Path;

use webtrain::Result;

use super::StudyArgs;
use crate::files;

/// What a row trains: every seed of it alike.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub preset: String,
    pub optimizer: String,
    pub state: String,
    /// A named recipe, or a recipe file.
    pub precision: String,
}

impl Row {
    pub fn new(preset: &str, optimizer: &str, state: &str, precision: &str) -> Row {
        Row {
            preset: preset.into(),
            optimizer: optimizer.into(),
            state: state.into(),
            precision: precision.into(),
        }
    }

    /// The recipe's name: a file's stem.
    fn precision_name(&self) -> &str {
        let path = Path::new(&self.precision);
        match path.extension() {
            Some(e) if e == "json" => path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("recipe"),
            _ => &self.precision,
        }
    }

    pub fn label(&self) -> String {
        format!(
            "{} · {} state · {}",
            self.precision_name(),
            self.state,
            self.optimizer
        )
    }

    pub fn file_stem(&self) -> String {
        let [p, o, s, r] = [
            &self.preset,
            &self.optimizer,
            &self.state,
            self.precision_name(),
        ];
        format!("{p}-{o}-{s}-{r}")
    }

    /// fp32 with f32 state: what the other rows' gaps are to.
    fn is_baseline(&self) -> bool {
        self.precision == "fp32" && self.state == "fp32"
    }

    fn baseline(&self) -> Row {
        Row::new(&self.preset, &self.optimizer, "fp32", "fp32")
    }
}

/// One run, from its log.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The last validation's loss.
    pub val_loss: Option<f64>,
    /// Steps whose loss was not finite (JSON null).
    pub nonfinite_losses: u32,
    pub skipped_steps: u64,
    pub seconds: f64,
}

impl Outcome {
    /// `None` where the log is missing or has no summary (a run cut short).
    pub fn read(log: &Path) -> Result<Option<Outcome>> {
        if !log.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(log).map_err(|e| files::io(log, "be read", e))?;
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let Some(summary) = lines.iter().rev().find_map(|l| l.get("summary")) else {
            return Ok(None);
        };
        let steps = lines.iter().filter(|l| l.get("grad_norm").is_some());
        Ok(Some(Outcome {
            val_loss: summary["val_loss"].as_f64(),
            nonfinite_losses: steps.filter(|l| !l["loss"].is_number()).count() as u32,
            skipped_steps: summary["skipped_steps"].as_u64().unwrap_or(0),
            seconds: summary["seconds"].as_f64().unwrap_or(0.0),
        }))
    }
}

/// A row over its seeds.
#[derive(Clone, Debug)]
pub struct Stats {
    pub row: Row,
    pub seeds: Vec<u64>,
    pub val_losses: Vec<Option<f64>>,
    /// 100 · (loss − fp32's) / fp32's at each seed, where both exist.
    pub gaps: Vec<Option<f64>>,
    pub nonfinite_losses: u32,
    pub skipped_steps: u64,
}

/// Mean and sample standard deviation (n − 1; `None` for one value).
pub fn mean_sd(xs: &[f64]) -> Option<(f64, Option<f64>)> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let sd = (xs.len() > 1)
        .then(|| (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
    Some((mean, sd))
}

impl Stats {
    fn known(xs: &[Option<f64>]) -> Vec<f64> {
        xs.iter().flatten().copied().collect()
    }

    pub fn val(&self) -> Option<(f64, Option<f64>)> {
        mean_sd(&Stats::known(&self.val_losses))
    }

    pub fn gap(&self) -> Option<(f64, Option<f64>)> {
        mean_sd(&Stats::known(&self.gaps))
    }

    /// Whether the mean gap stands beyond twice its standard error: what
    /// the seeds can separate from fp32.
    pub fn verdict(&self) -> &'static str {
        if self.row.is_baseline() {
            return "baseline";
        }
        let n = Stats::known(&self.gaps).len() as f64;
        match self.gap() {
            None => "no fp32 to compare",
            Some((_, None)) => "one seed",
            Some((mean, Some(sd))) if mean.abs() > 2.0 * sd / n.sqrt() => {
                "beyond the seeds' spread"
            }
            Some(_) => "within the seeds' spread",
        }
    }

    pub fn json(&self) -> serde_json::Value {
        let pair = |m: Option<(f64, Option<f64>)>| {
            m.map(|(mean, sd)| serde_json::json!({"mean": mean, "sd": sd}))
        };
        serde_json::json!({
            "preset": self.row.preset,
            "optimizer": self.row.optimizer,
            "optim_state": self.row.state,
            "precision": self.row.precision,
            "seeds": self.seeds,
            "val_loss": self.val_losses,
            "gap_percent": self.gaps,
            "val_loss_mean_sd": pair(self.val()),
            "gap_percent_mean_sd": pair(self.gap()),
            "verdict": self.verdict(),
            "nonfinite_losses": self.nonfinite_losses,
            "skipped_steps": self.skipped_steps,
        })
    }
}

/// The outcomes grouped by row, in their order, each seed's gap to the
/// baseline row's same seed.
pub fn rows(outcomes: &[(Row, u64, Outcome)]) -> Vec<Stats> {
    let mut stats: Vec<Stats> = Vec::new();
    for (row, seed, o) in outcomes {
        let base = outcomes
            .iter()
            .find(|(r, s, _)| *r == row.baseline() && s == seed)
            .and_then(|(_, _, b)| b.val_loss);
        let gap = match (o.val_loss, base) {
            (Some(v), Some(b)) => Some(100.0 * (v - b) / b),
            _ => None,
        };
        let at = match stats.iter().position(|s| s.row == *row) {
            Some(at) => at,
            None => {
                stats.push(Stats {
                    row: row.clone(),
                    seeds: Vec::new(),
                    val_losses: Vec::new(),
                    gaps: Vec::new(),
                    nonfinite_losses: 0,
                    skipped_steps: 0,
                });
                stats.len() - 1
            }
        };
        let s = &mut stats[at];
        s.seeds.push(*seed);
        s.val_losses.push(o.val_loss);
        s.gaps.push(gap);
        s.nonfinite_losses += o.nonfinite_losses;
        s.skipped_steps += o.skipped_steps;
    }
    stats
}

fn plus_minus(m: Option<(f64, Option<f64>)>, digits: usize, unit: &str) -> String {
    match m {
        None => "—".into(),
        Some((mean, None)) => format!("{mean:+.digits$}{unit}"),
        Some((mean, Some(sd))) => format!("{mean:+.digits$} ± {sd:.digits$}{unit}"),
    }
}

/// The markdown table, with the command that makes it.
pub fn table(args: &StudyArgs, rows: &[Stats]) -> String {
    let mut t = String::new();
    let seeds: Vec<String> = args.seeds.iter().map(u64::to_string).collect();
    let _ = writeln!(
        t,
        "Preset {}, {} steps, validation every {}, seeds {}: `webtrain study --precisions {} \
         --seeds {} --preset {} --steps {} --val-every {} --optim-states {} --optimizers {}`.\n\
         Gap: 100 · (validation loss − fp32's) / fp32's at the same seed, then mean ± sample \
         standard deviation over the seeds; beyond the seeds' spread where |mean| > 2 · sd / √n.\n",
        args.preset,
        args.steps,
        args.val_every,
        seeds.join(", "),
        args.precisions.join(","),
        seeds.join(","),
        args.preset,
        args.steps,
        args.val_every,
        args.optim_states.join(","),
        args.optimizers.join(","),
    );
    t.push_str(
        "| precision | state | optimizer | validation loss | gap to fp32 | per seed | \
         verdict | non-finite losses | skipped steps |\n",
    );
    t.push_str("|---|---|---|---:|---:|---|---|---:|---:|\n");
    for s in rows {
        let val = match s.val() {
            None => "—".into(),
            Some((mean, None)) => format!("{mean:.4}"),
            Some((mean, Some(sd))) => format!("{mean:.4} ± {sd:.4}"),
        };
        let per_seed: Vec<String> = s
            .gaps
            .iter()
            .map(|g| g.map_or("—".into(), |g| format!("{g:+.2}")))
            .collect();
        let _ = writeln!(
            t,
            "| {} | {} | {} | {val} | {} | {} | {} | {} | {} |",
            s.row.precision_name(),
            s.row.state,
            s.row.optimizer,
            plus_minus(s.gap(), 2, " %"),
            per_seed.join(", "),
            s.verdict(),
            s.nonfinite_losses,
            s.skipped_steps
        );
    }
    t
}

/// The gaps as a forest plot: each row's mean at a dot, its standard
/// deviation as a bar, fp32 at the zero line.
pub fn figure(rows: &[Stats], preset: &str) -> String {
    const LEFT: f64 = 250.0;
    const RIGHT: f64 = 150.0;
    const PLOT: f64 = 420.0;
    const LINE: f64 = 24.0;
    const TOP: f64 = 40.0;
    let gaps: Vec<Option<(f64, f64)>> = rows
        .iter()
        .map(|s| s.gap().map(|(m, sd)| (m, sd.unwrap_or(0.0))))
        .collect();
    let reach = gaps
        .iter()
        .flatten()
        .map(|(m, sd)| m.abs() + sd)
        .fold(0.5, f64::max)
        * 1.1;
    let x = |v: f64| LEFT + PLOT / 2.0 + v / reach * PLOT / 2.0;
    let height = TOP + LINE * rows.len() as f64 + 40.0;
    let width = LEFT + PLOT + RIGHT;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{LEFT}" y="20">Validation loss gap to fp32 (%), {preset}: mean ± sd over the seeds</text>"#
    );
    let bottom = TOP + LINE * rows.len() as f64;
    for tick in [-1.0, -0.5, 0.0, 0.5, 1.0] {
        let v = tick * reach / 1.1;
        let stroke = if tick == 0.0 { "#444" } else { "#ddd" };
        let _ = writeln!(
            svg,
            r##"<line x1="{0:.1}" y1="{TOP}" x2="{0:.1}" y2="{bottom}" stroke="{stroke}"/><text x="{0:.1}" y="{1}" text-anchor="middle" fill="#666">{v:+.2}</text>"##,
            x(v),
            bottom + 16.0
        );
    }
    for (i, (s, g)) in rows.iter().zip(&gaps).enumerate() {
        let y = TOP + LINE * (i as f64 + 0.5);
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 10.0,
            y + 4.0,
            s.row.label()
        );
        let Some((mean, sd)) = *g else { continue };
        let _ = writeln!(
            svg,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#3056d3" stroke-width="2"/><circle cx="{:.1}" cy="{y:.1}" r="4" fill="#3056d3"/><text x="{:.1}" y="{:.1}" fill="#444">{}</text>"##,
            x(mean - sd),
            x(mean + sd),
            x(mean),
            LEFT + PLOT + 10.0,
            y + 4.0,
            plus_minus(s.gap(), 2, " %")
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(val: f64) -> Outcome {
        Outcome {
            val_loss: Some(val),
            nonfinite_losses: 0,
            skipped_steps: 0,
            seconds: 1.0,
        }
    }

    #[test]
    fn mean_and_sample_sd() {
        assert_eq!(mean_sd(&[]), None);
        assert_eq!(mean_sd(&[2.0]), Some((2.0, None)));
        let (m, sd) = mean_sd(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(m, 2.5);
        assert!((sd.unwrap() - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
    }

    /// Gaps are to fp32's loss at the same seed; a steady gap is beyond
    /// the spread, one that changes sign is not.
    #[test]
    fn gaps_pair_seeds_and_judge_the_spread() {
        let fp32 = Row::new("tiny", "adamw", "fp32", "fp32");
        let steady = Row::new("tiny", "adamw", "fp32", "nvfp4");
        let noisy = Row::new("tiny", "adamw", "fp32", "bf16");
        let outcomes = [
            (fp32.clone(), 1, outcome(3.0)),
            (fp32.clone(), 2, outcome(4.0)),
            (steady.clone(), 1, outcome(3.03)),
            (steady.clone(), 2, outcome(4.05)),
            (noisy.clone(), 1, outcome(3.03)),
            (noisy.clone(), 2, outcome(3.96)),
        ];
        let rows = rows(&outcomes);
        assert_eq!(rows.len(), 3);
        let gaps = |s: &Stats| s.gaps.iter().map(|g| g.unwrap()).collect::<Vec<_>>();
        let near = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9);
        assert!(near(&gaps(&rows[1]), &[1.0, 1.25]), "{:?}", rows[1].gaps);
        assert!(near(&gaps(&rows[2]), &[1.0, -1.0]), "{:?}", rows[2].gaps);
        assert_eq!(rows[0].verdict(), "baseline");
        assert_eq!(rows[1].verdict(), "beyond the seeds' spread");
        assert_eq!(rows[2].verdict(), "within the seeds' spread");
        let svg = figure(&rows, "tiny");
        assert!(svg.starts_with("<svg") && svg.matches("<circle").count() == 3);
    }

    #[test]
    fn a_log_without_its_summary_is_not_an_outcome() {
        let dir = std::env::temp_dir().join(format!("webtrain-study-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("run.jsonl");
        std::fs::write(&log, "{\"step\":1,\"loss\":5.0,\"grad_norm\":1.0}\n").unwrap();
        assert_eq!(Outcome::read(&log).unwrap(), None);
        let summary = r#"{"summary":{"val_loss":4.5,"skipped_steps":0,"seconds":2.0}}"#;
        let text = format!("{{\"step\":1,\"loss\":null,\"grad_norm\":1.0}}\n{summary}\n");
        std::fs::write(&log, text).unwrap();
        let o = Outcome::read(&log).unwrap().unwrap();
        assert_eq!((o.val_loss, o.nonfinite_losses), (Some(4.5), 1));
        std::fs::remove_dir_all(&dir).ok();
    }
}
