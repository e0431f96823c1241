// attention_units_dkv: attention_backward_dkv (05_attention_backward.wgsl)
// on matrix units, for a recipe whose attention operands are f16: the
// key-major pass, dV = Pᵀ·dO and dK = scale·dSᵀ·q, after attention_units_dq
// wrote Δ. Legend in 05_attention.wgsl; composed as 05_attention_units.wgsl
// (whose header lists the constants and fragment operations), here with
// BR keys of one kv head a workgroup (subgroup g owning keys g·T..) and
// blocks of BC queries.
//
// k and v rows as f16 once; then for each query head of the kv head, in
// order, and each block of queries from the one holding the first key on:
// q and dO rows as f16 with their lse and Δ; Sᵀ = k·qᵀ and dPᵀ = v·dOᵀ
// (each subgroup its T keys) into `ss` and `sdp`; each key in plain code:
// p and dS for the queries that see it (0 before it), as f16 into `sp` and
// `sds`; dV += Pᵀ·dO and dK += dSᵀ·q through `sdv` and `sdk` (f32).

@group(0) @binding(5) var<storage, read> d_o: array<vec4<f32>>;  // [B·T, H·Dh]
@group(0) @binding(6) var<storage, read> lse: array<f32>;        // [B·T, H]
@group(0) @binding(7) var<storage, read> delta_in: array<f32>;   // [B·T, H], from attention_units_dq
@group(0) @binding(8) var<storage, read_write> dkv: array<vec4<f32>>;  // [B·T, dkv_stride]

var<workgroup> sk: array<f16, BR * DHP>;
var<workgroup> sv: array<f16, BR * DHP>;
var<workgroup> sq: array<f16, BC * DHP>;
var<workgroup> sdo: array<f16, BC * DHP>;
var<workgroup> ss: array<f32, BR * BCP>;
var<workgroup> sdp: array<f32, BR * BCP>;
var<workgroup> sp: array<f16, BR * BCP>;
var<workgroup> sds: array<f16, BR * BCP>;
var<workgroup> sdk: array<f32, BR * DHP>;
var<workgroup> sdv: array<f32, BR * DHP>;
var<workgroup> col_lse: array<f32, BC>;
var<workgroup> col_delta: array<f32, BC>;

// dK·scale and dV into their columns of dkv.
fn write_chunk(r: u32, c: u32, row: u32, kvh: u32) {
    let at = r * DHP + 4u * c;
    let base = row * params.dkv_stride + kvh * DH;
    let dk = vec4<f32>(sdk[at], sdk[at + 1u], sdk[at + 2u], sdk[at + 3u]);
    let dv = vec4<f32>(sdv[at], sdv[at + 1u], sdv[at + 2u], sdv[at + 3u]);
    dkv[(base + params.dk_col) / 4u + c] = dk * params.scale;
    dkv[(base + params.dv_col) / 4u + c] = dv;
}

@compute @workgroup_size(UWG)
fn attention_units_dkv(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    //#SUBGROUP_ID
    @builtin(local_invocation_index) li: u32,
) {
    //#SUBGROUP
    let t_len = params.seq_len;
    let block = unit_block(wid, nwg, params.kv_heads);
    let key0 = block.first;
    let kvh = block.head;
    let b = block.batch;
    let group = params.heads / params.kv_heads;
    let row0 = sg * T;

    stage(li, BR, key0, b, kvh, true);
    for (var e = li; e < BR * DHP; e += UWG) {
        sdk[e] = 0.0;
        sdv[e] = 0.0;
    }

    // the first block of queries that sees a key of this block
    let t_first = (key0 / BC) * BC;
    for (var h = kvh * group; h < (kvh + 1u) * group; h++) {
        for (var t0 = t_first; t0 < t_len; t0 += BC) {
            workgroupBarrier();  // the last block's readers are done
            stage(li, BC, t0, b, h, false);
            for (var j = li; j < BC; j += UWG) {
                var l = 0.0;
                var d = 0.0;
                if (t0 + j < t_len) {
                    let at = (b * t_len + t0 + j) * params.heads + h;
                    l = lse[at];
                    d = delta_in[at];
                }
                col_lse[j] = l;
                col_delta[j] = d;
            }
            workgroupBarrier();

            scores_and_dp(row0);
            workgroupBarrier();

            // p and dS, key by key
            for (var r = li; r < BR; r += UWG) {
                let key = key0 + r;
                for (var j = 0u; j < BC; j++) {
                    let t = t0 + j;
                    var p = 0.0;
                    var ds = 0.0;
                    if (key < t_len && t < t_len && t >= key) {
                        p = exp(ss[r * BCP + j] * params.scale - col_lse[j]);
                        ds = p * (sdp[r * BCP + j] - col_delta[j]);
                    }
                    sp[r * BCP + j] = f16(attn_operand(p));
                    sds[r * BCP + j] = f16(attn_operand(ds));
                }
            }
            workgroupBarrier();

            // dV += Pᵀ·dO and dK += dSᵀ·q, this subgroup's keys
            for (var d = 0u; d < DH; d += T) {
                let g_at = row0 * DHP + d;
                var acc_v = FRAG_C(sdv, g_at, DHP);
                var acc_k = FRAG_C(sdk, g_at, DHP);
                for (var kk = 0u; kk < BC; kk += T) {
                    let a_at = row0 * BCP + kk;
                    let b_at = kk * DHP + d;
                    let fp = FRAG_A(sp, a_at, BCP);
                    let fd = FRAG_B(sdo, b_at, DHP);
                    acc_v = MMA(fp, fd, acc_v);
                    let fs = FRAG_A(sds, a_at, BCP);
                    let fq = FRAG_B(sq, b_at, DHP);
                    acc_k = MMA(fs, fq, acc_k);
                }
                STORE_C(sdv, g_at, acc_v, DHP);
                STORE_C(sdk, g_at, acc_k, DHP);
            }
        }
    }
    workgroupBarrier();
    write_rows(li, block);
}
