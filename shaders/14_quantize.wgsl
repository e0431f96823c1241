// A tensor through a format and back (`webtrain quantize`, the formats'
// tests, the GEMM operands of a precision recipe): plain casts, per-tensor
// scaling, OCP MX blocks, NVFP4, the blockwise FP8; the random Hadamard
// transform. Twins in reference/formats.rs; the block sides and NVFP4's
// range come from ops::formats. Legend: n elements, a [rows, cols] matrix (cols
// the last dimension), B a block's values, along a row or down a column,
// cut at `parts` (block_at).
//
// stats: [0] values beyond the format's largest (±Inf included),
// [1] nonzero values rounded to 0, [2] blocks whose scale saturated (a
// block holding ±Inf or NaN: its values become NaN), [3] blocks whose
// scale underflowed (MX and per-tensor: below E8M0's 2^-127, clamped;
// NVFP4: its E4M3 scale rounded to 0, the block to zeros), [4] the tensor
// amax of NVFP4 and per-tensor scaling (the f32 bits of the largest finite
// |x|: zeroed by quantize_reset, written by quantize_amax). [0..4] add up
// over the quantizations sharing the buffer; [4] is each one's own. Where
// the noise sums are taken (quantize_noise_partials): [5] Σx², [6] Σ(y − x)²
// as f32 bits, added up likewise; [7] and on, the last one's partials.

struct QuantizeParams {
    n: u32,
    cols: u32,
    element: u32,     // ops::formats::Element code
    scaling: u32,     // SCALING_*
    blocks: u32,      // BLOCKS_* (0: along the rows)
    stochastic: u32,  // 1: stochastic rounding of the elements
    seed: u32,
    tensor: u32,
    parts: vec2<u32>, // where blocks start afresh along them (part_block)
    count: u32,       // blocks (ops::formats::Blocks::count); quantize_eden: groups
    lanes: u32,       // quantize_blocks' invocations per block (kernels::quantize::Spread)
    group: u32,       // quantize_eden's group along the line (Quantization::eden_group)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> qp: QuantizeParams;
@group(0) @binding(1) var<uniform> qstep: vec4<u32>;                        // x: the step the draws use; y: 1 to sum the noise
@group(0) @binding(2) var<storage, read> qx: array<f32>;                    // [n]
@group(0) @binding(3) var<storage, read_write> qy: array<f32>;              // [n]
@group(0) @binding(4) var<storage, read_write> stats: array<atomic<u32>>;   // [5], or NOISE_STATS_WORDS

var<workgroup> wg_stats: array<atomic<u32>, 4>;

// Adds each invocation's counts to stats, one global add per counter and
// workgroup. Uniform control flow: call it before any return.
fn add_stats(c: vec4<u32>, lidx: u32) {
    if (lidx < 4u) { atomicStore(&wg_stats[lidx], 0u); }
    workgroupBarrier();
    for (var i = 0u; i < 4u; i++) {
        if (c[i] != 0u) { atomicAdd(&wg_stats[i], c[i]); }
    }
    workgroupBarrier();
    if (lidx < 4u) {
        let total = atomicLoad(&wg_stats[lidx]);
        if (total != 0u) { atomicAdd(&stats[lidx], total); }
    }
}

fn element_random(i: u32) -> u32 {
    return random_bits(qp.seed, qstep.x, qp.tensor, i);
}

// quantize_cast: one invocation per value, each through the element format
// (bf16, f16, E4M3, E5M2 and the others), unscaled or, with
// SCALING_TENSOR, scaled by 2^k: k the smallest with amax ≤ max·2^k
// (mx_scale_exp's ceil of stats[4]), clamped to E8M0's [-127, 127], 0 for
// a tensor without a finite nonzero value.
@compute @workgroup_size(WG)
fn quantize_cast(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    let f = element_format(qp.element);
    var c = vec4<u32>(0u);
    if (i < qp.n) {
        var k = 0;
        let amax_t = atomicLoad(&stats[4]);
        if (qp.scaling == SCALING_TENSOR && amax_t != 0u) {
            let raw = mx_scale_exp(bitcast<f32>(amax_t), f, true);
            k = clamp(raw, -127, 127);
            c[3] = select(0u, 1u, i == 0u && raw < -127);  // the tensor's one scale
        }
        let x = qx[i];
        let q = quantize_scaled(x, f, k, qp.stochastic == 1u, element_random(i));
        qy[i] = q.value;
        c[0] = select(0u, 1u, q.saturated);
        c[1] = select(0u, 1u, flushed_to_zero(x, q.value));
    }
    add_stats(c, lidx);
}

// quantize_reset: zeroes stats[4] ahead of quantize_amax, so that each
// quantization sharing the stats buffer gets its own tensor amax.
@compute @workgroup_size(1)
fn quantize_reset() {
    atomicStore(&stats[4], 0u);
}

var<workgroup> wg_amax: atomic<u32>;

// quantize_amax: the largest finite |x| into stats[4], as f32 bits (whose
// order as u32 is the magnitudes' order): the first pass of NVFP4 and
// per-tensor scaling.
@compute @workgroup_size(WG)
fn quantize_amax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (lidx == 0u) { atomicStore(&wg_amax, 0u); }
    workgroupBarrier();
    if (i < qp.n && is_finite(qx[i])) {
        atomicMax(&wg_amax, bitcast<u32>(qx[i]) & 0x7fffffffu);
    }
    workgroupBarrier();
    if (lidx == 0u) { atomicMax(&stats[4], atomicLoad(&wg_amax)); }
}

