// f32 <-> f16 conversion, and bf16 widened. f16 tensors are `half2` words
// (00_f16_*.wgsl), bf16 ones u32 pairs (bf16_at). Forward weights' f16
// mirror is written by the fused AdamW kernel; these standalone casts serve
// loading, bf16-sr master weights (widened for the kernels that read f32,
// their f16 mirror filled), tests and tools.

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

// cast_bf16_to_f32: exact widening, one invocation per element.
@group(0) @binding(1) var<storage, read> src_bf16: array<u32>;      // [ceil(n/2)]

@compute @workgroup_size(WG)
fn cast_bf16_to_f32(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.n) { return; }
    dst_f32[i] = bf16_at(src_bf16[i >> 1u], i);
}

// cast_bf16_to_f16: as cast_f32_to_f16 of the widened values, a word each.
@compute @workgroup_size(WG)
fn cast_bf16_to_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let w = flat_id(wid, nwg, lidx);
    let i = 2u * w;
    if (i >= params.n) { return; }
    let word = src_bf16[w];
    let hi = select(0.0, bf16_at(word, 1u), i + 1u < params.n);
    dst_h[w] = pack_half2(vec2<f32>(bf16_at(word, 0u), hi));
}
