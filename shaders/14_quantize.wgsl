// A tensor through a format and back (`webtrain quantize`, the formats'
// tests, the GEMM operands of a precision recipe): plain casts, per-tensor
// scaling, OCP MX blocks, NVFP4, the blockwise FP8 (QuEST, MS-EDEN, the
// noise sums and the Hadamard transform: 14_quantize_recipes.wgsl,
// composed after this file). Twins in reference/formats.rs; the block sides and NVFP4's
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