// How many blocks part_block cuts a line into.
fn line_blocks(parts: vec2<u32>, len: u32, side: u32) -> u32 {
    return (parts.x + side - 1u) / side + (parts.y - parts.x + side - 1u) / side
        + (len - parts.y + side - 1u) / side;
}

// A block: its first value's flat index, how many values it has, and how
// many of them lie along a row (a square block's width).
struct Block {
    first: u32,
    len: u32,
    width: u32,
}

// Block b of a [rows, cols] matrix in `blocks` (BLOCKS_*), as
// ops::formats::Blocks::block: along a row, numbered row by row; down a
// column, numbered across the columns first (block b is column b % cols),
// so that neighbouring invocations read neighbouring words; or a side ×
// side tile, numbered row by row, cut short at the right and bottom edges.
// Cut at `parts` along the blocks (square: down the rows).
fn block_at(blocks: u32, side: u32, b: u32, rows: u32, cols: u32, parts: vec2<u32>) -> Block {
    switch blocks {
        case BLOCKS_COLUMNS: {
            let p = part_block(b / cols, parts, rows, side);
            return Block(p.x * cols + b % cols, p.y, 1u);
        }
        case BLOCKS_SQUARE: {
            let across = (cols + side - 1u) / side;
            let p = part_block(b / across, parts, rows, side);
            let left = (b % across) * side;
            let width = min(side, cols - left);
            return Block(p.x * cols + left, p.y * width, width);
        }
        default: {
            let across = line_blocks(parts, cols, side);
            let p = part_block(b % across, parts, cols, side);
            return Block((b / across) * cols + p.x, p.y, p.y);
        }
    }
}

// Value j of block `block` of a [_, cols] matrix (square: j row-major in
// the tile), as ops::formats::Blocks::index.
fn block_index(blocks: u32, cols: u32, block: Block, j: u32) -> u32 {
    switch blocks {
        case BLOCKS_COLUMNS: { return block.first + j * cols; }
        case BLOCKS_SQUARE: { return block.first + (j / block.width) * cols + j % block.width; }
        default: { return block.first + j; }
    }
}

// NVFP4's tensor scale, with amax_t = m·2^j, m in [1, 2): S = S_n·2^-j,
// S_n = 2688 / m. Keeping 2^j apart gives the issue's formulas' bits
// wherever they stay normal in f32, and carries them on where S alone
// would overflow (amax_t below ~1e-35).
struct TensorScale {
    s_n: f32,
    j: i32,
}

