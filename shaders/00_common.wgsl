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

// Element i of a bf16 tensor (pairs, element 2k in word k's low half):
// pass the word holding it, `t[i >> 1u]`. Exact.
fn bf16_at(word: u32, i: u32) -> f32 {
    return bitcast<f32>(((word >> (16u * (i & 1u))) & 0xffffu) << 16u);
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

// sf16's quantizers (reference/quantize.rs holds their twins). Every step
// is exact in f32 — products by powers of two and `round`, which WGSL
// defines as ties-to-even — so the GPU and the CPU agree bit for bit.
// Q115_LIMIT (the SF16 document's overflow threshold) comes from
// ops::formats, composed after this file.

// Q1.15 round trip: clamp to ±0.999, nearest multiple of 2^-15. NaN stays.
fn q115(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    return round(clamp(x, -Q115_LIMIT, Q115_LIMIT) * 32768.0) * (1.0 / 32768.0);
}

// Q1.31 round trip (the SF16 register format): clamp to [-1, 1), nearest
// multiple of 2^-31; in f32 it only changes values below 2^-8.
fn q131(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    return round(clamp(x, -1.0, 0.99999994) * 2147483648.0) * (1.0 / 2147483648.0);
}

// The pipeline's numeric mode: NUMERICS is declared ahead of this file by
// compose (shaders.rs), so a mode is a build of the same kernels.
const EXACT: u32 = 0u;
const SF16: u32 = 1u;   // Q1.15 round trips at the forward boundaries

// Forward boundaries, one clamp counter each (kernels/boundary.rs `Clamped`).
const SITE_EMBEDDING: u32 = 0u;
const SITE_NORM: u32 = 1u;
const SITE_PROJECTION: u32 = 2u;  // linear outputs: q|k|v, gate|up, logits
const SITE_RESIDUAL: u32 = 3u;    // residual stream after o and down
const SITE_SOFTMAX: u32 = 4u;     // attention probabilities
const SITE_ATTENTION: u32 = 5u;   // attention output P·V
const SITE_ACTIVATION: u32 = 6u;  // SwiGLU output
const SITE_NONE: u32 = 0xffffffffu;  // not a boundary (backward products)

// Values each boundary clamped, since the host last cleared them.
@group(0) @binding(15) var<storage, read_write> boundary_counts: array<atomic<u32>>;

// x as the mode stores it at boundary `site`: sf16 rounds it to Q1.15 and
// counts it if clamped; other modes and SITE_NONE leave it as it is.
fn boundary(x: f32, site: u32) -> f32 {
    if (NUMERICS != SF16 || site == SITE_NONE) { return x; }
    if (abs(x) > Q115_LIMIT) { atomicAdd(&boundary_counts[site], 1u); }
    return q115(x);
}

// A matmul's output at boundary `site`: through the Q1.31 register first.
fn matmul_boundary(x: f32, site: u32) -> f32 {
    if (NUMERICS != SF16 || site == SITE_NONE) { return x; }
    return boundary(q131(x), site);
}

