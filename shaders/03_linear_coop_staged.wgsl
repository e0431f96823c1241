// 03_linear_coop_staged.wgsl — out[M, N] (f32) = op(A) · op(B) on cooperative
// matrices (tensor cores), f16 inputs, f32 accumulation, with each K slice
// of the workgroup's BM × BN tile staged through workgroup memory as f16.
// In any syntax, emulated included (kernels/units/syntax.rs).
//
// Composed as 03_linear_coop_global.wgsl (its header says what comes
// ahead), plus: BK, the K slice; the staged blocks, each a copy of its
// source's row-major block — A as [A_ROWS][SA] (BM × BK, or BK × BM when
// A_T), B as [B_ROWS][SB] (BK × BN, or BN × BK when B_T), the strides SA,
// SB padded by 8 halves (16 bytes: a fragment's rows fall in different
// banks, and stay 16-byte aligned as fragment loads require); and the element
// the blocks are stored as: SHalf (f16, or vec4<f16>), SV halves each.
// Global memory is read 8 halves at a time, as two vec4<f16> (naga 30
// lowers `bitcast<vec2<f16>>(u32)` to a scalar, so no vec4<u32> words).
// M % BM, N % BN, K % BK are 0, and each block's 8-half quads divide
// evenly among the WG invocations (the launcher checks).

var<workgroup> sa: array<SHalf, A_LEN>;
var<workgroup> sb: array<SHalf, B_LEN>;

// The fragment of op(A) at the block's rows r.. and slice columns kk..
fn load_a(r: u32, kk: u32) -> MatA {
    if A_T {
        return FRAG_AT(sa, (kk * SA + r) / SV, SA / SV);
    }
    return FRAG_A(sa, (r * SA + kk) / SV, SA / SV);
}

// The fragment of op(B) at slice rows kk.. and the block's columns col..
fn load_b(kk: u32, col: u32) -> MatB {
    if B_T {
        return FRAG_BT(sb, (col * SB + kk) / SV, SB / SV);
    }
    return FRAG_B(sb, (kk * SB + col) / SV, SB / SV);
}

@compute @workgroup_size(WG)
fn gemm(
    @builtin(workgroup_id) wg: vec3<u32>,
    //#SUBGROUP_ID
    @builtin(local_invocation_index) li: u32,
) {
    //#SUBGROUP
    let tile = tile_of(wg, sg);
    //#INIT
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        // the source blocks' first rows and columns
        let a0 = vec2<u32>(select(tile.gr0, k0, A_T), select(k0, tile.gr0, A_T));
        let b0 = vec2<u32>(select(k0, tile.gc0, B_T), select(tile.gc0, k0, B_T));
        workgroupBarrier();
        for (var q = li; q < A_ROWS * A_COLS / 8u; q += WG) {
            let at = quad_at(q, A_COLS, a0, tile.lda, SA);
            let w0 = a[at.x];
            let w1 = a[at.x + 1u];
            let o = at.y / SV;
            //#STAGE_A
        }
        for (var q = li; q < B_ROWS * B_COLS / 8u; q += WG) {
            let at = quad_at(q, B_COLS, b0, tile.ldb, SB);
            let w0 = b[at.x];
            let w1 = b[at.x + 1u];
            let o = at.y / SV;
            //#STAGE_B
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk += T) {
            //#STEP
        }
    }
    //#STORE
}
