// How 03_linear.wgsl reads B: f32 (activations, gradients, master weights).
@group(0) @binding(2) var<storage, read> b: array<f32>;

fn load_b(i: u32) -> f32 {
    return b[i];
}
