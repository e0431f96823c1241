// Matrix products C = A·B over strided views, in 64×64 output tiles.
// Legend: C is [M, N] with rows c_row apart, the shared dimension is K,
// A(i, p) = a[i·a_row + p·a_col], B(p, j) = load_b(p·b_row + j·b_col)
// (load_b comes from the prelude: 03_linear_b32 or 03_linear_b16).
// With HF weights W [out, in] and activations X [rows, in]:
//   forward    Y = X·Wᵀ     M=rows N=out K=in    A=X (in, 1)    B=Wᵀ (1, in)
//   backward  dX += dY·W    M=rows N=in  K=out   A=dY (out, 1)  B=W (in, 1)
//   backward  dW += dYᵀ·X   M=out  N=in  K=rows  A=dYᵀ (1, out) B=X (in, 1)
// Each workgroup of 16×16 invocations computes a tile; invocation (tx, ty)
// owns rows ty + 16r and columns tx + 16s (r, s < 4), so its stores are
// coalesced and its shared-memory reads broadcast or hit distinct banks.

const TILE: u32 = 64u;         // output tile side
const KSTEP: u32 = 16u;        // shared-dimension slice per stage
const PAD: u32 = TILE + 1u;    // shared row stride: +1 spreads columns over banks

struct Params {
    m: u32,
    n: u32,
    k: u32,
    a_row: u32,
    a_col: u32,
    b_row: u32,
    b_col: u32,
    c_row: u32,
    site: u32,   // the forward boundary of this product's output, or SITE_NONE
    b_tile: u32, // fp8: columns of B sharing a scale: 1, or FP8_BLOCK for weights
    n_parts: vec2<u32>,  // fp8: where stacked weights' 2nd and 3rd parts begin along N (n if none)
    k_parts: vec2<u32>,  // ... along K
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;            // A
// @binding(2): B, declared by the prelude
@group(0) @binding(3) var<storage, read> residual: array<f32>;     // [M, N], matmul_add
@group(0) @binding(4) var<storage, read_write> c: array<f32>;      // [M, N]

var<workgroup> tile_a: array<f32, KSTEP * PAD>;  // [KSTEP][TILE]
var<workgroup> tile_b: array<f32, KSTEP * PAD>;  // [KSTEP][TILE]

// fp8 (NUMERICS): GEMM inputs in E4M3, f32 accumulation. Each operand value
// is rounded to E4M3 after division by its tile's power-of-two scale (the
// smallest with amax/scale ≤ 448, as UE8M0 scales), and multiplied back:
// exact in f32. A tile spans FP8_BLOCK values of K, and 1 row of A, or 1
// (activations) or 128 (a weight's 128×128 block) columns of B. Blocks
// start afresh where each of stacked weights begins ([W_q; W_k; W_v],
// [W_gate; W_up]: params.n_parts or k_parts), so no scale spans two
// tensors. The workgroup finds the scales of its rows and columns as it
// enters each K block.
const FP8_BLOCK: u32 = 128u;
var<workgroup> fp8_partial: array<f32, WG>;
var<workgroup> scale_a: array<f32, TILE>;  // this K block's scale per tile row
var<workgroup> scale_b: array<f32, TILE>;  // ... per tile column

// The smallest power of two s with amax / s ≤ 448: amax = m·2^e with
// m in [1, 2) needs s = 2^(e−8) if m ≤ 1.75 (448 = 1.75·2^8), else 2^(e−7).
fn fp8_scale(amax: f32) -> f32 {
    if (amax == 0.0 || !is_finite(amax)) { return 1.0; }
    let bits = bitcast<u32>(amax);
    let e = max(i32((bits >> 23u) & 0xffu) - 127, -126);
    let k = clamp(e - 8 + select(0, 1, (bits & 0x7fffffu) > 0x600000u), -126, 127);
    return bitcast<f32>(u32(k + 127) << 23u);
}

// x through E4M3 at scale s; `count` adds it to the saturated or
// flushed-to-zero totals when it is either.
fn fp8_round(x: f32, s: f32, count: bool) -> f32 {
    let scaled = x * (1.0 / s);
    let q = e4m3(scaled);
    if (count && abs(scaled) > E4M3_MAX) { atomicAdd(&boundary_counts[SITE_FP8_SATURATED], 1u); }
    if (count && q == 0.0 && x != 0.0) { atomicAdd(&boundary_counts[SITE_FP8_FLUSHED], 1u); }
    return q * s;
}

// The fp8 block holding index x of a dimension of length len whose
// stacked parts begin at 0, parts.x and parts.y: [start, end), at most
// FP8_BLOCK long, counted from its part's beginning.
fn fp8_block(x: u32, parts: vec2<u32>, len: u32) -> vec2<u32> {
    let part = select(select(0u, parts.x, x >= parts.x), parts.y, x >= parts.y);
    let part_end = select(select(len, parts.y, x < parts.y), parts.x, x < parts.x);
    let start = part + (x - part) / FP8_BLOCK * FP8_BLOCK;
    return vec2<u32>(start, min(start + FP8_BLOCK, part_end));
}

// |A(i, p)| or |B(p, j)| inside the matrices and K block kb, 0 outside.
fn abs_a(i: u32, p: u32, kb: vec2<u32>) -> f32 {
    if (i >= params.m || p < kb.x || p >= kb.y) { return 0.0; }
    return abs(a[i * params.a_row + p * params.a_col]);
}
fn abs_b(p: u32, j: u32, kb: vec2<u32>) -> f32 {
    if (j >= params.n || p < kb.x || p >= kb.y) { return 0.0; }
    return abs(load_b(p * params.b_row + j * params.b_col));
}

// The largest of 4 partial maxima, those of invocations 4·line to 4·line + 3.
fn fp8_quad_max(line: u32) -> f32 {
    let q = 4u * line;
    return max(max(fp8_partial[q], fp8_partial[q + 1u]), max(fp8_partial[q + 2u], fp8_partial[q + 3u]));
}

// scale_a and scale_b for K block kb. Invocation x takes a quarter of the
// block for row (or column) x / 4 (WG = 4·TILE); each weight block the
// tile's columns touch is read by all of them. Holds barriers: uniform
// control flow only.
fn fp8_block_scales(m0: u32, n0: u32, kb: vec2<u32>, lidx: u32) {
    let line = lidx / 4u;
    let quarter = kb.x + (lidx % 4u) * (FP8_BLOCK / 4u);
    var amax = 0.0;
    for (var p = quarter; p < quarter + FP8_BLOCK / 4u; p++) { amax = max(amax, abs_a(m0 + line, p, kb)); }
    fp8_partial[lidx] = amax;
    workgroupBarrier();
    if (lidx < TILE) { scale_a[lidx] = fp8_scale(fp8_quad_max(lidx)); }
    workgroupBarrier();
    if (params.b_tile != FP8_BLOCK) {
        amax = 0.0;
        for (var p = quarter; p < quarter + FP8_BLOCK / 4u; p++) { amax = max(amax, abs_b(p, n0 + line, kb)); }
        fp8_partial[lidx] = amax;
        workgroupBarrier();
        if (lidx < TILE) { scale_b[lidx] = fp8_scale(fp8_quad_max(lidx)); }
        workgroupBarrier();
        return;
    }
    // weight blocks: one, or more where stacked parts begin inside the tile
    let p_fast = params.b_row == 1u;
    let depth = kb.y - kb.x;
    var cols = fp8_block(n0, params.n_parts, params.n);
    loop {
        let width = cols.y - cols.x;
        amax = 0.0;
        for (var e = lidx; e < depth * width; e += WG) {
            let p = kb.x + select(e / width, e % depth, p_fast);
            let j = cols.x + select(e % width, e / depth, p_fast);
            amax = max(amax, abs_b(p, j, kb));
        }
        let scale = fp8_scale(workgroup_max(amax, lidx));
        if (lidx < TILE && n0 + lidx >= cols.x && n0 + lidx < cols.y) { scale_b[lidx] = scale; }
        if (cols.y >= min(n0 + TILE, params.n)) { break; }
        cols = fp8_block(cols.y, params.n_parts, params.n);
    }
    workgroupBarrier();
}

// Stages the K slice [k0, k1) of A and B into shared memory, zero past M,
// N and k1, through E4M3 in fp8 (each value counted by one workgroup: the
// first along the dimension that does not index it).
// Consecutive invocations step whichever index is contiguous in memory.
fn stage(wid: vec3<u32>, k0: u32, k1: u32, lidx: u32) {
    let m0 = wid.y * TILE;
    let n0 = wid.x * TILE;
    let a_p_fast = params.a_col == 1u;
    let b_p_fast = params.b_row == 1u;
    let fp8 = NUMERICS == FP8;
    for (var e = lidx; e < KSTEP * TILE; e += WG) {
        let pa = select(e / TILE, e % KSTEP, a_p_fast);
        let ia = select(e % TILE, e / KSTEP, a_p_fast);
        var va = 0.0;
        if (m0 + ia < params.m && k0 + pa < k1) {
            va = a[(m0 + ia) * params.a_row + (k0 + pa) * params.a_col];
            if (fp8) { va = fp8_round(va, scale_a[ia], wid.x == 0u); }
        }
        tile_a[pa * PAD + ia] = va;

        let pb = select(e / TILE, e % KSTEP, b_p_fast);
        let jb = select(e % TILE, e / KSTEP, b_p_fast);
        var vb = 0.0;
        if (n0 + jb < params.n && k0 + pb < k1) {
            vb = load_b((k0 + pb) * params.b_row + (n0 + jb) * params.b_col);
            if (fp8) { vb = fp8_round(vb, scale_b[jb], wid.y == 0u); }
        }
        tile_b[pb * PAD + jb] = vb;
    }
}

// This invocation's 4×4 block of the tile's products, f32 accumulation.
// Contains barriers: call from uniform control flow.
fn tile_product(wid: vec3<u32>, lidx: u32) -> array<vec4<f32>, 4> {
    let tx = lidx % 16u;
    let ty = lidx / 16u;
    var acc: array<vec4<f32>, 4>;
    var k0 = 0u;
    loop {
        if (k0 >= params.k) { break; }
        var k1 = min(k0 + KSTEP, params.k);
        if (NUMERICS == FP8) {
            // a slice stays inside one K block: it ends early where a stacked part begins
            let kb = fp8_block(k0, params.k_parts, params.k);
            if (k0 == kb.x) { fp8_block_scales(wid.y * TILE, wid.x * TILE, kb, lidx); }
            k1 = min(k1, kb.y);
        }
        stage(wid, k0, k1, lidx);
        workgroupBarrier();
        for (var p = 0u; p < KSTEP; p++) {
            let row = p * PAD;
            let av = vec4<f32>(tile_a[row + ty], tile_a[row + ty + 16u], tile_a[row + ty + 32u], tile_a[row + ty + 48u]);
            let bv = vec4<f32>(tile_b[row + tx], tile_b[row + tx + 16u], tile_b[row + tx + 32u], tile_b[row + tx + 48u]);
            acc[0] += av.x * bv;
            acc[1] += av.y * bv;
            acc[2] += av.z * bv;
            acc[3] += av.w * bv;
        }
        workgroupBarrier();
        k0 = k1;
    }
    return acc;
}

// Row and column of output (r, s) of this invocation.
fn out_at(wid: vec3<u32>, lidx: u32, r: u32, s: u32) -> vec2<u32> {
    return vec2<u32>(wid.y * TILE + lidx / 16u + 16u * r, wid.x * TILE + lidx % 16u + 16u * s);
}

fn inside(at: vec2<u32>) -> bool {
    return at.x < params.m && at.y < params.n;
}

// C = A·B
@compute @workgroup_size(WG)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    for (var r = 0u; r < 4u; r++) {
        for (var s = 0u; s < 4u; s++) {
            let at = out_at(wid, lidx, r, s);
            if (inside(at)) { c[at.x * params.c_row + at.y] = matmul_boundary(acc[r][s], params.site); }
        }
    }
}

// C = R + A·B: a projection added to the residual stream.
@compute @workgroup_size(WG)
fn matmul_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    for (var r = 0u; r < 4u; r++) {
        for (var s = 0u; s < 4u; s++) {
            let at = out_at(wid, lidx, r, s);
            if (inside(at)) {
                let i = at.x * params.c_row + at.y;
                let product = matmul_boundary(acc[r][s], params.site);
                c[i] = boundary(residual[i] + product, select(SITE_RESIDUAL, SITE_NONE, params.site == SITE_NONE));
            }
        }
    }
}

// C += A·B: gradients, which accumulate.
@compute @workgroup_size(WG)
fn matmul_accumulate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    for (var r = 0u; r < 4u; r++) {
        for (var s = 0u; s < 4u; s++) {
            let at = out_at(wid, lidx, r, s);
            if (inside(at)) { c[at.x * params.c_row + at.y] += acc[r][s]; }
        }
    }
}
