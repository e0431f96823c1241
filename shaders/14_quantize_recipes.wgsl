// The recipes' parts beyond the formats, composed after 14_quantize.wgsl
// (its bindings, Block, block_at, stats): QuEST's MXFP4 and its mask
// (Quartet), MS-EDEN's stochastically rounded scales (Quartet II), the
// noise criterion's sums, and the random Hadamard transform. Twins in
// reference/formats.rs.

// QuEST's block exponent (Quartet's mxfp4_forward_kernel, quest=True): k
// = floor(log2 s), s = QUEST_SCALE·σ + QUEST_EPS, σ = √(mean x² − mean²)
// over the block's `len` values (32, or a line's last block) summed in
// order, the products by mul_rne (which no GPU fuses into the sum) and the
// means by div_round; 128 where a sum overflows. Subnormal squares a GPU
// may flush leave s at QUEST_EPS either way (below 2^-102, σ·QUEST_SCALE is
// under half an ulp of QUEST_EPS). Twin: reference::formats::quartet.
fn quest_exp(v: ptr<function, array<f32, 32>>, len: u32) -> i32 {
    var s1 = 0.0;
    var s2 = 0.0;
    for (var j = 0u; j < len; j++) {
        s1 += (*v)[j];
        s2 += mul_rne((*v)[j], (*v)[j]);
    }
    if (!is_finite(s1) || !is_finite(s2)) { return 128; }
    let mean = div_round(s1, f32(len));
    let d = div_round(s2, f32(len)) - mul_rne(mean, mean);
    let s = mul_rne(QUEST_SCALE, sqrt(max(d, 0.0))) + QUEST_EPS;
    return split(s).e;
}

// quantize_quest: QuEST's MXFP4 (SCALING_QUEST), one invocation per block
// (its σ summed in order): S = 2^quest_exp, each value
// e2m1_toward_zero(|x| / S)·S with x's sign; a block holding ±Inf or NaN,
// or whose sums overflow, NaN; a zero block as it is. Its own kernel so
// that quantize_blocks keeps its registers. Twin:
// reference::formats::quartet::quest_block.
@compute @workgroup_size(WG)
fn quantize_quest(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lidx: u32) {
    let b = flat_id(wid, nwg, lidx);
    var c = vec4<u32>(0u);
    if (b < qp.count) {
        let block = block_at(qp.blocks, MX_BLOCK, b, qp.n / qp.cols, qp.cols, qp.parts);
        var v: array<f32, 32>;
        var finite = true;
        var nonzero = false;
        for (var j = 0u; j < block.len; j++) {
            v[j] = qx[block_index(qp.blocks, qp.cols, block, j)];
            finite = finite && is_finite(v[j]);
            nonzero = nonzero || (bitcast<u32>(v[j]) & 0x7fffffffu) != 0u;
        }
        let k = quest_exp(&v, block.len);
        // saturated scales: a block holding ±Inf or NaN, or whose sums
        // overflowed (the reference's scale is Inf or NaN then)
        c[2] = select(0u, 1u, !finite || k > 127);
        for (var j = 0u; j < block.len; j++) {
            let i = block_index(qp.blocks, qp.cols, block, j);
            let x = v[j];
            if (!finite || k > 127) {
                c[0] += select(0u, 1u, !is_finite(x) && !is_nan(x));
                qy[i] = bitcast<f32>(0x7fc00000u | (bitcast<u32>(x) & SIGN_BIT));
            } else if (!nonzero) {
                qy[i] = x;  // ±0
            } else {
                let a = quest_ratio(x, k);
                let y = bitcast<f32>(bitcast<u32>(e2m1_toward_zero(a) * pow2(k)) | (bitcast<u32>(x) & SIGN_BIT));
                qy[i] = y;
                c[0] += select(0u, 1u, a > 6.0);
                c[1] += select(0u, 1u, flushed_to_zero(x, y));
            }
        }
    }
    add_stats(c, lidx);
}

