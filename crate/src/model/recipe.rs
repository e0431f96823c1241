//! Precision recipes: what a model's products read and compute in. A recipe
//! says, for each operand of the forward (`Y = X·Wᵀ`), the data-gradient
//! (`dX = dY·W`) and the weight-gradient (`dW = dYᵀ·X`) products, the format
//! it goes through first, how it is rounded and whether a random Hadamard
//! transform comes first; which weights the products read (the f32 master
//! or an f16 mirror); whether the forward's boundaries are Q1.15 (sf16);
//! and which layers stay wide. Recipes are data: serde, in checkpoints, in
//! the page's address, on the CLI as `--precision NAME` or `--recipe FILE`.
//!
//! The named recipes (`Recipe::named`) are written by their name alone when
//! they are exactly the named one, so a file of today's modes reads as it
//! always did; any other recipe is written in full.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::Kernels;
use crate::ops::formats::{HADAMARD_BLOCK, HADAMARD_MAX, Scaling};
use crate::ops::loss_scale::LossScaling;
use crate::ops::products::{
    AttentionOperands, BlockShape, HadamardSigns, Operand, OperandFormat, Products, Rounding, Wide,
};
use crate::shaders::Numerics;

use super::{BatchShape, Config};

/// The version of the recipe file format this build writes (`version` in a
/// recipe's JSON; a file without one is version 1).
pub const RECIPE_VERSION: u32 = 1;

/// The forward's operands: `Y = X·Wᵀ`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Forward {
    pub x: Operand,
    pub w: Operand,
}

/// The data gradient's: `dX = dY·W`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataGrad {
    pub dy: Operand,
    pub w: Operand,
}

/// The weight gradient's: `dW = dYᵀ·X`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WeightGrad {
    pub dy: Operand,
    pub x: Operand,
}

/// Which weights the products read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightCopy {
    /// The f32 master weights.
    #[default]
    F32,
    /// Their f16 mirror, written by the fused AdamW update (the seed's
    /// mixed precision): the forward and dX products read f16 weights.
    F16,
}

/// What the forward's boundaries (embedding, norms, projections, residual,
/// softmax, attention, activation) are stored as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Boundaries {
    #[default]
    #[serde(rename = "f32")]
    F32,
    /// The SF16 document's Q1.15, clamps counted; the backward is f32,
    /// straight through.
    #[serde(rename = "q1.15")]
    Q115,
}

/// A precision recipe (the module's comment says what each part means).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecipeSpec {
    pub name: String,
    #[serde(default = "recipe_version")]
    pub version: u32,
    #[serde(default)]
    pub weights: WeightCopy,
    #[serde(default)]
    pub boundaries: Boundaries,
    #[serde(default)]
    pub forward: Forward,
    #[serde(default)]
    pub dgrad: DataGrad,
    #[serde(default)]
    pub wgrad: WeightGrad,
    #[serde(default)]
    pub wide: Wide,
    /// What attention's products read (every layer's: `wide` keeps the
    /// linear products wide). A file without it (before 2026-11-27) reads
    /// as f32.
    #[serde(default)]
    pub attention: AttentionOperands,
    /// Dynamic loss scaling (GradScaler's), where the recipe scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_scaling: Option<LossScaling>,
}

fn recipe_version() -> u32 {
    1
}

/// A checked recipe: `Recipe::named` or a `RecipeSpec` that passed
/// `Recipe::new`.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe(RecipeSpec);

/// The named recipes, in the order the selectors list them.
pub const RECIPE_NAMES: [&str; 17] = [
    "fp32",
    "f16",
    "sf16",
    "sf16-wide-head",
    "fp8",
    "bf16",
    "amp-f16",
    "fp8-hybrid",
    "mxfp8",
    "mxfp4",
    "nvfp4",
    "nvfp4-naive",
    "nvfp4-4over6",
    "fp8-rowwise",
    "fp8-rowwise-gw-hp",
    "quartet",
    "quartet-ii",
];

