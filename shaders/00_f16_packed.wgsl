// f16 storage header, packed mode: no `shader-f16` (Safari, SwiftShader), or
// forced for testing. Same bytes as the native header's `vec2<f16>` words.

alias half2 = u32;

fn unpack_half2(w: half2) -> vec2<f32> {
    return unpack2x16float(w);
}

fn pack_half2(v: vec2<f32>) -> half2 {
    return pack2x16float(saturate_f16(v));
}
