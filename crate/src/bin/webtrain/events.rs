//! What `webtrain train` makes of a session's events (`run::Event`): a
//! JSON line per step, inspection and validation on stdout, progress in
//! words on stderr, saves written to `--out`; and the devices a lost one is
//! replaced with. A step trained again after a loss prints again: a reader
//! keeps the last line of each step.

use std::path::{Path, PathBuf};

use webtrain::run::{Devices, Event, Listener, Run, Validation};
use webtrain::train::StepStats;
use webtrain::{Error, Gpu, GpuOptions, Result};

use crate::files;

/// New devices made as the first was.
pub struct CliDevices(pub GpuOptions);

impl Devices for CliDevices {
    async fn replace(&self, lost: &Gpu) -> Result<Gpu> {
        let options = GpuOptions {
            kernel_config: Some(lost.kernel_config()),
            ..self.0.clone()
        };
        Gpu::new(&options).await
    }

    async fn sleep(&self, ms: u32) {
        std::thread::sleep(std::time::Duration::from_millis(ms.into()));
    }
}

/// Prints events, writes saves, and remembers what the summary repeats.
pub struct Printer<'a> {
    out: Option<&'a Path>,
    /// The step of the checkpoint file last written or resumed from.
    on_disk: Option<(u32, PathBuf)>,
    /// The run's last step.
    end: u32,
    pub last: Option<StepStats>,
    pub validation: Option<Validation>,
}

impl Listener for Printer<'_> {
    async fn hear(&mut self, _: &Run, events: Vec<Event>) -> Result<()> {
        events.into_iter().try_for_each(|e| self.print(e))
    }
}

impl<'a> Printer<'a> {
    pub fn new(out: Option<&'a Path>, resumed: Option<(u32, PathBuf)>, end: u32) -> Printer<'a> {
        Printer {
            out,
            on_disk: resumed,
            end,
            last: None,
            validation: None,
        }
    }

    pub fn print(&mut self, event: Event) -> Result<()> {
        match event {
            Event::Stepped(s) => self.stepped(s)?,
            Event::Inspected(i) => {
                let survival: Vec<_> = i.tensors.iter().map(|t| &t.survival).collect();
                let line =
                    serde_json::json!({"step": i.step, "inspect": survival, "softmax": i.softmax});
                println!("{line}");
            }
            Event::Validated { step, validation } => self.validated(step, validation),
            Event::Saved { step, bytes } => {
                let path = self.out.ok_or_else(|| {
                    Error::Unsupported("the run saved with nowhere to write: give --out".into())
                })?;
                files::write_atomically(path, &bytes)?;
                eprintln!(
                    "train: step {step} saved to {} ({:.1} MiB)",
                    path.display(),
                    bytes.len() as f64 / (1 << 20) as f64
                );
                self.on_disk = Some((step, path.to_path_buf()));
            }
            Event::Lost { at, reason, from } => {
                let repeating = at.saturating_sub(from);
                let source = match &self.on_disk {
                    Some((step, path)) if *step == from => path.display().to_string(),
                    _ => "the snapshot in memory".into(),
                };
                eprintln!(
                    "train: the GPU device was lost at step {at} ({reason}); resuming from step {from} ({source}), repeating {repeating} step{}",
                    if repeating == 1 { "" } else { "s" }
                );
            }
            Event::Measured { .. } | Event::Snapshot(_) => {}
        }
        Ok(())
    }

    fn stepped(&mut self, s: StepStats) -> Result<()> {
        let line = serde_json::to_string(&s).map_err(|e| Error::Unsupported(e.to_string()))?;
        println!("{line}");
        if s.step.is_multiple_of(10) || s.step == 1 {
            // FP4 All the Way's criterion: progress stalls below √3
            let noise = s.noise_ratio.map_or(String::new(), |r| {
                let below = if r < 3f32.sqrt() { " (below √3)" } else { "" };
                format!("  noise ratio {r:.2}{below}")
            });
            eprintln!(
                "step {:>5}  loss {:.4}  grad norm {:.3}  lr {:.2e}  {:.0} tokens/s{noise}",
                s.step, s.loss, s.grad_norm, s.lr, s.tokens_per_s
            );
        }
        self.last = Some(s);
        Ok(())
    }

    fn validated(&mut self, step: u32, v: Validation) {
        let mut line =
            serde_json::json!({"step": step, "val_loss": v.loss, "weight_norm": v.weight_norm});
        match (v.accuracy, v.char_accuracy, v.train_accuracy) {
            (Some(exact), Some(chars), Some(train)) => {
                line["accuracy"] = exact.into();
                line["char_accuracy"] = chars.into();
                line["train_accuracy"] = train.into();
                eprintln!(
                    "step {step:>5}  validation loss {:.4}  accuracy {:.1}% ({:.1}% of characters; {:.1}% on training examples)",
                    v.loss,
                    100.0 * exact,
                    100.0 * chars,
                    100.0 * train
                );
            }
            _ => eprintln!("step {step:>5}  validation loss {:.4}", v.loss),
        }
        println!("{line}");
        self.validation = Some(v);
    }

    /// Where the run can be taken up again by hand, after `error`.
    pub fn resume_hint(&self, error: &Error) {
        if !matches!(error, Error::RunLost { .. }) {
            return;
        }
        match &self.on_disk {
            Some((step, path)) => eprintln!(
                "train: continue from step {step} with `webtrain train --resume {} --steps {}`",
                path.display(),
                self.end - step
            ),
            None => eprintln!(
                "train: no checkpoint of the run was written (--out FILE --save-every N writes them)"
            ),
        }
    }
}
