// f32 <-> f16 conversion. f16 tensors are `half2` words (00_f16_*.wgsl).
// Forward weights' f16 mirror is written by the fused AdamW kernel; these
// standalone casts serve loading, tests and tools.

struct Params {
    n: u32,  // elements (not words); odd n leaves the last word's high half 0
}

@group(0) @binding(0) var<uniform> params: Params;

// cast_f32_to_f16: one invocation per word, so each writes whole words and
// packed storage needs no read-modify-write. Saturates to ±65504 (±Inf too);
// NaN stays NaN; rounding is the adapter's f32->f16 conversion (RNE, tested).
@group(0) @binding(1) var<storage, read> src_f32: array<f32>;      // [n]
@group(0) @binding(2) var<storage, read_write> dst_h: array<half2>; // [ceil(n/2)]

@compute @workgroup_size(WG)
fn cast_f32_to_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lidx: u32) {
    let w = flat_id(wid, nwg, lidx);
    let i = 2u * w;
    if (i >= params.n) { return; }
    let hi = select(0.0, src_f32[min(i + 1u, params.n - 1u)], i + 1u < params.n);
    dst_h[w] = pack_half2(vec2<f32>(src_f32[i], hi));
}

// cast_f16_to_f32: exact widening, one invocation per element.
@group(0) @binding(1) var<storage, read> src_h: array<half2>;       // [ceil(n/2)]
@group(0) @binding(2) var<storage, read_write> dst_f32: array<f32>; // [n]

@compute @workgroup_size(WG)
fn cast_f16_to_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    dst_f32[i] = half_at(src_h[i >> 1u], i);
}

// narrow_f16: f32 values f16 holds exactly (a recipe's f16 operands, already
// rounded and counted by its pre-pass), ±Inf and NaN, as f16 bits, two to a
// u32 word (element 2k low), for the matrix units' products. Unlike
// cast_f32_to_f16 nothing saturates: an operand that overflowed stays ±Inf,
// as the scalar product reads it. The bits come from integers alone.
@group(0) @binding(2) var<storage, read_write> narrow_dst: array<u32>;  // [ceil(n/2)]

fn exact_f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) { return sign | 0x7e00u; }                    // NaN
    if (a >= 0x47800000u) { return sign | 0x7c00u; }                   // ±Inf
    if (a >= 0x38800000u) { return sign | ((a - 0x38000000u) >> 13u); } // normal: rebias 127 -> 15
    // a subnormal f16 (or 0), a normal f32: m · 2^-24 with m < 1024
    return sign | u32(bitcast<f32>(a) * 16777216.0);
}

@compute @workgroup_size(WG)
fn narrow_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lidx: u32) {
    let w = flat_id(wid, nwg, lidx);
    let i = 2u * w;
    if (i >= params.n) { return; }
    let hi = select(0u, exact_f16_bits(src_f32[min(i + 1u, params.n - 1u)]), i + 1u < params.n);
    narrow_dst[w] = exact_f16_bits(src_f32[i]) | (hi << 16u);
}
