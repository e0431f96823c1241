// How 03_linear.wgsl reads B: f16 weights (the mixed-precision mirror, either
// storage mode), widened to f32 as the tile is loaded.
@group(0) @binding(2) var<storage, read> b_h: array<half2>;

fn load_b(i: u32) -> f32 {
    return half_at(b_h[i >> 1u], i);
}
