// Causal grouped-query attention: the training forward, one-token decode
// and the KV-cache append that precedes it.
// Legend: B batch, T sequence, H query heads, Hkv key/value heads (H/Hkv = G
// query heads share kv head h / G), Dh head dim (multiple of 16, ≤ 128),
// L cache length, Lmax cache capacity. Row b·T + t holds token t of sequence
// b; head h of a q/k/v row sits at columns col + h·Dh of rows `stride`
// apart, so q, k, v may be column ranges of one fused [q | k | v] row.
// Scores s = q·k / sqrt(Dh); softmax and its sums in f32 with the running
// max subtracted (online softmax), so scores of any size stay finite; the
// T×T matrix never exists.

const DC: u32 = 64u;      // head-dim columns per staged K or V chunk

@group(0) @binding(4) var<storage, read_write> o: array<f32>;     // [B·T, H·Dh] (decode: [B, H·Dh])
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;   // [B·T, H], saved for backward

// attention_forward: one workgroup per (query block, head, sequence).
// Q stays in shared memory; K then V of each key block pass through one
// [BK, DC] tile. Invocation (r, j) scores query r against key j of the
// block, then owns columns d = j + BK·i of query r's output. Per key block:
//   m' = max(m, max_j s_j), p_j = exp(s_j − m'), α = exp(m − m')
//   l = α·l + Σ_j p_j,  acc = α·acc + Σ_j p_j·v_j
// o = acc / l and lse = m + log l at the end. Every sum runs in a fixed
// order and the BK invocations of a row compute identical m and l.
// In sf16 (NUMERICS) a first pass over the scores gives the final m and l,
// so the second writes each probability normalized and rounded to Q1.15,
// p_j = q115(exp(s_j − m) / l) (the SF16 document's softmax write-back),
// with α = 1 and o = acc.
var<workgroup> q_tile: array<f32, BQ * MAX_DH>;  // [BQ, Dh]
var<workgroup> kv_tile: array<f32, BK * DC>;     // [BK, DC]
var<workgroup> s_tile: array<f32, BQ * BK>;      // scores
var<workgroup> p_tile: array<f32, BQ * BK>;      // probabilities (unnormalized; sf16: normalized, rounded)

// Stages columns c0.. of the key block's K (or V) rows; zero past T and Dh.
fn stage_kv(from_k: bool, b: u32, key0: u32, kvh: u32, c0: u32, lidx: u32) {
    for (var e = lidx; e < BK * DC; e += WG) {
        let key = key0 + e / DC;
        let d = c0 + e % DC;
        let row = b * params.seq_len + key;
        var x = 0.0;
        if (key < params.seq_len && d < params.head_dim) {
            if (from_k) { x = k[k_at(row, kvh) + d]; } else { x = v[v_at(row, kvh) + d]; }
        }
        kv_tile[e] = x;
    }
}

// Query r's scaled score against key j of the block at key0, NEG_BIG
// where masked (causal, or past T). Holds barriers: call from uniform
// control flow.
fn block_score(b: u32, key0: u32, kvh: u32, r: u32, j: u32, t: u32, lidx: u32) -> f32 {
    var s = 0.0;
    for (var c0 = 0u; c0 < params.head_dim; c0 += DC) {
        workgroupBarrier();  // the tile's last readers are done
        stage_kv(true, b, key0, kvh, c0, lidx);
        workgroupBarrier();
        for (var d = 0u; d < min(DC, params.head_dim - c0); d++) {
            s += q_tile[r * MAX_DH + c0 + d] * kv_tile[j * DC + d];
        }
    }
    let key = key0 + j;
    return select(NEG_BIG, s * params.scale, key <= t && key < params.seq_len);
}

