// f16 storage header, native mode: the device has `shader-f16`.
// f16 tensors are arrays of `half2` words, two halves per 32-bit word, element
// 2k in the low half. The packed header gives the same bytes as `u32`, so
// buffers and kernels are identical in both modes; only these lines differ.
enable f16;

alias half2 = vec2<f16>;

fn unpack_half2(w: half2) -> vec2<f32> {
    return vec2<f32>(w);
}

fn pack_half2(v: vec2<f32>) -> half2 {
    return vec2<f16>(saturate_f16(v));
}
