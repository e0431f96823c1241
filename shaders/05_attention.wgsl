// Causal grouped-query attention: the training forward, one-token decode
// and the KV-cache append that precedes it.
// Legend: B batch, T sequence, H query heads, Hkv key/value heads (H/Hkv = G
// query heads share kv head h / G), Dh head dim (DH, a multiple of 16 up to
// 128), L cache length, Lmax cache capacity. Row b·T + t holds token t of
// sequence b; head h of a q/k/v row sits at columns col + h·Dh of rows
// `stride` apart, so q, k, v may be column ranges of one fused [q | k | v]
// row. Scores s = q·k / sqrt(Dh); softmax and its sums in f32 with the
// running max subtracted (online softmax), so scores of any size stay
// finite; the T×T matrix never exists.

@group(0) @binding(4) var<storage, read_write> o: array<vec4<f32>>;  // [B·T, H·Dh] (decode: [B, H·Dh])
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;      // [B·T, H], saved for backward

// attention_forward (flash attention): one query row per slot of LANES
// invocations, its q and output accumulator in registers (COLS ≤ 64
// columns each); the workgroup streams K|V tiles of TILE keys through
// workgroup memory, read by
// broadcast, for Gw heads × block_rows queries that share a kv head. Keys
// are taken one at a time, in order, with the online softmax
//   if s > m: α = exp(m − s), l = α·l, acc = α·acc, m = s
//   p = exp(s − m), l += p, acc += p·v
// so every sum has one order whatever the tile size, and o = acc / l,
// lse = m + log l. Keys after the query are skipped (only the diagonal
// tile masks), and tiles past the block's last query are never staged.
// In sf16 (NUMERICS) a first pass over the scores gives the final m and l,
// so the second writes each probability normalized and rounded to Q1.15,
// p = q115(exp(s − m) / l) (the SF16 document's softmax write-back), and
// o = acc. With ATTN_F16, q, k and v are rounded to f16 as they are read
// and each p as it multiplies v (l sums p unrounded: FlashAttention's f16
// path rounds its P tile after the row sums).
// Stages the K (and V) tile at key0 and each lane's part of the scores of
// the keys its query sees; returns how many (`score_sum` reads them). Holds
// barriers: call from uniform control flow.
fn score_tile(s: QuerySlot, qr: Row, key0: u32, with_v: bool, lidx: u32) -> u32 {
    workgroupBarrier();  // the last tile's readers are done
    stage_kv(s.b, key0, s.kvh, with_v, lidx);
    workgroupBarrier();
    let n = visible_keys(s.t, key0, s.live);
    for (var j = 0u; j < n; j++) { score_part[j * ROW_WG + lidx] = row_dot(qr, tile_row(true, j, s.lane)); }
    if (LANES > 1u) { workgroupBarrier(); }
    return n;
}

fn attention_out(x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(matmul_boundary(x.x, SITE_ATTENTION), matmul_boundary(x.y, SITE_ATTENTION),
                     matmul_boundary(x.z, SITE_ATTENTION), matmul_boundary(x.w, SITE_ATTENTION));
}

fn store_chunk(at: u32, x: mat4x4<f32>) {
    for (var c = 0u; c < 4u; c++) { o[at + c] = attention_out(x[c]); }
}

@compute @workgroup_size(ROW_WG)
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    let t_len = params.seq_len;
    let bq = params.block_rows;
    let g = flat_group(wid, nwg);
    if (g >= query_workgroups()) { return; }  // uniform
    let s = query_slot(g, lidx);
    let row = s.b * t_len + s.t;
    var qr: Row;
    if (s.live) { qr = row_of(FROM_Q, q_at(row, s.h) + s.lane * COLS4); }
    let key_end = min(block_first_query(g) + bq, t_len);  // uniform: the loops hold barriers

    let sf16 = NUMERICS == SF16;
    var m = NEG_BIG;
    var l = 0.0;
    if (sf16) {
        for (var key0 = 0u; key0 < key_end; key0 += TILE) {
            let n = score_tile(s, qr, key0, false, lidx);
            for (var j = 0u; j < n; j++) {
                let sc = score_sum(j, lidx) * params.scale;
                if (sc > m) { l *= exp(m - sc); m = sc; }
                l += exp(sc - m);
            }
        }
    }
    var acc: Row;
    for (var key0 = 0u; key0 < key_end; key0 += TILE) {
        let n = score_tile(s, qr, key0, true, lidx);
        for (var j = 0u; j < n; j++) {
            let sc = score_sum(j, lidx) * params.scale;
            var p: f32;
            if (sf16) {
                // rounded by every lane of the row, counted by the first
                let x = exp(sc - m) / l;
                if (s.lane == 0u) { p = boundary(x, SITE_SOFTMAX); } else { p = q115(x); }
            } else {
                if (sc > m) {
                    let alpha = exp(m - sc);
                    l *= alpha;
                    acc = row_scaled(acc, alpha);
                    m = sc;
                }
                p = exp(sc - m);
                l += p;
            }
            acc = row_axpy(attn_operand(p), tile_row(false, j, s.lane), acc);
        }
    }

    if (s.live) {
        let out = row_scaled(acc, select(1.0 / l, 1.0, sf16));  // l ≥ 1: the row's max contributes exp(0)
        let at = o_at(row, s.h) + s.lane * COLS4;
        store_chunk(at, out.c0);
        if (CHUNKS > 1u) { store_chunk(at + 4u, out.c1); }
        if (CHUNKS > 2u) { store_chunk(at + 8u, out.c2); }
        if (CHUNKS > 3u) { store_chunk(at + 12u, out.c3); }
        if (s.lane == 0u) { lse[row * params.heads + s.h] = m + log(l); }
    }
}

