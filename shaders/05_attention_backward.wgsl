// Backward of 05_attention.wgsl's attention_forward (the FlashAttention-2
// split), without float atomics: a query-major pass writes dQ (and Δ), then
// a key-major pass writes dK and dV, every sum in a fixed order, so
// gradients are bit-identical run to run. Legend as in 05_attention.wgsl.
// With P = exp(s − lse) recomputed from the saved lse, and Δ_t = dO_t·O_t:
//   dP = dO·Vᵀ,  dS = P∘(dP − Δ),  dQ = scale·dS·K,  dK = scale·dSᵀ·Q,  dV = Pᵀ·dO
// Gradients are written, not accumulated (each q/k/v feeds only attention).
// With ATTN_F16 each product's factors are f16 as they are read: q, k, v,
// dO (not o: Δ = dO·O reads the forward's f32 output), P in dV = Pᵀ·dO and
// dS in dQ and dK; dP, dS and every sum are f32.
// dQ has q's layout (dq_stride, dq_col); dK and dV are column ranges of one
// buffer (dkv_stride, dk_col, dv_col), e.g. the k and v parts of a fused
// [dq | dk | dv] gradient, since one dispatch may bind a buffer writable once.
// Each invocation keeps COLS ≤ 32 columns of each of its rows in registers
// (the key-major pass holds five: k, v, dK, dV and a tile's dV terms).

@group(0) @binding(4) var<storage, read> o: array<vec4<f32>>;    // [B·T, H·Dh], the forward's output
@group(0) @binding(5) var<storage, read> d_o: array<vec4<f32>>;  // [B·T, H·Dh]
@group(0) @binding(6) var<storage, read> lse: array<f32>;        // [B·T, H], saved by the forward

// Beside the streamed tile (05_attention_common.wgsl): each lane's part of
// dP for every row of it, and (dK/dV pass) the Q rows' lse and Δ.
var<workgroup> dp_part: array<f32, TILE * ROW_WG>;
var<workgroup> tile_lse: array<f32, TILE>;
var<workgroup> tile_delta: array<f32, TILE>;

fn chunk_o(from_o: bool, at: u32) -> mat4x4<f32> {
    if (from_o) { return mat4x4<f32>(o[at], o[at + 1u], o[at + 2u], o[at + 3u]); }
    return attn_chunk(d_o[at], d_o[at + 1u], d_o[at + 2u], d_o[at + 3u]);
}

// COLS columns of o or dO from vec4 index `at`.
fn row_o(from_o: bool, at: u32) -> Row {
    var r: Row;
    r.c0 = chunk_o(from_o, at);
    if (CHUNKS > 1u) { r.c1 = chunk_o(from_o, at + 4u); }
    if (CHUNKS > 2u) { r.c2 = chunk_o(from_o, at + 8u); }
    if (CHUNKS > 3u) { r.c3 = chunk_o(from_o, at + 12u); }
    return r;
}

// Rows i0 .. n of the tile: each lane's parts of a·tile_a[i] and b·tile_b[i].
fn dot_parts(a: Row, b: Row, i0: u32, n: u32, lane: u32, lidx: u32) {
    for (var i = i0; i < n; i++) {
        score_part[i * ROW_WG + lidx] = row_dot(a, tile_row(true, i, lane));
        dp_part[i * ROW_WG + lidx] = row_dot(b, tile_row(false, i, lane));
    }
}

// Row i's dP: its lanes' parts, in order (as `score_sum`).
fn dp_sum(i: u32, lidx: u32) -> f32 {
    let first = i * ROW_WG + lidx - lidx % LANES;
    var s = dp_part[first];
    for (var l = 1u; l < LANES; l++) { s += dp_part[first + l]; }
    return s;
}

// attention_backward_dq: workgroups as attention_forward's (query slots of
// LANES invocations, Gw heads sharing each K|V tile). Per visible key j,
// in order: dQ += dS_j·k_j. Also writes Δ [B·T, H] for the key-major pass.
@group(0) @binding(7) var<storage, read_write> dq: array<vec4<f32>>;  // [B·T, dq_stride]
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;     // [B·T, H]

fn store_dq(at: u32, x: mat4x4<f32>) {
    for (var c = 0u; c < 4u; c++) { dq[at + c] = x[c]; }
}

@compute @workgroup_size(ROW_WG)
fn attention_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lidx: u32) {
    let t_len = params.seq_len;
    let bq = params.block_rows;
    let g = flat_group(wid, nwg);
    if (g >= query_workgroups()) { return; }  // uniform
    let s = query_slot(g, lidx);
    let row = s.b * t_len + s.t;
    let col = s.lane * COLS4;
    var qr: Row;
    var dor: Row;
    var part = 0.0;
    var lse_t = 0.0;
    if (s.live) {
        qr = row_of(FROM_Q, q_at(row, s.h) + col);
        dor = row_o(false, o_at(row, s.h) + col);
        part = row_dot(dor, row_o(true, o_at(row, s.h) + col));
        lse_t = lse[row * params.heads + s.h];
    }
    // Δ_t = dO_t·O_t: the row's lane parts, in order
    score_part[lidx] = part;
    workgroupBarrier();
    let delta_t = score_sum(0u, lidx);
    if (s.live && s.lane == 0u) { delta[row * params.heads + s.h] = delta_t; }

    var acc: Row;
    let key_end = min(block_first_query(g) + bq, t_len);  // uniform: the loops hold barriers
    for (var key0 = 0u; key0 < key_end; key0 += TILE) {
        workgroupBarrier();  // the last tile's (and Δ's) readers are done
        stage_kv(s.b, key0, s.kvh, true, lidx);
        workgroupBarrier();
        let n = visible_keys(s.t, key0, s.live);
        dot_parts(qr, dor, 0u, n, s.lane, lidx);
        if (LANES > 1u) { workgroupBarrier(); }
        for (var j = 0u; j < n; j++) {
            let p = exp(score_sum(j, lidx) * params.scale - lse_t);
            let ds = p * (dp_sum(j, lidx) - delta_t);
            acc = row_axpy(attn_operand(ds), tile_row(true, j, s.lane), acc);
        }
    }

    if (s.live) {
        let at = (row * params.dq_stride + params.dq_col) / 4u + s.h * DH4 + col;
        let out = row_scaled(acc, params.scale);
        store_dq(at, out.c0);
        if (CHUNKS > 1u) { store_dq(at + 4u, out.c1); }
    }
}