fn nvfp4_tensor_scale(amax_bits: u32) -> TensorScale {
    let s = split(bitcast<f32>(amax_bits));
    return TensorScale(div_rne(NVFP4_RANGE, bitcast<f32>(0x3f800000u | (s.sig & 0x7fffffu))), s.e);
}

// |x|·2^-j, for |x|·2^-j ≥ 2^-126 (else 0: below anything NVFP4 keeps).
fn unscale(x: f32, j: i32) -> f32 {
    let s = split(x);
    if (s.e - j < -126) { return 0.0; }
    return bitcast<f32>(f32_bits(s.sig, s.e - j - 23));
}

// Four Over Six (mit-han-lab/fouroversix's reference quantizer): NVFP4
// under the tensor scale 1536 / amax_t, each block quantized with the E4M3
// scale mapping its amax to 6, s6 = E4M3((amax_b / 6)·enc), and with the
// one mapping it to 4, E4M3((amax_b / 6)·enc·1.5); each value q =
// E2M1(x / (dec·s)) (to nearest, or stochastically: both candidates draw
// alike), dec = 1 / enc, dequantized ((q·s)·amax_t) / 1536; the
// candidate whose errors (squared, or absolute) sum less over the block, in
// the values' order, kept (ties: s6). Computed on x' = x·2^-j with amax_t =
// m·2^j: enc = 1536 / m, every quotient correctly rounded (div_rne) and
// every product normal, so the reference's numbers wherever its own are
// normal (and finite ones where its enc overflows, amax_t < 2^-117).
// Twin: reference::formats::FourOverSixTensor.
struct FourOverSix {
    m: f32,
    enc: f32,
    dec: f32,
    j: i32,
}

fn four_over_six_tensor(amax_bits: u32) -> FourOverSix {
    let s = split(bitcast<f32>(amax_bits));
    let m = bitcast<f32>(0x3f800000u | (s.sig & 0x7fffffu));
    let enc = div_rne(FOUR_OVER_SIX_RANGE, m);
    return FourOverSix(m, enc, div_rne(1.0, enc), s.e);
}

// The block's candidate scales: (to 6, to 4).
fn four_over_six_scales(amax_b: f32, t: FourOverSix) -> vec2<f32> {
    let u = unscale(amax_b, t.j);
    if (u < 0x1p-100) { return vec2(0.0); }
    let hp = div_rne(u, 6.0) * t.enc;
    return vec2(round_format(hp, FMT_E4M3), round_format(hp * 1.5, FMT_E4M3));
}

struct FourOverSixValue {
    y: f32,           // the dequantized magnitude, times 2^-j
    saturated: bool,  // q beyond E2M1's 6 (a subnormal scale), held at 6
    err: f32,         // against |x'|: squared or absolute, 0 below 2^-126
}

// |x'| through block scale s, rounded to nearest or (sr) stochastically
// with the random bits r: both candidates draw the same.
fn four_over_six_value(xn: f32, s: f32, t: FourOverSix, mae: bool, sr: bool, r: u32) -> FourOverSixValue {
    var y = 0.0;
    var saturated = false;
    if (s != 0.0) {
        let q = quantize_scaled(xn * div_rne(1.0, t.dec * s), FMT_E2M1, 0, sr, r);
        saturated = q.saturated;
        if (q.value != 0.0) { y = div_rne(q.value * s * t.m, FOUR_OVER_SIX_RANGE); }
    }
    let d = y - xn;
    let e = select(mul_rne(d, d), abs(d), mae);
    return FourOverSixValue(y, saturated, select(e, 0.0, e < 0x1p-126));
}

