// Matrix products C = A·B, register-blocked. Legend: C is [M, N] with rows
// ldc apart, the shared dimension is K.
// The layout and tile sizes are constants composed ahead of this file by the
// launcher (kernels/linear/gemm.rs), one module per variant:
//   A_K_FAST  A(i, p) = a[i·lda + p] (K contiguous), else a[p·lda + i]
//   B_K_FAST  B(p, j) = load_b(j·ldb + p) (K contiguous), else load_b(p·ldb + j)
//   TM, TN    the workgroup's output tile; TK the K slice staged per step
//   RM, RN    each invocation's micro-tile (multiples of 4)
//   PAD_A, PAD_B  words added to a staged row where its operand is stored
//             transposed (K-contiguous), so those scalar stores spread over banks
// With HF weights W [out, in] and activations X [rows, in]:
//   forward   Y = X·Wᵀ     M=rows N=out K=in    A=X (K fast)    B=Wᵀ (K fast)
//   dX       dX = dY·W     M=rows N=in  K=out   A=dY (K fast)   B=W (N fast)
//   dW       dW += dYᵀ·X   M=out  N=in  K=rows  A=dYᵀ (M fast)  B=X (N fast)
// load_b comes from the prelude (03_linear_b32 or 03_linear_b16).
// A batch of products (Muon's Newton–Schulz, one matrix per layer) is the
// grid's z: product z reads A from a_at + z·a_stride, B from b_at +
// z·b_stride and writes C at c_at + z·c_stride (all 0 for one product).
//
// Invocation (tx, ty) owns RM rows × RN columns as up to 2×2 blocks of
// 4×4: rows g·4·NY + 4·ty + r and columns h·4·NX + 4·tx + c, so its reads
// of the staged tiles are vec4s that neighbouring invocations take from
// neighbouring words (or the same word: a broadcast), and its stores cover
// 4 consecutive columns. Every output sums its K products with fma in
// ascending K from 0, and nothing else: every variant gives the same bits.
// Registers are named variables, never indexed arrays: a compiler that
// cannot prove an index constant moves an array to memory (on the H100 the
// indexed form ran 10× slower).

const NX: u32 = TN / RN;   // invocations along N
const NY: u32 = TM / RM;   // ... along M
const NT: u32 = NX * NY;   // invocations per workgroup
const GM: u32 = RM / 4u;   // 4-row blocks per invocation: 1 or 2
const GN: u32 = RN / 4u;   // 4-column blocks per invocation: 1 or 2
const SA: u32 = (TM + PAD_A) / 4u;  // vec4s per staged row of A (one k)
const SB: u32 = (TN + PAD_B) / 4u;
const QUADS_A: u32 = TM * TK / 4u;  // 4-value quads of a slice of A
const QUADS_B: u32 = TN * TK / 4u;
// quads each invocation stages per slice, rounded up: 1 or 2
const QA: u32 = (QUADS_A + NT - 1u) / NT;
const QB: u32 = (QUADS_B + NT - 1u) / NT;

struct Params {
    m: u32,
    n: u32,
    k: u32,
    lda: u32,
    ldb: u32,
    ldc: u32,
    site: u32,  // the forward boundary of this product's output, or SITE_NONE
    a_at: u32,
    a_stride: u32,
    b_at: u32,
    b_stride: u32,
    c_at: u32,
    c_stride: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;            // A
// @binding(2): B, declared by the prelude
@group(0) @binding(3) var<storage, read> residual: array<f32>;     // [M, N], matmul_add
@group(0) @binding(4) var<storage, read_write> c: array<f32>;      // [M, N]

var<workgroup> tile_a: array<vec4<f32>, TK * SA>;  // [TK][TM + PAD_A], k-major
var<workgroup> tile_b: array<vec4<f32>, TK * SB>;  // [TK][TN + PAD_B]

// The micro-tile: b_gh[r] is row r of block (g, h), 4 columns.
struct Micro {
    b00: mat4x4<f32>,
    b01: mat4x4<f32>,
    b10: mat4x4<f32>,
    b11: mat4x4<f32>,
}

// 4 consecutive values of a from index i, the lanes of `ok` only (0 elsewhere).
fn load_a4(i: u32, ok: vec4<bool>) -> vec4<f32> {
    let v = vec4<f32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u]);
    return select(vec4<f32>(0.0), v, ok);
}

// Quad q of A's K slice [k0, k1) in the tile at row m0. A K-fast quad is 4
// values of K in one row; an M-fast quad, 4 rows at one k.
fn fetch_a(base: u32, q: u32, m0: u32, k0: u32, k1: u32) -> vec4<f32> {
    let lane = vec4<u32>(0u, 1u, 2u, 3u);
    if (q >= QUADS_A) { return vec4<f32>(0.0); }
    if (A_K_FAST) {
        let i = m0 + q / (TK / 4u);
        let p = k0 + 4u * (q % (TK / 4u));
        return load_a4(base + i * params.lda + p, (vec4<u32>(p) + lane < vec4<u32>(k1)) & vec4<bool>(i < params.m));
    }
    let p = k0 + q / (TM / 4u);
    let i = m0 + 4u * (q % (TM / 4u));
    return load_a4(base + p * params.lda + i, (vec4<u32>(i) + lane < vec4<u32>(params.m)) & vec4<bool>(p < k1));
}

