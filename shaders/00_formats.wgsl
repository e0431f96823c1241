// The element formats' round trips, composed into every module after
// 00_common.wgsl; twins in reference/formats.rs. The FMT_* constants and
// element_format(code) are composed ahead of this file from
// ops/formats.rs, the formats' one definition.
//
// Everything here works on the bits with integer arithmetic: no float
// operation rounds, flushes a subnormal or fuses, so the GPU and the twins
// agree bit for bit, subnormal f32 inputs and results included. (NVFP4's
// scales are the exception: its formulas multiply and divide f32 values,
// see below.)

struct Minifloat {
    man: u32,      // mantissa bits
    emin: i32,     // smallest normal exponent
    emax: i32,     // the largest finite value's exponent
    max_sig: u32,  // the largest finite value's significand: max = max_sig·2^(emax − man)
    inf: bool,     // overflow gives ±Inf (bf16, f16, f32), else ±max
}

const SIGN_BIT: u32 = 0x80000000u;

// A finite nonzero magnitude as sig·2^(e − 23) with sig in [2^23, 2^24):
// e = floor(log2 |x|), subnormal f32 values normalized.
struct Split {
    sig: u32,
    e: i32,
}

fn split(x: f32) -> Split {
    let u = bitcast<u32>(x) & 0x7fffffffu;
    let biased = i32(u >> 23u);
    if (biased == 0) {
        let top = firstLeadingBit(u);
        return Split(u << (23u - top), i32(top) - 149);
    }
    return Split((u & 0x7fffffu) | 0x800000u, biased - 127);
}

// f32 bits of sig·2^qe (sig > 0, sig < 2^25, the value one an f32 holds
// exactly): normal, subnormal, or Inf when beyond f32's range.
fn f32_bits(sig: u32, qe: i32) -> u32 {
    let p = i32(firstLeadingBit(sig));
    let e = qe + p;
    if (e > 127) { return 0x7f800000u; }
    if (e >= -126) {
        let m = select(sig << u32(23 - p), sig >> u32(p - 23), p > 23);
        return (u32(e + 127) << 23u) | (m & 0x7fffffu);
    }
    return sig << u32(qe + 149);
}

struct Rounded {
    bits: u32,        // the magnitude's f32 bits
    saturated: bool,  // the input was beyond the largest finite value
}

// The magnitude sig·2^e0 (sig < 2^31) in format f scaled by 2^k (the
// values v·2^k): to nearest, ties to even, or with `stochastic` up with
// probability equal to the distance to the value below (as a fraction of
// the step, in 32 bits: exact for steps of up to 2^32 ulps of the input),
// drawing the 32 random bits `r`. Beyond the largest value: ±max, or Inf.
fn round_magnitude(sig: u32, e0: i32, f: Minifloat, k: i32, stochastic: bool, r: u32) -> Rounded {
    if (sig == 0u) { return Rounded(0u, false); }
    let e = e0 + i32(firstLeadingBit(sig));  // floor(log2 value)
    let emax = f.emax + k;
    let qe = max(e, f.emin + k) - i32(f.man);  // the step's exponent there
    let drop = qe - e0;                        // bits of sig below the step
    var kept: u32;
    var frac = 0u;  // the distance above `kept`, in 2^-32 steps
    if (drop <= 0) {
        kept = sig << u32(-drop);  // on the grid: at most man + 1 bits
    } else if (drop < 32) {
        kept = sig >> u32(drop);
        frac = (sig & ((1u << u32(drop)) - 1u)) << u32(32 - drop);
    } else {
        kept = 0u;
        frac = select(0u, sig >> u32(drop - 32), drop < 64);
    }
    let beyond = e > emax || (e == emax && (kept > f.max_sig || (kept == f.max_sig && frac != 0u)));
    var up: bool;
    if (stochastic) {
        up = r < frac;
    } else {
        up = frac > SIGN_BIT || (frac == SIGN_BIT && (kept & 1u) == 1u);
    }
    kept += select(0u, 1u, up);
    let over = e > emax || (qe == emax - i32(f.man) && kept > f.max_sig);
    if (over) {
        let top = select(f32_bits(f.max_sig, emax - i32(f.man)), 0x7f800000u, f.inf);
        return Rounded(top, beyond);
    }
    if (kept == 0u) { return Rounded(0u, beyond); }
    return Rounded(f32_bits(kept, qe), beyond);
}

struct Quantized {
    value: f32,
    saturated: bool,  // |x| beyond the largest finite value (±Inf included)
}