impl Recipe {
    /// A recipe from its parts, refused with the reason where the parts
    /// do not make one.
    pub fn new(spec: RecipeSpec) -> Result<Recipe> {
        let bad = |why: String| Err(Error::Unsupported(format!("recipe {:?}: {why}", spec.name)));
        if spec.version > RECIPE_VERSION {
            return bad(format!(
                "version {} is newer than this build's {RECIPE_VERSION}: update webtrain",
                spec.version
            ));
        }
        if let Some(s) = &spec.loss_scaling {
            s.validate()?;
        }
        let quantized = spec.products().all().iter().any(|o| !o.is_identity());
        if spec.weights == WeightCopy::F16 && quantized {
            return bad("f16 weights are a recipe of their own: its products read the f16 mirror, not quantized operands".into());
        }
        let products = spec.products();
        for (pass, [a, b]) in products.passes() {
            if a.hadamard != b.hadamard {
                return bad(format!(
                    "{pass}: a Hadamard transform on one operand only would change the product; give it both or neither"
                ));
            }
            if a.hadamard_signs != b.hadamard_signs {
                return bad(format!(
                    "{pass}: its operands' Hadamard signs differ, so the transforms would not cancel in the product; give both the same hadamardSigns"
                ));
            }
            if !a.hadamard && a.hadamard_signs != HadamardSigns::Fixed {
                return bad(format!(
                    "{pass}: hadamardSigns without a Hadamard transform; set hadamard: true"
                ));
            }
            if a.hadamard_size != b.hadamard_size {
                return bad(format!(
                    "{pass}: its operands' Hadamard blocks differ ({} and {}), so the transforms would not cancel in the product; give both the same hadamardSize",
                    a.hadamard_size, b.hadamard_size
                ));
            }
            for o in [a, b] {
                let f = o.format;
                if o.blocks == BlockShape::Square
                    && !matches!(f, OperandFormat::Format(f) if f.has_square_blocks())
                {
                    return bad(format!(
                        "{pass}: 2-D blocks are NVFP4's and e4m3-blockwise's, not {}'s",
                        f.name()
                    ));
                }
                if o.rounding == Rounding::Stochastic && f == OperandFormat::F32 {
                    return bad(format!(
                        "{pass}: stochastic rounding needs a format to round into, not {}",
                        f.name()
                    ));
                }
                let size = o.hadamard_size as usize;
                if !(HADAMARD_BLOCK..=HADAMARD_MAX).contains(&size) || !size.is_power_of_two() {
                    return bad(format!(
                        "{pass}: hadamardSize {size} is not one of 16, 32, 64 and {HADAMARD_MAX}"
                    ));
                }
                if !o.hadamard && size != HADAMARD_BLOCK {
                    return bad(format!(
                        "{pass}: hadamardSize without a Hadamard transform; set hadamard: true"
                    ));
                }
                if o.clips() && o.rounding != Rounding::Nearest {
                    return bad(format!(
                        "{pass}: {} rounds to nearest (QuEST's clipping is its point); for stochastic rounding take mxfp4 or mxfp4-tseng",
                        f.name()
                    ));
                }
                if matches!(f, OperandFormat::Format(f) if f.scaling == Scaling::MsEden) {
                    if o.rounding != Rounding::Nearest {
                        return bad(format!(
                            "{pass}: {} rounds its values to nearest and its scales stochastically; drop \"rounding\"",
                            f.name()
                        ));
                    }
                    if !o.hadamard || size != HADAMARD_MAX {
                        return bad(format!(
                            "{pass}: {} corrects its scales over the Hadamard transform's group, as Quartet II does; give it hadamard: true and hadamardSize: {HADAMARD_MAX}",
                            f.name()
                        ));
                    }
                }
            }
        }
        for o in [
            products.forward[0],
            products.dgrad[0],
            products.wgrad[0],
            products.wgrad[1],
        ] {
            if o.blocks == BlockShape::Square {
                return bad("2-D blocks are for weights (forward.w, dgrad.w)".into());
            }
        }
        Ok(Recipe(spec))
    }

