// What 05_attention.wgsl and 05_attention_backward.wgsl share, composed
// ahead of each (the module's prelude): the params (one struct for every
// attention kernel, as kernels/attention.rs writes it), the q, k, v views,
// a register row, the streamed tile and the query slots. Legend in
// 05_attention.wgsl.
//
// A module is built per head dim: kernels/attention.rs declares ahead of
// this file DH (the head dim, a multiple of 16), COLS (the head-dim
// columns one invocation keeps of a row: a multiple of 16 dividing DH, at
// most 64 in the forward, 32 in the backward), TILE (rows of each
// streamed K|V or Q|dO tile, sized to the adapter's workgroup memory) and
// ATTN_F16 (the recipe's attention operands: every factor of a product —
// q, k, v, dO, p, dS — rounded to f16 as it is read, `attn_operand`).
// LANES = DH / COLS invocations share a row.

const DH4: u32 = DH / 4u;
const LANES: u32 = DH / COLS;
const COLS4: u32 = COLS / 4u;
const CHUNKS: u32 = COLS / 16u;   // a Row's mat4x4 chunks in use
const ROW_WG: u32 = 64u;          // invocations of the row kernels
const ROWS: u32 = ROW_WG / LANES; // rows (queries or keys) per workgroup; invocations past ROWS·LANES idle
const NEG_BIG: f32 = -1e30;       // the max before any key: finite, exp gives 0
const_assert LANES * COLS == DH && CHUNKS >= 1u && CHUNKS <= 4u;
const_assert TILE <= ROW_WG;      // a tile's per-row values are staged one per invocation

