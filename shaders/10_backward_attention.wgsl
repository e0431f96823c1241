// Backward of 05_attention.wgsl's attention_forward, without float atomics:
// a query-major pass writes dQ (and Δ), then a key-major pass writes dK and
// dV, every sum in a fixed order, so gradients are bit-identical run to run.
// Legend as in 05_attention.wgsl. With P = exp(s − lse) recomputed from the
// saved lse, and Δ_t = dO_t·O_t:
//   dP = dO·Vᵀ,  dS = P∘(dP − Δ),  dQ = scale·dS·K,  dK = scale·dSᵀ·Q,  dV = Pᵀ·dO
// Gradients are written, not accumulated (each q/k/v feeds only attention).
// dQ has q's layout (dq_stride, dq_col); dK and dV are column ranges of one
// buffer (dkv_stride, dk_col, dv_col), e.g. the k and v parts of a fused
// [dq | dk | dv] gradient, since one dispatch may bind a buffer writable once.

const DC: u32 = 32u;      // head-dim columns per staged chunk: four [16, DC] tiles

@group(0) @binding(4) var<storage, read> o: array<f32>;      // [B·T, H·Dh], the forward's output
@group(0) @binding(5) var<storage, read> d_o: array<f32>;    // [B·T, H·Dh]
@group(0) @binding(6) var<storage, read> lse: array<f32>;    // [B·T, H], saved by the forward

fn o_at(row: u32, h: u32) -> u32 { return (row * params.heads + h) * params.head_dim; }

// Columns c0 .. c0 + DC of a block's query rows (q, dO) and/or key rows
// (k, v), zero past T and Dh.
var<workgroup> q_tile: array<f32, BQ * DC>;
var<workgroup> do_tile: array<f32, BQ * DC>;
var<workgroup> k_tile: array<f32, BK * DC>;
var<workgroup> v_tile: array<f32, BK * DC>;
var<workgroup> p_tile: array<f32, BQ * BK>;
var<workgroup> ds_tile: array<f32, BQ * BK>;

fn stage(b: u32, t0: u32, h: u32, key0: u32, kvh: u32, c0: u32, queries: bool, keys: bool, lidx: u32) {
    let t_len = params.seq_len;
    for (var e = lidx; e < BQ * DC; e += WG) {
        let i = e / DC;
        let d = c0 + e % DC;
        let inside = d < params.head_dim;
        if (queries) {
            let row = b * t_len + t0 + i;
            var x = 0.0;
            var y = 0.0;
            if (inside && t0 + i < t_len) {
                x = q[q_at(row, h) + d];
                y = d_o[o_at(row, h) + d];
            }
            q_tile[e] = x;
            do_tile[e] = y;
        }
        if (keys) {
            let row = b * t_len + key0 + i;
            var x = 0.0;
            var y = 0.0;
            if (inside && key0 + i < t_len) {
                x = k[k_at(row, kvh) + d];
                y = v[v_at(row, kvh) + d];
            }
            k_tile[e] = x;
            v_tile[e] = y;
        }
    }
}

// attention_backward_dq: one workgroup per (query block, head, sequence);
// invocation (r, j) = query r, key j of each key block, then columns
// d = j + BK·i of dQ_r. Also writes Δ [B·T, H] for the key-major pass.
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;     // [B·T, dq_stride]
@group(0) @binding(8) var<storage, read_write> delta: array<f32>;  // [B·T, H]

@compute @workgroup_size(WG)
fn attention_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lidx: u32) {
    let t_len = params.seq_len;
    let dh = params.head_dim;
    let blocks = (t_len + BQ - 1u) / BQ;
    let g = flat_group(wid, nwg);
    if (g >= blocks * params.heads * params.batch) { return; }  // uniform
    let t0 = (g % blocks) * BQ;
    let h = (g / blocks) % params.heads;
    let b = g / (blocks * params.heads);
    let kvh = h / (params.heads / params.kv_heads);
    let r = lidx / BK;
    let j = lidx % BK;
    let t = t0 + r;
    let row = b * t_len + t;

    // Δ_t = dO_t·O_t: BK partial sums per row, added in order by every lane
    var part = 0.0;
    if (t < t_len) {
        for (var i = 0u; i < dh / BK; i++) {
            let at = o_at(row, h) + j + BK * i;
            part += d_o[at] * o[at];
        }
    }
    ds_tile[lidx] = part;
    workgroupBarrier();
    var delta_t = 0.0;
    for (var jj = 0u; jj < BK; jj++) { delta_t += ds_tile[r * BK + jj]; }
    var lse_t = 0.0;
    if (t < t_len) {
        lse_t = lse[row * params.heads + h];
        if (j == 0u) { delta[row * params.heads + h] = delta_t; }
    }

    var acc: array<f32, SLOTS>;
    let key_end = min(t0 + BQ, t_len);
    for (var key0 = 0u; key0 < key_end; key0 += BK) {
        var s = 0.0;
        var dp = 0.0;
        for (var c0 = 0u; c0 < dh; c0 += DC) {
            workgroupBarrier();
            stage(b, t0, h, key0, kvh, c0, true, true, lidx);
            workgroupBarrier();
            for (var d = 0u; d < min(DC, dh - c0); d++) {
                s += q_tile[r * DC + d] * k_tile[j * DC + d];
                dp += do_tile[r * DC + d] * v_tile[j * DC + d];
            }
        }
        let key = key0 + j;
        let visible = key <= t && t < t_len;
        let p = exp(select(NEG_BIG, s * params.scale - lse_t, visible));
        ds_tile[lidx] = p * (dp - delta_t);
        for (var c0 = 0u; c0 < dh; c0 += DC) {
            workgroupBarrier();
            stage(b, t0, h, key0, kvh, c0, false, true, lidx);
            workgroupBarrier();
            for (var i = c0 / BK; i < min(c0 + DC, dh) / BK; i++) {
                let dl = j + BK * i - c0;
                var sum = 0.0;
                for (var jj = 0u; jj < BK; jj++) { sum += ds_tile[r * BK + jj] * k_tile[jj * DC + dl]; }
                acc[i] += sum;
            }
        }
    }

    if (t < t_len) {
        for (var i = 0u; i < dh / BK; i++) {
            dq[row * params.dq_stride + params.dq_col + h * dh + j + BK * i] = params.scale * acc[i];
        }
    }
}

