// attention_units_dq: attention_backward_dq (05_attention_backward.wgsl) on
// matrix units, for a recipe whose attention operands are f16: the
// query-major pass of the backward, dQ = scale·dS·K with dS = P∘(dP − Δ),
// P = exp(s − lse) from the forward's lse, dP = dO·vᵀ; also writes Δ =
// dO·O for attention_units_dkv. Legend in 05_attention.wgsl; composed as
// 05_attention_units.wgsl (whose header lists the constants and fragment
// operations), BR queries of one head a workgroup, blocks of BC keys.
//
// Per block of keys up to the block's last query: k and v rows as f16;
// S = q·kᵀ and dP = dO·vᵀ (each subgroup its T rows) into `ss` and `sdp`;
// each row in plain code: dS for its visible keys (0 past the diagonal),
// as f16 into `sds`; dQ += dS·k through `sdq` (f32). No max, no order of
// maxima: P comes from lse, as the scalar kernel's.

@group(0) @binding(4) var<storage, read> o: array<vec4<f32>>;    // [B·T, H·Dh], the forward's output
@group(0) @binding(5) var<storage, read> d_o: array<vec4<f32>>;  // [B·T, H·Dh]
@group(0) @binding(6) var<storage, read> lse: array<f32>;        // [B·T, H]
@group(0) @binding(7) var<storage, read_write> dq: array<vec4<f32>>;  // [B·T, dq_stride]
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;     // [B·T, H]

var<workgroup> sq: array<f16, BR * DHP>;
var<workgroup> sdo: array<f16, BR * DHP>;
var<workgroup> sk: array<f16, BC * DHP>;
var<workgroup> sv: array<f16, BC * DHP>;
var<workgroup> ss: array<f32, BR * BCP>;
var<workgroup> sdp: array<f32, BR * BCP>;
var<workgroup> sds: array<f16, BR * BCP>;
var<workgroup> sdq: array<f32, BR * DHP>;
var<workgroup> row_lse: array<f32, BR>;
var<workgroup> row_delta: array<f32, BR>;

@compute @workgroup_size(UWG)
fn attention_units_dq(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    //#SUBGROUP_ID
    @builtin(local_invocation_index) li: u32,
) {
    //#SUBGROUP
    let t_len = params.seq_len;
    let blocks = (t_len + BR - 1u) / BR;
    // spare workgroups of a 2-D grid redo the last block and write nothing
    let groups = blocks * params.heads * params.batch;
    let live = flat_group(wid, nwg) < groups;
    let g = min(flat_group(wid, nwg), groups - 1u);
    let q0 = (g % blocks) * BR;
    let h = (g / blocks) % params.heads;
    let b = g / (blocks * params.heads);
    let kvh = h / (params.heads / params.kv_heads);
    let row0 = sg * T;

    for (var e = li; e < BR * DH4; e += UWG) {
        let r = e / DH4;
        let c = e % DH4;
        var x = vec4<f32>(0.0);
        var y = vec4<f32>(0.0);
        if (q0 + r < t_len) {
            let row = b * t_len + q0 + r;
            x = attn_operand4(q[q_at(row, h) + c]);
            y = attn_operand4(d_o[o_at(row, h) + c]);
        }
        for (var i = 0u; i < 4u; i++) {
            sq[r * DHP + 4u * c + i] = f16(x[i]);
            sdo[r * DHP + 4u * c + i] = f16(y[i]);
        }
    }
    for (var e = li; e < BR * DHP; e += UWG) { sdq[e] = 0.0; }
    // Δ = dO·O (dO as the products read it, O the forward's f32) and lse
    for (var r = li; r < BR; r += UWG) {
        let t = q0 + r;
        var d = 0.0;
        var l = 0.0;
        if (t < t_len) {
            let row = b * t_len + t;
            for (var c = 0u; c < DH4; c++) { d += dot(attn_operand4(d_o[o_at(row, h) + c]), o[o_at(row, h) + c]); }
            l = lse[row * params.heads + h];
            if (live) { delta[row * params.heads + h] = d; }
        }
        row_delta[r] = d;
        row_lse[r] = l;
    }

    let key_end = min(q0 + BR, t_len);  // uniform: the loop holds barriers
    for (var k0 = 0u; k0 < key_end; k0 += BC) {
        workgroupBarrier();  // the last block's readers are done
        for (var e = li; e < BC * DH4; e += UWG) {
            let r = e / DH4;
            let c = e % DH4;
            var x = vec4<f32>(0.0);
            var y = vec4<f32>(0.0);
            if (k0 + r < t_len) {
                let row = b * t_len + k0 + r;
                x = attn_operand4(k[k_at(row, kvh) + c]);
                y = attn_operand4(v[v_at(row, kvh) + c]);
            }
            for (var i = 0u; i < 4u; i++) {
                sk[r * DHP + 4u * c + i] = f16(x[i]);
                sv[r * DHP + 4u * c + i] = f16(y[i]);
            }
        }
        workgroupBarrier();

        // S = q·kᵀ and dP = dO·vᵀ, this subgroup's rows
        for (var j = 0u; j < BC; j += T) {
            var acc_s = MatC();
            var acc_p = MatC();
            for (var kk = 0u; kk < DH; kk += T) {
                let a_at = row0 * DHP + kk;
                let b_at = j * DHP + kk;
                let fq = FRAG_A(sq, a_at, DHP);
                let fk = FRAG_BT(sk, b_at, DHP);
                acc_s = MMA(fq, fk, acc_s);
                let fd = FRAG_A(sdo, a_at, DHP);
                let fv = FRAG_BT(sv, b_at, DHP);
                acc_p = MMA(fd, fv, acc_p);
            }
            let s_at = row0 * BCP + j;
            STORE_C(ss, s_at, acc_s, BCP);
            STORE_C(sdp, s_at, acc_p, BCP);
        }
        workgroupBarrier();

        // dS, row by row
        for (var r = li; r < BR; r += UWG) {
            let t = q0 + r;
            var n = 0u;  // keys of the block that query t sees
            if (t < t_len && t >= k0) { n = min(BC, t + 1u - k0); }
            for (var j = 0u; j < BC; j++) {
                var ds = 0.0;
                if (j < n) {
                    let p = exp(ss[r * BCP + j] * params.scale - row_lse[r]);
                    ds = p * (sdp[r * BCP + j] - row_delta[r]);
                }
                sds[r * BCP + j] = f16(attn_operand(ds));
            }
        }
        workgroupBarrier();

        // dQ += dS·k, this subgroup's rows
        for (var d = 0u; d < DH; d += T) {
            let g_at = row0 * DHP + d;
            var acc = FRAG_C(sdq, g_at, DHP);
            for (var kk = 0u; kk < BC; kk += T) {
                let a_at = row0 * BCP + kk;
                let b_at = kk * DHP + d;
                let fs = FRAG_A(sds, a_at, BCP);
                let fk = FRAG_B(sk, b_at, DHP);
                acc = MMA(fs, fk, acc);
            }
            STORE_C(sdq, g_at, acc, DHP);
        }
    }
    workgroupBarrier();

    for (var e = li; e < BR * DH4; e += UWG) {
        let r = e / DH4;
        let c = e % DH4;
        let t = q0 + r;
        if (live && t < t_len) {
            let at = r * DHP + 4u * c;
            let x = vec4<f32>(sdq[at], sdq[at + 1u], sdq[at + 2u], sdq[at + 3u]);
            dq[((b * t_len + t) * params.dq_stride + params.dq_col) / 4u + h * DH4 + c] = x * params.scale;
        }
    }
}
