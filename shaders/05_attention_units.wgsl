// attention_units_forward: attention_forward (05_attention.wgsl) on matrix
// units, for a recipe whose attention operands are f16 (ATTN_F16): q·kᵀ
// and p·v multiply f16 fragments with f32 accumulation. Legend and views
// in 05_attention.wgsl; the prelude is 05_attention_common.wgsl.
//
// A workgroup takes BR queries of one head of one sequence: SGS = BR / T
// subgroups, subgroup g owning query rows g·T.. of the block. Its q rows
// are staged as f16 once; then for each block of BC keys up to the block's
// last query:
//   1. the keys' k and v rows, as f16, into workgroup memory;
//   2. S = q·kᵀ: each subgroup its T × BC scores (f32) into `ss`;
//   3. each row in plain code: the block's max m' of its visible scaled
//      scores, α = exp(m − m'), p = exp(s·scale − m') (0 past the
//      diagonal), l = α·l + Σp, the row's p as f16 into `sp`, its output
//      accumulator scaled by α;
//   4. O += p·v: each subgroup its T × DH outputs, through `so` (f32).
// Then o = O / l, lse = m + log l. One max per key block, so p is rounded
// relative to it: the twin's `attend(.., (scale, BC))`.
//
// Composed by kernels/units/attention.rs, which declares T, SG, SGS, UWG
// (the workgroup: 00_common.wgsl's WG is another), BR, BC and the strides
// DHP = DH + 8, BCP = BC + 8 (halves or floats: rows stay 16-byte aligned
// for the fragment loads). The fragment operations are neutral (FRAG_A /
// FRAG_B row-major, FRAG_BT column-major: B given transposed; FRAG_C an
// f32 accumulator, STORE_C, MMA(a, b, c) = a·b + c; all on workgroup
// memory) and spelled by kernels/units/syntax.rs for the device's units.

@group(0) @binding(4) var<storage, read_write> o: array<vec4<f32>>;  // [B·T, H·Dh]
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;      // [B·T, H]

var<workgroup> sq: array<f16, BR * DHP>;
var<workgroup> sk: array<f16, BC * DHP>;
var<workgroup> sv: array<f16, BC * DHP>;
var<workgroup> ss: array<f32, BR * BCP>;
var<workgroup> sp: array<f16, BR * BCP>;
var<workgroup> so: array<f32, BR * DHP>;
var<workgroup> row_m: array<f32, BR>;
var<workgroup> row_l: array<f32, BR>;

// q's rows are staged alone: no partner.
fn q_partner(row: u32, h: u32, c: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

fn put_q(at: u32, x: vec4<f32>, y: vec4<f32>) {
    for (var i = 0u; i < 4u; i++) { sq[at + i] = f16(x[i]); }
}

// o = O / l (l ≥ 1: the row's max contributes exp(0)) and lse = m + log l.
fn write_chunk(r: u32, c: u32, row: u32, h: u32) {
    let at = r * DHP + 4u * c;
    let x = vec4<f32>(so[at], so[at + 1u], so[at + 2u], so[at + 3u]);
    o[o_at(row, h) + c] = x / row_l[r];
    if (c == 0u) { lse[row * params.heads + h] = row_m[r] + log(row_l[r]); }
}

@compute @workgroup_size(UWG)
fn attention_units_forward(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    //#SUBGROUP_ID
    @builtin(local_invocation_index) li: u32,
) {
    //#SUBGROUP
    let t_len = params.seq_len;
    let block = unit_block(wid, nwg, params.heads);
    let q0 = block.first;
    let b = block.batch;
    let kvh = block.head / (params.heads / params.kv_heads);
    let row0 = sg * T;  // this subgroup's first row of the block

    stage(li, BR, q0, b, block.head, false);
    for (var e = li; e < BR * DHP; e += UWG) { so[e] = 0.0; }
    for (var r = li; r < BR; r += UWG) {
        row_m[r] = NEG_BIG;
        row_l[r] = 0.0;
    }

    let key_end = min(q0 + BR, t_len);  // uniform: the loop holds barriers
    for (var k0 = 0u; k0 < key_end; k0 += BC) {
        workgroupBarrier();  // the last block's readers are done
        stage(li, BC, k0, b, kvh, true);
        workgroupBarrier();

        // S = q·kᵀ, this subgroup's rows
        for (var j = 0u; j < BC; j += T) {
            var acc = MatC();
            for (var kk = 0u; kk < DH; kk += T) {
                let a_at = row0 * DHP + kk;
                let b_at = j * DHP + kk;
                let fa = FRAG_A(sq, a_at, DHP);
                let fb = FRAG_BT(sk, b_at, DHP);
                acc = MMA(fa, fb, acc);
            }
            let s_at = row0 * BCP + j;
            STORE_C(ss, s_at, acc, BCP);
        }
        workgroupBarrier();

        // the block's softmax, row by row
        for (var r = li; r < BR; r += UWG) {
            let t = q0 + r;
            var n = 0u;  // keys of the block that query t sees
            if (t < t_len && t >= k0) { n = min(BC, t + 1u - k0); }
            let m = row_m[r];
            var m_new = m;
            for (var j = 0u; j < n; j++) { m_new = max(m_new, ss[r * BCP + j] * params.scale); }
            let alpha = exp(m - m_new);
            var sum = 0.0;
            for (var j = 0u; j < BC; j++) {
                var p = 0.0;
                if (j < n) { p = exp(ss[r * BCP + j] * params.scale - m_new); }
                sum += p;
                sp[r * BCP + j] = f16(attn_operand(p));
            }
            row_l[r] = alpha * row_l[r] + sum;
            row_m[r] = m_new;
            for (var c = 0u; c < DH; c++) { so[r * DHP + c] *= alpha; }
        }
        workgroupBarrier();

        // O += p·v, this subgroup's rows
        for (var d = 0u; d < DH; d += T) {
            let o_at = row0 * DHP + d;
            var acc = FRAG_C(so, o_at, DHP);
            for (var kk = 0u; kk < BC; kk += T) {
                let a_at = row0 * BCP + kk;
                let b_at = kk * DHP + d;
                let fa = FRAG_A(sp, a_at, BCP);
                let fb = FRAG_B(sv, b_at, DHP);
                acc = MMA(fa, fb, acc);
            }
            STORE_C(so, o_at, acc, DHP);
        }
    }
    workgroupBarrier();
    write_rows(li, block);
}
