//! Every setting of a new run, once: its `RunSpec` field, kind, range and
//! help. `RunSpec::config` checks a run against it; the page asks for it
//! (`runSettings()`) and derives its form's ranges, its address's fields
//! and the settings a run is compared by; the CLI takes its flags' help
//! and choices from it, and a test holds its flags to it.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::RECIPE_NAMES;
use Group::{Data, Mode, Optimizer, Schedule, Shape};
use Kind::{Float, Int};

/// What values a setting takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A whole number.
    Int,
    /// Any finite number.
    Float,
    /// One of `Setting::choices`.
    Choice,
}

/// Which part of a run a setting belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Group {
    /// The batch's shape.
    Shape,
    /// The precision and optimizer-state modes (a running run can switch).
    Mode,
    /// The learning-rate schedule.
    Schedule,
    /// The optimizer and its settings, and the seed.
    Optimizer,
    /// How the text is split: fixed by the text, not the run's config.
    Data,
}

/// One setting of a new run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Setting {
    /// The `RunSpec` field as JSON (and JS) names it.
    pub field: &'static str,
    pub kind: Kind,
    pub group: Group,
    /// Inclusive bounds, where there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// `Kind::Choice`'s values.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub choices: &'static [&'static str],
    /// What each choice is, in `choices`' order: the page's selector and
    /// the CLI's help say it.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub notes: &'static [&'static str],
    /// The heading each choice is listed under, in `choices`' order, where
    /// there are many (the page's selector groups them).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub sections: &'static [&'static str],
    pub help: &'static str,
}

impl Setting {
    /// This choice setting with its choices under `sections`, one each.
    const fn in_sections<const N: usize>(self, sections: &'static [&'static str; N]) -> Setting {
        assert!(N == self.choices.len(), "a section per choice");
        Setting { sections, ..self }
    }
}

const fn number(
    field: &'static str,
    kind: Kind,
    group: Group,
    min: Option<f64>,
    max: Option<f64>,
    help: &'static str,
) -> Setting {
    Setting {
        field,
        kind,
        group,
        min,
        max,
        choices: &[],
        notes: &[],
        sections: &[],
        help,
    }
}

const fn choice<const N: usize>(
    field: &'static str,
    group: Group,
    choices: &'static [&'static str; N],
    notes: &'static [&'static str; N],
    help: &'static str,
) -> Setting {
    Setting {
        field,
        kind: Kind::Choice,
        group,
        min: None,
        max: None,
        choices,
        notes,
        sections: &[],
        help,
    }
}

// The precision recipes' sections: by the narrowest format their products read.
const WIDE: &str = "32 and 16 bits";
const Q115: &str = "Q1.15 boundaries (research)";
const BITS8: &str = "8 bits";
const BITS4: &str = "4 bits";

/// Every setting, in the order the page's form and the CLI's help show them.
pub const SETTINGS: &[Setting] = &[
    number(
        "batch",
        Int,
        Shape,
        Some(1.0),
        Some(1024.0),
        "Sequences per batch",
    ),
    number(
        "seq",
        Int,
        Shape,
        Some(2.0),
        Some(65536.0),
        "Tokens per sequence",
    ),
    choice(
        "precision",
        Mode,
        &RECIPE_NAMES,
        &[
            "f32 throughout",
            "products read an f16 mirror of the f32 master weights",
            "Q1.15 forward boundaries (research)",
            "sf16 with an f32 output head",
            "DeepSeek-V3's E4M3 blocks, f32 head",
            "bf16 products",
            "f16 products, dynamic loss scaling",
            "E4M3 forward, E5M2 gradients, per tensor",
            "MXFP8 E4M3, scales rounded up",
            "MXFP4 products",
            "NVIDIA's recipe: 2-D weight blocks, stochastic dY, Hadamard wgrad",
            "NVFP4 everywhere, nothing else",
            "NVIDIA's recipe, each block's scale mapping its amax to 6 or 4 (Four Over Six)",
            "TorchAO's rowwise float8: E4M3, a power-of-two scale per row",
            "rowwise float8, the weight gradient from f32 operands",
            "Quartet: MXFP4 with QuEST's clipping forward; 32-point Hadamard, stochastic rounding backward",
            "Quartet II: NVFP4 Four Over Six forward; 128-point Hadamard, MS-EDEN scales backward",
        ],
        "The precision recipe: a named one, or a custom one (docs/PRECISION.md)",
    )
    .in_sections(&[
        WIDE, WIDE, Q115, Q115, BITS8, WIDE, WIDE, BITS8, BITS8, BITS4, BITS4, BITS4, BITS4, BITS8,
        BITS8, BITS4, BITS4,
    ]),
    choice(
        "optimizer",
        Optimizer,
        &["adamw", "muon"],
        &[
            "AdamW for every parameter",
            "Muon for the hidden matrices (Newton–Schulz), AdamW for the rest",
        ],
        "The optimizer",
    ),
    choice(
        "optimState",
        Mode,
        &["fp32", "bf16", "fp8", "int8", "int8-linear", "int4"],
        &[
            "f32 moments",
            "bf16 moments, to nearest (DeepSeek-V3)",
            "E4M3 in blocks of 256, to nearest (TorchAO's FP8 state)",
            "dynamic codes in blocks of 256, rounded stochastically",
            "m (Muon's momentum) as round(127·x/absmax) in blocks of 256 (8-bit Muon); v as int8",
            "4-bit codes in blocks of 128, to nearest (TorchAO's 4-bit state)",
        ],
        "The optimizer's moments (AdamW's m and v, Muon's momentum)",
    ),
    choice(
        "masterWeights",
        Optimizer,
        &["f32", "bf16-sr"],
        &[
            "f32 master weights",
            "bf16 weights, each update rounded stochastically, no f32 copy (TorchAO's bf16_stochastic_round; AdamW's and Muon's)",
        ],
        "The master weights the optimizer updates",
    ),
    number("lr", Float, Schedule, Some(0.0), None, "Peak learning rate"),
    number(
        "warmup",
        Int,
        Schedule,
        Some(0.0),
        None,
        "Linear warm-up steps",
    ),
    number(
        "steps",
        Int,
        Schedule,
        Some(1.0),
        None,
        "The step the cosine schedule reaches its floor",
    ),
    number(
        "minLrRatio",
        Float,
        Schedule,
        Some(0.0),
        Some(1.0),
        "The cosine's floor, as a fraction of the peak",
    ),
    number(
        "weightDecay",
        Float,
        Optimizer,
        Some(0.0),
        None,
        "Decoupled weight decay of the 2-D weights",
    ),
    number(
        "clip",
        Float,
        Optimizer,
        Some(0.0),
        None,
        "Global gradient-norm clip (0: none)",
    ),
    number(
        "beta1",
        Float,
        Optimizer,
        Some(0.0),
        Some(0.9999),
        "AdamW's β1",
    ),
    number(
        "beta2",
        Float,
        Optimizer,
        Some(0.0),
        Some(0.9999),
        "AdamW's β2",
    ),
    number("eps", Float, Optimizer, Some(0.0), None, "AdamW's ε"),
    number(
        "seed",
        Int,
        Optimizer,
        Some(0.0),
        None,
        "Seeds the initial weights and the batch order",
    ),
    number(
        "valFraction",
        Float,
        Data,
        Some(0.0),
        Some(0.49),
        "The share of the tokens held out for validation, from the end",
    ),
];

