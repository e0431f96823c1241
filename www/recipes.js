// A run's precision recipe as Rust writes it (model::recipe): a named
// recipe's name, or a custom recipe's parts. The recipe book (web::recipes,
// asked once when the page opens: www/recipe-editor.js) holds every named
// recipe's parts, the values each part takes and what an optional part
// starts from.

let book = null;

/// `{recipes: {name: parts}, parts: {format, blocks, rounding, weights,
/// boundaries, attention}, defaults: {lossScaling, attention}}`.
export const setBook = (b) => { book = b; };
export const recipeBook = () => book;

/// "nvfp4", or a custom recipe's "mine (custom)".
export const recipeLabel = (recipe) => (typeof recipe === 'string' ? recipe : `${recipe.name} (custom)`);

/// A recipe's parts, where the book has come (a named one's) or it has them.
export const partsOf = (recipe) => (typeof recipe === 'string' ? book?.recipes[recipe] ?? null : recipe);

/// The six operands of a recipe's products: [pass, operand].
export const OPERANDS = [['forward', 'x'], ['forward', 'w'], ['dgrad', 'dy'], ['dgrad', 'w'], ['wgrad', 'dy'], ['wgrad', 'x']];

/// The counters a run of `recipe` makes: Q1.15 boundaries' clamps, and per
/// operand of `OPERANDS` whether it goes through a quantizer (a format, or
/// a Hadamard transform).
export function countsOf(recipe) {
  const p = partsOf(recipe);
  const operand = ([pass, op]) => p?.[pass][op];
  return {
    boundaries: p?.boundaries === 'q1.15',
    operands: OPERANDS.map((o) => Boolean(operand(o) && (operand(o).hadamard || operand(o).format !== 'f32'))),
  };
}