// attention_backward_dkv: one workgroup per (block of ROWS keys, kv head,
// sequence); slot lidx / LANES owns key `key` with its k, v, dK and dV
// columns in registers, while Q|dO tiles of the G query heads of the kv
// head stream in, heads in order, then queries from the block's first key
// on, in order: dV += P·dO_t (a tile's terms summed first), dK += dS·q_t.
@group(0) @binding(7) var<storage, read> delta_in: array<f32>;      // [B·T, H], from attention_backward_dq
@group(0) @binding(8) var<storage, read_write> dkv: array<vec4<f32>>;  // [B·T, dkv_stride]

fn store_dkv(at: u32, x: Row) {
    for (var c = 0u; c < 4u; c++) {
        dkv[at + c] = x.c0[c];
        if (CHUNKS > 1u) { dkv[at + 4u + c] = x.c1[c]; }
    }
}

@compute @workgroup_size(ROW_WG)
fn attention_backward_dkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lidx: u32) {
    let t_len = params.seq_len;
    let blocks = (t_len + ROWS - 1u) / ROWS;
    let g = flat_group(wid, nwg);
    if (g >= blocks * params.kv_heads * params.batch) { return; }  // uniform
    let key0 = (g % blocks) * ROWS;
    let kvh = (g / blocks) % params.kv_heads;
    let b = g / (blocks * params.kv_heads);
    let group = params.heads / params.kv_heads;
    let lane = lidx % LANES;
    let col = lane * COLS4;
    let key = key0 + lidx / LANES;
    let live = lidx / LANES < ROWS && key < t_len;  // invocations past ROWS·LANES idle
    let krow = b * t_len + key;
    var kr: Row;
    var vr: Row;
    if (live) {
        kr = row_of(FROM_K, k_at(krow, kvh) + col);
        vr = row_of(FROM_V, v_at(krow, kvh) + col);
    }

    var dk: Row;
    var dv: Row;
    for (var h = kvh * group; h < (kvh + 1u) * group; h++) {
        for (var t0 = key0; t0 < t_len; t0 += TILE) {
            workgroupBarrier();  // the last tile's readers are done
            for (var e = lidx; e < TILE * DH4; e += ROW_WG) {
                let t = t0 + e / DH4;
                let c = e % DH4;
                var x = vec4<f32>(0.0);
                var y = vec4<f32>(0.0);
                if (t < t_len) {
                    x = attn_operand4(q[q_at(b * t_len + t, h) + c]);
                    y = attn_operand4(d_o[o_at(b * t_len + t, h) + c]);
                }
                tile_a[e] = x;
                tile_b[e] = y;
            }
            if (lidx < TILE) {
                let t = t0 + lidx;
                var x = 0.0;
                var y = 0.0;
                if (t < t_len) {
                    x = lse[(b * t_len + t) * params.heads + h];
                    y = delta_in[(b * t_len + t) * params.heads + h];
                }
                tile_lse[lidx] = x;
                tile_delta[lidx] = y;
            }
            workgroupBarrier();
            // the tile's queries that see this key: t ≥ key, t < T
            var i0 = TILE;
            if (live) { i0 = select(0u, key - t0, key > t0); }
            let n = min(TILE, t_len - t0);
            dot_parts(kr, vr, i0, n, lane, lidx);
            if (LANES > 1u) { workgroupBarrier(); }
            // dV's terms p·dO share a sign pattern and add up over G·T
            // queries: summed per tile first, one chain of T = 1024 erred by
            // 5.1e-6 on SwiftShader (3.3e-6 on lavapipe) against the f64
            // twin. Zeroed explicitly: Chrome on SwiftShader kept the last
            // tile's sums in a bare `var dv_tile: Row;` inside this loop.
            var dv_tile = Row(mat4x4<f32>(), mat4x4<f32>(), mat4x4<f32>(), mat4x4<f32>());
            for (var i = i0; i < n; i++) {
                let p = exp(score_sum(i, lidx) * params.scale - tile_lse[i]);
                let ds = p * (dp_sum(i, lidx) - tile_delta[i]);
                dv_tile = row_axpy(attn_operand(p), tile_row(false, i, lane), dv_tile);
                dk = row_axpy(attn_operand(ds), tile_row(true, i, lane), dk);
            }
            dv = row_axpy(1.0, dv_tile, dv);
        }
    }

    if (live) {
        let base = krow * params.dkv_stride + kvh * DH;
        store_dkv((base + params.dk_col) / 4u + col, row_scaled(dk, params.scale));
        store_dkv((base + params.dv_col) / 4u + col, dv);
    }
}
