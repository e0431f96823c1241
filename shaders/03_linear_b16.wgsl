// How 03_linear.wgsl reads B: f16 weights (the mixed-precision mirror, either
// storage mode), four halves from two or three words, widened to f32.
@group(0) @binding(2) var<storage, read> b_h: array<half2>;

// 4 consecutive values from index i (past the end: any value, masked by the caller).
fn load_b4(i: u32) -> vec4<f32> {
    let w = i >> 1u;
    let lo = unpack_half2(b_h[w]);
    let mid = unpack_half2(b_h[w + 1u]);
    if ((i & 1u) == 0u) { return vec4<f32>(lo, mid); }
    return vec4<f32>(lo.y, mid, unpack_half2(b_h[w + 2u]).x);
}