// attention_backward_dkv: one workgroup per (key block, kv head, sequence);
// invocation (r, j) = key r, query j of each query block, then columns
// d = j + BK·i of dK_r and dV_r. Loops over the G query heads of the kv
// head, then over the query blocks at or after the key block, in order.
@group(0) @binding(7) var<storage, read> delta_in: array<f32>;     // [B·T, H], from attention_backward_dq
@group(0) @binding(8) var<storage, read_write> dkv: array<f32>;    // [B·T, dkv_stride]

@compute @workgroup_size(WG)
fn attention_backward_dkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                          @builtin(local_invocation_index) lidx: u32) {
    let t_len = params.seq_len;
    let dh = params.head_dim;
    let blocks = (t_len + BK - 1u) / BK;
    let g = flat_group(wid, nwg);
    if (g >= blocks * params.kv_heads * params.batch) { return; }  // uniform
    let key0 = (g % blocks) * BK;
    let kvh = (g / blocks) % params.kv_heads;
    let b = g / (blocks * params.kv_heads);
    let group = params.heads / params.kv_heads;
    let r = lidx / BK;
    let j = lidx % BK;
    let key = key0 + r;

    var acc_k: array<f32, SLOTS>;
    var acc_v: array<f32, SLOTS>;
    for (var h = kvh * group; h < (kvh + 1u) * group; h++) {
        for (var t0 = key0; t0 < t_len; t0 += BQ) {
            let t = t0 + j;
            let row = b * t_len + t;
            var lse_t = 0.0;
            var delta_t = 0.0;
            if (t < t_len) {
                lse_t = lse[row * params.heads + h];
                delta_t = delta_in[row * params.heads + h];
            }
            var s = 0.0;
            var dp = 0.0;
            for (var c0 = 0u; c0 < dh; c0 += DC) {
                workgroupBarrier();
                stage(b, t0, h, key0, kvh, c0, true, true, lidx);
                workgroupBarrier();
                for (var d = 0u; d < min(DC, dh - c0); d++) {
                    s += k_tile[r * DC + d] * q_tile[j * DC + d];
                    dp += v_tile[r * DC + d] * do_tile[j * DC + d];
                }
            }
            let visible = key <= t && t < t_len;
            let p = exp(select(NEG_BIG, s * params.scale - lse_t, visible));
            p_tile[lidx] = p;
            ds_tile[lidx] = p * (dp - delta_t);
            for (var c0 = 0u; c0 < dh; c0 += DC) {
                workgroupBarrier();
                stage(b, t0, h, key0, kvh, c0, true, false, lidx);
                workgroupBarrier();
                for (var i = c0 / BK; i < min(c0 + DC, dh) / BK; i++) {
                    let dl = j + BK * i - c0;
                    var sum_k = 0.0;
                    var sum_v = 0.0;
                    for (var jj = 0u; jj < BQ; jj++) {
                        sum_k += ds_tile[r * BQ + jj] * q_tile[jj * DC + dl];
                        sum_v += p_tile[r * BQ + jj] * do_tile[jj * DC + dl];
                    }
                    acc_k[i] += sum_k;
                    acc_v[i] += sum_v;
                }
            }
        }
    }

    if (key < t_len) {
        let base = (b * t_len + key) * params.dkv_stride + kvh * dh;
        for (var i = 0u; i < dh / BK; i++) {
            let d = j + BK * i;
            dkv[base + params.dk_col + d] = params.scale * acc_k[i];
            dkv[base + params.dv_col + d] = acc_v[i];
        }
    }
}
