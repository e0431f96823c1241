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
//
// Invocation (tx, ty) owns RM rows × RN columns as 4×4 blocks: rows
// g·4·NY + 4·ty + r and columns g·4·NX + 4·tx + c, so its reads of the
// staged tiles are vec4s that neighbouring invocations take from
// neighbouring words (or the same word: a broadcast), and its stores cover
// 4 consecutive columns. Every output sums its K products with fma in
// ascending K from 0, and nothing else: every variant gives the same bits.

const NX: u32 = TN / RN;   // invocations along N
const NY: u32 = TM / RM;   // ... along M
const NT: u32 = NX * NY;   // invocations per workgroup
const GM: u32 = RM / 4u;   // 4-row blocks per invocation
const GN: u32 = RN / 4u;   // 4-column blocks per invocation
const SA: u32 = (TM + PAD_A) / 4u;  // vec4s per staged row of A (one k)
const SB: u32 = (TN + PAD_B) / 4u;
// 4-value quads each invocation stages per slice, rounded up
const QA: u32 = (TM * TK / 4u + NT - 1u) / NT;
const QB: u32 = (TN * TK / 4u + NT - 1u) / NT;

struct Params {
    m: u32,
    n: u32,
    k: u32,
    lda: u32,
    ldb: u32,
    ldc: u32,
    site: u32,  // the forward boundary of this product's output, or SITE_NONE
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;            // A
// @binding(2): B, declared by the prelude
@group(0) @binding(3) var<storage, read> residual: array<f32>;     // [M, N], matmul_add
@group(0) @binding(4) var<storage, read_write> c: array<f32>;      // [M, N]

var<workgroup> tile_a: array<vec4<f32>, TK * SA>;  // [TK][TM + PAD_A], k-major
var<workgroup> tile_b: array<vec4<f32>, TK * SB>;  // [TK][TN + PAD_B]

// A slice's values on their way from memory to the tiles: quad q of this
// invocation is the slice's quad lidx + q·NT.
var<private> staged_a: array<vec4<f32>, QA>;
var<private> staged_b: array<vec4<f32>, QB>;

// 4 consecutive values of a from index i, the lanes of `ok` only (0 elsewhere).
fn load_a4(i: u32, ok: vec4<bool>) -> vec4<f32> {
    let v = vec4<f32>(a[i], a[i + 1u], a[i + 2u], a[i + 3u]);
    return select(vec4<f32>(0.0), v, ok);
}

// Quad q of A's K slice [k0, k1) in the tile at row m0. A K-fast quad is 4
// values of K in one row; an M-fast quad, 4 rows at one k.
fn fetch_a(q: u32, m0: u32, k0: u32, k1: u32) -> vec4<f32> {
    let lane = vec4<u32>(0u, 1u, 2u, 3u);
    if (A_K_FAST) {
        let i = m0 + q / (TK / 4u);
        let p = k0 + 4u * (q % (TK / 4u));
        return load_a4(i * params.lda + p, (vec4<u32>(p) + lane < vec4<u32>(k1)) & vec4<bool>(i < params.m));
    }
    let p = k0 + q / (TM / 4u);
    let i = m0 + 4u * (q % (TM / 4u));
    return load_a4(p * params.lda + i, (vec4<u32>(i) + lane < vec4<u32>(params.m)) & vec4<bool>(p < k1));
}

fn fetch_b(q: u32, n0: u32, k0: u32, k1: u32) -> vec4<f32> {
    let lane = vec4<u32>(0u, 1u, 2u, 3u);
    if (B_K_FAST) {
        let j = n0 + q / (TK / 4u);
        let p = k0 + 4u * (q % (TK / 4u));
        return select(vec4<f32>(0.0), load_b4(j * params.ldb + p),
                      (vec4<u32>(p) + lane < vec4<u32>(k1)) & vec4<bool>(j < params.n));
    }
    let p = k0 + q / (TN / 4u);
    let j = n0 + 4u * (q % (TN / 4u));
    return select(vec4<f32>(0.0), load_b4(p * params.ldb + j),
                  (vec4<u32>(j) + lane < vec4<u32>(params.n)) & vec4<bool>(p < k1));
}

fn fetch(wid: vec3<u32>, lidx: u32, k0: u32) {
    let k1 = min(k0 + TK, params.k);
    for (var q = 0u; q < QA; q++) {
        let e = lidx + q * NT;
        if (e < TM * TK / 4u) { staged_a[q] = fetch_a(e, wid.y * TM, k0, k1); }
    }
    for (var q = 0u; q < QB; q++) {
        let e = lidx + q * NT;
        if (e < TN * TK / 4u) { staged_b[q] = fetch_b(e, wid.x * TN, k0, k1); }
    }
}

// Writes a fetched slice into the k-major tiles: K-fast quads spread over
// four staged rows, M- or N-fast quads are one vec4.
fn stage(lidx: u32) {
    for (var q = 0u; q < QA; q++) {
        let e = lidx + q * NT;
        if (e >= TM * TK / 4u) { break; }
        if (A_K_FAST) {
            let i = e / (TK / 4u);
            let p = 4u * (e % (TK / 4u));
            for (var t = 0u; t < 4u; t++) { tile_a[(p + t) * SA + i / 4u][i % 4u] = staged_a[q][t]; }
        } else {
            tile_a[(e / (TM / 4u)) * SA + e % (TM / 4u)] = staged_a[q];
        }
    }
    for (var q = 0u; q < QB; q++) {
        let e = lidx + q * NT;
        if (e >= TN * TK / 4u) { break; }
        if (B_K_FAST) {
            let j = e / (TK / 4u);
            let p = 4u * (e % (TK / 4u));
            for (var t = 0u; t < 4u; t++) { tile_b[(p + t) * SB + j / 4u][j % 4u] = staged_b[q][t]; }
        } else {
            tile_b[(e / (TN / 4u)) * SB + e % (TN / 4u)] = staged_b[q];
        }
    }
}

// acc[(4·g + r)·GN + h] holds row (g, r) and columns (h, 0..4) of the micro-tile.
var<private> acc: array<vec4<f32>, RM * GN>;

// The products of staged row k, added in.
fn multiply_row(k: u32, tx: u32, ty: u32) {
    var av: array<vec4<f32>, GM>;
    var bv: array<vec4<f32>, GN>;
    for (var g = 0u; g < GM; g++) { av[g] = tile_a[k * SA + g * NY + ty]; }
    for (var h = 0u; h < GN; h++) { bv[h] = tile_b[k * SB + h * NX + tx]; }
    for (var g = 0u; g < GM; g++) {
        for (var r = 0u; r < 4u; r++) {
            for (var h = 0u; h < GN; h++) {
                let x = (4u * g + r) * GN + h;
                acc[x] = fma(vec4<f32>(av[g][r]), bv[h], acc[x]);
            }
        }
    }
}

// The workgroup's tile of A·B into acc. The next slice is fetched into
// registers while this one is multiplied, so one barrier pair serves a
// slice. Contains barriers: call from uniform control flow.
fn tile_product(wid: vec3<u32>, lidx: u32) {
    let tx = lidx % NX;
    let ty = lidx / NX;
    fetch(wid, lidx, 0u);
    for (var k0 = 0u; k0 < params.k; k0 += TK) {
        stage(lidx);
        workgroupBarrier();
        if (k0 + TK < params.k) { fetch(wid, lidx, k0 + TK); }
        let count = min(TK, params.k - k0);
        if (count == TK) {
            for (var k = 0u; k < TK; k++) { multiply_row(k, tx, ty); }
        } else {
            for (var k = 0u; k < count; k++) { multiply_row(k, tx, ty); }  // the last, short slice
        }
        workgroupBarrier();
    }
}

// Row and column of micro-tile entry (g, r), (h, col) of this invocation.
fn out_row(wid: vec3<u32>, lidx: u32, g: u32, r: u32) -> u32 {
    return wid.y * TM + g * 4u * NY + 4u * (lidx / NX) + r;
}
fn out_col(wid: vec3<u32>, lidx: u32, h: u32, col: u32) -> u32 {
    return wid.x * TN + h * 4u * NX + 4u * (lidx % NX) + col;
}

// C = A·B
@compute @workgroup_size(NT)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    tile_product(wid, lidx);
    for (var g = 0u; g < GM; g++) {
        for (var r = 0u; r < 4u; r++) {
            let i = out_row(wid, lidx, g, r);
            if (i >= params.m) { continue; }
            for (var h = 0u; h < GN; h++) {
                for (var col = 0u; col < 4u; col++) {
                    let j = out_col(wid, lidx, h, col);
                    if (j < params.n) {
                        c[i * params.ldc + j] = matmul_boundary(acc[(4u * g + r) * GN + h][col], params.site);
                    }
                }
            }
        }
    }
}