// |x| / 2^k (0 below 2^-126, which rounds to 0 anyway).
fn quest_ratio(x: f32, k: i32) -> f32 {
    if ((bitcast<u32>(x) & 0x7fffffffu) == 0u) { return 0.0; }
    return unscale(x, k);
}

// E2M1 of a ≥ 0 by the reference's thresholds: to nearest, ties toward
// zero, above 6 clipped to 6.
fn e2m1_toward_zero(a: f32) -> f32 {
    if (a > 5.0) { return 6.0; }
    if (a > 3.5) { return 4.0; }
    if (a > 2.5) { return 3.0; }
    if (a > 1.75) { return 2.0; }
    if (a > 1.25) { return 1.5; }
    if (a > 0.75) { return 1.0; }
    if (a > 0.25) { return 0.5; }
    return 0.0;
}

// Quartet II's MS-EDEN (IST-DASLab/Quartet-II @8776a90,
// schemes/quartet_2.py, eden_1x16s_fp4_kernel): one invocation per group of
// G = qp.group values along a line (a row, or down a column: numbered
// across the columns first), its G / 16 blocks of 16 in turn. Under the
// tensor scale g = (amax_t / 255.99) / val_max (1 where amax_t is 0),
// val_max = 6 / (17/16 · 0.93): each block's scale s_b = E4M3(amax_b /
// val_max / g) (1 where that is 0), v = x / (s_b·g), q = E2M1 to nearest
// with ties away from zero (the reference's thresholds); c = Σv² / Σv·q
// over the group's finite blocks (1 where Σv·q = 0); each block's scale
// s_b·c rounded stochastically between its E4M3 neighbours (up with
// probability the distance; the draw at the block's first index); the
// value (q·scale)·g. Every product correctly rounded in integers
// (mul_rne), every quotient by div_round, the sums in order: the twin's bits.
// A block holding ±Inf or NaN becomes NaN and stays out of the sums.
// Twin: reference::formats (ms_eden).
fn e2m1_away(v: f32) -> f32 {
    let a = abs(v);
    var q = 0.0;
    if (a >= 5.0) { q = 6.0; } else if (a >= 3.5) { q = 4.0; } else if (a >= 2.5) { q = 3.0; }
    else if (a >= 1.75) { q = 2.0; } else if (a >= 1.25) { q = 1.5; } else if (a >= 0.75) { q = 1.0; }
    else if (a >= 0.25) { q = 0.5; }
    // the reference's sign: −0 for ±0 (by the bits: a subnormal v, which a
    // GPU may flush in a comparison, is positive)
    let positive = bitcast<u32>(v) != 0u && (bitcast<u32>(v) & SIGN_BIT) == 0u;
    return select(-q, q, positive);
}

// 2^e as f32 (e within the normal range).
fn pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127) << 23u);
}

// E4M3's step at a positive value c of it (2^-9 below its normals), and
// the one below c (half as large where c is a power of two above them).
fn e4m3_step_up(c: f32) -> f32 {
    if (c == 0.0) { return pow2(-9); }
    return pow2(max(split(c).e, -6) - 3);
}

fn e4m3_step_down(c: f32) -> f32 {
    let s = split(c);
    let pow2_above = s.sig == 0x800000u && s.e > -6;
    return pow2(max(s.e, -6) - 3 - select(0, 1, pow2_above));
}

struct EdenValue {
    v: f32,
    q: f32,
}

fn eden_value(x: f32, d: f32) -> EdenValue {
    let v = div_round(x, d);
    return EdenValue(v, e2m1_away(v));
}

