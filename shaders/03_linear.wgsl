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
// (activations) or 128 (a weight's 128×128 block) columns of B. The
// workgroup finds the scales of its rows and columns as it enters each
// K block.
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

// |A(m0 + i, p)| or |B(p, j)| inside the matrices, 0 outside.
fn abs_a(i: u32, p: u32) -> f32 {
    if (i >= params.m || p >= params.k) { return 0.0; }
    return abs(a[i * params.a_row + p * params.a_col]);
}
fn abs_b(p: u32, j: u32) -> f32 {
    if (j >= params.n || p >= params.k) { return 0.0; }
    return abs(load_b(p * params.b_row + j * params.b_col));
}

// scale_a and scale_b for the K block at kb. Invocation x takes a quarter
// of the block for row (or column) x / 4 (WG = 4·TILE); a weight block's
// 128 columns are split over all of them. Holds barriers: uniform control
// flow only.
fn fp8_block_scales(m0: u32, n0: u32, kb: u32, lidx: u32) {
    let line = lidx / 4u;
    let quarter = kb + (lidx % 4u) * (FP8_BLOCK / 4u);
    var amax = 0.0;
    for (var p = quarter; p < quarter + FP8_BLOCK / 4u; p++) { amax = max(amax, abs_a(m0 + line, p)); }
    fp8_partial[lidx] = amax;
    workgroupBarrier();
    if (lidx < TILE) {
        let q = 4u * lidx;
        scale_a[lidx] = fp8_scale(max(max(fp8_partial[q], fp8_partial[q + 1u]), max(fp8_partial[q + 2u], fp8_partial[q + 3u])));
    }
    workgroupBarrier();
    amax = 0.0;
    if (params.b_tile == FP8_BLOCK) {
        let col0 = n0 / FP8_BLOCK * FP8_BLOCK;  // the weight block holding the tile's columns
        let p_fast = params.b_row == 1u;
        for (var e = lidx; e < FP8_BLOCK * FP8_BLOCK; e += WG) {
            let p = select(e / FP8_BLOCK, e % FP8_BLOCK, p_fast);
            let j = select(e % FP8_BLOCK, e / FP8_BLOCK, p_fast);
            amax = max(amax, abs_b(kb + p, col0 + j));
        }
    } else {
        for (var p = quarter; p < quarter + FP8_BLOCK / 4u; p++) { amax = max(amax, abs_b(p, n0 + line)); }
    }
    fp8_partial[lidx] = amax;
    workgroupBarrier();
    if (lidx < TILE) {
        var top = 0.0;
        if (params.b_tile == FP8_BLOCK) {
            for (var x = 0u; x < WG; x++) { top = max(top, fp8_partial[x]); }
        } else {
            let q = 4u * lidx;
            top = max(max(fp8_partial[q], fp8_partial[q + 1u]), max(fp8_partial[q + 2u], fp8_partial[q + 3u]));
        }
        scale_b[lidx] = fp8_scale(top);
    }
    workgroupBarrier();
}

// Stages one K slice of A and B into shared memory, zero past M, N, K,
// through E4M3 in fp8 (each value counted by one workgroup: the first
// along the dimension that does not index it).
// Consecutive invocations step whichever index is contiguous in memory.
fn stage(wid: vec3<u32>, k0: u32, lidx: u32) {
    let m0 = wid.y * TILE;
    let n0 = wid.x * TILE;
    let a_p_fast = params.a_col == 1u;
    let b_p_fast = params.b_row == 1u;
    let fp8 = NUMERICS == FP8;
    for (var e = lidx; e < KSTEP * TILE; e += WG) {
        let pa = select(e / TILE, e % KSTEP, a_p_fast);
        let ia = select(e % TILE, e / KSTEP, a_p_fast);
        var va = 0.0;
        if (m0 + ia < params.m && k0 + pa < params.k) {
            va = a[(m0 + ia) * params.a_row + (k0 + pa) * params.a_col];
            if (fp8) { va = fp8_round(va, scale_a[ia], wid.x == 0u); }
        }
        tile_a[pa * PAD + ia] = va;

        let pb = select(e / TILE, e % KSTEP, b_p_fast);
        let jb = select(e % TILE, e / KSTEP, b_p_fast);
        var vb = 0.0;
        if (n0 + jb < params.n && k0 + pb < params.k) {
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
    for (var k0 = 0u; k0 < params.k; k0 += KSTEP) {
        if (NUMERICS == FP8 && k0 % FP8_BLOCK == 0u) { fp8_block_scales(wid.y * TILE, wid.x * TILE, k0, lidx); }
        stage(wid, k0, lidx);
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
