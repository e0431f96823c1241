// The optimizer step: global gradient norm, clip scale, fused AdamW.
// Legend: n elements of one parameter block (or chunk of one), G = ⌈n/GROUP⌉.
//   reduce_norm_sq      per workgroup: Σ g² of finite g, and the non-finite count
//   finalize_grad_stats one workgroup: sums all partials in a fixed order;
//                       decides whether the step is skipped (non-finite
//                       loss, or Σg² overflowed; with loss scaling, any
//                       non-finite gradient) and updates the loss scale
//   adamw_update(_f16)  per element: NaN/Inf -> 0, clip, moments, bias
//                       correction, decoupled decay, gradient zeroed (and
//                       the f16 forward mirror written); a skipped step only
//                       zeroes the gradient
// and in 12_optimizer_states.wgsl, composed after this file:
//   adamw_8bit_update(_f16)  the same with m and v as 8-bit codes: one
//                       invocation per 4 values (one packed word), one scale
//                       per block of QBLOCK values and moment
//   adamw_fp8_update(_f16)   the same with E4M3 codes (TorchAO's FP8 state)
//   adamw_linear_update(_f16) with m on 8-bit Muon's linear code
//   adamw_int4_update(_f16)  with TorchAO's 4-bit codes, 8 per word
//   adamw_bf16_update(_f16)  m and v as bf16, two per word
//   muon_momentum(_8bit, _fp8, _linear, _int4, _bf16)  Muon's first step per element of the hidden
//                       matrices: NaN/Inf -> 0, clip, m <- lerp(m, g, 1 − μ),
//                       the Nesterov direction lerp(g, m, μ) out for
//                       Newton–Schulz (15_muon.wgsl), gradient zeroed
// Deterministic: no float atomics, fixed reduction orders.

const GROUP: u32 = 4096u;  // gradients per reduce_norm_sq workgroup (16 per invocation)

struct ReduceParams {
    n: u32,
    partial_offset: u32,  // first partial of this dispatch: several blocks share one buffer
}

struct FinalizeParams {
    partials: u32,         // partials written by all reduce dispatches of the step
    max_norm: f32,         // clip threshold; <= 0 disables clipping
    scaling: u32,          // 1: the gradients carry scale_state.scale; 0: scale_state unused
    growth_interval: u32,  // clean steps before the scale grows
    growth: f32,           // powers of two (ops/loss_scale.rs)
    backoff: f32,
}

// What finalize_grad_stats writes, and AdamW and the host read.
struct GradStats {
    norm: f32,        // of the unscaled gradients
    clip_scale: f32,  // AdamW's factor for each raw gradient: clip / S
    nonfinite: u32,
    skip: u32,        // 1: leave weights and moments untouched this step
}

// The loss scale's state across steps (07_loss.wgsl reads scale).
struct LossScale {
    scale: f32,    // S, a power of two
    clean: u32,    // clean steps since the last skip or growth
    skipped: u32,  // steps skipped so far
    changes: u32,  // times S changed so far
}

const MIN_SCALE: f32 = 0x1p-126f;  // 1/S stays normal (ops/loss_scale.rs)
const MAX_SCALE: f32 = 0x1p+126f;

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
@group(0) @binding(4) var<storage, read_write> scale_state: LossScale;

// x / s for s a power of two, exactly: ldexp is correctly rounded, a WGSL
// division need not be.
fn unscale(x: f32, s: f32) -> f32 {
    return ldexp(x, 1 - frexp(s).exp);
}