@compute @workgroup_size(WG)
fn quantize_eden(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lidx: u32) {
    let gi = flat_id(wid, nwg, lidx);
    var c = vec4<u32>(0u);
    if (gi < qp.count) {
        let size = qp.group;
        let down = qp.blocks == BLOCKS_COLUMNS;
        // the group's first index and the stride between its values
        var first = (gi / (qp.cols / size)) * qp.cols + (gi % (qp.cols / size)) * size;
        var stride = 1u;
        if (down) {
            first = (gi / qp.cols) * size * qp.cols + gi % qp.cols;
            stride = qp.cols;
        }
        let amax_t = atomicLoad(&stats[4]);  // bits: a subnormal amax is not 0
        var g = 1.0;
        if (amax_t != 0u) { g = div_round(div_round(bitcast<f32>(amax_t), EDEN_SCALES_MAX), EDEN_VAL_MAX); }
        var scales: array<f32, 8>;  // each block's s_b, 0 for a block not finite
        var num = 0.0;
        var den = 0.0;
        for (var b = 0u; b < size / 16u; b++) {
            var amax = 0u;
            var finite = true;
            for (var j = 0u; j < 16u; j++) {
                let x = qx[first + (16u * b + j) * stride];
                finite = finite && is_finite(x);
                amax = max(amax, bitcast<u32>(x) & 0x7fffffffu);
            }
            scales[b] = 0.0;
            if (!finite) { continue; }
            var sb = 0.0;
            if (amax != 0u) {
                sb = round_format(div_round(div_round(bitcast<f32>(amax), EDEN_VAL_MAX), g), FMT_E4M3);
            }
            if (sb == 0.0) {
                c[3] += select(0u, 1u, amax != 0u);
                sb = 1.0;
            }
            scales[b] = sb;
            let d = mul_rne(sb, g);
            for (var j = 0u; j < 16u; j++) {
                let e = eden_value(qx[first + (16u * b + j) * stride], d);
                num += mul_rne(e.v, e.v);
                den += mul_rne(e.v, e.q);
                c[0] += select(0u, 1u, abs(e.v) > 6.0);
            }
        }
        var corr = 1.0;
        if (den != 0.0) { corr = div_round(num, den); }
        for (var b = 0u; b < size / 16u; b++) {
            let at = first + 16u * b * stride;
            let sb = scales[b];
            if (sb == 0.0) {
                c[2] += 1u;
                for (var j = 0u; j < 16u; j++) {
                    let i = at + j * stride;
                    let x = qx[i];
                    c[0] += select(0u, 1u, !is_finite(x) && !is_nan(x));
                    qy[i] = bitcast<f32>(0x7fc00000u | (bitcast<u32>(x) & SIGN_BIT));
                }
                continue;
            }
            // the corrected scale, rounded stochastically between its E4M3 neighbours
            let corrected = mul_rne(sb, corr);
            let cur = round_format(corrected, FMT_E4M3);
            var lo = cur;
            var hi = cur + e4m3_step_up(cur);
            if (cur > corrected) {
                hi = cur;
                lo = cur - e4m3_step_down(cur);
            }
            var p = 0.0;
            if (corrected != lo) { p = div_round(corrected - lo, hi - lo); }
            let u = f32(element_random(at) >> 8u) * 0x1p-24;
            let scale = select(lo, hi, u < p);
            let d = mul_rne(sb, g);
            for (var j = 0u; j < 16u; j++) {
                let i = at + j * stride;
                let x = qx[i];
                let y = mul_rne(eden_value(x, d).q * scale, g);
                qy[i] = y;
                c[1] += select(0u, 1u, flushed_to_zero(x, y));
            }
        }
    }
    add_stats(c, lidx);
}