// C = R + A·B: a projection added to the residual stream.
@compute @workgroup_size(NT)
fn matmul_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    tile_product(wid, lidx);
    let residual_site = select(SITE_RESIDUAL, SITE_NONE, params.site == SITE_NONE);
    for (var g = 0u; g < GM; g++) {
        for (var r = 0u; r < 4u; r++) {
            let i = out_row(wid, lidx, g, r);
            if (i >= params.m) { continue; }
            for (var h = 0u; h < GN; h++) {
                for (var col = 0u; col < 4u; col++) {
                    let j = out_col(wid, lidx, h, col);
                    if (j < params.n) {
                        let at = i * params.ldc + j;
                        let product = matmul_boundary(acc[(4u * g + r) * GN + h][col], params.site);
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
    tile_product(wid, lidx);
    for (var g = 0u; g < GM; g++) {
        for (var r = 0u; r < 4u; r++) {
            let i = out_row(wid, lidx, g, r);
            if (i >= params.m) { continue; }
            for (var h = 0u; h < GN; h++) {
                for (var col = 0u; col < 4u; col++) {
                    let j = out_col(wid, lidx, h, col);
                    if (j < params.n) { c[i * params.ldc + j] += acc[(4u * g + r) * GN + h][col]; }
                }
            }
        }
    }
}