    /// The named recipe `name` (`RECIPE_NAMES`).
    pub fn named(name: &str) -> Result<Recipe> {
        let spec = |weights, boundaries, ops: [Operand; 6], wide| RecipeSpec {
            loss_scaling: None,
            attention: AttentionOperands::F32,
            name: name.to_string(),
            version: RECIPE_VERSION,
            weights,
            boundaries,
            forward: Forward {
                x: ops[0],
                w: ops[1],
            },
            dgrad: DataGrad {
                dy: ops[2],
                w: ops[3],
            },
            wgrad: WeightGrad {
                dy: ops[4],
                x: ops[5],
            },
            wide,
        };
        let all = |o: Operand| [o; 6];
        let f32 = all(Operand::default());
        let head = Wide {
            head: true,
            ..Wide::default()
        };
        let plain = |weights, boundaries, wide| spec(weights, boundaries, f32, wide);
        use Boundaries::{F32, Q115};
        let s = match name {
            "fp32" => plain(WeightCopy::F32, F32, Wide::default()),
            "f16" => plain(WeightCopy::F16, F32, Wide::default()),
            "sf16" => plain(WeightCopy::F32, Q115, Wide::default()),
            "sf16-wide-head" => plain(WeightCopy::F32, Q115, head),
            // DeepSeek-V3's: 1×128 blocks along K, the weights' 128×128
            "fp8" => {
                let b = Operand::format("e4m3-blockwise");
                let ops = [b, b.square(), b, b.square(), b, b];
                spec(WeightCopy::F32, F32, ops, head)
            }
            "bf16" => spec(
                WeightCopy::F32,
                F32,
                all(Operand::format("bf16")),
                Wide::default(),
            ),
            "amp-f16" => RecipeSpec {
                loss_scaling: Some(LossScaling::default()),
                ..spec(
                    WeightCopy::F32,
                    F32,
                    all(Operand::format("f16")),
                    Wide::default(),
                )
            },
            "fp8-hybrid" => {
                let (e4, e5) = (
                    Operand::format("e4m3-tensor"),
                    Operand::format("e5m2-tensor"),
                );
                spec(WeightCopy::F32, F32, [e4, e4, e5, e4, e5, e4], head)
            }
            "mxfp8" => spec(
                WeightCopy::F32,
                F32,
                all(Operand::format("mxfp8-e4m3-rceil")),
                head,
            ),
            "mxfp4" => spec(
                WeightCopy::F32,
                F32,
                all(Operand::format("mxfp4")),
                Wide::default(),
            ),
            // NVIDIA's recipe, and Four Over Six's (mit-han-lab/fouroversix's
            // training configs: every operand 4/6, by the squared error)
            "nvfp4" | "nvfp4-4over6" => {
                let q = Operand::format(name);
                let ops = [
                    q,
                    q.square(),
                    q.stochastic(),
                    q.square(),
                    q.stochastic().hadamard(),
                    q.hadamard(),
                ];
                let wide = Wide {
                    first: 0,
                    last: 1,
                    head: true,
                };
                spec(WeightCopy::F32, F32, ops, wide)
            }
            // TorchAO's float8 ROWWISE: E4M3 everywhere, a power-of-two
            // scale per row along each product's K; ROWWISE_WITH_GW_HP: dX's
            // W per tensor, dW from the f32 operands
            "fp8-rowwise" => spec(WeightCopy::F32, F32, all(Operand::format("e4m3-row")), head),
            "fp8-rowwise-gw-hp" => {
                let (row, tensor) = (Operand::format("e4m3-row"), Operand::format("e4m3-tensor"));
                let f32 = Operand::default();
                spec(
                    WeightCopy::F32,
                    F32,
                    [row, row, row, tensor, f32, f32],
                    head,
                )
            }
            // Quartet (IST-DASLab/Quartet, arXiv 2505.14669, its
            // main_setup.sh): the forward's X and W through the plain 32-point
            // Hadamard transform and QuEST's MXFP4 (the clipped values pass no
            // gradient); the backward's four operands through 32-point
            // transforms re-signed every step and Tseng's MXFP4, rounded
            // stochastically; the head unquantized, as its lm_head
            "quartet" => {
                let forward = Operand {
                    hadamard_size: 32,
                    hadamard_signs: HadamardSigns::None,
                    ..Operand::format("mxfp4-quest").hadamard()
                };
                let backward = Operand {
                    hadamard_size: 32,
                    hadamard_signs: HadamardSigns::PerStep,
                    ..Operand::format("mxfp4-tseng").stochastic().hadamard()
                };
                let ops = [forward, forward, backward, backward, backward, backward];
                let wide = Wide {
                    head: true,
                    ..Wide::default()
                };
                spec(WeightCopy::F32, F32, ops, wide)
            }
            // Quartet II (IST-DASLab/Quartet-II, arXiv 2601.22813): the
            // forward NVFP4 with Four Over Six (its kernels' default), the
            // backward's four operands rotated by 128-point Hadamard
            // transforms re-signed every step and rounded by MS-EDEN
            "quartet-ii" => {
                let forward = Operand::format("nvfp4-4over6");
                let backward = Operand {
                    hadamard_size: HADAMARD_MAX as u32,
                    hadamard_signs: HadamardSigns::PerStep,
                    ..Operand::format("nvfp4-ms-eden").hadamard()
                };
                let ops = [forward, forward, backward, backward, backward, backward];
                let wide = Wide {
                    head: true,
                    ..Wide::default()
                };
                spec(WeightCopy::F32, F32, ops, wide)
            }
            "nvfp4-naive" => spec(
                WeightCopy::F32,
                F32,
                all(Operand::format("nvfp4")),
                Wide::default(),
            ),
            _ => {
                return Err(Error::Unsupported(format!(
                    "unknown precision {name:?}: use {}, or a recipe file",
                    RECIPE_NAMES.join(", ")
                )));
            }
        };
        Recipe::new(s)
    }

