// The optimizer step: global gradient norm, clip scale, fused AdamW.
// Legend: n elements of one parameter block (or chunk of one), G = ⌈n/GROUP⌉.
//   reduce_norm_sq      per workgroup: Σ g² of finite g, and the non-finite count
//   finalize_grad_stats one workgroup: sums all partials in a fixed order;
//                       decides whether the step is skipped (non-finite
//                       loss, or Σg² overflowed)
//   adamw_update(_f16)  per element: NaN/Inf -> 0, clip, moments, bias
//                       correction, decoupled decay, gradient zeroed (and
//                       the f16 forward mirror written); a skipped step only
//                       zeroes the gradient
//   adamw_8bit_update(_f16)  the same with m and v as 8-bit codes: one
//                       invocation per 4 values (one packed word), one scale
//                       per block of QBLOCK values and moment
// Deterministic: no float atomics, fixed reduction orders.

const GROUP: u32 = 4096u;  // gradients per reduce_norm_sq workgroup (16 per invocation)

struct ReduceParams {
    n: u32,
    partial_offset: u32,  // first partial of this dispatch: several blocks share one buffer
}

struct FinalizeParams {
    partials: u32,   // partials written by all reduce dispatches of the step
    max_norm: f32,   // clip threshold; <= 0 disables clipping
}

// What finalize_grad_stats writes, and AdamW and the host read.
struct GradStats {
    norm: f32,
    clip_scale: f32,
    nonfinite: u32,
    skip: u32,       // 1: leave weights and moments untouched this step
}

// The step's loss, as loss_sum writes it (kernels/loss.rs LossTotals).
struct LossTotals {
    sum: f32,
    mean: f32,
    counted: u32,
    out_of_range: u32,
}

// reduce_norm_sq
@group(0) @binding(0) var<uniform> reduce_params: ReduceParams;
@group(0) @binding(1) var<storage, read> grads_in: array<f32>;              // [n]
@group(0) @binding(2) var<storage, read_write> partials: array<vec2<f32>>;  // [G total]: (Σg², non-finite)

@compute @workgroup_size(WG)
fn reduce_norm_sq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lidx: u32) {
    let group = flat_group(wid, nwg);
    let start = group * GROUP;
    var sum = 0.0;
    var bad = 0.0;
    for (var i = start + lidx; i < min(start + GROUP, reduce_params.n); i += WG) {
        let g = grads_in[i];
        if (is_finite(g)) { sum += g * g; } else { bad += 1.0; }
    }
    let total = workgroup_sum(sum, lidx);
    let total_bad = workgroup_sum(bad, lidx);  // at most GROUP: exact in f32
    if (lidx == 0u) { partials[reduce_params.partial_offset + group] = vec2<f32>(total, total_bad); }
}

// finalize_grad_stats
@group(0) @binding(0) var<uniform> finalize_params: FinalizeParams;
@group(0) @binding(1) var<storage, read> partials_in: array<vec2<f32>>;     // [G total]
@group(0) @binding(2) var<storage, read> loss_in: LossTotals;               // the step's loss
@group(0) @binding(3) var<storage, read_write> stats_out: GradStats;

@compute @workgroup_size(WG)
fn finalize_grad_stats(@builtin(local_invocation_index) lidx: u32) {
    var sum = 0.0;
    var bad = 0u;
    for (var i = lidx; i < finalize_params.partials; i += WG) {
        sum += partials_in[i].x;
        bad += u32(partials_in[i].y);
    }
    let total = workgroup_sum(sum, lidx);
    let total_bad = workgroup_sum(f32(bad), lidx);
    if (lidx == 0u) {
        let norm = sqrt(total);
        var clip = 1.0;
        if (finalize_params.max_norm > 0.0 && norm > finalize_params.max_norm) {
            clip = finalize_params.max_norm / norm;
        }
        let skip = !is_finite(loss_in.mean) || !is_finite(total);
        stats_out = GradStats(norm, clip, u32(total_bad), select(0u, 1u, skip));
    }
}

