// 03_linear_coop_global.wgsl — out[M, N] (f32) = op(A) · op(B) on cooperative
// matrices (tensor cores): f16 inputs, f32 accumulation, every fragment
// loaded straight from global memory (the caches serve the reuse between
// subgroups). wgpu's syntax only (Dawn's loads read workgroup arrays).
//
// kernels/units/gemm_source.rs composes ahead of this file the enables,
// 03_linear_coop_common.wgsl (the sizes, bindings and the tile's place)
// and the variant's constants: T (the fragment's edge, 16 or 8), MatA, MatB,
// MatC (the f16 and f32 fragment types), TM × TN fragments per
// subgroup, SGM × SGN subgroups per workgroup (SG invocations each; WG in
// all), BM = SGM·TM·T and BN = SGN·TN·T, and the layout: A_T (A given as
// [K, M], row-major: dW = dYᵀ·X) and B_T (B given as [N, K]: Y = X·Wᵀ);
// otherwise A is [M, K] and B [K, N], both row-major (dX = dY·W).
// Lines `//#NAME` are replaced by the variant's statements, unrolled over
// its TM × TN accumulators (named, never an indexed array).
//
// The fragment operations (FRAG_A, FRAG_AT, …, MMA, STORE_C) and the
// `//#SUBGROUP*` lines are neutral: kernels/units/syntax.rs spells them;
// offsets and strides are in elements of the named array. M % BM, N % BN and K % T are 0
// (the launcher checks).

// The fragment of op(A) at rows r.. and columns kk..
fn load_a(r: u32, kk: u32) -> MatA {
    if A_T {
        // op(A)[i, j] = a[(kk + j)·M + r + i]: column-major from a's row kk
        return FRAG_AT(a, kk * p.m + r, p.m);
    }
    return FRAG_A(a, r * p.k + kk, p.k);
}

// The fragment of op(B) at rows kk.. and columns col..
fn load_b(kk: u32, col: u32) -> MatB {
    if B_T {
        // op(B)[i, j] = b[(col + j)·K + kk + i]: column-major from b's row col
        return FRAG_BT(b, col * p.k + kk, p.k);
    }
    return FRAG_B(b, kk * p.n + col, p.n);
}

@compute @workgroup_size(WG)
fn gemm(
    @builtin(workgroup_id) wg: vec3<u32>,
    //#SUBGROUP_ID
) {
    let tile = tile_of(wg, sg);
    //#INIT
    for (var k0 = 0u; k0 < p.k; k0 += T) {
        let kk = k0;
        //#STEP
    }
    //#STORE
}