@compute @workgroup_size(WG)
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    let t_len = params.seq_len;
    let dh = params.head_dim;
    let blocks = (t_len + BQ - 1u) / BQ;
    let g = flat_group(wid, nwg);
    if (g >= blocks * params.heads * params.batch) { return; }  // uniform: the whole workgroup leaves
    let t0 = (g % blocks) * BQ;
    let h = (g / blocks) % params.heads;
    let b = g / (blocks * params.heads);
    let kvh = h / (params.heads / params.kv_heads);
    let r = lidx / BK;
    let j = lidx % BK;
    let t = t0 + r;               // this invocation's query; rows past T compute but never store
    let row = b * t_len + t;

    for (var e = lidx; e < BQ * MAX_DH; e += WG) {
        let tq = t0 + e / MAX_DH;
        let d = e % MAX_DH;
        var x = 0.0;
        if (tq < t_len && d < dh) { x = q[q_at(b * t_len + tq, h) + d]; }
        q_tile[e] = x;
    }

    let sf16 = NUMERICS == SF16;
    let key_end = min(t0 + BQ, t_len);  // keys past the block's last query are masked for every row
    var m = NEG_BIG;
    var l = 0.0;
    if (sf16) {
        // sf16 rounds each normalized probability as it is written, so the
        // row's final max and sum come first, from a pass over the scores
        for (var key0 = 0u; key0 < key_end; key0 += BK) {
            s_tile[lidx] = block_score(b, key0, kvh, r, j, t, lidx);
            workgroupBarrier();
            var block_max = NEG_BIG;
            for (var jj = 0u; jj < BK; jj++) { block_max = max(block_max, s_tile[r * BK + jj]); }
            let m_new = max(m, block_max);
            var p_sum = 0.0;
            for (var jj = 0u; jj < BK; jj++) {
                let sc = s_tile[r * BK + jj];
                p_sum += select(0.0, exp(sc - m_new), sc > NEG_BIG);
            }
            l = exp(m - m_new) * l + p_sum;
            m = m_new;
            workgroupBarrier();  // s_tile's readers are done
        }
    }
    var acc: array<f32, SLOTS>;
    for (var key0 = 0u; key0 < key_end; key0 += BK) {
        let scaled = block_score(b, key0, kvh, r, j, t, lidx);
        let visible = scaled > NEG_BIG;
        s_tile[lidx] = scaled;
        workgroupBarrier();
        var block_max = NEG_BIG;
        for (var jj = 0u; jj < BK; jj++) { block_max = max(block_max, s_tile[r * BK + jj]); }
        let m_new = select(max(m, block_max), m, sf16);
        let alpha = exp(m - m_new);
        var p = select(0.0, exp(scaled - m_new), visible);
        if (sf16) { p = boundary(p / l, select(SITE_NONE, SITE_SOFTMAX, visible && t < t_len)); }
        p_tile[lidx] = p;
        m = m_new;
        for (var c0 = 0u; c0 < dh; c0 += DC) {
            workgroupBarrier();
            stage_kv(false, b, key0, kvh, c0, lidx);
            workgroupBarrier();
            if (c0 == 0u && !sf16) {
                var p_sum = 0.0;
                for (var jj = 0u; jj < BK; jj++) { p_sum += p_tile[r * BK + jj]; }
                l = alpha * l + p_sum;
            }
            for (var i = c0 / BK; i < min(c0 + DC, dh) / BK; i++) {
                let dl = j + BK * i - c0;
                var pv = 0.0;
                for (var jj = 0u; jj < BK; jj++) { pv += p_tile[r * BK + jj] * kv_tile[jj * DC + dl]; }
                acc[i] = alpha * acc[i] + pv;
            }
        }
    }

    if (t < t_len) {
        let inv_l = select(1.0 / l, 1.0, sf16);  // l ≥ 1: the row's max contributes exp(0)
        for (var i = 0u; i < dh / BK; i++) {
            o[row * params.heads * dh + h * dh + j + BK * i] = matmul_boundary(acc[i] * inv_l, SITE_ATTENTION);
        }
        if (j == 0u) { lse[row * params.heads + h] = m + log(l); }
    }
}