// adamw_update, adamw_update_f16. A block's constants come with its
// dispatch; the step's values from one uniform the host rewrites every step
// (queue.write_buffer), bias corrections folded in as torch.optim.AdamW:
//   w <- w·(1 − lr·wd) − step_size · m / (sqrt(v) / bc2_sqrt + eps)
// with step_size = lr / (1 − β1^t), bc2_sqrt = sqrt(1 − β2^t).
struct AdamBlock {
    n: u32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    decays: u32,     // 1: the decay block (2-D weights); 0: gains
}

struct AdamStep {
    step_size: f32,
    bc2_sqrt: f32,
    decay: f32,      // 1 − lr·weight_decay, for blocks that decay
}

@group(0) @binding(0) var<uniform> adam: AdamBlock;
@group(0) @binding(1) var<uniform> adam_step: AdamStep;
@group(0) @binding(2) var<storage, read> stats: GradStats;
@group(0) @binding(3) var<storage, read_write> weights: array<f32>;   // [n] f32 master
@group(0) @binding(4) var<storage, read_write> grads: array<f32>;     // [n], zeroed
@group(0) @binding(5) var<storage, read_write> moment1: array<f32>;   // [n]
@group(0) @binding(6) var<storage, read_write> moment2: array<f32>;   // [n]
@group(0) @binding(7) var<storage, read_write> mirror: array<half2>;  // [n] f16, adamw_update_f16

// The new (m, v) of one element from its raw gradient: NaN/Inf -> 0, clip.
fn adam_moments(raw: f32, m_old: f32, v_old: f32) -> vec2<f32> {
    let g = select(0.0, raw * stats.clip_scale, is_finite(raw));
    let m = m_old + (1.0 - adam.beta1) * (g - m_old);
    let v = adam.beta2 * v_old + (1.0 - adam.beta2) * g * g;
    return vec2<f32>(m, v);
}

// The new master weight from the new moments (m, v).
fn adam_weight(w_old: f32, mv: vec2<f32>) -> f32 {
    let decay = select(1.0, adam_step.decay, adam.decays != 0u);
    return w_old * decay - adam_step.step_size * (mv.x / (sqrt(mv.y) / adam_step.bc2_sqrt + adam.eps));
}

// Updates element i; returns its new master weight.
fn adamw_at(i: u32) -> f32 {
    let raw = grads[i];
    grads[i] = 0.0;
    if (stats.skip != 0u) { return weights[i]; }
    let mv = adam_moments(raw, moment1[i], moment2[i]);
    let w = adam_weight(weights[i], mv);
    moment1[i] = mv.x;
    moment2[i] = mv.y;
    weights[i] = w;
    return w;
}

@compute @workgroup_size(WG)
fn adamw_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= adam.n) { return; }
    adamw_at(i);
}

// Two elements per invocation, so each mirror word is written whole.
@compute @workgroup_size(WG)
fn adamw_update_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let pair = flat_id(wid, nwg, lidx);
    let i = 2u * pair;
    if (i >= adam.n) { return; }
    let w0 = adamw_at(i);
    var w1 = 0.0;
    if (i + 1u < adam.n) { w1 = adamw_at(i + 1u); }
    if (stats.skip == 0u) { mirror[pair] = pack_half2(vec2<f32>(w0, w1)); }
}

// adamw_8bit_update, adamw_8bit_update_f16: the update above with m and v
// stored as 8-bit codes, 4 per word (element 4k+j in byte j of word k), and
// one f32 scale per block of QBLOCK values and moment: the block's absmax
// after the update. Codes are dynamic trees (M_CODE, V_ROOT below; v's is on
// sqrt(v/absmax)). The moments are dequantized, updated in f32 and used
// unquantized for this step's weights, then quantized against the block's
// new absmax, a workgroup max in a fixed order. One invocation per word, so
// every write is a whole word; QWORDS invocations per block, WG/QWORDS
// blocks per workgroup. A skipped step only zeroes the gradients.
const QBLOCK: u32 = 256u;
const QWORDS: u32 = QBLOCK / 4u;  // packed words per block