/// The setting of `field`; a name not in `SETTINGS` is a bug of the caller.
pub fn setting(field: &str) -> &'static Setting {
    SETTINGS
        .iter()
        .find(|s| s.field == field)
        .unwrap_or_else(|| panic!("no run setting {field:?}"))
}

impl Setting {
    /// Whether `value` (the field as JSON) is one this setting takes.
    pub fn check(&self, value: &serde_json::Value) -> Result<()> {
        let refuse = |why: String| {
            Err(Error::Unsupported(format!(
                "{} {value}: {why} ({})",
                self.field, self.help
            )))
        };
        if self.kind == Kind::Choice {
            return match value.as_str() {
                Some(v) if self.choices.contains(&v) => Ok(()),
                // a custom recipe's parts: checked as they are read (`Recipe::new`)
                None if self.field == "precision" && value.is_object() => Ok(()),
                _ => refuse(format!("use {}", self.choices.join(", "))),
            };
        }
        let Some(v) = value.as_f64().filter(|v| v.is_finite()) else {
            return refuse("not a number".into());
        };
        if self.kind == Kind::Int && v.fract() != 0.0 {
            return refuse("not a whole number".into());
        }
        match (self.min, self.max) {
            (Some(min), _) if v < min => refuse(format!("below {min}")),
            (_, Some(max)) if v > max => refuse(format!("above {max}")),
            _ => Ok(()),
        }
    }
}

/// Checks every setting of `spec` (a `RunSpec` as JSON).
pub fn check_all(spec: &serde_json::Value) -> Result<()> {
    for s in SETTINGS {
        s.check(&spec[s.field])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Recipe;
    use crate::optim::{MasterWeights, OptimState, OptimizerKind};

    #[test]
    fn the_choices_are_the_modes() {
        let precisions: Vec<String> = Recipe::all_named()
            .iter()
            .map(|p| p.name().into())
            .collect();
        assert_eq!(setting("precision").choices, precisions);
        let states = OptimState::ALL.map(|s| s.name());
        assert_eq!(setting("optimState").choices, states);
        let optimizers = OptimizerKind::ALL.map(|o| o.name());
        assert_eq!(setting("optimizer").choices, optimizers);
        let masters = MasterWeights::ALL.map(|m| m.name());
        assert_eq!(setting("masterWeights").choices, masters);
    }

    #[test]
    fn a_setting_refuses_what_it_does_not_take() {
        let batch = setting("batch");
        assert!(batch.check(&8.into()).is_ok());
        for bad in [serde_json::json!(0), 2.5.into(), 2000.into(), "8".into()] {
            let e = batch.check(&bad).unwrap_err().to_string();
            assert!(
                e.contains("batch") && e.contains("Sequences per batch"),
                "{e}"
            );
        }
        assert!(setting("precision").check(&"bf17".into()).is_err());
        assert!(setting("lr").check(&(-1e-3).into()).is_err());
    }
}
