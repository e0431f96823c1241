// f16 storage header, packed mode: no `shader-f16` (Safari, SwiftShader), or
// forced for testing. Same bytes as the native header's `vec2<f16>` words.

alias half2 = u32;

fn unpack_half2(w: half2) -> vec2<f32> {
    return unpack2x16float(w);
}

// Narrowing is done in integers, not with pack2x16float: WGSL leaves the
// rounding direction of conversions to the implementation, and SwiftShader
// rounds 2.98e-8 to 0 where round-to-nearest-even gives 2^-24. This way the
// packed path gives the same bits as the `half` crate on every adapter.
fn pack_half2(v: vec2<f32>) -> half2 {
    let s = saturate_f16(v);
    return f16_bits_rne(s.x) | (f16_bits_rne(s.y) << 16u);
}

// f16 bits of x, rounded to nearest even. x is within ±65504 or NaN.
fn f16_bits_rne(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u;  // quiet NaN
    }
    if (a >= 0x38800000u) {
        // normal: rebias the exponent (127 -> 15), round away 13 mantissa
        // bits; a carry into the exponent is the correct result.
        let r = a - 0x38000000u;
        return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
    }
    if (a <= 0x33000000u) {
        return sign;  // |x| <= 2^-25: rounds to ±0 (2^-25 is a tie, 0 is even)
    }
    // subnormal: |x| = m · 2^(e-150) in units of 2^-24 is m >> (126 - e)
    let m = (a & 0x7fffffu) | 0x800000u;
    let shift = 126u - (a >> 23u);  // 14 ..= 24
    let q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    let up = rem > half || (rem == half && (q & 1u) == 1u);
    return sign | (q + select(0u, 1u, up));
}