fn fetch_b(base: u32, q: u32, n0: u32, k0: u32, k1: u32) -> vec4<f32> {
    let lane = vec4<u32>(0u, 1u, 2u, 3u);
    if (q >= QUADS_B) { return vec4<f32>(0.0); }
    if (B_K_FAST) {
        let j = n0 + q / (TK / 4u);
        let p = k0 + 4u * (q % (TK / 4u));
        return select(vec4<f32>(0.0), load_b4(base + j * params.ldb + p),
                      (vec4<u32>(p) + lane < vec4<u32>(k1)) & vec4<bool>(j < params.n));
    }
    let p = k0 + q / (TN / 4u);
    let j = n0 + 4u * (q % (TN / 4u));
    return select(vec4<f32>(0.0), load_b4(base + p * params.ldb + j),
                  (vec4<u32>(j) + lane < vec4<u32>(params.n)) & vec4<bool>(p < k1));
}

// Quad q of a slice into its k-major tile: a K-fast quad spreads over four
// staged rows, an M- or N-fast quad is one vec4.
fn stage_a(q: u32, v: vec4<f32>) {
    if (q >= QUADS_A) { return; }
    if (A_K_FAST) {
        let i = q / (TK / 4u);
        let at = 4u * (q % (TK / 4u)) * SA + i / 4u;
        tile_a[at][i % 4u] = v.x;
        tile_a[at + SA][i % 4u] = v.y;
        tile_a[at + 2u * SA][i % 4u] = v.z;
        tile_a[at + 3u * SA][i % 4u] = v.w;
    } else {
        tile_a[(q / (TM / 4u)) * SA + q % (TM / 4u)] = v;
    }
}

fn stage_b(q: u32, v: vec4<f32>) {
    if (q >= QUADS_B) { return; }
    if (B_K_FAST) {
        let j = q / (TK / 4u);
        let at = 4u * (q % (TK / 4u)) * SB + j / 4u;
        tile_b[at][j % 4u] = v.x;
        tile_b[at + SB][j % 4u] = v.y;
        tile_b[at + 2u * SB][j % 4u] = v.z;
        tile_b[at + 3u * SB][j % 4u] = v.w;
    } else {
        tile_b[(q / (TN / 4u)) * SB + q % (TN / 4u)] = v;
    }
}

// m + a·bᵀ, row by row: the products of one k in a 4×4 block.
fn outer_fma(m: mat4x4<f32>, a: vec4<f32>, b: vec4<f32>) -> mat4x4<f32> {
    return mat4x4<f32>(
        fma(vec4<f32>(a.x), b, m[0]),
        fma(vec4<f32>(a.y), b, m[1]),
        fma(vec4<f32>(a.z), b, m[2]),
        fma(vec4<f32>(a.w), b, m[3]));
}

// acc plus the products of staged row k.
fn multiply_k(acc: Micro, k: u32, tx: u32, ty: u32) -> Micro {
    var m = acc;
    let a0 = tile_a[k * SA + ty];
    let b0 = tile_b[k * SB + tx];
    m.b00 = outer_fma(m.b00, a0, b0);
    if (GN > 1u) {
        let b1 = tile_b[k * SB + NX + tx];
        m.b01 = outer_fma(m.b01, a0, b1);
        if (GM > 1u) {
            let a1 = tile_a[k * SA + NY + ty];
            m.b10 = outer_fma(m.b10, a1, b0);
            m.b11 = outer_fma(m.b11, a1, b1);
        }
    } else if (GM > 1u) {
        m.b10 = outer_fma(m.b10, tile_a[k * SA + NY + ty], b0);
    }
    return m;
}

