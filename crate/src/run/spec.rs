//! A new run as a person describes it, and the defaults every front end
//! starts from: the page's form is filled from `RunSpec::preset` (exported
//! to JS) and sends one back; the CLI's flags change the fields they name.
//! What each field takes is `settings::SETTINGS`'.

use serde::{Deserialize, Serialize};

use crate::data::tasks::{Task, TaskSpec};
use crate::error::{Error, Result};
use crate::model::{BatchShape, Config, Recipe};
use crate::optim::{LrSchedule, MasterWeights, OptimConfig, OptimState, OptimizerKind};
use crate::train::TrainConfig;

/// Validation batches per evaluation: enough to be steady, few enough to be quick.
pub const VALIDATION_BATCHES: usize = 8;

/// Keeps the batch stream apart from the weight initialisation's: a new
/// run draws its batches from `SplitMix64(seed ^ BATCH_SEED)`.
pub const BATCH_SEED: u64 = 0x5eed_da7a;

/// A new run (camelCase in JS; `steps` is the schedule's length).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunSpec {
    /// A preset name, or `custom` with `model`.
    pub preset: String,
    /// The model's HF Llama fields; absent: the preset's.
    #[serde(default)]
    pub model: Option<Config>,
    pub batch: u32,
    pub seq: u32,
    pub precision: Recipe,
    /// AdamW, or Muon for the hidden matrices (absent: AdamW).
    #[serde(default)]
    pub optimizer: OptimizerKind,
    pub optim_state: OptimState,
    /// f32, or bf16 rounded stochastically (absent: f32).
    #[serde(default)]
    pub master_weights: MasterWeights,
    /// Peak learning rate.
    pub lr: f64,
    /// Linear warm-up steps.
    pub warmup: u32,
    /// The step the cosine reaches its floor.
    pub steps: u32,
    #[serde(default = "defaults::min_lr_ratio")]
    pub min_lr_ratio: f64,
    #[serde(default = "defaults::weight_decay")]
    pub weight_decay: f64,
    /// Global gradient-norm clip (≤ 0: none).
    #[serde(default = "defaults::clip")]
    pub clip: f32,
    #[serde(default = "defaults::beta1")]
    pub beta1: f64,
    #[serde(default = "defaults::beta2")]
    pub beta2: f64,
    #[serde(default = "defaults::eps")]
    pub eps: f64,
    /// Seeds the initial weights and the batch order.
    #[serde(default = "defaults::seed")]
    pub seed: u64,
    /// The held-out tail's share of the tokens.
    #[serde(default = "defaults::val_fraction")]
    pub val_fraction: f64,
    /// Train on this task's examples instead of text (`RunSpec::task`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskSpec>,
}

/// The settings a person changed from a run's defaults (the CLI's flags,
/// the page's form where it differs from its preset): absent, the default.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Changes {
    pub batch: Option<u32>,
    pub seq: Option<u32>,
    pub precision: Option<Recipe>,
    pub optimizer: Option<OptimizerKind>,
    pub optim_state: Option<OptimState>,
    pub master_weights: Option<MasterWeights>,
    pub lr: Option<f64>,
    pub warmup: Option<u32>,
    pub steps: Option<u32>,
    pub min_lr_ratio: Option<f64>,
    pub weight_decay: Option<f64>,
    pub clip: Option<f32>,
    pub beta1: Option<f64>,
    pub beta2: Option<f64>,
    pub eps: Option<f64>,
    pub seed: Option<u64>,
    pub val_fraction: Option<f64>,
}

/// An imported model's context as a fine-tuning run reads it, at most:
/// longer rows cost memory a first fine-tune rarely needs.
pub const FINE_TUNE_SEQ: u32 = 512;

/// An imported model's peak rate: a trained model takes a smaller step
/// than a fresh one.
pub const FINE_TUNE_LR: f64 = 1e-3;

/// Tokens a task preset's row holds about: whole examples up to it.
const TASK_ROW: usize = 64;

/// modadd's schedule: long enough for the held-out jump with either
/// optimizer on lavapipe (docs/TASKS.md, "Grokking").
const MODADD_STEPS: u32 = 5000;