    /// Every named recipe.
    pub fn all_named() -> Vec<Recipe> {
        RECIPE_NAMES
            .iter()
            .map(|n| Recipe::named(n).expect("a named recipe"))
            .collect()
    }

    pub fn fp32() -> Recipe {
        Recipe::named("fp32").expect("fp32")
    }

    pub fn f16() -> Recipe {
        Recipe::named("f16").expect("f16")
    }

    pub fn sf16() -> Recipe {
        Recipe::named("sf16").expect("sf16")
    }

    pub fn sf16_wide_head() -> Recipe {
        Recipe::named("sf16-wide-head").expect("sf16-wide-head")
    }

    pub fn fp8() -> Recipe {
        Recipe::named("fp8").expect("fp8")
    }

    /// A recipe from JSON: a named recipe's name (a JSON string) or a
    /// recipe's parts (an object).
    pub fn from_json(text: &str) -> Result<Recipe> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| Error::Unsupported(format!("recipe: not JSON: {e}")))?;
        // its errors say "recipe" already
        Recipe::deserialize(value).map_err(|e| Error::Unsupported(e.to_string()))
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    pub fn spec(&self) -> &RecipeSpec {
        &self.0
    }

    /// Whether this is the named recipe of its name, unchanged.
    pub fn is_named(&self) -> bool {
        Recipe::named(&self.0.name).is_ok_and(|r| r.0 == self.0)
    }

    /// The numeric mode its kernels are built in.
    pub fn numerics(&self) -> Numerics {
        match self.0.boundaries {
            Boundaries::F32 => Numerics::Exact,
            Boundaries::Q115 => Numerics::Sf16,
        }
    }

    /// Whether the products read the f16 mirror.
    pub fn f16_weights(&self) -> bool {
        self.0.weights == WeightCopy::F16
    }

    /// Whether the layers' weights are quantized once per optimizer step
    /// into a copy both products read (`Products::shares_quantized_weights`).
    pub fn quantized_weight_copy(&self) -> bool {
        self.products().shares_quantized_weights()
    }

    /// Which layers and whether the head stay wide.
    pub fn wide(&self) -> Wide {
        self.0.wide
    }

    /// Its dynamic loss scaling, if it scales.
    pub fn loss_scaling(&self) -> Option<LossScaling> {
        self.0.loss_scaling
    }

    /// This recipe with `scaling` instead of its own (still named only
    /// if that is its named one's).
    pub fn with_loss_scaling(&self, scaling: Option<LossScaling>) -> Result<Recipe> {
        Recipe::new(RecipeSpec {
            loss_scaling: scaling,
            ..self.0.clone()
        })
    }

    /// What each product's operands go through.
    pub fn products(&self) -> Products {
        self.0.products()
    }

    /// Whether boundaries round (sf16): the run then reports the boundary
    /// counters (`Clamped`).
    pub fn counts(&self) -> bool {
        self.numerics() != Numerics::Exact
    }

    /// Refuses a model this recipe cannot run, with the reason: a Hadamard
    /// transform along a K that is not a multiple of 16.
    pub fn check(&self, config: &Config, shape: BatchShape) -> Result<()> {
        let p = self.products();
        let (d, f, att) = (
            config.d_model,
            config.ffn,
            config.n_heads * config.head_dim(),
        );
        let ks: [(&str, &[u32]); 3] = [
            ("forward", &[d, att, f]),
            ("dgrad", &[config.qkv_width(), d, 2 * f]),
            ("wgrad", &[shape.rows()]),
        ];
        for ((pass, [a, _]), (_, ks)) in p.passes().into_iter().zip(ks) {
            let whole = |k: &&u32| a.hadamard_block(**k as usize).is_some();
            if let Some(k) = ks.iter().find(|k| a.hadamard && !whole(k)) {
                let h = HADAMARD_BLOCK;
                return Err(Error::Unsupported(format!(
                    "recipe {:?}: {pass}'s Hadamard transform runs along K in blocks of {h} or more, and K = {k} is not a multiple of {h}",
                    self.name()
                )));
            }
        }
        Ok(())
    }

    /// The kernels a model in this recipe runs, attention for `head_dims`;
    /// `seed` seeds its stochastic rounding and Hadamard signs.
    pub async fn kernels(&self, gpu: &Gpu, head_dims: &[u32], seed: u32) -> Result<Kernels> {
        let gpu = gpu.with_numerics(self.numerics());
        Kernels::with_products(&gpu, self.kernel_products(), head_dims, seed).await
    }

    /// What the kernels are built to read: the linear products' operands,
    /// the layers kept wide, attention's operands.
    pub fn kernel_products(&self) -> (Products, Wide, AttentionOperands) {
        (self.products(), self.wide(), self.0.attention)
    }
}

