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
use crate::ops::formats::HADAMARD_BLOCK;
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
pub const RECIPE_NAMES: [&str; 15] = [
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
            let h = HADAMARD_BLOCK as u32;
            if let Some(k) = ks.iter().find(|&&k| a.hadamard && k % h != 0) {
                return Err(Error::Unsupported(format!(
                    "recipe {:?}: {pass}'s Hadamard transform runs along K in blocks of {h}, and K = {k} is not a multiple of {h}",
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
mod tests {
    use super::*;

    fn refusal(json: &str) -> String {
        Recipe::from_json(json).unwrap_err().to_string()
    }

    #[test]
    fn a_renamed_format_loads_and_is_written_by_its_name() {
        let old = r#"{"name": "x", "forward": {"x": {"format": "mxfp8-e4m3-ceil"}}}"#;
        let r = Recipe::from_json(old).unwrap();
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            json.contains("\"mxfp8-e4m3-rceil\"") && !json.contains("-ceil"),
            "{json}"
        );
    }

    #[test]
    fn named_recipes_are_written_by_name_and_read_back() {
        for r in Recipe::all_named() {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.name()));
            assert_eq!(Recipe::from_json(&json).unwrap(), r);
        }
    }

    #[test]
    fn a_changed_recipe_is_written_in_full() {
        let mut spec = Recipe::named("nvfp4").unwrap().spec().clone();
        spec.wide.last = 2;
        let r = Recipe::new(spec).unwrap();
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            json.starts_with('{') && json.contains("\"last\":2"),
            "{json}"
        );
        assert_eq!(Recipe::from_json(&json).unwrap(), r);
    }

    /// Attention's operands: read as f32 where a file has none, written
    /// in full, and handed to the kernels.
    #[test]
    fn attention_operands_round_trip() {
        let mut spec = Recipe::named("amp-f16").unwrap().spec().clone();
        let old = r#"{"name": "x", "forward": {"x": {"format": "f16"}}}"#;
        assert_eq!(
            Recipe::from_json(old).unwrap().kernel_products().2,
            AttentionOperands::F32
        );
        spec.attention = AttentionOperands::F16;
        let r = Recipe::new(spec).unwrap();
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            json.contains("\"attention\":\"f16\"") && !r.is_named(),
            "{json}"
        );
        assert_eq!(Recipe::from_json(&json).unwrap(), r);
        assert_eq!(r.kernel_products().2, AttentionOperands::F16);
        let e = refusal(r#"{"name": "x", "attention": "bf16"}"#);
        assert!(e.contains("unknown variant `bf16`"), "{e}");
    }

    #[test]
    fn todays_modes_keep_their_meaning() {
        let fp8 = Recipe::fp8();
        assert!(fp8.quantized_weight_copy() && fp8.wide().head && !fp8.f16_weights());
        assert!(Recipe::f16().f16_weights() && Recipe::f16().products().is_exact());
        assert_eq!(Recipe::sf16().numerics(), Numerics::Sf16);
        assert!(!Recipe::sf16().wide().head && Recipe::sf16_wide_head().wide().head);
        assert!(!Recipe::fp32().counts() && Recipe::sf16().counts() && !fp8.counts());
        // one copy serves both products where W and Wᵀ quantize alike
        let copied: Vec<&str> = RECIPE_NAMES
            .into_iter()
            .filter(|n| Recipe::named(n).unwrap().quantized_weight_copy())
            .collect();
        assert_eq!(
            copied,
            [
                "fp8",
                "bf16",
                "amp-f16",
                "fp8-hybrid",
                "nvfp4",
                "nvfp4-4over6"
            ]
        );
    }

    /// A recipe file of fp8's former `e4m3-tiles` reads as the blockwise
    /// format it was: the named fp8, its weights in 128×128 blocks.
    #[test]
    fn e4m3_tiles_read_as_e4m3_blockwise() {
        let all = ["x", "w", "dy", "w", "dy", "x"]
            .chunks(2)
            .zip(["forward", "dgrad", "wgrad"])
            .map(|(ops, p)| {
                format!(
                    r#""{p}": {{"{}": {{"format": "e4m3-tiles"}}, "{}": {{"format": "e4m3-tiles"}}}}"#,
                    ops[0], ops[1]
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let old = format!(r#"{{"name": "fp8", "wide": {{"head": true}}, {all}}}"#);
        let r = Recipe::from_json(&old).unwrap();
        assert_eq!(r, Recipe::fp8());
        assert!(r.is_named());
    }

    /// A file written by the first version of recipes (the fixture is
    /// never rewritten) still loads, as what it said.
    #[test]
    fn a_version_1_recipe_file_loads() {
        let text = include_str!("../../../tests/fixtures/recipes/fp4-wide-ends.v1.json");
        let r = Recipe::from_json(text).unwrap();
        let p = r.products();
        assert_eq!(p.forward[1].blocks, BlockShape::Square);
        assert_eq!(p.wgrad[0].rounding, Rounding::Stochastic);
        assert!(p.wgrad[0].hadamard && p.wgrad[1].hadamard);
        assert_eq!((r.wide().first, r.wide().last, r.wide().head), (1, 1, true));
        assert!(!r.is_named());
    }

    #[test]
    fn bad_recipes_are_refused_with_the_reason() {
        let cases = [
            (
                r#"{"name": "x", "forward": {"x": {"format": "fp5"}}}"#,
                "unknown format \"fp5\"",
            ),
            (r#""fp7""#, "unknown precision \"fp7\""),
            (
                r#"{"name": "x", "wgrad": {"dy": {"format": "nvfp4", "hadamard": true}, "x": {"format": "nvfp4"}}}"#,
                "one operand only",
            ),
            (
                r#"{"name": "x", "forward": {"w": {"format": "mxfp4", "blocks": "2d"}}}"#,
                "2-D blocks are NVFP4's and e4m3-blockwise's",
            ),
            (
                r#"{"name": "x", "forward": {"x": {"format": "nvfp4", "blocks": "2d"}}}"#,
                "2-D blocks are for weights",
            ),
            (
                r#"{"name": "x", "dgrad": {"dy": {"format": "f32", "rounding": "stochastic"}}}"#,
                "stochastic rounding needs a format",
            ),
            (
                r#"{"name": "x", "weights": "f16", "forward": {"x": {"format": "bf16"}}}"#,
                "f16 weights are a recipe of their own",
            ),
            (r#"{"name": "x", "version": 2}"#, "newer than this build's"),
            (r#"{"name": "x", "speed": "fast"}"#, "unknown field `speed`"),
            (
                r#"{"name": "x", "wgrad": {"dy": {"format": "nvfp4", "hadamard": true, "hadamardSigns": "per-step"}, "x": {"format": "nvfp4", "hadamard": true}}}"#,
                "Hadamard signs differ",
            ),
            (
                r#"{"name": "x", "wgrad": {"dy": {"format": "nvfp4", "hadamardSigns": "per-step"}, "x": {"format": "nvfp4", "hadamardSigns": "per-step"}}}"#,
                "hadamardSigns without a Hadamard transform",
            ),
            // every part refuses a field it does not know (a misspelt `init`)
            (
                r#"{"name": "x", "lossScaling": {"initial": 1e39}}"#,
                "unknown field `initial`, expected one of `init`",
            ),
            (
                r#"{"name": "x", "forward": {"bogus": 5}}"#,
                "unknown field `bogus`",
            ),
            (r#"{"name": "x", "dgrad": {"x": {}}}"#, "unknown field `x`"),
            (
                r#"{"name": "x", "wgrad": {"dy": {"format": "e4m3", "bogus": 5}}}"#,
                "unknown field `bogus`",
            ),
            (
                r#"{"name": "x", "wide": {"bogus": 5}}"#,
                "unknown field `bogus`",
            ),
        ];
        for (json, why) in cases {
            let e = refusal(json);
            assert!(
                e.contains(why) && !e.contains("recipe: recipe"),
                "{json}: {e}"
            );
        }
    }

    #[test]
    fn a_hadamard_transform_needs_k_in_sixteens() {
        let r = Recipe::named("nvfp4").unwrap();
        let c = Config::preset("tiny").unwrap();
        assert!(r.check(&c, BatchShape { batch: 4, seq: 32 }).is_ok());
        let e = r
            .check(&c, BatchShape { batch: 3, seq: 7 })
            .unwrap_err()
            .to_string();
        assert!(e.contains("K = 21 is not a multiple of 16"), "{e}");
    }
}