/// modadd's peak rate with Muon, twice AdamW's: at 1e-3 Muon reached 78%
/// held out and fell back; at 2e-3 it held 95% from step 1 400, where AdamW
/// at 2e-3 hovered at 85–91% (docs/TASKS.md, "Grokking").
const MODADD_MUON_LR: f64 = 2e-3;

/// The fields every preset shares (AdamW's from `OptimConfig::default`).
mod defaults {
    use crate::optim::OptimConfig;

    pub fn min_lr_ratio() -> f64 {
        0.1
    }
    pub fn weight_decay() -> f64 {
        OptimConfig::default().weight_decay
    }
    pub fn clip() -> f32 {
        OptimConfig::default().max_grad_norm
    }
    pub fn beta1() -> f64 {
        OptimConfig::default().beta1
    }
    pub fn beta2() -> f64 {
        OptimConfig::default().beta2
    }
    pub fn eps() -> f64 {
        OptimConfig::default().eps
    }
    pub fn seed() -> u64 {
        1
    }
    pub fn val_fraction() -> f64 {
        0.05
    }
}

/// Warm-up steps for a schedule of `steps`: a tenth of it.
pub fn warmup_for(steps: u32) -> u32 {
    steps / 10
}

impl RunSpec {
    /// What a run of `preset` starts from: its model, a batch that suits it,
    /// a peak rate that trains it (smaller models take larger ones), a
    /// schedule of 2000 steps, fp32 weights and state.
    pub fn preset(preset: &str) -> Result<RunSpec> {
        let model = Config::preset(preset)?;
        let (shape, lr) = match preset {
            "tiny" => (BatchShape { batch: 8, seq: 64 }, 3e-3),
            "small" => (BatchShape { batch: 8, seq: 256 }, 1e-3),
            _ => (BatchShape { batch: 8, seq: 512 }, 6e-4),
        };
        let steps = 2000;
        Ok(RunSpec {
            preset: preset.to_string(),
            model: Some(model),
            batch: shape.batch,
            seq: shape.seq,
            precision: Recipe::fp32(),
            optimizer: OptimizerKind::Adamw,
            optim_state: OptimState::Fp32,
            master_weights: MasterWeights::F32,
            lr,
            warmup: warmup_for(steps),
            steps,
            min_lr_ratio: defaults::min_lr_ratio(),
            weight_decay: defaults::weight_decay(),
            clip: defaults::clip(),
            beta1: defaults::beta1(),
            beta2: defaults::beta2(),
            eps: defaults::eps(),
            seed: defaults::seed(),
            val_fraction: defaults::val_fraction(),
            task: None,
        })
    }

    /// What a run of `task` starts from: a small model of the tasks'
    /// character vocabulary, rows of whole examples (about `TASK_ROW`
    /// tokens), and settings that reach the task's goal in about a minute
    /// on a laptop GPU (docs/TASKS.md).
    pub fn task(task: &TaskSpec) -> Result<RunSpec> {
        let parsed = Task::parse(task)?;
        let model = Config {
            vocab: parsed.vocab(),
            max_seq: 128,
            ..Config::preset("tiny")?
        };
        let len = parsed.example_len();
        let seq = ((TASK_ROW / len).max(1) * len - 1) as u32;
        // (batch, peak rate, steps, weight decay, β2, the cosine's floor)
        let (batch, lr, steps, weight_decay, beta2, min_lr_ratio) = match parsed {
            Task::Copy { .. } | Task::Reverse { .. } | Task::Sort { .. } => (
                16,
                3e-3,
                1000,
                defaults::weight_decay(),
                defaults::beta2(),
                defaults::min_lr_ratio(),
            ),
            Task::Add { .. } => (
                16,
                3e-3,
                3000,
                defaults::weight_decay(),
                defaults::beta2(),
                defaults::min_lr_ratio(),
            ),
            // grokking's: strong decoupled weight decay, β2 0.98 (Power et
            // al. 2022), and a constant rate after warm-up, so weight decay
            // keeps pulling until the held-out jump (docs/TASKS.md)
            Task::ModAdd { .. } => (16, 1e-3, MODADD_STEPS, 1.0, 0.98, 1.0),
        };
        Ok(RunSpec {
            preset: "custom".into(),
            model: Some(model),
            batch,
            seq,
            lr,
            warmup: warmup_for(steps),
            steps,
            weight_decay,
            beta2,
            min_lr_ratio,
            task: Some(parsed.spec()),
            ..RunSpec::preset("tiny")?
        })
    }

