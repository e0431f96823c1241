// 03_linear_coop_double.wgsl — out[M, N] (f32) = op(A) · op(B) on cooperative
// matrices (tensor cores), f16 inputs, f32 accumulation: as
// 03_linear_coop_staged.wgsl (its header says what the blocks are), but
// double-buffered. Workgroup memory holds two stages of each block
// (stage s of A at sa[s·A_LEN..], of B at sb[s·B_LEN..], in SHalf
// elements of SV halves: vec4<f16>, or f16 for Dawn's loads).
// While the subgroups multiply the K slice in stage `st`, each invocation
// holds the next slice's A_PER + B_PER 8-half quads of A and B in registers
// (fetched from global memory before the multiplications, so their latency
// hides behind them) and stores them into the other stage after: one
// barrier per K slice. The trainer's variant (kernels/units/gemm.rs
// `GemmVariant::for_units`).
//
// Composed as the staged file, plus A_PER and B_PER (each block's quads per
// invocation); lines `//#REGS` (the register variables), `//#FETCH` (global
// → registers, the slice at K offset `kf`) and `//#PUT` (registers → stage
// `nx`) are unrolled over the quads by kernels/units/gemm_source.rs.
// M % BM, N % BN, K % BK are 0, and each block's quads divide evenly among
// the WG invocations (the launcher checks).

var<workgroup> sa: array<SHalf, 2u * A_LEN>;
var<workgroup> sb: array<SHalf, 2u * B_LEN>;

// The fragment of op(A) in stage s at the block's rows r.. and slice columns kk..
fn load_a(s: u32, r: u32, kk: u32) -> MatA {
    if A_T {
        return FRAG_AT(sa, s * A_LEN + (kk * SA + r) / SV, SA / SV);
    }
    return FRAG_A(sa, s * A_LEN + (r * SA + kk) / SV, SA / SV);
}

// The fragment of op(B) in stage s at slice rows kk.. and the block's columns col..
fn load_b(s: u32, kk: u32, col: u32) -> MatB {
    if B_T {
        return FRAG_BT(sb, s * B_LEN + (col * SB + kk) / SV, SB / SV);
    }
    return FRAG_B(sb, s * B_LEN + (kk * SB + col) / SV, SB / SV);
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
    //#REGS
    // slice 0 into stage 0
    var kf = 0u;
    var nx = 0u;
    //#FETCH
    //#PUT
    workgroupBarrier();
    var st = 0u;
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        kf = k0 + BK;
        nx = 1u - st;
        let more = kf < p.k;
        if more {
            //#FETCH
        }
        for (var kk = 0u; kk < BK; kk += T) {
            //#STEP
        }
        if more {
            //#PUT
        }
        workgroupBarrier();
        st = nx;
    }
    //#STORE
}
