// Shared preamble, composed after the f16 storage header (00_f16_*.wgsl) and
// before every kernel file. Legend: n elements, WG invocations per workgroup.

const WG: u32 = 256u;
const F16_MAX: f32 = 65504.0;

// Flat invocation index. A dispatch of more than 65 535 workgroups is laid
// out as a 2-D grid of rows of `nwg.x` workgroups (gpu/dispatch.rs); surplus
// invocations in the last row fail the kernel's bounds check.
fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lidx: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * WG + lidx;
}

// Tests on the bit pattern: WGSL lets compilers assume floats are finite,
// so `x != x` or comparisons with infinity may be folded away.
fn is_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// Saturate to the f16 range (±Inf included) so an overflow becomes ±65504
// instead of ±Inf. NaN is let through untouched (clamp of NaN is unspecified
// in WGSL) so a corrupt value stays visibly NaN instead of turning plausible.
fn saturate_f16(v: vec2<f32>) -> vec2<f32> {
    let c = clamp(v, vec2<f32>(-F16_MAX), vec2<f32>(F16_MAX));
    return select(c, v, vec2<bool>(is_nan(v.x), is_nan(v.y)));
}

// Element i of an f16 tensor: pass the word holding it, `t[i >> 1u]`.
fn half_at(w: half2, i: u32) -> f32 {
    return unpack_half2(w)[i & 1u];
}

// Row kernels run one workgroup per row: the row is the flat workgroup
// index (2-D grid beyond 65 535 rows, as for flat_id).
fn flat_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// Workgroup reductions, returned to every invocation. A fixed tree order
// makes them deterministic run to run. Call from uniform control flow (no
// early return before them): they contain barriers.
var<workgroup> wg_scratch: array<f32, WG>;

fn workgroup_sum(v: f32, lidx: u32) -> f32 {
    wg_scratch[lidx] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lidx < s) {
            wg_scratch[lidx] += wg_scratch[lidx + s];
        }
        workgroupBarrier();
    }
    let total = wg_scratch[0];
    workgroupBarrier();  // the scratch may be reused right after
    return total;
}

fn workgroup_max(v: f32, lidx: u32) -> f32 {
    wg_scratch[lidx] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lidx < s) {
            wg_scratch[lidx] = max(wg_scratch[lidx], wg_scratch[lidx + s]);
        }
        workgroupBarrier();
    }
    let total = wg_scratch[0];
    workgroupBarrier();
    return total;
}
