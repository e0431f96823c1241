// How 03_linear.wgsl reads B: f32 (activations, gradients, master weights).
@group(0) @binding(2) var<storage, read> b: array<f32>;

// 4 consecutive values from index i (past the end: any value, masked by the caller).
fn load_b4(i: u32) -> vec4<f32> {
    return vec4<f32>(b[i], b[i + 1u], b[i + 2u], b[i + 3u]);
}