@group(0) @binding(5) var<storage, read_write> m_codes: array<u32>;    // [⌈n/4⌉] 4 bytes of m per word
@group(0) @binding(6) var<storage, read_write> v_codes: array<u32>;    // [⌈n/4⌉] 4 bytes of v per word
@group(0) @binding(7) var<storage, read_write> m_scales: array<f32>;   // [⌈n/QBLOCK⌉] max |m| per block
@group(0) @binding(8) var<storage, read_write> v_scales: array<f32>;   // [⌈n/QBLOCK⌉] max v per block
@group(0) @binding(9) var<storage, read_write> q_mirror: array<half2>; // [n] f16, adamw_8bit_update_f16

// Both codes, m's at [0, 256) and v's at [256, 512): byte k of a block of
// scale s stands for q_value[k]·s, and x gets the byte #{k : x > q_mid[k]·s}
// (round to nearest). The same f32 formulas as Int8Map::from_points in
// reference/optimizer.rs, so the CPU twin chooses the same bytes.
var<workgroup> q_value: array<f32, 512>;
var<workgroup> q_mid: array<f32, 512>;
var<workgroup> q_max: array<vec2<f32>, WG>;

// One entry of each table per invocation (WG = 256 points per code).
fn load_codes(lidx: u32) {
    let c = bitcast<f32>(M_CODE[lidx]);
    let r = bitcast<f32>(V_ROOT[lidx]);
    q_value[lidx] = c;
    q_value[256u + lidx] = r * r;
    if (lidx < 255u) {
        let r_mid = (r + bitcast<f32>(V_ROOT[lidx + 1u])) * 0.5;
        q_mid[lidx] = (c + bitcast<f32>(M_CODE[lidx + 1u])) * 0.5;
        q_mid[256u + lidx] = r_mid * r_mid;
    }
    workgroupBarrier();
}

// The byte of x in a block of scale s (base 0: m, 256: v): binary search
// over the 255 ascending thresholds.
fn quantize(x: f32, s: f32, base: u32) -> u32 {
    var k = 0u;
    for (var step = 128u; step > 0u; step >>= 1u) {
        if (x > q_mid[base + k + step - 1u] * s) { k += step; }
    }
    return k;
}

// Max of x over the QWORDS invocations of this invocation's block.
fn block_max(x: vec2<f32>, lidx: u32) -> vec2<f32> {
    q_max[lidx] = x;
    workgroupBarrier();
    let lane = lidx % QWORDS;
    for (var s = QWORDS / 2u; s > 0u; s >>= 1u) {
        if (lane < s) { q_max[lidx] = max(q_max[lidx], q_max[lidx + s]); }
        workgroupBarrier();
    }
    return q_max[lidx - lane];
}

// Updates word k (elements 4k .. 4k+3); returns their new master weights,
// 0 past n. Call from uniform control flow: it holds barriers.
fn adamw_8bit_word(k: u32, lidx: u32) -> vec4<f32> {
    load_codes(lidx);
    let live = k < (adam.n + 3u) / 4u;
    let skip = stats.skip != 0u;
    let block = k / QWORDS;
    var w = vec4<f32>(0.0);
    var m = vec4<f32>(0.0);
    var v = vec4<f32>(0.0);
    if (live) {
        let mc = m_codes[k];
        let vc = v_codes[k];
        let ms = m_scales[block];
        let vs = v_scales[block];
        for (var j = 0u; j < 4u; j++) {
            let i = 4u * k + j;
            if (i < adam.n) {
                let raw = grads[i];
                grads[i] = 0.0;
                if (!skip) {
                    let m_old = q_value[(mc >> (8u * j)) & 0xffu] * ms;
                    let v_old = q_value[256u + ((vc >> (8u * j)) & 0xffu)] * vs;
                    let mv = adam_moments(raw, m_old, v_old);
                    w[j] = adam_weight(weights[i], mv);
                    weights[i] = w[j];
                    m[j] = mv.x;
                    v[j] = mv.y;
                }
            }
        }
    }
    let a = abs(m);
    let top = block_max(vec2<f32>(max(max(a.x, a.y), max(a.z, a.w)), max(max(v.x, v.y), max(v.z, v.w))), lidx);
    // the block's old scales were read above by every invocation of the
    // block; order those reads before the new scales' write
    storageBarrier();
    if (live && !skip) {
        var mq = 0u;
        var vq = 0u;
        for (var j = 0u; j < 4u; j++) {
            mq |= quantize(m[j], top.x, 0u) << (8u * j);
            vq |= quantize(v[j], top.y, 256u) << (8u * j);
        }
        m_codes[k] = mq;
        v_codes[k] = vq;
        if (k % QWORDS == 0u) {
            m_scales[block] = top.x;
            v_scales[block] = top.y;
        }
    }
    return w;
}

