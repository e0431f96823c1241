// log2_histogram: how many of n f32 values fall in each binade, the
// inspector's value ranges. Bin floor(log2|x|) + 149 for binades −149
// (f32's smallest subnormal) … 127, then zeros, ±Inf and NaN: read from the
// bit pattern (exponent field, or a subnormal's leading bit), so nothing is
// rounded and no driver's flush-to-zero touches it. Each workgroup counts
// its grid-stride share in workgroup atomics, then adds its nonzero bins to
// the output once: integer sums, the same whatever the order. Each also
// writes the sum of squares of its finite values (for the RMS), summed in
// a fixed order, so the host's sum of the partials is deterministic too.
// Legend: n elements; counts [BINS] u32, accumulated (zero them first);
// sums [workgroups] f32, written.
const BINADES: u32 = 277u;
const ZERO_BIN: u32 = 277u;
const INF_BIN: u32 = 278u;
const NAN_BIN: u32 = 279u;
const BINS: u32 = 280u;

struct Params {
    n: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<u32>;  // f32 bit patterns
@group(0) @binding(2) var<storage, read_write> counts: array<atomic<u32>>;  // [BINS]
@group(0) @binding(3) var<storage, read_write> sums: array<f32>;            // [workgroups]

var<workgroup> local_counts: array<atomic<u32>, BINS>;
var<workgroup> local_sums: array<f32, WG>;

fn bin_of(bits: u32) -> u32 {
    let exponent = (bits >> 23u) & 0xffu;
    let mantissa = bits & 0x7fffffu;
    if (exponent == 0xffu) { return select(NAN_BIN, INF_BIN, mantissa == 0u); }
    if (exponent == 0u) {
        if (mantissa == 0u) { return ZERO_BIN; }
        return u32(firstLeadingBit(mantissa));  // m·2^-149: binade −149 + leading bit
    }
    return exponent + 22u;  // binade exponent − 127, + 149
}

@compute @workgroup_size(WG)
fn log2_histogram(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lidx: u32) {
    for (var b = lidx; b < BINS; b += WG) { atomicStore(&local_counts[b], 0u); }
    workgroupBarrier();
    let stride = nwg.x * nwg.y * WG;  // every invocation launched
    var sum_sq = 0.0;
    for (var i = flat_id(wid, nwg, lidx); i < params.n; i += stride) {
        let bin = bin_of(x[i]);
        atomicAdd(&local_counts[bin], 1u);
        if (bin < INF_BIN) { let v = bitcast<f32>(x[i]); sum_sq = fma(v, v, sum_sq); }
    }
    local_sums[lidx] = sum_sq;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (lidx < half) { local_sums[lidx] += local_sums[lidx + half]; }
        workgroupBarrier();
    }
    if (lidx == 0u) { sums[flat_id(wid, nwg, 0u) / WG] = local_sums[0]; }
    for (var b = lidx; b < BINS; b += WG) {
        let c = atomicLoad(&local_counts[b]);
        if (c != 0u) { atomicAdd(&counts[b], c); }
    }
}

// relative_error: how far y is from x as a quantization of it — per
// workgroup, Σ |y − x| / |x| and how many terms, over the finite nonzero x
// whose y is finite (the twin: kernels::quantize::quantization_error, in
// f64). A subnormal x (and its y) is read from its bits scaled by 2^64, so
// a driver's flush to zero cannot turn it into 0/0. Summed in a fixed order
// per workgroup; the count is an f32, exact below 2^24 terms a workgroup.
// Legend: x, y [n] f32; errors [2 · workgroups] f32, written: sum, count.
@group(0) @binding(4) var<storage, read> y: array<u32>;        // f32 bit patterns
@group(0) @binding(5) var<storage, read_write> errors: array<f32>;

var<workgroup> local_terms: array<f32, WG>;

fn is_finite_bits(bits: u32) -> bool { return (bits & 0x7f800000u) != 0x7f800000u; }

/// The value of f32 bits times 2^64, exact for |v| < 2^64 (subnormals included).
fn scaled_up(bits: u32) -> f32 {
    let m = bits & 0x7fffffffu;
    let v = select(ldexp(bitcast<f32>(m), 64), ldexp(f32(m), -85), m < 0x800000u);  // m · 2^-149 · 2^64
    return select(v, -v, bits >= 0x80000000u);
}

@compute @workgroup_size(WG)
fn relative_error(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lidx: u32) {
    let stride = nwg.x * nwg.y * WG;
    var sum = 0.0;
    var terms = 0.0;
    for (var i = flat_id(wid, nwg, lidx); i < params.n; i += stride) {
        let a = x[i];
        let b = y[i];
        if (!is_finite_bits(a) || !is_finite_bits(b) || (a & 0x7fffffffu) == 0u) { continue; }
        if ((a & 0x7f800000u) == 0u) {
            let sa = scaled_up(a);
            sum += abs(scaled_up(b) - sa) / abs(sa);
        } else {
            sum += abs(bitcast<f32>(b) - bitcast<f32>(a)) / abs(bitcast<f32>(a));
        }
        terms += 1.0;
    }
    local_sums[lidx] = sum;
    local_terms[lidx] = terms;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half /= 2u) {
        if (lidx < half) {
            local_sums[lidx] += local_sums[lidx + half];
            local_terms[lidx] += local_terms[lidx + half];
        }
        workgroupBarrier();
    }
    if (lidx == 0u) {
        let g = flat_id(wid, nwg, 0u) / WG;
        errors[2u * g] = local_sums[0];
        errors[2u * g + 1u] = local_terms[0];
    }
}