struct Params {
    batch: u32,       // B
    seq_len: u32,     // T (decode: L, the cache length including the new token)
    heads: u32,       // H
    kv_heads: u32,    // Hkv
    head_dim: u32,    // Dh: the shaders use DH; kept for the layout
    scale: f32,       // 1 / sqrt(Dh)
    q_stride: u32,    // strides and columns in floats, multiples of 4
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
    group_heads: u32, // query-major kernels: heads of one kv group per workgroup (Gw)
    block_rows: u32,  // query-major kernels: queries per head per workgroup (ROWS / Gw)
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;  // [B·T, q_stride]
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;  // [B·T, k_stride] (decode: [B·Lmax, k_stride])
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;  // [B·T, v_stride] (decode: [B·Lmax, v_stride])

// vec4 index of head h's first column in row `row`
fn q_at(row: u32, h: u32) -> u32 { return (row * params.q_stride + params.q_col) / 4u + h * DH4; }
fn k_at(row: u32, kvh: u32) -> u32 { return (row * params.k_stride + params.k_col) / 4u + kvh * DH4; }
fn v_at(row: u32, kvh: u32) -> u32 { return (row * params.v_stride + params.v_col) / 4u + kvh * DH4; }
// o, dO: [rows, H·Dh]
fn o_at(row: u32, h: u32) -> u32 { return (row * params.heads + h) * DH4; }

// COLS columns of a row in registers, as named 4×4 chunks (indexed arrays
// of registers are spilled to memory by some GPU compilers); chunks past
// CHUNKS stay zero and are never touched.
struct Row {
    c0: mat4x4<f32>,
    c1: mat4x4<f32>,
    c2: mat4x4<f32>,
    c3: mat4x4<f32>,
}

// A factor of one of attention's products as the recipe has it: f16
// (nearest even, on the bits: 00_formats.wgsl's round_f16) where ATTN_F16,
// else as is.
fn attn_operand(x: f32) -> f32 {
    if (ATTN_F16) { return round_f16(x); }
    return x;
}

fn attn_operand4(x: vec4<f32>) -> vec4<f32> {
    if (ATTN_F16) {
        return vec4<f32>(attn_operand(x.x), attn_operand(x.y), attn_operand(x.z), attn_operand(x.w));
    }
    return x;
}

fn attn_chunk(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>) -> mat4x4<f32> {
    return mat4x4<f32>(attn_operand4(a), attn_operand4(b), attn_operand4(c), attn_operand4(d));
}

fn dot16(a: mat4x4<f32>, b: mat4x4<f32>) -> f32 {
    return dot(a[0], b[0]) + dot(a[1], b[1]) + dot(a[2], b[2]) + dot(a[3], b[3]);
}

fn row_scaled(x: Row, a: f32) -> Row {
    var r = x;
    r.c0 = a * x.c0;
    if (CHUNKS > 1u) { r.c1 = a * x.c1; }
    if (CHUNKS > 2u) { r.c2 = a * x.c2; }
    if (CHUNKS > 3u) { r.c3 = a * x.c3; }
    return r;
}

// a·x + y
fn row_axpy(a: f32, x: Row, y: Row) -> Row {
    var r = y;
    r.c0 = a * x.c0 + y.c0;
    if (CHUNKS > 1u) { r.c1 = a * x.c1 + y.c1; }
    if (CHUNKS > 2u) { r.c2 = a * x.c2 + y.c2; }
    if (CHUNKS > 3u) { r.c3 = a * x.c3 + y.c3; }
    return r;
}

fn row_dot(x: Row, y: Row) -> f32 {
    var s = dot16(x.c0, y.c0);
    if (CHUNKS > 1u) { s += dot16(x.c1, y.c1); }
    if (CHUNKS > 2u) { s += dot16(x.c2, y.c2); }
    if (CHUNKS > 3u) { s += dot16(x.c3, y.c3); }
    return s;
}

// The streamed tile: K|V rows (forward, dQ pass) or Q|dO rows (dK/dV
// pass), and each lane's part of the score of every row of it.
var<workgroup> tile_a: array<vec4<f32>, TILE * DH4>;  // [TILE, Dh]
var<workgroup> tile_b: array<vec4<f32>, TILE * DH4>;
var<workgroup> score_part: array<f32, TILE * ROW_WG>; // [row, invocation]

// COLS columns of a row of q, k, v or the tile from vec4 index `at` (one
// reader for them all: WGSL passes no storage pointers portably). q, k
// and v are read as the products' operands; the tile holds them so.
const FROM_Q: u32 = 0u;
const FROM_K: u32 = 1u;
const FROM_V: u32 = 2u;
const FROM_TILE_A: u32 = 3u;
const FROM_TILE_B: u32 = 4u;

fn chunk_of(source: u32, at: u32) -> mat4x4<f32> {
    if (source == FROM_TILE_A) { return mat4x4<f32>(tile_a[at], tile_a[at + 1u], tile_a[at + 2u], tile_a[at + 3u]); }
    if (source == FROM_TILE_B) { return mat4x4<f32>(tile_b[at], tile_b[at + 1u], tile_b[at + 2u], tile_b[at + 3u]); }
    if (source == FROM_Q) { return attn_chunk(q[at], q[at + 1u], q[at + 2u], q[at + 3u]); }
    if (source == FROM_K) { return attn_chunk(k[at], k[at + 1u], k[at + 2u], k[at + 3u]); }
    return attn_chunk(v[at], v[at + 1u], v[at + 2u], v[at + 3u]);
}

fn row_of(source: u32, at: u32) -> Row {
    var r: Row;
    r.c0 = chunk_of(source, at);
    if (CHUNKS > 1u) { r.c1 = chunk_of(source, at + 4u); }
    if (CHUNKS > 2u) { r.c2 = chunk_of(source, at + 8u); }
    if (CHUNKS > 3u) { r.c3 = chunk_of(source, at + 12u); }
    return r;
}

// This lane's COLS columns of tile row j.
fn tile_row(from_a: bool, j: u32, lane: u32) -> Row {
    return row_of(select(FROM_TILE_B, FROM_TILE_A, from_a), j * DH4 + lane * COLS4);
}

// K rows key0.. of sequence b into tile_a and V rows into tile_b (with_v),
// zero past T.
fn stage_kv(b: u32, key0: u32, kvh: u32, with_v: bool, lidx: u32) {
    for (var e = lidx; e < TILE * DH4; e += ROW_WG) {
        let key = key0 + e / DH4;
        let c = e % DH4;
        var x = vec4<f32>(0.0);
        var y = vec4<f32>(0.0);
        if (key < params.seq_len) {
            let row = b * params.seq_len + key;
            x = attn_operand4(k[k_at(row, kvh) + c]);
            if (with_v) { y = attn_operand4(v[v_at(row, kvh) + c]); }
        }
        tile_a[e] = x;
        if (with_v) { tile_b[e] = y; }
    }
}

// Row j's score: its lanes' parts, in order (after a barrier when
// LANES > 1).
fn score_sum(j: u32, lidx: u32) -> f32 {
    let first = j * ROW_WG + lidx - lidx % LANES;
    var s = score_part[first];
    for (var l = 1u; l < LANES; l++) { s += score_part[first + l]; }
    return s;
}

// Where a query-major workgroup's invocation sits: workgroups go over
// (query block, head chunk, sequence); slot lidx / LANES is query qi of
// head h, lane lidx % LANES owns columns lane·COLS.. of it. The Gw heads of
// a chunk share one kv head, so they share each staged K|V tile.
struct QuerySlot {
    b: u32,
    h: u32,
    kvh: u32,
    t: u32,      // this slot's query
    lane: u32,
    live: bool,  // a real (head, query): the others stage tiles and stay idle
}

fn query_slot(g: u32, lidx: u32) -> QuerySlot {
    let bq = params.block_rows;
    let blocks = query_blocks();
    let chunks = params.heads / params.group_heads;  // head chunks over all kv heads
    var s: QuerySlot;
    let chunk = (g / blocks) % chunks;
    s.b = g / (blocks * chunks);
    let slot = lidx / LANES;
    s.lane = lidx % LANES;
    let hg = slot / bq;
    s.h = chunk * params.group_heads + min(hg, params.group_heads - 1u);
    s.kvh = s.h / (params.heads / params.kv_heads);
    s.t = block_first_query(g) + slot % bq;
    s.live = hg < params.group_heads && s.t < params.seq_len;
    return s;
}

// The first query of workgroup g's block, apart from `QuerySlot`: uniform
// analysis (Tint's) sees a struct as one value, and the key loops, which
// hold barriers, are bounded by it.
fn block_first_query(g: u32) -> u32 {
    return (g % query_blocks()) * params.block_rows;
}

fn query_blocks() -> u32 { return (params.seq_len + params.block_rows - 1u) / params.block_rows; }

// Workgroups of a query-major dispatch: past these, a workgroup leaves.
fn query_workgroups() -> u32 {
    return query_blocks() * (params.heads / params.group_heads) * params.batch;
}

// Keys of the tile at key0 that query t sees (causal): 0 when all are later.
fn visible_keys(t: u32, key0: u32, live: bool) -> u32 {
    if (!live || t < key0) { return 0u; }
    return min(TILE, t + 1u - key0);
}
