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

// Updates element i; returns its new master weight.
fn adamw_at(i: u32) -> f32 {
    let raw = grads[i];
    grads[i] = 0.0;
    if (stats.skip != 0u) { return weights[i]; }
    let g = select(0.0, raw * stats.clip_scale, is_finite(raw));
    let m = moment1[i] + (1.0 - adam.beta1) * (g - moment1[i]);
    let v = adam.beta2 * moment2[i] + (1.0 - adam.beta2) * g * g;
    let decay = select(1.0, adam_step.decay, adam.decays != 0u);
    let w = weights[i] * decay - adam_step.step_size * (m / (sqrt(v) / adam_step.bc2_sqrt + adam.eps));
    moment1[i] = m;
    moment2[i] = v;
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