// The workgroup's tile of A·B, this invocation's micro-tile of it. The
// next slice is fetched into registers while this one is multiplied, so
// one barrier pair serves a slice. Registers are local variables and
// values, never module-scope: drivers keep those in registers. Contains
// barriers: call from uniform control flow.
fn tile_product(wid: vec3<u32>, lidx: u32) -> Micro {
    let tx = lidx % NX;
    let ty = lidx / NX;
    let m0 = wid.y * TM;
    let n0 = wid.x * TN;
    let a0 = params.a_at + wid.z * params.a_stride;
    let b0 = params.b_at + wid.z * params.b_stride;
    var acc: Micro;
    // the next slice: quads lidx and lidx + NT of A's and of B's
    var a_next0 = fetch_a(a0, lidx, m0, 0u, min(TK, params.k));
    var b_next0 = fetch_b(b0, lidx, n0, 0u, min(TK, params.k));
    var a_next1: vec4<f32>;
    var b_next1: vec4<f32>;
    if (QA > 1u) { a_next1 = fetch_a(a0, lidx + NT, m0, 0u, min(TK, params.k)); }
    if (QB > 1u) { b_next1 = fetch_b(b0, lidx + NT, n0, 0u, min(TK, params.k)); }
    for (var k0 = 0u; k0 < params.k; k0 += TK) {
        stage_a(lidx, a_next0);
        stage_b(lidx, b_next0);
        if (QA > 1u) { stage_a(lidx + NT, a_next1); }
        if (QB > 1u) { stage_b(lidx + NT, b_next1); }
        workgroupBarrier();
        let k1 = k0 + TK;
        if (k1 < params.k) {
            let k2 = min(k1 + TK, params.k);
            a_next0 = fetch_a(a0, lidx, m0, k1, k2);
            b_next0 = fetch_b(b0, lidx, n0, k1, k2);
            if (QA > 1u) { a_next1 = fetch_a(a0, lidx + NT, m0, k1, k2); }
            if (QB > 1u) { b_next1 = fetch_b(b0, lidx + NT, n0, k1, k2); }
        }
        let count = params.k - k0;
        if (count >= TK) {
            // by fours (TK is a multiple of 4): unrolled, this ran up to 1.2× faster on the H100
            for (var k = 0u; k < TK; k += 4u) {
                acc = multiply_k(acc, k, tx, ty);
                acc = multiply_k(acc, k + 1u, tx, ty);
                acc = multiply_k(acc, k + 2u, tx, ty);
                acc = multiply_k(acc, k + 3u, tx, ty);
            }
        } else {
            for (var k = 0u; k < count; k++) { acc = multiply_k(acc, k, tx, ty); }  // the last, short slice
        }
        workgroupBarrier();
    }
    return acc;
}

// Block (g, h) of the micro-tile.
fn block(acc: Micro, g: u32, h: u32) -> mat4x4<f32> {
    if (g == 0u) {
        if (h == 0u) { return acc.b00; }
        return acc.b01;
    }
    if (h == 0u) { return acc.b10; }
    return acc.b11;
}

// Where entry (g, r), (h, col) of this invocation's micro-tile goes.
// Where product wid.z's C starts.
fn c_base(wid: vec3<u32>) -> u32 {
    return params.c_at + wid.z * params.c_stride;
}
fn out_row(wid: vec3<u32>, lidx: u32, g: u32, r: u32) -> u32 {
    return wid.y * TM + g * 4u * NY + 4u * (lidx / NX) + r;
}
fn out_col(wid: vec3<u32>, lidx: u32, h: u32, col: u32) -> u32 {
    return wid.x * TN + h * 4u * NX + 4u * (lidx % NX) + col;
}

// C = A·B
@compute @workgroup_size(NT)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    for (var g = 0u; g < GM; g++) {
        for (var h = 0u; h < GN; h++) {
            let m = block(acc, g, h);
            for (var r = 0u; r < 4u; r++) {
                let i = out_row(wid, lidx, g, r);
                for (var col = 0u; col < 4u; col++) {
                    let j = out_col(wid, lidx, h, col);
                    if (i < params.m && j < params.n) {
                        c[c_base(wid) + i * params.ldc + j] = matmul_boundary(m[r][col], params.site);
                    }
                }
            }
        }
    }
}

// C = R + A·B: a projection added to the residual stream.
@compute @workgroup_size(NT)
fn matmul_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    let residual_site = select(SITE_RESIDUAL, SITE_NONE, params.site == SITE_NONE);
    for (var g = 0u; g < GM; g++) {
        for (var h = 0u; h < GN; h++) {
            let m = block(acc, g, h);
            for (var r = 0u; r < 4u; r++) {
                let i = out_row(wid, lidx, g, r);
                for (var col = 0u; col < 4u; col++) {
                    let j = out_col(wid, lidx, h, col);
                    if (i < params.m && j < params.n) {
                        let at = c_base(wid) + i * params.ldc + j;
                        let product = matmul_boundary(m[r][col], params.site);
                        c[at] = boundary(residual[at] + product, residual_site);
                    }
                }
            }
        }
    }
}

// C += A·B: gradients, which accumulate.
@compute @workgroup_size(NT)
fn matmul_accumulate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    for (var g = 0u; g < GM; g++) {
        for (var h = 0u; h < GN; h++) {
            let m = block(acc, g, h);
            for (var r = 0u; r < 4u; r++) {
                let i = out_row(wid, lidx, g, r);
                for (var col = 0u; col < 4u; col++) {
                    let j = out_col(wid, lidx, h, col);
                    if (i < params.m && j < params.n) { c[c_base(wid) + i * params.ldc + j] += m[r][col]; }
                }
            }
        }
    }
}
