// RMSNorm: y = x / sqrt(mean(x²) + eps) * g, reductions in f32. A workgroup
// takes ROWS rows, LANES invocations to a row for its sums, so short rows
// (D of a few hundred) still keep every invocation busy.
// Legend: R rows, D width, B = ⌈R / ROWS⌉ row blocks.

const ROWS: u32 = 8u;            // rows per workgroup: kernels/norm.rs sizes the dgain scratch by it
const LANES: u32 = WG / ROWS;    // invocations per row

struct Params {
    rows: u32,  // R
    d: u32,     // D
    eps: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [R, D]
@group(0) @binding(2) var<storage, read> gain: array<f32>;       // [D]
@group(0) @binding(2) var<storage, read> gain_h: array<half2>;   // [D] f16

var<workgroup> lane_sums: array<f32, WG>;

// Σ of v over the LANES invocations of this invocation's row, to each of
// them, in a fixed tree order. Contains barriers: uniform control flow.
fn row_sum(v: f32, lidx: u32) -> f32 {
    lane_sums[lidx] = v;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lidx % LANES < s) { lane_sums[lidx] += lane_sums[lidx + s]; }
        workgroupBarrier();
    }
    let total = lane_sums[lidx - lidx % LANES];
    workgroupBarrier();
    return total;
}

// This invocation's row (R or more past the last) and its lane in it.
fn my_row(wid: vec3<u32>, nwg: vec3<u32>, lidx: u32) -> u32 {
    return flat_group(wid, nwg) * ROWS + lidx / LANES;
}

// 1 / sqrt(mean(x[row]²) + eps), to every invocation of the row.
fn row_rrms(row: u32, lidx: u32) -> f32 {
    var ss = 0.0;
    if (row < params.rows) {
        for (var i = lidx % LANES; i < params.d; i += LANES) {
            let v = x[row * params.d + i];
            ss += v * v;
        }
    }
    return inverseSqrt(row_sum(ss, lidx) / f32(params.d) + params.eps);
}

// rmsnorm_forward, rmsnorm_forward_w16: saves 1/rms per row for backward.
// Each `_w16` entry point repeats its twin but for the gain load: WGSL
// cannot pass a binding to a function, and one entry point may not use both
// variables bound at @binding(2).
@group(0) @binding(3) var<storage, read_write> y: array<f32>;     // [R, D]
@group(0) @binding(4) var<storage, read_write> rrms: array<f32>;  // [R]

@compute @workgroup_size(WG)
fn rmsnorm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lidx: u32) {
    let row = my_row(wid, nwg, lidx);
    let r = row_rrms(row, lidx);
    if (row >= params.rows) { return; }
    let base = row * params.d;
    for (var i = lidx % LANES; i < params.d; i += LANES) {
        y[base + i] = boundary(x[base + i] * r * gain[i], SITE_NORM);
    }
    if (lidx % LANES == 0u) { rrms[row] = r; }
}

@compute @workgroup_size(WG)
fn rmsnorm_forward_w16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lidx: u32) {
    let row = my_row(wid, nwg, lidx);
    let r = row_rrms(row, lidx);
    if (row >= params.rows) { return; }
    let base = row * params.d;
    for (var i = lidx % LANES; i < params.d; i += LANES) {
        y[base + i] = boundary(x[base + i] * r * half_at(gain_h[i >> 1u], i), SITE_NORM);
    }
    if (lidx % LANES == 0u) { rrms[row] = r; }
}

// rmsnorm_backward, rmsnorm_backward_w16: one dispatch for dx and the
// dgain partials of the workgroup's ROWS rows,
//   dx += r·g·dy − (r³/D)·x·Σ(g·dy·x)     (a pre-norm block's input
//                                          gradient adds to the residual's)
//   partials[b, i] = Σ_rows dy·x·r        (rows in order)
// First each row's coefficient (LANES invocations per row), then each
// column over the block's rows (invocations across the columns: its rows
// were just read, so the second read comes from cache).
// rmsnorm_dgain_finish then adds the B partials of each column in a fixed
// order: no float atomics, the same inputs give the same bits every run.
// Uses the gain the forward used (the f16 mirror in mixed precision).
@group(0) @binding(3) var<storage, read> rrms_saved: array<f32>;      // [R]
@group(0) @binding(4) var<storage, read> dy: array<f32>;              // [R, D]
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;        // [R, D], accumulated
@group(0) @binding(6) var<storage, read_write> partials: array<f32>;  // [B, D]

