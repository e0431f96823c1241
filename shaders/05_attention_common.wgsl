// What 05_attention.wgsl and 10_backward_attention.wgsl share, composed
// ahead of each (the module's prelude): block sizes, the params (one struct
// for every attention kernel, as kernels/attention.rs writes it), the q, k,
// v views and their indexing. Legend in 05_attention.wgsl.

const BQ: u32 = 16u;      // query rows per block
const BK: u32 = 16u;      // keys per block (= BQ); WG = BQ·BK: invocation (r, j) = (lidx / BK, lidx % BK)
const MAX_DH: u32 = 128u;
const SLOTS: u32 = MAX_DH / BK;  // head-dim columns per invocation: d = j + BK·i
const NEG_BIG: f32 = -1e30;      // masked score and the max before any key: finite, exp gives 0

struct Params {
    batch: u32,       // B
    seq_len: u32,     // T (decode: L, the cache length including the new token)
    heads: u32,       // H
    kv_heads: u32,    // Hkv
    head_dim: u32,    // Dh
    scale: f32,       // 1 / sqrt(Dh)
    q_stride: u32,
    q_col: u32,
    k_stride: u32,
    k_col: u32,
    v_stride: u32,
    v_col: u32,
    dq_stride: u32,   // backward only
    dq_col: u32,
    dkv_stride: u32,
    dk_col: u32,
    dv_col: u32,
    cache_len: u32,   // decode: Lmax, rows per sequence of the cache
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;  // [B·T, q_stride]
@group(0) @binding(2) var<storage, read> k: array<f32>;  // [B·T, k_stride] (decode: [B·Lmax, k_stride])
@group(0) @binding(3) var<storage, read> v: array<f32>;  // [B·T, v_stride] (decode: [B·Lmax, v_stride])

fn q_at(row: u32, h: u32) -> u32 { return row * params.q_stride + params.q_col + h * params.head_dim; }
fn k_at(row: u32, kvh: u32) -> u32 { return row * params.k_stride + params.k_col + kvh * params.head_dim; }
fn v_at(row: u32, kvh: u32) -> u32 { return row * params.v_stride + params.v_col + kvh * params.head_dim; }