// TorchAO's rowwise scale exponent (ops::formats::row_scale_exp): k of the
// scale 2^k = 2^floor(log2(max / max(amax, EPS))), the quotient correctly
// rounded and its log2 as f32 rounds it: e, or e + 1 where the quotient is
// within floor(ln2·2^p) ulps below 2^(e+1), 2^p ≤ |e + 1| < 2^(p+1).
// ROW_EPS_EXP is E4M3's (the one element scaled per row).
fn floor_log2_rounded(sig: u32, e: i32) -> i32 {
    let t = e + 1;
    if (t == 0) { return e; }
    var below = array<u32, 8>(0u, 1u, 2u, 5u, 11u, 22u, 44u, 88u);
    let p = firstLeadingBit(u32(abs(t)));
    return e + select(0, 1, 0x1000000u - sig <= below[min(p, 7u)]);
}

fn row_scale_exp(amax_bits: u32, f: Minifloat) -> i32 {
    if (amax_bits < ROW_EPS_BITS) { return ROW_EPS_EXP; }
    let max = bitcast<f32>(f32_bits(f.max_sig, f.emax - i32(f.man)));
    let s = split(div_rne(max, bitcast<f32>(amax_bits)));
    return floor_log2_rounded(s.sig, s.e);
}

// quantize_blocks: a block's values spread over `lanes` invocations, its
// amax by a workgroup reduction, WG / lanes blocks per workgroup. On a GPU
// a lane per value (at most WG: 16 of NVFP4's 1-D blocks to a workgroup,
// 8 of MX's, 2 of the blockwise FP8's, one 16×16 or 128×128 tile); on a
// CPU adapter one lane per block, where an invocation's loop is cheap and
// a workgroup's barriers and atomics are not (kernels::quantize::Spread).
// Invocation `lane` takes values lane, lane + lanes, …: along a row and in
// a tile neighbouring lanes read neighbouring words; down a column the
// blocks are the neighbours (block_at numbers them across the columns), so
// there the block varies fastest. Blocks along a row, down a column or
// square (block_at), a part's last block shorter (its scale from the values
// it has). MX (B = 32) and the blockwise FP8 (B = 128, or 128×128): X = 2^k
// from the block's amax (mx_scale_exp, rounded up for MX ceil and
// blockwise), each value round(x / X)·X. NVFP4 (B = 16, or 16×16): d_b =
// E4M3((amax_b / 6)·S), q = E2M1(x·(S / d_b)), value q·(d_b / S), S / d_b and
// d_b / S once per block, every product and quotient correctly rounded in
// f32, the value's product exact and rounded once. Each block's own counts
// (scales saturated or underflowed) are its first lane's.
var<workgroup> qb_amax: array<atomic<u32>, WG>;  // per block of the workgroup
var<workgroup> qb_nonfinite: array<atomic<u32>, WG>;
var<workgroup> qb_err: array<vec2<f32>, WG>;     // Four Over Six: per lane

