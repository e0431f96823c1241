//! Recipes' refusals, names and meanings.

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
    let text = include_str!("../../../../tests/fixtures/recipes/fp4-wide-ends.v1.json");
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
        (
            r#"{"name": "x", "wgrad": {"dy": {"format": "nvfp4", "hadamard": true, "hadamardSize": 48}, "x": {"format": "nvfp4", "hadamard": true, "hadamardSize": 48}}}"#,
            "hadamardSize 48 is not one of 16, 32, 64 and 128",
        ),
        (
            r#"{"name": "x", "wgrad": {"dy": {"format": "nvfp4", "hadamard": true, "hadamardSize": 128}, "x": {"format": "nvfp4", "hadamard": true}}}"#,
            "Hadamard blocks differ (128 and 16)",
        ),
        (
            r#"{"name": "x", "wgrad": {"dy": {"format": "nvfp4", "hadamardSize": 32}, "x": {"format": "nvfp4", "hadamardSize": 32}}}"#,
            "hadamardSize without a Hadamard transform",
        ),
        (
            r#"{"name": "x", "dgrad": {"dy": {"format": "nvfp4-ms-eden", "rounding": "stochastic", "hadamard": true, "hadamardSize": 128}, "w": {"format": "nvfp4", "hadamard": true, "hadamardSize": 128}}}"#,
            "nvfp4-ms-eden rounds its values to nearest and its scales stochastically",
        ),
        (
            r#"{"name": "x", "dgrad": {"dy": {"format": "nvfp4-ms-eden"}}}"#,
            "give it hadamard: true and hadamardSize: 128",
        ),
        (
            r#"{"name": "x", "forward": {"x": {"format": "mxfp4-quest", "rounding": "stochastic"}, "w": {"format": "mxfp4-quest"}}}"#,
            "mxfp4-quest rounds to nearest (QuEST's clipping is its point)",
        ),
        (
            r#"{"name": "x", "forward": {"x": {"format": "mxfp4-quest", "hadamardSigns": "none"}, "w": {"format": "mxfp4-quest", "hadamardSigns": "none"}}}"#,
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

#[test]
fn quartet_ii_rotates_its_backward_in_128s_where_k_allows() {
    let r = Recipe::named("quartet-ii").unwrap();
    let p = r.products();
    assert_eq!(p.dgrad[0].hadamard_size, 128);
    assert_eq!(
        p.dgrad[0].hadamard_block(1376),
        Some(32),
        "small's 2·ffn = 43·32"
    );
    assert_eq!(p.dgrad[0].hadamard_block(512), Some(128));
    assert_eq!(p.dgrad[0].hadamard_block(64), Some(64));
    assert_eq!(
        p.forward[0].hadamard_block(176),
        Some(16),
        "tiny's ffn = 11·16"
    );
    assert!(p.dgrad[0].hadamard_block(100).is_none());
    let c = Config::preset("tiny").unwrap();
    assert!(r.check(&c, BatchShape { batch: 4, seq: 32 }).is_ok());
    // a recipe file without sizes (before them) reads as blocks of 16
    let o = r#"{"format": "nvfp4", "hadamard": true}"#;
    let file = format!(r#"{{"name": "q", "wgrad": {{"dy": {o}, "x": {o}}}}}"#);
    let old = Recipe::from_json(&file).unwrap();
    assert_eq!(old.products().wgrad[1].hadamard_size, 16);
    let json = serde_json::to_string(&old).unwrap();
    assert!(json.contains(r#""hadamardSize":16"#), "{json}");
    assert_eq!(Recipe::from_json(&json).unwrap(), old);
}

#[test]
fn quartet_is_quest_forward_and_tseng_backward() {
    use crate::ops::products::{HadamardSigns, Rounding};
    let r = Recipe::named("quartet").unwrap();
    let p = r.products();
    for o in p.forward {
        assert_eq!(o.format.name(), "mxfp4-quest");
        assert!(o.clips() && o.hadamard && o.hadamard_size == 32);
        assert_eq!(o.hadamard_signs, HadamardSigns::None, "QuEST's plain H");
    }
    for o in [p.dgrad, p.wgrad].concat() {
        assert_eq!(o.format.name(), "mxfp4-tseng");
        assert_eq!(o.rounding, Rounding::Stochastic);
        assert_eq!(o.hadamard_signs, HadamardSigns::PerStep);
        assert!(!o.clips());
    }
    assert!(r.spec().wide.head, "its lm_head is unquantized");
    // tiny's ffn of 176 (11·16): the down projection's K in 16s, QuEST's
    // last block of each row 16 values
    assert_eq!(p.forward[0].hadamard_block(176), Some(16));
    let c = Config::preset("tiny").unwrap();
    assert!(r.check(&c, BatchShape { batch: 4, seq: 32 }).is_ok());
}
