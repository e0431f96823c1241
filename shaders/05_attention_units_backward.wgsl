// The parts the backward's two passes on matrix units share (composed
// after 05_attention_units_common.wgsl, ahead of 05_attention_units_dq.wgsl
// and 05_attention_units_dkv.wgsl): q rows staged with their dO, and the
// products S and dP of a block.

// The partner staged with q's rows: dO, as the products read it.
fn q_partner(row: u32, h: u32, c: u32) -> vec4<f32> {
    return attn_operand4(d_o[o_at(row, h) + c]);
}

fn put_q(at: u32, x: vec4<f32>, y: vec4<f32>) {
    for (var i = 0u; i < 4u; i++) {
        sq[at + i] = f16(x[i]);
        sdo[at + i] = f16(y[i]);
    }
}

// S = q·kᵀ and dP = dO·vᵀ, this subgroup's T rows of the block (from
// `row0`), into `ss` and `sdp`; in the key-major pass (KEY_MAJOR, declared
// by kernels/units/attention.rs: a constant keeps the fragment operations
// in uniform control flow) Sᵀ = k·qᵀ and dPᵀ = v·dOᵀ, its T keys.
fn scores_and_dp(row0: u32) {
    for (var j = 0u; j < BC; j += T) {
        var acc_s = MatC();
        var acc_p = MatC();
        for (var kk = 0u; kk < DH; kk += T) {
            let a_at = row0 * DHP + kk;
            let b_at = j * DHP + kk;
            if (KEY_MAJOR) {
                acc_s = MMA(FRAG_A(sk, a_at, DHP), FRAG_BT(sq, b_at, DHP), acc_s);
                acc_p = MMA(FRAG_A(sv, a_at, DHP), FRAG_BT(sdo, b_at, DHP), acc_p);
            } else {
                acc_s = MMA(FRAG_A(sq, a_at, DHP), FRAG_BT(sk, b_at, DHP), acc_s);
                acc_p = MMA(FRAG_A(sdo, a_at, DHP), FRAG_BT(sv, b_at, DHP), acc_p);
            }
        }
        let s_at = row0 * BCP + j;
        STORE_C(ss, s_at, acc_s, BCP);
        STORE_C(sdp, s_at, acc_p, BCP);
    }
}