// x through format f scaled by 2^k: x / 2^k rounded (as round_magnitude),
// times 2^k, exactly. NaN stays NaN; ±Inf goes to ±max (or stays ±Inf
// where f.inf); the sign is kept (a flushed negative value is −0).
fn quantize_scaled(x: f32, f: Minifloat, k: i32, stochastic: bool, r: u32) -> Quantized {
    if (is_nan(x)) { return Quantized(x, false); }
    let sign = bitcast<u32>(x) & SIGN_BIT;
    var m: Rounded;
    if (!is_finite(x)) {
        let top = select(f32_bits(f.max_sig, f.emax + k - i32(f.man)), 0x7f800000u, f.inf);
        m = Rounded(top, true);
    } else if ((bitcast<u32>(x) & 0x7fffffffu) == 0u) {
        m = Rounded(0u, false);
    } else {
        let s = split(x);
        m = round_magnitude(s.sig, s.e - 23, f, k, stochastic, r);
    }
    return Quantized(bitcast<f32>(m.bits | sign), m.saturated);
}

// x in format f, to nearest even (the plain casts).
fn round_format(x: f32, f: Minifloat) -> f32 {
    return quantize_scaled(x, f, 0, false, 0u).value;
}

// round_format(x, FMT_F16) in a few instructions, for kernels that round
// every factor they read (attention's f16 operands): the generic path,
// inlined per element of unrolled rows, took SwiftShader 26–65 s to
// compile per head size. Normal f16 values: 13 mantissa bits rounded away
// on the bits, past 65504 ±Inf; below 2^-14 the grid of 2^-24 steps, where
// scaling by 2^24 is exact and round() is to nearest even (an f32
// subnormal flushed there rounds to ±0 all the same). NaN and ±Inf stay.
fn round_f16(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    let a = b & 0x7fffffffu;
    if (a >= 0x7f800000u) { return x; }
    let sign = b & SIGN_BIT;
    if (a >= 0x38800000u) {
        let r = (a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u;
        return bitcast<f32>(sign | select(r, 0x7f800000u, r > 0x477fe000u));
    }
    let steps = round(bitcast<f32>(a) * 16777216.0);
    return bitcast<f32>(sign | bitcast<u32>(steps * 5.9604644775390625e-8));
}

// Whether a nonzero, non-NaN x became 0 (what the flush counters count).
fn flushed_to_zero(x: f32, y: f32) -> bool {
    let nonzero = (bitcast<u32>(x) & 0x7fffffffu) != 0u;
    return nonzero && !is_nan(x) && (bitcast<u32>(y) & 0x7fffffffu) == 0u;
}

// OCP MX v1.0's scale exponent for a block whose largest magnitude is amax
// (finite, nonzero): floor(log2 amax) − emax_elem; with `ceil`, the
// smallest k with amax ≤ max·2^k (amax never saturates). Unclamped: E8M0
// holds [-127, 127], the caller clamps and counts.
fn mx_scale_exp(amax: f32, f: Minifloat, ceil: bool) -> i32 {
    let s = split(amax);
    let above = s.sig > (f.max_sig << (23u - f.man));
    return s.e - f.emax + select(0, 1, ceil && above);
}

// The long division of |a| / |b| (finite, nonzero; subnormal f32
// inputs normalized): the quotient's top 25 bits (24 and a guard bit) with
// the quotient in [1, 2)·2^e, and whether a remainder is left.
struct Quotient {
    q: u32,
    e: i32,
    sticky: bool,
}

fn long_division(a: f32, b: f32) -> Quotient {
    let sa = split(a);
    let sb = split(b);
    var rem = sa.sig;
    var e = sa.e - sb.e;
    if (rem < sb.sig) { rem <<= 1u; e -= 1; }  // the quotient in [1, 2)
    var q = 0u;
    for (var i = 0u; i < 25u; i++) {
        q <<= 1u;
        if (rem >= sb.sig) { rem -= sb.sig; q |= 1u; }
        rem <<= 1u;
    }
    return Quotient(q, e, rem != 0u);
}

// a / b rounded to nearest even, for positive normal a and b whose
// quotient is normal. (WGSL's `/` may be off by 2.5 ulp; NVFP4's scales
// need the correctly rounded quotient.)
fn div_rne(a: f32, b: f32) -> f32 {
    let d = long_division(a, b);
    var m = d.q >> 1u;
    if ((d.q & 1u) == 1u && (d.sticky || (m & 1u) == 1u)) { m += 1u; }
    return bitcast<f32>(f32_bits(m, d.e - 23));
}

// a·b (finite) rounded to nearest even, in integers, subnormal results
// included: a GPU may fuse a float product into the sum that follows,
// rounding once where the reference rounds twice, or flush it to zero.
fn mul_rne(a: f32, b: f32) -> f32 {
    let sign = (bitcast<u32>(a) ^ bitcast<u32>(b)) & SIGN_BIT;
    if ((bitcast<u32>(a) & 0x7fffffffu) == 0u || (bitcast<u32>(b) & 0x7fffffffu) == 0u) {
        return bitcast<f32>(sign);
    }
    let sa = split(a);
    let sb = split(b);
    let ah = sa.sig >> 12u;
    let al = sa.sig & 0xfffu;
    let bh = sb.sig >> 12u;
    let bl = sb.sig & 0xfffu;
    let mid = ah * bl + al * bh;
    let low = al * bl + ((mid & 0xfffu) << 12u);
    let high = ah * bh + (mid >> 12u) + (low >> 24u);  // sig_a·sig_b = high·2^24 + low mod 2^24
    let low24 = low & 0xffffffu;
    // the top 30 bits and a sticky bit: round_magnitude drops at least 6
    let sig = (high << 7u) | (low24 >> 17u) | select(0u, 1u, (low24 & 0x1ffffu) != 0u);
    return bitcast<f32>(round_magnitude(sig, sa.e + sb.e - 29, FMT_F32, 0, false, 0u).bits | sign);
}

// x / d (d positive, x finite) rounded to nearest even, subnormal and
// zero quotients included (div_rne's long division, rounded by
// round_magnitude): MS-EDEN's quotients may be subnormal (a block far
// below the tensor's amax), and whether a tiny v is +0 or a subnormal sets
// its q's sign.
fn div_round(x: f32, d: f32) -> f32 {
    let sign = bitcast<u32>(x) & SIGN_BIT;
    if ((bitcast<u32>(x) & 0x7fffffffu) == 0u) { return bitcast<f32>(sign); }
    let l = long_division(x, d);  // split reads |x| from the bits
    let sig = (l.q << 1u) | select(0u, 1u, l.sticky);  // and a sticky bit
    return bitcast<f32>(round_magnitude(sig, l.e - 25, FMT_F32, 0, false, 0u).bits | sign);
}

// Counter-based random bits: Jarzynski and Olano's pcg4d hash ("Hash
// Functions for GPU Rendering", JCGT 2020) of (element, tensor, step, seed):
// every draw is a function of its coordinates, the same on every device.
fn pcg4d(input: vec4<u32>) -> vec4<u32> {
    var v = input * 1664525u + vec4<u32>(1013904223u);
    v.x += v.y * v.w;
    v.y += v.z * v.x;
    v.z += v.x * v.y;
    v.w += v.y * v.z;
    v ^= v >> vec4<u32>(16u);
    v.x += v.y * v.w;
    v.y += v.z * v.x;
    v.z += v.x * v.y;
    v.w += v.y * v.z;
    return v;
}

fn random_bits(seed: u32, step: u32, tensor: u32, index: u32) -> u32 {
    return pcg4d(vec4<u32>(index, tensor, step, seed)).x;
}

// TorchAO's _fp32_to_bf16_sr (twin ops::adam::bf16_sr): w's top 16 bits,
// one bf16 step away from zero iff the 16 random bits r16 fall below its
// low 16 — rounded up with the probability of the fraction it drops.
fn bf16_sr(w: f32, r16: u32) -> f32 {
    let bits = bitcast<u32>(w);
    let toward_zero = bits & 0xffff0000u;
    return bitcast<f32>(select(toward_zero, toward_zero + 0x10000u, r16 < (bits & 0xffffu)));
}

// Block b of a line `len` long cut at `parts` (p1 ≤ p2 ≤ len), as
// ops::formats::part_block: (start, length); past the last block (len, 0).
// Shared by the quantizers (14_quantize.wgsl) and fp8's pre-pass. [0, p1), [p1, p2) and
// [p2, len) each go in blocks of `side` from their own start, the last one
// shorter, so that no block spans two stacked weights.
fn part_block(b: u32, parts: vec2<u32>, len: u32, side: u32) -> vec2<u32> {
    let starts = vec3<u32>(0u, parts.x, parts.y);
    let ends = vec3<u32>(parts.x, parts.y, len);
    var left = b;
    for (var i = 0u; i < 3u; i++) {
        let blocks = (ends[i] - starts[i] + side - 1u) / side;
        if (left < blocks) {
            let start = starts[i] + left * side;
            return vec2<u32>(start, min(side, ends[i] - start));
        }
        left -= blocks;
    }
    return vec2<u32>(len, 0u);
}