// The noise criterion's sums (FP4 All the Way, arXiv 2505.19115: training
// stalls once ‖g‖ falls below about √3 times the quantization noise):
// Σx² and Σ(y − x)² over a quantization's pairs with x and y − x finite,
// added to stats[5] and [6] where qstep.y says so (the trainer's choice of
// steps, kernels::quantize::NOISE_EVERY; the others return at once). No
// float atomics: every sum runs in a fixed order, so a step's ratio repeats
// bit for bit on an adapter (the twin, reference::formats::noise_sums, sums
// in the same order; a compiler may fuse x·x + s). quantize_noise_partials:
// G workgroups (G ≤ NOISE_GROUPS), invocation i of group g summing the
// values g·WG + i + k·G·WG in order, then its group's lanes in a tree into
// stats[8 + 2g] and [9 + 2g], G into stats[7]; quantize_noise_total adds
// the G pairs in order.
struct NoiseParams {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> np: NoiseParams;

fn noise_measured() -> bool {
    return qstep.y != 0u;
}

var<workgroup> qn_sums: array<vec2<f32>, WG>;

@compute @workgroup_size(WG)
fn quantize_noise_partials(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                           @builtin(local_invocation_index) lidx: u32) {
    if (!noise_measured()) { return; }
    var s = vec2<f32>(0.0);
    for (var i = wid.x * WG + lidx; i < np.n; i += nwg.x * WG) {
        let x = qx[i];
        let d = qy[i] - x;
        if (is_finite(x) && is_finite(d)) { s += vec2<f32>(x * x, d * d); }
    }
    qn_sums[lidx] = s;
    workgroupBarrier();
    for (var half = WG / 2u; half > 0u; half >>= 1u) {
        if (lidx < half) { qn_sums[lidx] += qn_sums[lidx + half]; }
        workgroupBarrier();
    }
    if (lidx == 0u) {
        atomicStore(&stats[8u + 2u * wid.x], bitcast<u32>(qn_sums[0].x));
        atomicStore(&stats[9u + 2u * wid.x], bitcast<u32>(qn_sums[0].y));
        if (wid.x == 0u) { atomicStore(&stats[7], nwg.x); }
    }
}

@compute @workgroup_size(1)
fn quantize_noise_total() {
    if (!noise_measured()) { return; }
    var s = vec2<f32>(bitcast<f32>(atomicLoad(&stats[5])), bitcast<f32>(atomicLoad(&stats[6])));
    let groups = atomicLoad(&stats[7]);
    for (var g = 0u; g < groups; g++) {
        s += vec2<f32>(bitcast<f32>(atomicLoad(&stats[8u + 2u * g])), bitcast<f32>(atomicLoad(&stats[9u + 2u * g])));
    }
    atomicStore(&stats[5], bitcast<u32>(s.x));
    atomicStore(&stats[6], bitcast<u32>(s.y));
}

// hadamard16: the random Hadamard transform of 16-value blocks of a
// [_, cols] matrix, along its rows or down its columns (block_index): with
// random signs s (one per position in the block, from the seed and the
// step in hstep: fixed for a run where that stays 0, or drawn per step),
// y = H16·(s∘x)/4 forward and x = s∘(H16·y)/4 inverse (H16 the
// Walsh–Hadamard matrix, H16·H16 = 16·I). One invocation per block; the
// butterflies add in a fixed order, so the GPU and the twin agree bit for
// bit (for normal f32 values: a GPU may flush subnormal sums to zero).
struct HadamardParams {
    n: u32,
    cols: u32,
    blocks: u32,  // BLOCKS_*: along the rows or down the columns
    flags: u32,   // bit 0: the inverse; bit 1: no signs (the plain Walsh–Hadamard matrix)
    seed: u32,
    tensor: u32,
    size: u32,   // hadamard_wide's block: 32, 64 or 128
    scale: f32,  // hadamard_wide's 1/√size (ops::formats::hadamard_scale)
}

@group(0) @binding(0) var<uniform> hp: HadamardParams;
@group(0) @binding(1) var<storage, read> hx: array<f32>;            // [n]
@group(0) @binding(2) var<storage, read_write> hy: array<f32>;      // [n]
@group(0) @binding(3) var<uniform> hstep: vec4<u32>;                // x: the step the signs are drawn at

// Position j's sign, as the bit to flip: bit 0 of its random draw (none
// where the transform has no signs).
fn hadamard_sign(j: u32) -> u32 {
    if ((hp.flags & 2u) != 0u) { return 0u; }
    return (random_bits(hp.seed, hstep.x, hp.tensor, j) & 1u) << 31u;
}

fn hadamard_inverse() -> bool {
    return (hp.flags & 1u) != 0u;
}

fn flip(x: f32, sign: u32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ sign);
}