// attention_decode: one new query per sequence (row b of q) against keys
// 0..L−1 of the cache (the new token's k and v already written at L−1).
// One workgroup per (head, sequence). Keys go in blocks of WG, one per
// invocation (a full Dh dot), with the online softmax per block; for p·V,
// invocation x owns the 4 columns x % (Dh/4) of key subset x / (Dh/4)
// (WG·4/Dh subsets, summed in order at the end). Deterministic; saves
// nothing. In sf16, as attention_forward: a first pass for the final max
// and sum, then each probability normalized and rounded as it is written,
// the output rounded. With ATTN_F16, q, k, v and each p·v's p in f16, as
// attention_forward.
var<workgroup> q_row: array<vec4<f32>, DH4>;
var<workgroup> p_block: array<f32, WG>;
var<workgroup> pv_part: array<vec4<f32>, WG>;

// The new query's scaled score against cache row `key` of its sequence;
// NEG_BIG past L.
fn decode_score(b: u32, kvh: u32, key: u32) -> f32 {
    if (key >= params.seq_len) { return NEG_BIG; }
    let at = k_at(b * params.cache_len + key, kvh);
    var s = 0.0;
    for (var c = 0u; c < DH4; c++) { s += dot(q_row[c], attn_operand4(k[at + c])); }
    return s * params.scale;
}

@compute @workgroup_size(WG)
fn attention_decode(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let g = flat_group(wid, nwg);
    if (g >= params.heads * params.batch) { return; }  // uniform
    let h = g % params.heads;
    let b = g / params.heads;
    let kvh = h / (params.heads / params.kv_heads);
    let len = params.seq_len;
    let subsets = WG / DH4;
    let col = lidx % DH4;
    let subset = lidx / DH4;  // ≥ subsets (when Dh/4 does not divide WG): idle in p·V

    if (lidx < DH4) { q_row[lidx] = attn_operand4(q[q_at(b, h) + lidx]); }
    workgroupBarrier();

    let sf16 = NUMERICS == SF16;
    var m = NEG_BIG;
    var l = 0.0;
    if (sf16) {
        for (var key0 = 0u; key0 < len; key0 += WG) {
            let s = decode_score(b, kvh, key0 + lidx);
            let m_new = max(m, workgroup_max(s, lidx));
            l = exp(m - m_new) * l + workgroup_sum(select(0.0, exp(s - m_new), s > NEG_BIG), lidx);
            m = m_new;
        }
    }
    var acc = vec4<f32>(0.0);
    for (var key0 = 0u; key0 < len; key0 += WG) {
        let s = decode_score(b, kvh, key0 + lidx);
        let visible = s > NEG_BIG;
        var m_new = m;
        if (!sf16) { m_new = max(m, workgroup_max(s, lidx)); }
        let alpha = exp(m - m_new);
        var p = select(0.0, exp(s - m_new), visible);
        if (sf16) { p = boundary(p / l, select(SITE_NONE, SITE_SOFTMAX, visible)); }
        p_block[lidx] = attn_operand(p);
        let p_sum = workgroup_sum(p, lidx);  // its barriers also publish p_block
        if (!sf16) { l = alpha * l + p_sum; }
        var pv = vec4<f32>(0.0);
        for (var kk = subset; kk < min(WG, len - key0) && subset < subsets; kk += subsets) {
            pv += p_block[kk] * attn_operand4(v[v_at(b * params.cache_len + key0 + kk, kvh) + col]);
        }
        acc = alpha * acc + pv;
        m = m_new;
        workgroupBarrier();  // p_block is rewritten by the next block
    }

    pv_part[lidx] = acc;
    workgroupBarrier();
    if (lidx < DH4) {
        var total = vec4<f32>(0.0);
        for (var x = 0u; x < subsets; x++) { total += pv_part[x * DH4 + lidx]; }
        o[o_at(b, h) + lidx] = attention_out(select(total / l, total, sf16));
    }
}

// kv_append: the new tokens' k and v heads (row b of the k and v views,
// e.g. column ranges of a decode step's fused [q | k | v] rows, k rotated)
// into cache row b·Lmax + L − 1, before attention_decode reads rows 0..L−1.
// That row's byte offset is seldom a multiple of the 256-B binding
// alignment, so the caches are bound whole and written here. One invocation
// per (sequence, 4 cache columns); a plain copy, exact.
@group(0) @binding(6) var<storage, read_write> k_cache: array<vec4<f32>>;  // [B·Lmax, Hkv·Dh]
@group(0) @binding(7) var<storage, read_write> v_cache: array<vec4<f32>>;  // [B·Lmax, Hkv·Dh]

@compute @workgroup_size(WG)
fn kv_append(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    let width = params.kv_heads * DH4;
    if (i >= params.batch * width) { return; }
    let b = i / width;
    let e = i % width;
    let kvh = e / DH4;
    let c = e % DH4;
    let at = (b * params.cache_len + params.seq_len - 1u) * width + e;
    k_cache[at] = k[k_at(b, kvh) + c];
    v_cache[at] = v[v_at(b, kvh) + c];
}