    /// The run with `optimizer`; a task's preset that has a rate of its
    /// own for it takes that rate (modadd with Muon).
    pub fn with_optimizer(self, optimizer: OptimizerKind) -> RunSpec {
        let task = self.task.as_ref().map(Task::parse);
        let lr = match (task, optimizer) {
            (Some(Ok(Task::ModAdd { .. })), OptimizerKind::Muon) => MODADD_MUON_LR,
            _ => self.lr,
        };
        RunSpec {
            optimizer,
            lr,
            ..self
        }
    }

    /// What a run fine-tuning an imported model (a Hugging Face folder)
    /// starts from, in both front ends: base's batch and shared settings,
    /// the model's own context up to `FINE_TUNE_SEQ`, the fine-tuning rate
    /// `FINE_TUNE_LR`.
    pub fn fine_tune(model: &Config) -> Result<RunSpec> {
        Ok(RunSpec {
            preset: "custom".into(),
            model: Some(model.clone()),
            seq: model.max_seq.min(FINE_TUNE_SEQ),
            lr: FINE_TUNE_LR,
            ..RunSpec::preset("base")?
        })
    }

    /// The run with the fields a person changed (`Changes`) in place of
    /// its defaults: a schedule of other length warms up over a tenth of
    /// it unless the warm-up is given too; the optimizer before the rate,
    /// so a rate given wins over a task's own rate for it.
    pub fn with(self, c: &Changes) -> RunSpec {
        let mut s = match c.optimizer {
            Some(o) => self.with_optimizer(o),
            None => self,
        };
        s.steps = c.steps.unwrap_or(s.steps);
        s.warmup = match (c.warmup, c.steps) {
            (Some(w), _) => w,
            (None, Some(steps)) => warmup_for(steps),
            (None, None) => s.warmup,
        };
        s.precision = c.precision.clone().unwrap_or(s.precision);
        // each setting the person changed replaces the spec's
        macro_rules! changed {
            ($($field:ident),*) => { $( if let Some(v) = c.$field { s.$field = v; } )* };
        }
        changed!(
            optim_state,
            master_weights,
            seed,
            batch,
            seq,
            lr,
            min_lr_ratio,
            weight_decay,
            clip,
            beta1,
            beta2,
            eps,
            val_fraction
        );
        s
    }

    pub fn shape(&self) -> BatchShape {
        BatchShape {
            batch: self.batch,
            seq: self.seq,
        }
    }