@compute @workgroup_size(WG)
fn hadamard16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lidx: u32) {
    let b = flat_id(wid, nwg, lidx);
    if (b >= hp.n / 16u) { return; }
    let block = block_at(hp.blocks, 16u, b, hp.n / hp.cols, hp.cols, vec2<u32>(0u));
    var v: array<f32, 16>;
    for (var j = 0u; j < 16u; j++) {
        let x = hx[block_index(hp.blocks, hp.cols, block, j)];
        v[j] = select(flip(x, hadamard_sign(j)), x, hadamard_inverse());
    }
    for (var h = 1u; h < 16u; h <<= 1u) {
        for (var i = 0u; i < 16u; i++) {
            if ((i & h) == 0u) {
                let a = v[i];
                let c = v[i + h];
                v[i] = a + c;
                v[i + h] = a - c;
            }
        }
    }
    for (var j = 0u; j < 16u; j++) {
        let y = v[j] * 0.25;
        hy[block_index(hp.blocks, hp.cols, block, j)] = select(y, flip(y, hadamard_sign(j)), hadamard_inverse());
    }
}

// hadamard_wide: hadamard16 in blocks of hp.size (32, 64 or 128: Quartet's
// and Quartet II's), y = H·(s∘x)·hp.scale forward and x = s∘(H·y)·hp.scale
// inverse, hp.scale = 1/√size rounded to f32 (so the inverse of a block of
// 32 or 128 returns x within an ulp or two, not exactly).
@compute @workgroup_size(WG)
fn hadamard_wide(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lidx: u32) {
    let size = hp.size;
    let b = flat_id(wid, nwg, lidx);
    if (b >= hp.n / size) { return; }
    let block = block_at(hp.blocks, size, b, hp.n / hp.cols, hp.cols, vec2<u32>(0u));
    var v: array<f32, 128>;
    for (var j = 0u; j < size; j++) {
        let x = hx[block_index(hp.blocks, hp.cols, block, j)];
        v[j] = select(flip(x, hadamard_sign(j)), x, hadamard_inverse());
    }
    for (var h = 1u; h < size; h <<= 1u) {
        for (var i = 0u; i < size; i++) {
            if ((i & h) == 0u) {
                let a = v[i];
                let c = v[i + h];
                v[i] = a + c;
                v[i + h] = a - c;
            }
        }
    }
    for (var j = 0u; j < size; j++) {
        let y = v[j] * hp.scale;
        hy[block_index(hp.blocks, hp.cols, block, j)] = select(y, flip(y, hadamard_sign(j)), hadamard_inverse());
    }
}

// quest_mask: QuEST's gradient mask (Quartet's QuestMXFP4QuantizerFn
// backward): a gradient hy, taken into the forward operand's Hadamard
// basis, zeroed where the operand hx (that operand in the same basis)
// clipped: |x / S| ≥ 6 in its block of 32 along the row (a row's last
// block shorter where 32 does not divide it), S = 2^quest_exp as
// quantize_blocks computes it. Blocks the forward made NaN (holding ±Inf
// or NaN, or whose sums overflow) keep their gradient. One invocation per
// block; hp's size, signs and scale unused.
@compute @workgroup_size(WG)
fn quest_mask(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lidx: u32) {
    let rows = hp.n / hp.cols;
    let b = flat_id(wid, nwg, lidx);
    if (b >= rows * ((hp.cols + MX_BLOCK - 1u) / MX_BLOCK)) { return; }
    let block = block_at(hp.blocks, MX_BLOCK, b, rows, hp.cols, vec2<u32>(0u));  // along the rows
    var v: array<f32, 32>;
    var finite = true;
    for (var j = 0u; j < block.len; j++) {
        v[j] = hx[block.first + j];
        finite = finite && is_finite(v[j]);
    }
    let k = quest_exp(&v, block.len);
    if (!finite || k > 127) { return; }
    for (var j = 0u; j < block.len; j++) {
        if (!(quest_ratio(v[j], k) < 6.0)) { hy[block.first + j] = 0.0; }
    }
}
