//! Precision recipes for the page's editor (www/recipe-editor.js): the
//! named recipes in full and what each part of a recipe takes, and the
//! check every recipe the page makes goes through before it is used.

use serde::Serialize;
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

use super::{de_message, to_js};
use crate::model::Recipe;
use crate::model::recipe::{Boundaries, WeightCopy};
use crate::ops::loss_scale::LossScaling;
use crate::ops::products::{AttentionOperands, BlockShape, HadamardSigns, OperandFormat, Rounding};

/// `serde_json` of `T`'s values, in the order the editor offers them.
fn names<T: Serialize>(values: &[T]) -> Vec<Value> {
    values
        .iter()
        .map(|v| serde_json::to_value(v).unwrap_or(Value::Null))
        .collect()
}

/// `{recipes: {name: parts}, parts: {format, blocks, rounding,
/// hadamardSigns, hadamardSize, weights, boundaries, attention}, defaults:
/// {lossScaling, attention}}`: every named recipe's parts (`RecipeSpec`),
/// the values each part takes (an operand's format, block shape, rounding,
/// Hadamard signs and block; the weights the products
/// read; the forward's boundaries; attention's operands), and what a part
/// starts from where a recipe leaves it out.
#[wasm_bindgen(js_name = recipeBook)]
pub fn recipe_book() -> Result<JsValue, JsError> {
    let recipes: serde_json::Map<String, Value> = Recipe::all_named()
        .iter()
        .map(|r| {
            let spec = serde_json::to_value(r.spec()).unwrap_or(Value::Null);
            (r.name().to_string(), spec)
        })
        .collect();
    to_js(&json!({
        "recipes": recipes,
        "parts": {
            "format": OperandFormat::names(),
            "blocks": names(&[BlockShape::Line, BlockShape::Square]),
            "rounding": names(&[Rounding::Nearest, Rounding::Stochastic]),
            "hadamardSigns": names(&[
                HadamardSigns::Fixed,
                HadamardSigns::PerStep,
                HadamardSigns::None,
            ]),
            "hadamardSize": [16, 32, 64, 128],
            "weights": names(&[WeightCopy::F32, WeightCopy::F16]),
            "boundaries": names(&[Boundaries::F32, Boundaries::Q115]),
            "attention": names(&[AttentionOperands::F32, AttentionOperands::F16]),
        },
        "defaults": {
            "lossScaling": LossScaling::default(),
            "attention": AttentionOperands::default(),
        },
    }))
}

/// `recipe` (a named recipe's name, or a recipe's parts) as a run would
/// take it: a named recipe by its name, any other with every part
/// written; throws the reason a recipe is refused (`Recipe::new`).
#[wasm_bindgen(js_name = checkRecipe)]
pub fn check_recipe(recipe: JsValue) -> Result<JsValue, JsError> {
    to_js(&recipe_from_js(recipe)?)
}

/// A recipe from JavaScript, refused with the reason.
pub(super) fn recipe_from_js(recipe: JsValue) -> Result<Recipe, JsError> {
    serde_wasm_bindgen::from_value(recipe).map_err(|e| JsError::new(&de_message(e)))
}
