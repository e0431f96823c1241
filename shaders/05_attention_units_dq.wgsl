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

// dQ·scale into its columns of dq.
fn write_chunk(r: u32, c: u32, row: u32, h: u32) {
    let at = r * DHP + 4u * c;
    let x = vec4<f32>(sdq[at], sdq[at + 1u], sdq[at + 2u], sdq[at + 3u]);
    dq[(row * params.dq_stride + params.dq_col) / 4u + h * DH4 + c] = x * params.scale;
}

@compute @workgroup_size(UWG)
fn attention_units_dq(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    //#SUBGROUP_ID
    @builtin(local_invocation_index) li: u32,
) {
    //#SUBGROUP
    let t_len = params.seq_len;
    let block = unit_block(wid, nwg, params.heads);
    let q0 = block.first;
    let h = block.head;
    let b = block.batch;
    let kvh = h / (params.heads / params.kv_heads);
    let row0 = sg * T;

    stage(li, BR, q0, b, h, false);
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
            if (block.live) { delta[row * params.heads + h] = d; }
        }
        row_delta[r] = d;
        row_lse[r] = l;
    }

    let key_end = min(q0 + BR, t_len);  // uniform: the loop holds barriers
    for (var k0 = 0u; k0 < key_end; k0 += BC) {
        workgroupBarrier();  // the last block's readers are done
        stage(li, BC, k0, b, kvh, true);
        workgroupBarrier();

        scores_and_dp(row0);
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
    write_rows(li, block);
}