var<workgroup> block_rrms: array<f32, ROWS>;
var<workgroup> block_coefficient: array<f32, ROWS>;  // (r³/D)·Σ(g·dy·x) per row

// Publishes the block's per-row r and coefficient from this invocation's
// part of its row's Σ(g·dy·x). Contains barriers: uniform control flow.
fn publish_coefficients(row: u32, partial_dot: f32, lidx: u32) {
    let dot = row_sum(partial_dot, lidx);
    if (lidx % LANES == 0u) {
        let r = select(0.0, rrms_saved[min(row, params.rows - 1u)], row < params.rows);
        block_rrms[lidx / LANES] = r;
        block_coefficient[lidx / LANES] = dot * r * r * r / f32(params.d);
    }
    workgroupBarrier();
}

// Column i of the block's rows: dx updated, the dgain partial written.
fn backward_column(block: u32, i: u32, g: f32) {
    var partial = 0.0;
    for (var k = 0u; k < ROWS; k++) {
        let row = block * ROWS + k;
        if (row >= params.rows) { break; }
        let at = row * params.d + i;
        let r = block_rrms[k];
        let d_y = dy[at];
        let x_i = x[at];
        dx[at] += r * g * d_y - block_coefficient[k] * x_i;
        partial += d_y * x_i * r;
    }
    partials[block * params.d + i] = partial;
}

@compute @workgroup_size(WG)
fn rmsnorm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let row = my_row(wid, nwg, lidx);
    var dot = 0.0;
    if (row < params.rows) {
        for (var i = lidx % LANES; i < params.d; i += LANES) {
            let at = row * params.d + i;
            dot += gain[i] * dy[at] * x[at];
        }
    }
    publish_coefficients(row, dot, lidx);
    let block = flat_group(wid, nwg);
    if (block * ROWS >= params.rows) { return; }
    for (var i = lidx; i < params.d; i += WG) { backward_column(block, i, gain[i]); }
}

@compute @workgroup_size(WG)
fn rmsnorm_backward_w16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lidx: u32) {
    let row = my_row(wid, nwg, lidx);
    var dot = 0.0;
    if (row < params.rows) {
        for (var i = lidx % LANES; i < params.d; i += LANES) {
            let at = row * params.d + i;
            dot += half_at(gain_h[i >> 1u], i) * dy[at] * x[at];
        }
    }
    publish_coefficients(row, dot, lidx);
    let block = flat_group(wid, nwg);
    if (block * ROWS >= params.rows) { return; }
    for (var i = lidx; i < params.d; i += WG) { backward_column(block, i, half_at(gain_h[i >> 1u], i)); }
}

@group(0) @binding(1) var<storage, read> partials_in: array<f32>;      // [B, D]
@group(0) @binding(2) var<storage, read_write> dgain: array<f32>;      // [D], accumulated

// Invocations that share one column's B partials: each adds every
// FINISH_LANES-th in order, then a fixed tree adds theirs. (One invocation
// per column, adding B in a chain of dependent loads, took 0.13 ms of the
// H100's 0.14 at B = 512.)
const FINISH_LANES: u32 = 64u;

@compute @workgroup_size(WG)
fn rmsnorm_dgain_finish(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lidx: u32) {
    let i = flat_group(wid, nwg) * (WG / FINISH_LANES) + lidx / FINISH_LANES;
    let lane = lidx % FINISH_LANES;
    let blocks = (params.rows + ROWS - 1u) / ROWS;
    var sum = 0.0;
    if (i < params.d) {
        for (var b = lane; b < blocks; b += FINISH_LANES) { sum += partials_in[b * params.d + i]; }
    }
    lane_sums[lidx] = sum;
    workgroupBarrier();
    for (var s = FINISH_LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) { lane_sums[lidx] += lane_sums[lidx + s]; }
        workgroupBarrier();
    }
    if (lane == 0u && i < params.d) { dgain[i] += lane_sums[lidx]; }
}
