// A quantized recipe's product on the matrix units (kernels/linear/units.rs).
// The recipe's pre-pass has written each operand's values in f32; here each
// operand, times a multiplier m, becomes f16 bits, and every value whose
// product with m is not an f16 value is counted. Then the gate: where no
// value of either operand was inexact, the product runs on the units, its
// epilogue multiplying by 1 / (m_a·m_b); else on the scalar GEMM, as it
// would without units. The gate picks by writing both GEMMs' indirect
// dispatch arguments, one of them zero: never a silent rounding.
//
// Multipliers (UNITS_*, composed from kernels/linear/units.rs): PLAIN 1 (f16 values: amp-f16); POW2 the power of
// two that takes the operand's finite amax into [2^14, 2^15) (every scale
// of bf16, E4M3, E5M2, MX and the blockwise FP8 is a power of two, so the
// elements come back exact wherever their scales lie within f16's binades
// of the largest); NVFP4 (and Four Over Six: 6·256) its tensor scale S = 6·448 / amax, recomputed from
// the dequantized values, whose amax is the tensor's: the quantizer wrote
// q·d_b / S, so times S each value is the f16 value q·d_b up to the f32
// roundings of both quotients, which the comparison allows (2^-18
// relative: 2^5 times their bound).
//
// gate (one per Units, zeroed by units_gate for the next product):
//   [0], [1] operand A's and B's finite amax (f32 bits: as u32, ordered as
//   the magnitudes), [2], [3] A's and B's values not exact in f16.
// counts (the step's, zeroed with the operands' counters): [0] products
//   on the units, [1] products on the scalar GEMM because a value was not
//   exact (or m_a·m_b left [2^-64, 2^64]), [2] the values not exact.

struct UnitsParams {
    n: u32,
    side: u32,   // 0: A, 1: B
    mode: u32,   // UNITS_*
    _pad: u32,
}

struct GateParams {
    units: vec4<u32>,   // the unit GEMM's workgroups (x, y, z)
    scalar: vec4<u32>,  // the scalar GEMM's
    modes: vec4<u32>,   // x: A's UNITS_*, y: B's
}

@group(0) @binding(0) var<uniform> up: UnitsParams;
@group(0) @binding(1) var<storage, read> ux: array<f32>;            // [n]
@group(0) @binding(2) var<storage, read_write> uh: array<u32>;      // [ceil(n/2)] f16 pairs
@group(0) @binding(3) var<storage, read_write> gate: array<atomic<u32>, 4>;
@group(0) @binding(4) var<uniform> gp: GateParams;
@group(0) @binding(5) var<storage, read_write> args: array<u32, 8>; // units' then scalar's
@group(0) @binding(6) var<storage, read_write> scale: array<f32, 2>; // 1 / (m_a·m_b), m_a·m_b
@group(0) @binding(7) var<storage, read_write> counts: array<u32, 4>;

fn pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(clamp(e, -126, 127) + 127) << 23u);
}

// The operand's multiplier from its amax (0 where it is not finite and
// nonzero: the gate sends the product to the scalar GEMM).
fn multiplier(mode: u32, amax_bits: u32) -> f32 {
    if (amax_bits == 0u) { return 1.0; }
    switch mode {
        case UNITS_POW2: { return pow2(14 - split(bitcast<f32>(amax_bits)).e); }
        case UNITS_NVFP4, UNITS_FOUR_OVER_SIX: {
            let range = select(NVFP4_RANGE, FOUR_OVER_SIX_RANGE, mode == UNITS_FOUR_OVER_SIX);
            let s = range / bitcast<f32>(amax_bits);
            return select(0.0, s, is_finite(s) && s >= 0x1p-126);
        }
        default: { return 1.0; }
    }
}

var<workgroup> wg_amax: atomic<u32>;

