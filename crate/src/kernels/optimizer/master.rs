//! The master weights as the optimizer's kernels (12_optimizer*.wgsl,
//! 15_muon.wgsl) bind them: each variant declares its `weights` binding and
//! the two functions the kernels read and write it with.

/// The declarations of a module variant whose master weights, bound at
/// `binding`, are f32 words, or bf16 pairs (bf16-sr: element 2k in word k's
/// low half; `MASTER_SR` rounds each new weight to bf16 stochastically).
pub(crate) fn master_prelude(binding: u32, bf16: bool) -> String {
    let declarations = match bf16 {
        false => F32_MASTER,
        true => BF16_MASTER,
    };
    format!("const MASTER_SR: bool = {bf16};\n@group(0) @binding({binding}){declarations}")
}

const F32_MASTER: &str = "
var<storage, read_write> weights: array<f32>;
fn load_weight(i: u32) -> f32 { return weights[i]; }
fn store_weight(i: u32, w_old: f32, w: f32) { weights[i] = w; }
";

// Two invocations may write the two halves of one word (adamw_update,
// muon_apply: an element each), so each XORs in its own half's change:
// the other half's bits are left as they are, whatever order the two run in.
// `w` is a bf16 value (bf16_sr's), `w_old` the element as loaded.
const BF16_MASTER: &str = "
var<storage, read_write> weights: array<atomic<u32>>;
fn load_weight(i: u32) -> f32 { return bf16_at(atomicLoad(&weights[i >> 1u]), i); }
fn store_weight(i: u32, w_old: f32, w: f32) {
    let change = (bitcast<u32>(w_old) ^ bitcast<u32>(w)) >> 16u;
    if (change != 0u) { atomicXor(&weights[i >> 1u], change << (16u * (i & 1u))); }
}
";

/// Bytes `n` master weights take bound: f32, or bf16 pairs (whole words).
pub(crate) fn master_bytes(n: u64, bf16: bool) -> u64 {
    match bf16 {
        false => 4 * n,
        true => crate::gpu::f16_bytes(n),
    }
}

/// The element of its buffer a master weights binding starts at.
pub(crate) fn master_element(weights: &crate::gpu::BufferRange, bf16: bool) -> u32 {
    (weights.offset / if bf16 { 2 } else { 4 }) as u32
}
