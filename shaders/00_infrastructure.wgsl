// Element-wise utilities over f32 tensors: fill, scale, axpy, copy, and
// copy_words, the memory-bandwidth yardstick of `webtrain bench`.
// One invocation per element (per 16-byte word in copy_words); n need not
// be a multiple of WG.

struct Params {
    n: u32,      // elements
    alpha: f32,  // fill value, scale factor or axpy multiplier
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;        // [n]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;  // [n]
@group(0) @binding(3) var<storage, read> x_words: array<vec4<f32>>;        // [n] copy_words
@group(0) @binding(4) var<storage, read_write> y_words: array<vec4<f32>>;  // [n] copy_words

// y = alpha
@compute @workgroup_size(WG)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    y[i] = params.alpha;
}

// y = alpha * y
@compute @workgroup_size(WG)
fn scale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    y[i] = params.alpha * y[i];
}

// y = y + alpha * x
@compute @workgroup_size(WG)
fn axpy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    y[i] = fma(params.alpha, x[i], y[i]);
}

// y = x
@compute @workgroup_size(WG)
fn copy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    y[i] = x[i];
}

// y = x in 16-byte words, WGSL's widest load and store
@compute @workgroup_size(WG)
fn copy_words(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    y_words[i] = x_words[i];
}