// units_amax: the operand's largest finite |x| into gate[side].
@compute @workgroup_size(WG)
fn units_amax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (lidx == 0u) { atomicStore(&wg_amax, 0u); }
    workgroupBarrier();
    if (i < up.n && is_finite(ux[i])) {
        atomicMax(&wg_amax, bitcast<u32>(ux[i]) & 0x7fffffffu);
    }
    workgroupBarrier();
    if (lidx == 0u) { atomicMax(&gate[up.side], atomicLoad(&wg_amax)); }
}

// v's f16 bits, rounded to nearest even, for |v| < 65520 (the multipliers
// keep it below 2^15), ±Inf and NaN kept; y: 1 where that changed v beyond
// the mode's allowance.
fn narrowed(x: f32, m: f32, mode: u32) -> vec2<u32> {
    let sign = (bitcast<u32>(x) >> 16u) & 0x8000u;
    if (!is_finite(x)) {
        return vec2(select(sign | 0x7c00u, sign | 0x7e00u, is_nan(x)), 0u);
    }
    let v = x * m;
    let a = bitcast<u32>(v) & 0x7fffffffu;
    var h = 0u;
    if (a >= 0x38800000u) {  // normal in f16: rebias 127 -> 15, round 13 bits off
        let r = a - 0x38000000u;
        let low = r & 0x1fffu;
        h = r >> 13u;
        if (low > 0x1000u || (low == 0x1000u && (h & 1u) == 1u)) { h += 1u; }
    } else {                 // subnormal in f16: k·2^-24 (1024 rounds up to the smallest normal)
        h = u32(round(abs(v) * 16777216.0));
    }
    let back = unpack2x16float(h).x;
    let err = abs(back - abs(v));
    let allowed = select(0.0, abs(v) * 0x1p-18, mode == UNITS_NVFP4 || mode == UNITS_FOUR_OVER_SIX);
    return vec2(sign | h, select(0u, 1u, err > allowed));
}

var<workgroup> wg_inexact: atomic<u32>;

// units_narrow: two values per invocation into one word of uh, after
// units_amax; the inexact ones counted into gate[2 + side].
@compute @workgroup_size(WG)
fn units_narrow(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lidx: u32) {
    let w = flat_id(wid, nwg, lidx);
    if (lidx == 0u) { atomicStore(&wg_inexact, 0u); }
    workgroupBarrier();
    let i = 2u * w;
    if (i < up.n) {
        let m = multiplier(up.mode, atomicLoad(&gate[up.side]));
        let lo = narrowed(ux[i], m, up.mode);
        var hi = vec2(0u);
        if (i + 1u < up.n) { hi = narrowed(ux[i + 1u], m, up.mode); }
        uh[w] = lo.x | (hi.x << 16u);
        let bad = lo.y + hi.y;
        if (bad > 0u) { atomicAdd(&wg_inexact, bad); }
    }
    workgroupBarrier();
    let bad = atomicLoad(&wg_inexact);
    if (lidx == 0u && bad > 0u) { atomicAdd(&gate[2u + up.side], bad); }
}

// units_gate: after both operands' units_narrow, one invocation.
@compute @workgroup_size(1)
fn units_gate() {
    let m = multiplier(gp.modes.x, atomicLoad(&gate[0])) * multiplier(gp.modes.y, atomicLoad(&gate[1]));
    let inexact = atomicLoad(&gate[2]) + atomicLoad(&gate[3]);
    let on_units = inexact == 0u && m >= 0x1p-64 && m <= 0x1p64;
    for (var i = 0u; i < 3u; i++) {
        args[i] = select(0u, gp.units[i], on_units);
        args[4u + i] = select(gp.scalar[i], 0u, on_units);
    }
    scale[0] = select(1.0, 1.0 / m, on_units);
    scale[1] = select(1.0, m, on_units);
    counts[0] += select(0u, 1u, on_units);
    counts[1] += select(1u, 0u, on_units);
    counts[2] += inexact;
    for (var i = 0u; i < 4u; i++) { atomicStore(&gate[i], 0u); }
}