    /// The run's config, checked: every setting, the model's sizes and the
    /// batch shape.
    pub fn config(&self) -> Result<TrainConfig> {
        let json = serde_json::to_value(self).map_err(|e| Error::Unsupported(e.to_string()))?;
        super::settings::check_all(&json)?;
        let model = match (&self.model, self.preset.as_str()) {
            (Some(c), _) => c.clone(),
            (None, "custom") => {
                return Err(Error::Unsupported("a custom model needs its sizes".into()));
            }
            (None, name) => Config::preset(name)?,
        };
        model.validate()?;
        self.shape().validate(&model)?;
        let optim = OptimConfig {
            optimizer: self.optimizer,
            state: self.optim_state,
            master: self.master_weights,
            schedule: LrSchedule {
                peak: self.lr,
                warmup: self.warmup,
                total: self.steps.max(1),
                min_ratio: self.min_lr_ratio,
            },
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            max_grad_norm: self.clip,
            ..OptimConfig::default()
        };
        Ok(TrainConfig {
            model,
            shape: self.shape(),
            precision: self.precision.clone(),
            optim,
            seed: self.seed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PRESETS;

    #[test]
    fn modadd_takes_its_own_rate_with_muon() {
        let modadd = RunSpec::task(&TaskSpec {
            name: "modadd".into(),
            options: Default::default(),
        })
        .unwrap();
        assert_eq!(
            modadd.clone().with_optimizer(OptimizerKind::Muon).lr,
            MODADD_MUON_LR
        );
        assert_eq!(
            modadd.clone().with_optimizer(OptimizerKind::Adamw).lr,
            modadd.lr
        );
        let sort = RunSpec::task(&TaskSpec {
            name: "sort".into(),
            options: Default::default(),
        })
        .unwrap();
        let muon = sort.clone().with_optimizer(OptimizerKind::Muon);
        assert_eq!((muon.lr, muon.optimizer), (sort.lr, OptimizerKind::Muon));
    }

    #[test]
    fn changes_replace_defaults_and_the_warmup_follows_the_schedule() {
        let tiny = RunSpec::preset("tiny").unwrap();
        let same = tiny.clone().with(&Changes::default());
        assert_eq!(same, tiny);
        let c = Changes {
            steps: Some(100),
            lr: Some(0.5),
            ..Changes::default()
        };
        let s = tiny.clone().with(&c);
        assert_eq!(
            (s.steps, s.warmup, s.lr, s.batch),
            (100, 10, 0.5, tiny.batch)
        );
        let json = r#"{"warmup":3,"steps":100,"precision":"fp8"}"#;
        let c: Changes = serde_json::from_str(json).unwrap();
        let s = tiny.with(&c);
        assert_eq!((s.warmup, s.precision), (3, Recipe::fp8()));
    }

    /// The page sends what its form changed, setting by setting: each is a field of `Changes`.
    #[test]
    fn every_setting_is_a_change() {
        let spec = serde_json::to_value(RunSpec::preset("tiny").unwrap()).unwrap();
        for s in crate::run::settings::SETTINGS {
            let one = serde_json::json!({ s.field: spec[s.field] });
            let c: Changes =
                serde_json::from_value(one).unwrap_or_else(|e| panic!("{}: {e}", s.field));
            assert_ne!(c, Changes::default(), "{}", s.field);
        }
    }

    #[test]
    fn an_imported_model_fine_tunes_on_at_most_512_tokens() {
        let model = Config {
            max_seq: 2048,
            ..Config::preset("small").unwrap()
        };
        let s = RunSpec::fine_tune(&model).unwrap();
        assert_eq!((s.seq, s.lr, s.batch), (512, 1e-3, 8));
        assert_eq!(s.model.as_ref(), Some(&model));
        s.config().unwrap();
    }

    #[test]
    fn every_preset_has_a_valid_run() {
        for name in PRESETS {
            let spec = RunSpec::preset(name).unwrap();
            let c = spec.config().unwrap();
            assert_eq!(c.model, Config::preset(name).unwrap());
            assert_eq!(c.optim.schedule.warmup, c.optim.schedule.total / 10);
        }
        assert!(RunSpec::preset("huge").is_err());
    }

    #[test]
    fn the_page_may_leave_out_what_every_preset_shares() {
        let json = r#"{"preset":"tiny","batch":4,"seq":32,"precision":"fp8","optimState":"int8","lr":0.003,"warmup":5,"steps":40}"#;
        let spec: RunSpec = serde_json::from_str(json).unwrap();
        let c = spec.config().unwrap();
        assert_eq!(c.optim.beta2, OptimConfig::default().beta2);
        assert_eq!((c.shape.batch, c.precision), (4, Recipe::fp8()));
        let custom = RunSpec {
            preset: "custom".into(),
            model: None,
            ..spec
        };
        assert!(custom.config().is_err(), "custom without sizes");
    }

    #[test]
    fn every_task_has_a_valid_run_of_whole_examples() {
        for t in crate::data::tasks::TASKS {
            let spec = RunSpec::task(&TaskSpec {
                name: t.name.into(),
                options: Default::default(),
            })
            .unwrap();
            let c = spec.config().unwrap();
            let task = Task::parse(spec.task.as_ref().unwrap()).unwrap();
            assert_eq!(c.model.vocab, task.vocab());
            let len = task.example_len() as u32;
            assert_eq!(
                (spec.seq + 1) % len,
                0,
                "{}: rows of whole examples",
                t.name
            );
            let json = serde_json::to_string(&spec).unwrap();
            assert_eq!(serde_json::from_str::<RunSpec>(&json).unwrap(), spec);
        }
    }
}
