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
