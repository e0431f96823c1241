// RMSNorm: y = x / sqrt(mean(x²) + eps) * g, reductions in f32, one
// workgroup per row. Legend: R rows, D width, B = ⌈R / DGAIN_ROWS⌉.

const DGAIN_ROWS: u32 = 32u;  // rows per dgain partial: kernels/norm.rs sizes the scratch

struct Params {
    rows: u32,  // R
    d: u32,     // D
    eps: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;          // [R, D]
@group(0) @binding(2) var<storage, read> gain: array<f32>;       // [D]
@group(0) @binding(2) var<storage, read> gain_h: array<half2>;   // [D] f16

// 1 / sqrt(mean(x[row]²) + eps), to every invocation of the workgroup.
fn row_rrms(base: u32, lidx: u32) -> f32 {
    var ss = 0.0;
    for (var i = lidx; i < params.d; i += WG) {
        let v = x[base + i];
        ss += v * v;
    }
    return inverseSqrt(workgroup_sum(ss, lidx) / f32(params.d) + params.eps);
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
    let row = flat_group(wid, nwg);
    if (row >= params.rows) { return; }
    let base = row * params.d;
    let r = row_rrms(base, lidx);
    for (var i = lidx; i < params.d; i += WG) {
        y[base + i] = boundary(x[base + i] * r * gain[i], SITE_NORM);
    }
    if (lidx == 0u) { rrms[row] = r; }
}

@compute @workgroup_size(WG)
fn rmsnorm_forward_w16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lidx: u32) {
    let row = flat_group(wid, nwg);
    if (row >= params.rows) { return; }
    let base = row * params.d;
    let r = row_rrms(base, lidx);
    for (var i = lidx; i < params.d; i += WG) {
        y[base + i] = boundary(x[base + i] * r * half_at(gain_h[i >> 1u], i), SITE_NORM);
    }
    if (lidx == 0u) { rrms[row] = r; }
}

// rmsnorm_backward, rmsnorm_backward_w16: one workgroup per row,
//   dx += r·g·dy − (r³/D)·x·Σ(g·dy·x)
// accumulated, since a pre-norm block's input gradient adds to the residual's.
// Uses the gain the forward used (the f16 mirror in mixed precision).
@group(0) @binding(3) var<storage, read> rrms_saved: array<f32>;  // [R]
@group(0) @binding(4) var<storage, read> dy: array<f32>;          // [R, D]
@group(0) @binding(5) var<storage, read_write> dx: array<f32>;    // [R, D], accumulated

fn dot_term(at: u32, g: f32) -> f32 {
    return g * dy[at] * x[at];
}

// (r³/D)·Σ(g·dy·x) from this invocation's part of the sum.
fn backward_coefficient(partial_dot: f32, r: f32, lidx: u32) -> f32 {
    return workgroup_sum(partial_dot, lidx) * r * r * r / f32(params.d);
}

fn accumulate_dx(at: u32, g: f32, r: f32, c: f32) {
    dx[at] += r * g * dy[at] - c * x[at];
}

@compute @workgroup_size(WG)
fn rmsnorm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let row = flat_group(wid, nwg);
    if (row >= params.rows) { return; }
    let base = row * params.d;
    let r = rrms_saved[row];
    var dot = 0.0;
    for (var i = lidx; i < params.d; i += WG) { dot += dot_term(base + i, gain[i]); }
    let c = backward_coefficient(dot, r, lidx);
    for (var i = lidx; i < params.d; i += WG) { accumulate_dx(base + i, gain[i], r, c); }
}

@compute @workgroup_size(WG)
fn rmsnorm_backward_w16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lidx: u32) {
    let row = flat_group(wid, nwg);
    if (row >= params.rows) { return; }
    let base = row * params.d;
    let r = rrms_saved[row];
    var dot = 0.0;
    for (var i = lidx; i < params.d; i += WG) { dot += dot_term(base + i, half_at(gain_h[i >> 1u], i)); }
    let c = backward_coefficient(dot, r, lidx);
    for (var i = lidx; i < params.d; i += WG) { accumulate_dx(base + i, half_at(gain_h[i >> 1u], i), r, c); }
}

// dgain += Σ_rows dy·x·r, deterministically in two stages (no float
// atomics, so the same inputs give the same bits every run):
// rmsnorm_dgain_partial: one invocation per (row block b, column i) sums
// DGAIN_ROWS rows in order; rmsnorm_dgain_finish sums the B partials of
// each column in order and adds to dgain.
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;  // [B, D]

@compute @workgroup_size(WG)
fn rmsnorm_dgain_partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lidx: u32) {
    let t = flat_id(wid, nwg, lidx);
    let blocks = (params.rows + DGAIN_ROWS - 1u) / DGAIN_ROWS;
    if (t >= blocks * params.d) { return; }
    let b = t / params.d;
    let i = t % params.d;
    var sum = 0.0;
    for (var row = b * DGAIN_ROWS; row < min((b + 1u) * DGAIN_ROWS, params.rows); row++) {
        let at = row * params.d + i;
        sum += dy[at] * x[at] * rrms_saved[row];
    }
    partials[t] = sum;
}

@group(0) @binding(1) var<storage, read> partials_in: array<f32>;      // [B, D]
@group(0) @binding(2) var<storage, read_write> dgain: array<f32>;      // [D], accumulated

@compute @workgroup_size(WG)
fn rmsnorm_dgain_finish(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                        @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.d) { return; }
    let blocks = (params.rows + DGAIN_ROWS - 1u) / DGAIN_ROWS;
    var sum = 0.0;
    for (var b = 0u; b < blocks; b++) { sum += partials_in[b * params.d + i]; }
    dgain[i] += sum;
}