impl RecipeSpec {
    fn products(&self) -> Products {
        Products {
            forward: [self.forward.x, self.forward.w],
            dgrad: [self.dgrad.dy, self.dgrad.w],
            wgrad: [self.wgrad.dy, self.wgrad.x],
        }
    }
}

impl Serialize for Recipe {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.is_named() {
            true => s.serialize_str(&self.0.name),
            false => self.0.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Recipe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut value = serde_json::Value::deserialize(d)?;
        rewrite_e4m3_tiles(&mut value);
        let recipe = match value {
            serde_json::Value::String(name) => Recipe::named(&name),
            v => serde_json::from_value::<RecipeSpec>(v)
                .map_err(|e| Error::Unsupported(format!("recipe: {e}")))
                .and_then(Recipe::new),
        };
        recipe.map_err(D::Error::custom)
    }
}

/// Rewrites a recipe file's `e4m3-tiles` operands (before 2026-11-28: the
/// fp8 recipe's own quantizer) as what they were: `e4m3-blockwise`, 2-D
/// for the weights.
fn rewrite_e4m3_tiles(recipe: &mut serde_json::Value) {
    for (product, operand) in [
        ("forward", "x"),
        ("forward", "w"),
        ("dgrad", "dy"),
        ("dgrad", "w"),
        ("wgrad", "dy"),
        ("wgrad", "x"),
    ] {
        let Some(o) = recipe.pointer_mut(&format!("/{product}/{operand}")) else {
            continue;
        };
        if o.get("format").and_then(|f| f.as_str()) == Some("e4m3-tiles") {
            o["format"] = "e4m3-blockwise".into();
            if operand == "w" {
                o["blocks"] = "2d".into();
            }
        }
    }
}

#[cfg(test)]
mod tests;