// attention_decode: one new query per sequence (row b of q) against keys
// 0..L−1 of the cache (the new token's k and v already written at L−1).
// One workgroup per (head, sequence). Keys go in blocks of WG, one per
// invocation (a full Dh dot), with the same online softmax; for p·V,
// invocation x owns column x % Dh of key subset x / Dh (WG / Dh subsets,
// summed in order at the end). Deterministic; saves nothing. In sf16, as
// attention_forward: a first pass for the final max and sum, then each
// probability normalized and rounded as it is written, the output rounded.
var<workgroup> q_row: array<f32, MAX_DH>;
var<workgroup> p_block: array<f32, WG>;

// The new query's scaled score against cache row `key` of its sequence;
// NEG_BIG past L.
fn decode_score(b: u32, kvh: u32, key: u32) -> f32 {
    if (key >= params.seq_len) { return NEG_BIG; }
    let at = k_at(b * params.cache_len + key, kvh);
    var dot = 0.0;
    for (var d = 0u; d < params.head_dim; d++) { dot += q_row[d] * k[at + d]; }
    return dot * params.scale;
}

@compute @workgroup_size(WG)
fn attention_decode(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let dh = params.head_dim;
    let g = flat_group(wid, nwg);
    if (g >= params.heads * params.batch) { return; }  // uniform
    let h = g % params.heads;
    let b = g / params.heads;
    let kvh = h / (params.heads / params.kv_heads);
    let len = params.seq_len;
    let subsets = WG / dh;
    let col = lidx % dh;
    let subset = lidx / dh;  // ≥ subsets: idle in p·V

    if (lidx < dh) { q_row[lidx] = q[q_at(b, h) + lidx]; }
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
    var acc = 0.0;
    for (var key0 = 0u; key0 < len; key0 += WG) {
        let s = decode_score(b, kvh, key0 + lidx);
        let visible = s > NEG_BIG;
        var m_new = m;
        if (!sf16) { m_new = max(m, workgroup_max(s, lidx)); }
        let alpha = exp(m - m_new);
        var p = select(0.0, exp(s - m_new), visible);
        if (sf16) { p = boundary(p / l, select(SITE_NONE, SITE_SOFTMAX, visible)); }
        p_block[lidx] = p;
        let p_sum = workgroup_sum(p, lidx);  // its barriers also publish p_block
        if (!sf16) { l = alpha * l + p_sum; }
        var pv = 0.0;
        if (subset < subsets) {
            for (var kk = subset; kk < min(WG, len - key0); kk += subsets) {
                pv += p_block[kk] * v[v_at(b * params.cache_len + key0 + kk, kvh) + col];
            }
        }
        acc = alpha * acc + pv;
        m = m_new;
        workgroupBarrier();  // p_block is rewritten by the next block
    }

    p_block[lidx] = acc;
    workgroupBarrier();
    if (lidx < dh) {
        var total = 0.0;
        for (var x = 0u; x < subsets; x++) { total += p_block[x * dh + lidx]; }
        o[b * params.heads * dh + h * dh + lidx] = matmul_boundary(select(total / l, total, sf16), SITE_ATTENTION);
    }
}

// kv_append: the new tokens' k and v heads (row b of the k and v views,
// e.g. column ranges of a decode step's fused [q | k | v] rows, k rotated)
// into cache row b·Lmax + L − 1, before attention_decode reads rows 0..L−1.
// That row's byte offset is seldom a multiple of the 256-B binding
// alignment, so the caches are bound whole and written here. One invocation
// per (sequence, cache column); a plain copy, exact.
@group(0) @binding(6) var<storage, read_write> k_cache: array<f32>;  // [B·Lmax, Hkv·Dh]
@group(0) @binding(7) var<storage, read_write> v_cache: array<f32>;  // [B·Lmax, Hkv·Dh]

@compute @workgroup_size(WG)
fn kv_append(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    let width = params.kv_heads * params.head_dim;
    if (i >= params.batch * width) { return; }
    let b = i / width;
    let e = i % width;
    let kvh = e / params.head_dim;
    let d = e % params.head_dim;
    let at = (b * params.cache_len + params.seq_len - 1u) * width + e;
    k_cache[at] = k[k_at(b, kvh) + d];
    v_cache[at] = v[v_at(b, kvh) + d];
}