// GradScaler's update: back off on a skip, grow after growth_interval clean steps.
fn next_scale(state: LossScale, skip: bool) -> LossScale {
    var next = state;
    let p = finalize_params;
    if (skip) {
        next.scale = max(state.scale * p.backoff, MIN_SCALE);
        next.clean = 0u;
        next.skipped += 1u;
    } else {
        next.clean += 1u;
        if (next.clean >= p.growth_interval) {
            next.scale = min(state.scale * p.growth, MAX_SCALE);
            next.clean = 0u;
        }
    }
    next.changes += select(0u, 1u, next.scale != state.scale);
    return next;
}

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
        let scaling = finalize_params.scaling != 0u;
        var s = 1.0;
        if (scaling) { s = scale_state.scale; }
        // Σ(S·g)² = S²·Σg² exactly, so the norm is the unscaled run's
        let norm = unscale(sqrt(total), s);
        var clip = 1.0;
        if (finalize_params.max_norm > 0.0 && norm > finalize_params.max_norm) {
            clip = finalize_params.max_norm / norm;
        }
        let skip = !is_finite(loss_in.mean) || !is_finite(total) || (scaling && total_bad > 0.0);
        stats_out = GradStats(norm, unscale(clip, s), u32(total_bad), select(0u, 1u, skip));
        if (scaling) { scale_state = next_scale(scale_state, skip); }
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
    first: u32,      // 8-bit: elements before it (whole blocks) are another optimizer's
    sr_seed: u32,    // bf16-sr master weights (MASTER_SR): their draws' seed
    offset: u32,     // the weights buffer's element at the binding's start
    sr_stream: u32,  // ops::adam::MASTER_SR_STREAM
}

struct AdamStep {
    step_size: f32,
    bc2_sqrt: f32,
    decay: f32,      // 1 − lr·weight_decay, for blocks that decay
    t: u32,          // the step, 1-based: seeds the 8-bit state's dither
}

@group(0) @binding(0) var<uniform> adam: AdamBlock;
@group(0) @binding(1) var<uniform> adam_step: AdamStep;
@group(0) @binding(2) var<storage, read> stats: GradStats;
// binding 3, weights: the master, as the variant declares it with
// load_weight and store_weight (kernels/optimizer/master.rs)
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

// The master weight kept of element i's new value w: w itself, or with
// bf16-sr w rounded by bf16_sr (00_formats.wgsl) on the draw of (run seed,
// step, element of the buffer). MASTER_SR is the variant's constant
// (kernels/optimizer: Updates), so the f32 variant compiles to w alone.
fn master_value(w: f32, i: u32) -> f32 {
    if (!MASTER_SR) { return w; }
    return bf16_sr(w, random_bits(adam.sr_seed, adam_step.t, adam.sr_stream, adam.offset + i) & 0xffffu);
}

// One element's gradient, master weight and moments as read.
struct AdamElement {
    raw: f32,
    w: f32,
    m: f32,
    v: f32,
}

// Reads element i. Callers read every element they update before writing
// any, so no read waits behind a write to a binding the compiler cannot
// prove distinct.
fn adamw_load(i: u32) -> AdamElement {
    return AdamElement(grads[i], load_weight(i), moment1[i], moment2[i]);
}

// Zeroes element i's gradient and, unless the step is skipped, writes its
// new moments and master weight; returns the master weight.
fn adamw_store(i: u32, e: AdamElement) -> f32 {
    grads[i] = 0.0;
    if (stats.skip != 0u) { return e.w; }
    let mv = adam_moments(e.raw, e.m, e.v);
    let w = master_value(adam_weight(e.w, mv), i);
    moment1[i] = mv.x;
    moment2[i] = mv.y;
    store_weight(i, e.w, w);
    return w;
}

// Written as two guarded statements, not an early return and one call:
// NVIDIA's Vulkan compiler made the latter half as fast (H100, base preset:
// 2.99 ms against 1.49 ms per step, 0.49 against 0.99 of copy bandwidth).
@compute @workgroup_size(WG)
fn adamw_update(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    var e = AdamElement(0.0, 0.0, 0.0, 0.0);
    if (i < adam.n) { e = adamw_load(i); }
    if (i < adam.n) { adamw_store(i, e); }
}

// Two elements per invocation, so each mirror word is written whole.
@compute @workgroup_size(WG)
fn adamw_update_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let pair = flat_id(wid, nwg, lidx);
    let i = 2u * pair;
    if (i >= adam.n) { return; }
    let second = i + 1u < adam.n;
    let e0 = adamw_load(i);
    var e1 = AdamElement(0.0, 0.0, 0.0, 0.0);
    if (second) { e1 = adamw_load(i + 1u); }
    let w0 = adamw_store(i, e0);
    var w1 = 0.0;
    if (second) { w1 = adamw_store(i + 1u, e1); }
    if (stats.skip == 0u) { mirror[pair] = pack_half2(vec2<f32>(w0, w1)); }
}