@compute @workgroup_size(WG)
fn adamw_8bit_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    adamw_8bit_word(flat_id(wid, nwg, lidx), lidx);
}

// The mirror's two words of the invocation's four values, written whole.
@compute @workgroup_size(WG)
fn adamw_8bit_update_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lidx: u32) {
    let k = flat_id(wid, nwg, lidx);
    let w = adamw_8bit_word(k, lidx);
    if (k < (adam.n + 3u) / 4u && stats.skip == 0u) {
        q_mirror[2u * k] = pack_half2(w.xy);
        if (4u * k + 2u < adam.n) { q_mirror[2u * k + 1u] = pack_half2(w.zw); }
    }
}

// The code points, ascending, as f32 bit patterns: M_CODE for m / absmax (a
// signed dynamic tree), V_ROOT for sqrt(v / absmax) (an unsigned one).
// Generated by reference::optimizer::wgsl_code_tables(); a unit test holds
// this text to it.
const M_CODE = array<u32, 256>(
    0xbf800000u, 0xbf7c6666u, 0xbf78cccdu, 0xbf753333u, 0xbf71999au, 0xbf6e0000u, 0xbf6a6666u, 0xbf66cccdu,
    0xbf633333u, 0xbf5f999au, 0xbf5c0000u, 0xbf586666u, 0xbf54cccdu, 0xbf513333u, 0xbf4d999au, 0xbf4a0000u,
    0xbf466666u, 0xbf42cccdu, 0xbf3f3333u, 0xbf3b999au, 0xbf380000u, 0xbf346666u, 0xbf30cccdu, 0xbf2d3333u,
    0xbf29999au, 0xbf260000u, 0xbf226666u, 0xbf1ecccdu, 0xbf1b3333u, 0xbf17999au, 0xbf140000u, 0xbf106666u,
    0xbf0ccccdu, 0xbf093333u, 0xbf05999au, 0xbf020000u, 0xbefccccdu, 0xbef5999au, 0xbeee6666u, 0xbee73333u,
    0xbee00000u, 0xbed8cccdu, 0xbed1999au, 0xbeca6666u, 0xbec33333u, 0xbebc0000u, 0xbeb4cccdu, 0xbead999au,
    0xbea66666u, 0xbe9f3333u, 0xbe980000u, 0xbe90cccdu, 0xbe89999au, 0xbe826666u, 0xbe766666u, 0xbe680000u,
    0xbe59999au, 0xbe4b3333u, 0xbe3ccccdu, 0xbe2e6666u, 0xbe200000u, 0xbe11999au, 0xbe033333u, 0xbde9999au,
    0xbdcccccdu, 0xbdc70a3du, 0xbdc147aeu, 0xbdbb851fu, 0xbdb5c28fu, 0xbdb00000u, 0xbdaa3d71u, 0xbda47ae1u,
    0xbd9eb852u, 0xbd98f5c3u, 0xbd933333u, 0xbd8d70a4u, 0xbd87ae14u, 0xbd81eb85u, 0xbd7851ecu, 0xbd6ccccdu,
    0xbd6147aeu, 0xbd55c28fu, 0xbd4a3d71u, 0xbd3eb852u, 0xbd333333u, 0xbd27ae14u, 0xbd1c28f6u, 0xbd10a3d7u,
    0xbd051eb8u, 0xbcf33333u, 0xbcdc28f6u, 0xbcc51eb8u, 0xbcae147bu, 0xbc970a3du, 0xbc800000u, 0xbc51eb85u,
    0xbc23d70au, 0xbc1a9fbeu, 0xbc116873u, 0xbc083127u, 0xbbfdf3b6u, 0xbbeb851fu, 0xbbd91687u, 0xbbc6a7f0u,
    0xbbb43958u, 0xbba1cac1u, 0xbb8f5c29u, 0xbb79db23u, 0xbb54fdf4u, 0xbb3020c5u, 0xbb0b4396u, 0xbacccccdu,
    0xba83126fu, 0xba68a71eu, 0xba4b295fu, 0xba2dab9fu, 0xba102de0u, 0xb9e56042u, 0xb9aa64c3u, 0xb95ed289u,
    0xb8d1b717u, 0xb8a2877fu, 0xb866afcdu, 0xb808509cu, 0xb727c5acu, 0xb6b88ca4u, 0xb58637bdu, 0xb3d6bf95u,
    0x00000000u, 0x358637bdu, 0x36b88ca4u, 0x3727c5acu, 0x3808509cu, 0x3866afcdu, 0x38a2877fu, 0x38d1b717u,
    0x395ed289u, 0x39aa64c3u, 0x39e56042u, 0x3a102de0u, 0x3a2dab9fu, 0x3a4b295fu, 0x3a68a71eu, 0x3a83126fu,
    0x3acccccdu, 0x3b0b4396u, 0x3b3020c5u, 0x3b54fdf4u, 0x3b79db23u, 0x3b8f5c29u, 0x3ba1cac1u, 0x3bb43958u,
    0x3bc6a7f0u, 0x3bd91687u, 0x3beb851fu, 0x3bfdf3b6u, 0x3c083127u, 0x3c116873u, 0x3c1a9fbeu, 0x3c23d70au,
    0x3c51eb85u, 0x3c800000u, 0x3c970a3du, 0x3cae147bu, 0x3cc51eb8u, 0x3cdc28f6u, 0x3cf33333u, 0x3d051eb8u,
    0x3d10a3d7u, 0x3d1c28f6u, 0x3d27ae14u, 0x3d333333u, 0x3d3eb852u, 0x3d4a3d71u, 0x3d55c28fu, 0x3d6147aeu,
    0x3d6ccccdu, 0x3d7851ecu, 0x3d81eb85u, 0x3d87ae14u, 0x3d8d70a4u, 0x3d933333u, 0x3d98f5c3u, 0x3d9eb852u,
    0x3da47ae1u, 0x3daa3d71u, 0x3db00000u, 0x3db5c28fu, 0x3dbb851fu, 0x3dc147aeu, 0x3dc70a3du, 0x3dcccccdu,
    0x3de9999au, 0x3e033333u, 0x3e11999au, 0x3e200000u, 0x3e2e6666u, 0x3e3ccccdu, 0x3e4b3333u, 0x3e59999au,
    0x3e680000u, 0x3e766666u, 0x3e826666u, 0x3e89999au, 0x3e90cccdu, 0x3e980000u, 0x3e9f3333u, 0x3ea66666u,
    0x3ead999au, 0x3eb4cccdu, 0x3ebc0000u, 0x3ec33333u, 0x3eca6666u, 0x3ed1999au, 0x3ed8cccdu, 0x3ee00000u,
    0x3ee73333u, 0x3eee6666u, 0x3ef5999au, 0x3efccccdu, 0x3f020000u, 0x3f05999au, 0x3f093333u, 0x3f0ccccdu,
    0x3f106666u, 0x3f140000u, 0x3f17999au, 0x3f1b3333u, 0x3f1ecccdu, 0x3f226666u, 0x3f260000u, 0x3f29999au,
    0x3f2d3333u, 0x3f30cccdu, 0x3f346666u, 0x3f380000u, 0x3f3b999au, 0x3f3f3333u, 0x3f42cccdu, 0x3f466666u,
    0x3f4a0000u, 0x3f4d999au, 0x3f513333u, 0x3f54cccdu, 0x3f586666u, 0x3f5c0000u, 0x3f5f999au, 0x3f633333u,
    0x3f66cccdu, 0x3f6a6666u, 0x3f6e0000u, 0x3f71999au, 0x3f753333u, 0x3f78cccdu, 0x3f7c6666u, 0x3f800000u,
);
const V_ROOT = array<u32, 256>(
    0x00000000u, 0x33d6bf95u, 0x358637bdu, 0x368637bdu, 0x36eae18bu, 0x3727c5acu, 0x37d1b717u, 0x3827c5acu,
    0x3866afcdu, 0x3892ccf7u, 0x38b24207u, 0x38d1b717u, 0x39378034u, 0x3983126fu, 0x39aa64c3u, 0x39d1b717u,
    0x39f9096cu, 0x3a102de0u, 0x3a23d70au, 0x3a378034u, 0x3a4b295fu, 0x3a5ed289u, 0x3a727bb3u, 0x3a83126fu,
    0x3ab43958u, 0x3ae56042u, 0x3b0b4396u, 0x3b23d70au, 0x3b3c6a7fu, 0x3b54fdf4u, 0x3b6d9168u, 0x3b83126fu,
    0x3b8f5c29u, 0x3b9ba5e3u, 0x3ba7ef9eu, 0x3bb43958u, 0x3bc08312u, 0x3bcccccdu, 0x3bd91687u, 0x3be56042u,
    0x3bf1a9fcu, 0x3bfdf3b6u, 0x3c051eb8u, 0x3c0b4396u, 0x3c116873u, 0x3c178d50u, 0x3c1db22du, 0x3c23d70au,
    0x3c428f5cu, 0x3c6147aeu, 0x3c800000u, 0x3c8f5c29u, 0x3c9eb852u, 0x3cae147bu, 0x3cbd70a4u, 0x3ccccccdu,
    0x3cdc28f6u, 0x3ceb851fu, 0x3cfae148u, 0x3d051eb8u, 0x3d0ccccdu, 0x3d147ae1u, 0x3d1c28f6u, 0x3d23d70au,
    0x3d2b851fu, 0x3d333333u, 0x3d3ae148u, 0x3d428f5cu, 0x3d4a3d71u, 0x3d51eb85u, 0x3d59999au, 0x3d6147aeu,
    0x3d68f5c3u, 0x3d70a3d7u, 0x3d7851ecu, 0x3d800000u, 0x3d83d70au, 0x3d87ae14u, 0x3d8b851fu, 0x3d8f5c29u,
    0x3d933333u, 0x3d970a3du, 0x3d9ae148u, 0x3d9eb852u, 0x3da28f5cu, 0x3da66666u, 0x3daa3d71u, 0x3dae147bu,
    0x3db1eb85u, 0x3db5c28fu, 0x3db9999au, 0x3dbd70a4u, 0x3dc147aeu, 0x3dc51eb8u, 0x3dc8f5c3u, 0x3dcccccdu,
    0x3dd851ecu, 0x3de3d70au, 0x3def5c29u, 0x3dfae148u, 0x3e033333u, 0x3e08f5c3u, 0x3e0eb852u, 0x3e147ae1u,
    0x3e1a3d71u, 0x3e200000u, 0x3e25c28fu, 0x3e2b851fu, 0x3e3147aeu, 0x3e370a3du, 0x3e3ccccdu, 0x3e428f5cu,
    0x3e4851ecu, 0x3e4e147bu, 0x3e53d70au, 0x3e59999au, 0x3e5f5c29u, 0x3e651eb8u, 0x3e6ae148u, 0x3e70a3d7u,
    0x3e766666u, 0x3e7c28f6u, 0x3e80f5c3u, 0x3e83d70au, 0x3e86b852u, 0x3e89999au, 0x3e8c7ae1u, 0x3e8f5c29u,
    0x3e923d71u, 0x3e951eb8u, 0x3e980000u, 0x3e9ae148u, 0x3e9dc28fu, 0x3ea0a3d7u, 0x3ea3851fu, 0x3ea66666u,
    0x3ea947aeu, 0x3eac28f6u, 0x3eaf0a3du, 0x3eb1eb85u, 0x3eb4cccdu, 0x3eb7ae14u, 0x3eba8f5cu, 0x3ebd70a4u,
    0x3ec051ecu, 0x3ec33333u, 0x3ec6147bu, 0x3ec8f5c3u, 0x3ecbd70au, 0x3eceb852u, 0x3ed1999au, 0x3ed47ae1u,
    0x3ed75c29u, 0x3eda3d71u, 0x3edd1eb8u, 0x3ee00000u, 0x3ee2e148u, 0x3ee5c28fu, 0x3ee8a3d7u, 0x3eeb851fu,
    0x3eee6666u, 0x3ef147aeu, 0x3ef428f6u, 0x3ef70a3du, 0x3ef9eb85u, 0x3efccccdu, 0x3effae14u, 0x3f0147aeu,
    0x3f02b852u, 0x3f0428f6u, 0x3f05999au, 0x3f070a3du, 0x3f087ae1u, 0x3f09eb85u, 0x3f0b5c29u, 0x3f0ccccdu,
    0x3f0e3d71u, 0x3f0fae14u, 0x3f111eb8u, 0x3f128f5cu, 0x3f140000u, 0x3f1570a4u, 0x3f16e148u, 0x3f1851ecu,
    0x3f19c28fu, 0x3f1b3333u, 0x3f1ca3d7u, 0x3f1e147bu, 0x3f1f851fu, 0x3f20f5c3u, 0x3f226666u, 0x3f23d70au,
    0x3f2547aeu, 0x3f26b852u, 0x3f2828f6u, 0x3f29999au, 0x3f2b0a3du, 0x3f2c7ae1u, 0x3f2deb85u, 0x3f2f5c29u,
    0x3f30cccdu, 0x3f323d71u, 0x3f33ae14u, 0x3f351eb8u, 0x3f368f5cu, 0x3f380000u, 0x3f3970a4u, 0x3f3ae148u,
    0x3f3c51ecu, 0x3f3dc28fu, 0x3f3f3333u, 0x3f40a3d7u, 0x3f42147bu, 0x3f43851fu, 0x3f44f5c3u, 0x3f466666u,
    0x3f47d70au, 0x3f4947aeu, 0x3f4ab852u, 0x3f4c28f6u, 0x3f4d999au, 0x3f4f0a3du, 0x3f507ae1u, 0x3f51eb85u,
    0x3f535c29u, 0x3f54cccdu, 0x3f563d71u, 0x3f57ae14u, 0x3f591eb8u, 0x3f5a8f5cu, 0x3f5c0000u, 0x3f5d70a4u,
    0x3f5ee148u, 0x3f6051ecu, 0x3f61c28fu, 0x3f633333u, 0x3f64a3d7u, 0x3f66147bu, 0x3f67851fu, 0x3f68f5c3u,
    0x3f6a6666u, 0x3f6bd70au, 0x3f6d47aeu, 0x3f6eb852u, 0x3f7028f6u, 0x3f71999au, 0x3f730a3du, 0x3f747ae1u,
    0x3f75eb85u, 0x3f775c29u, 0x3f78cccdu, 0x3f7a3d71u, 0x3f7bae14u, 0x3f7d1eb8u, 0x3f7e8f5cu, 0x3f800000u,
);