@compute @workgroup_size(WG)
fn quantize_blocks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lidx: u32) {
    let f = element_format(qp.element);
    let mae = qp.scaling == SCALING_FOUR_OVER_SIX_MAE;
    let fos = qp.scaling == SCALING_FOUR_OVER_SIX || mae;
    let nvfp4 = qp.scaling == SCALING_NVFP4 || fos;
    let down = qp.blocks == BLOCKS_COLUMNS;
    var side = MX_BLOCK;
    switch qp.scaling {
        case SCALING_NVFP4, SCALING_FOUR_OVER_SIX, SCALING_FOUR_OVER_SIX_MAE: { side = NVFP4_BLOCK; }
        case SCALING_BLOCKWISE: { side = BLOCKWISE_BLOCK; }
        case SCALING_ROW: { side = max(select(qp.cols, qp.n / qp.cols, down), 1u); }  // the line
        default: {}
    }
    let lanes = qp.lanes;
    let groups = WG / lanes;
    let g = select(lidx / lanes, lidx % groups, down);
    let lane = select(lidx % lanes, lidx / groups, down);
    let b = flat_group(wid, nwg) * groups + g;
    let live = b < qp.count;
    let sr = qp.stochastic == 1u;
    var block = Block(0u, 0u, 1u);
    var amax = 0u;
    var finite = true;
    if (live) {
        block = block_at(qp.blocks, side, b, qp.n / qp.cols, qp.cols, qp.parts);
        for (var j = lane; j < block.len; j += lanes) {
            let x = qx[block_index(qp.blocks, qp.cols, block, j)];
            finite = finite && is_finite(x);
            amax = max(amax, bitcast<u32>(x) & 0x7fffffffu);
        }
    }
    if (lanes > 1u) {  // uniform: the block's amax over its lanes
        if (lidx < groups) {
            atomicStore(&qb_amax[lidx], 0u);
            atomicStore(&qb_nonfinite[lidx], 0u);
        }
        workgroupBarrier();
        if (live) {
            atomicMax(&qb_amax[g], amax);
            if (!finite) { atomicStore(&qb_nonfinite[g], 1u); }
        }
        workgroupBarrier();
        amax = atomicLoad(&qb_amax[g]);
        finite = atomicLoad(&qb_nonfinite[g]) == 0u;
    }
    let amax_t = atomicLoad(&stats[4]);
    // Four Over Six's choice: both candidates' errors summed over the
    // block in its values' order (a lane per value, or one per block)
    var fos_t = FourOverSix(1.0, 1.0, 1.0, 0);
    var fos_s = 0.0;
    if (fos) {  // uniform
        let chooses = live && finite && amax != 0u && amax_t != 0u;
        var s = vec2(0.0);
        var err = vec2(0.0);
        if (chooses) {
            fos_t = four_over_six_tensor(amax_t);
            s = four_over_six_scales(bitcast<f32>(amax), fos_t);
            for (var j = lane; j < block.len; j += lanes) {
                let i = block_index(qp.blocks, qp.cols, block, j);
                let xn = unscale(qx[i], fos_t.j);
                let r = element_random(i);
                let e6 = four_over_six_value(xn, s.x, fos_t, mae, sr, r).err;
                err += vec2(e6, four_over_six_value(xn, s.y, fos_t, mae, sr, r).err);
            }
        }
        if (lanes > 1u) {  // uniform
            qb_err[lidx] = err;
            workgroupBarrier();
            if (chooses) {
                err = vec2(0.0);
                for (var j = 0u; j < min(block.len, lanes); j++) {
                    err += qb_err[select(g * lanes + j, j * groups + g, down)];
                }
            }
        }
        fos_s = select(s.x, s.y, err.y < err.x);
    }
    var c = vec4<u32>(0u);
    if (live) {
        let first = select(0u, 1u, lane == 0u);
        if (!finite) {
            c[2] = first;
            for (var j = lane; j < block.len; j += lanes) {
                let i = block_index(qp.blocks, qp.cols, block, j);
                let x = qx[i];
                c[0] += select(0u, 1u, !is_finite(x) && !is_nan(x));
                qy[i] = bitcast<f32>(0x7fc00000u | (bitcast<u32>(x) & SIGN_BIT));
            }
        } else if (amax == 0u || (nvfp4 && amax_t == 0u)) {
            for (var j = lane; j < block.len; j += lanes) {
                let i = block_index(qp.blocks, qp.cols, block, j);
                qy[i] = qx[i];  // ±0
            }
        } else if (qp.scaling == SCALING_TSENG) {
            let raw = mx_scale_exp(bitcast<f32>(amax), f, false);
            c[3] = select(0u, first, raw < TSENG_EXP_MIN);
            // 2^k / ¾ rounded once: a subnormal for the smallest blocks
            let k = max(raw, TSENG_EXP_MIN);
            let p = select(bitcast<f32>(1u << u32(max(k + 149, 0))), pow2(k), k >= -126);
            let s = div_round(p, TSENG_DIVISOR);
            for (var j = lane; j < block.len; j += lanes) {
                let i = block_index(qp.blocks, qp.cols, block, j);
                let x = qx[i];
                let q = quantize_scaled(div_round(x, s), f, 0, sr, element_random(i));
                let y = mul_rne(q.value, s);
                qy[i] = y;
                c[0] += select(0u, 1u, q.saturated);
                c[1] += select(0u, 1u, flushed_to_zero(x, y));
            }
        } else if (!nvfp4) {
            let ceil = qp.scaling == SCALING_MX_CEIL || qp.scaling == SCALING_BLOCKWISE;
            var raw = mx_scale_exp(bitcast<f32>(amax), f, ceil);
            if (qp.scaling == SCALING_ROW) { raw = -row_scale_exp(amax, f); }
            c[3] = select(0u, first, raw < -127);
            c[2] = select(0u, first, raw > 127);
            let k = clamp(raw, -127, 127);
            for (var j = lane; j < block.len; j += lanes) {
                let i = block_index(qp.blocks, qp.cols, block, j);
                let x = qx[i];
                let q = quantize_scaled(x, f, k, sr, element_random(i));
                qy[i] = q.value;
                c[0] += select(0u, 1u, q.saturated);
                c[1] += select(0u, 1u, flushed_to_zero(x, q.value));
            }
        } else if (fos) {
            c[3] = select(0u, first, fos_s == 0.0);
            for (var j = lane; j < block.len; j += lanes) {
                let i = block_index(qp.blocks, qp.cols, block, j);
                let x = qx[i];
                let v = four_over_six_value(unscale(x, fos_t.j), fos_s, fos_t, mae, sr, element_random(i));
                var bits = 0u;
                if (v.y != 0.0) {  // times 2^j, rounded once where that is subnormal
                    let sv = split(v.y);
                    bits = round_magnitude(sv.sig, sv.e - 23 + fos_t.j, FMT_F32, 0, false, 0u).bits;
                }
                let y = bitcast<f32>(bits | (bitcast<u32>(x) & SIGN_BIT));
                qy[i] = y;
                c[0] += select(0u, 1u, v.saturated);
                c[1] += select(0u, 1u, flushed_to_zero(x, y));
            }
        } else {
            let ts = nvfp4_tensor_scale(amax_t);
            let u = unscale(bitcast<f32>(amax), ts.j);
            var d = 0.0;
            if (u >= 0x1p-100) {
                d = round_format(div_rne(u, 6.0) * ts.s_n, FMT_E4M3);
            }
            if (d == 0.0) {
                c[3] = first;
                for (var j = lane; j < block.len; j += lanes) {
                    let i = block_index(qp.blocks, qp.cols, block, j);
                    let x = qx[i];
                    qy[i] = bitcast<f32>(bitcast<u32>(x) & SIGN_BIT);
                    c[1] += select(0u, 1u, flushed_to_zero(x, 0.0));
                }
            } else {
                let up = div_rne(ts.s_n, d);    // S / d_b, times 2^j
                let down_scale = split(div_rne(d, ts.s_n));  // d_b / S, over 2^j
                for (var j = lane; j < block.len; j += lanes) {
                    let i = block_index(qp.blocks, qp.cols, block, j);
                    let x = qx[i];
                    let xn = unscale(x, ts.j);
                    let q = quantize_scaled(xn * up, f, 0, sr, element_random(i));
                    var bits = 0u;
                    if (q.value != 0.0) {
                        // q·(d_b / S): q has man + 1 significant bits, the product
                        // man + 25 at most: exact, then rounded once to f32
                        let sq = split(q.value);
                        let prod = (sq.sig >> (23u - f.man)) * down_scale.sig;
                        let e0 = sq.e - i32(f.man) + down_scale.e - 23 + ts.j;
                        bits = round_magnitude(prod, e0, FMT_F32, 0, false, 0u).bits;
                    }
                    let y = bitcast<f32>(bits | (bitcast<u32>(x) & SIGN_BIT));
                    qy[i] = y;
                    c[0] += select(0u, 1u, q.saturated);
                    c[1] += select(0u, 1u, flushed_to_zero(x, y));
                }
            }
        }
    }
    add_stats(c, lidx);
}

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
