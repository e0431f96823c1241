// MLP activations, element-wise over f32: SwiGLU h = silu(gate)·up and
// tanh-GeLU. One invocation per element; n need not be a multiple of WG.
// Backwards WRITE their input gradients (each input feeds one output).
//
// Both are x·σ(z): silu(x) = x·σ(x), and tanh-GeLU
// 0.5·x·(1 + tanh(u)) = x·σ(2u) with u = √(2/π)·(x + 0.044715·x³), since
// 1 + tanh(u) = 2σ(2u). σ comes from exp(−|z|) ≤ 1, so nothing overflows at
// any |x| (no tanh builtin: some drivers build it from e^2x and give NaN),
// and 1 − σ is formed directly, so the tails keep their relative accuracy.

struct Params {
    n: u32,    // elements (R·F for SwiGLU)
    ffn: u32,  // F, SwiGLU's row width (h is [R, F], gu [R, 2F])
}

const SQRT_2_OVER_PI: f32 = 0.7978845608;
const GELU_C: f32 = 0.044715;
// Beyond |x| = 16, σ(2u) is exactly 0 or 1 in f32; clamping keeps x³ finite.
const GELU_X_MAX: f32 = 16.0;

// (σ(z), 1 − σ(z)), each without cancellation.
fn sigmoid_pair(z: f32) -> vec2<f32> {
    let e = exp(-abs(z));
    let p = 1.0 / (1.0 + e);
    let q = e * p;
    return select(vec2<f32>(q, p), vec2<f32>(p, q), z >= 0.0);
}

// 2u, GeLU's sigmoid argument, and its derivative d(2u)/dx.
fn gelu_arg(x: f32) -> vec2<f32> {
    let xc = clamp(x, -GELU_X_MAX, GELU_X_MAX);
    let x2 = xc * xc;
    return 2.0 * SQRT_2_OVER_PI * vec2<f32>(xc * (1.0 + GELU_C * x2), 1.0 + 3.0 * GELU_C * x2);
}

// d/dx [x·σ(z(x))] = σ + x·σ·(1 − σ)·z'
fn x_sigmoid_grad(x: f32, s: vec2<f32>, dz: f32) -> f32 {
    return s.x + x * s.x * s.y * dz;
}

@group(0) @binding(0) var<uniform> params: Params;

// swiglu_forward_gu: h = silu(gate)·up, and swiglu_backward_gu:
// dgate = dh·up·silu'(gate), dup = dh·silu(gate), written; over one fused
// projection row gu = [gate | up] ([R, 2F]), as a single GEMM against the
// stacked [W_gate; W_up] writes it. The backward writes dgu in that layout,
// so the projection's input and weight gradients are one GEMM each.

// Where element i = (r, c) of h finds its gate; its up is F further on.
fn gate_at(i: u32) -> u32 {
    return (i / params.ffn) * 2u * params.ffn + i % params.ffn;
}

@group(0) @binding(1) var<storage, read> gu: array<f32>;        // [R, 2F]
@group(0) @binding(2) var<storage, read_write> h: array<f32>;   // [R, F]

@compute @workgroup_size(WG)
fn swiglu_forward_gu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    let j = gate_at(i);
    let g = gu[j];
    h[i] = boundary(g * sigmoid_pair(g).x * gu[j + params.ffn], SITE_ACTIVATION);
}

@group(0) @binding(1) var<storage, read> dh: array<f32>;          // [R, F]
@group(0) @binding(2) var<storage, read> gu_in: array<f32>;       // [R, 2F]
@group(0) @binding(3) var<storage, read_write> dgu: array<f32>;   // [R, 2F]

@compute @workgroup_size(WG)
fn swiglu_backward_gu(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    let j = gate_at(i);
    let g = gu_in[j];
    let s = sigmoid_pair(g);
    dgu[j] = dh[i] * gu_in[j + params.ffn] * x_sigmoid_grad(g, s, 1.0);
    dgu[j + params.ffn] = dh[i] * g * s.x;
}

// gelu_forward: y = 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)))
@group(0) @binding(1) var<storage, read> x: array<f32>;         // [n]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;   // [n]

@compute @workgroup_size(WG)
fn gelu_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    let v = x[i];
    y[i] = v * sigmoid_pair(gelu_arg(v).x).x;
}

// gelu_backward: dx = dy·gelu'(x); written.
@group(0) @binding(1) var<storage, read> dy: array<f32>;          // [n]
@group(0) @binding(2) var<storage, read> x_in: array<f32>;        // [n]
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;    // [n]

@compute @workgroup_size(WG)
fn gelu_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    let v = x_in[i];
    let z = gelu_arg(v);
    dx[i] = dy[i] * x_sigmoid_grad(v, sigmoid_pair(z.x), z.y);
}
