// Cross-entropy over the vocabulary, forward and backward in one pass over
// each row, and the deterministic sum of the per-row losses.
// Legend: R rows (positions), V vocabulary.
//
// A target counts when it is < V and not the ignore index. One that does
// not count gives loss 0 and a zero gradient row; a target ≥ V that is not
// the ignore index is out of range: never read, and counted by loss_sum so
// the host can report it.

struct Params {
    rows: u32,             // R
    vocab: u32,            // V
    ignore_index: u32,     // targets equal to this contribute nothing
    label_smoothing: f32,  // ε
    z_loss: f32,           // β: adds β·lse² per counted row
    grad_scale: f32,       // dlogits multiplier: 1/count for a mean loss
}

@group(0) @binding(0) var<uniform> params: Params;

const F32_MAX: f32 = 0x1.fffffep+127f;  // largest finite f32 (Tint rejects inexact decimals)

fn counts(t: u32) -> bool {
    return t < params.vocab && t != params.ignore_index;
}

// cross_entropy_forward_backward: one workgroup per row. With
// m = max z, s = Σ exp(z − m), lse = m + log s, p = softmax(z):
//   loss = (1−ε)(lse − z_t) + ε(lse − mean z) + β·lse²
//   dz_j = S·grad_scale·((1 + 2β·lse)·p_j − (1−ε)·[j = t] − ε/V)
// with S the loss scale (ops/loss_scale.rs; 1 when the run does not scale):
// a power of two, so S·grad_scale and every product below are exact.
// Two passes over the row, 12 bytes per logit: the first finds m, s and
// Σ(z − m) online (each invocation keeps its own running maximum and
// rescales its sums when it grows; one tree then merges the invocations'),
// the second writes dz over z. Terms are formed from z − m (≤ 0), so
// logits of any size are safe and lse − z_t keeps its digits when both are
// large. Element j is read and written only by invocation j % WG, so the
// in-place write needs no barrier.
// The loss scale's state (finalize_grad_stats in 12_optimizer.wgsl updates it).
struct LossScale {
    scale: f32,  // S
    clean: u32,
    skipped: u32,
    changes: u32,
}

@group(0) @binding(1) var<storage, read> targets: array<u32>;         // [R]
@group(0) @binding(2) var<storage, read> loss_scale: LossScale;       // S
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;    // [R, V], becomes dlogits
@group(0) @binding(4) var<storage, read_write> losses: array<f32>;    // [R]
@group(0) @binding(5) var<storage, read_write> lse_out: array<f32>;   // [R], saved

// One invocation's running summary of its logits: the maximum m, Σ exp(z − m),
// Σ (z − m) and how many.
struct Running {
    m: f32,
    s: f32,
    shifted: f32,
    n: f32,
}

// a and b as one: both sums moved to the larger maximum. An empty summary
// (n = 0) has m = −F32_MAX and moves nothing.
fn merge(a: Running, b: Running) -> Running {
    let m = max(a.m, b.m);
    return Running(m, moved_s(a, m) + moved_s(b, m), moved_shifted(a, m) + moved_shifted(b, m), a.n + b.n);
}

// r's sums, moved to maximum m ≥ r.m (0 for an empty summary, whose m − r.m may overflow).
fn moved_s(r: Running, m: f32) -> f32 {
    return select(0.0, r.s * exp(r.m - m), r.n > 0.0);
}
fn moved_shifted(r: Running, m: f32) -> f32 {
    return select(0.0, r.shifted + r.n * (r.m - m), r.n > 0.0);
}

var<workgroup> summaries: array<Running, WG>;

// Every invocation's summary merged in a fixed tree, to each of them.
fn workgroup_merge(mine: Running, lidx: u32) -> Running {
    summaries[lidx] = mine;
    workgroupBarrier();
    for (var step = WG / 2u; step > 0u; step >>= 1u) {
        if (lidx < step) { summaries[lidx] = merge(summaries[lidx], summaries[lidx + step]); }
        workgroupBarrier();
    }
    let all = summaries[0];
    workgroupBarrier();
    return all;
}

@compute @workgroup_size(WG)
fn cross_entropy_forward_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                                  @builtin(local_invocation_index) lidx: u32) {
    let row = flat_group(wid, nwg);
    if (row >= params.rows) { return; }  // uniform: the whole workgroup leaves
    let v = params.vocab;
    let base = row * v;

    var mine = Running(-F32_MAX, 0.0, 0.0, 0.0);
    for (var j = lidx; j < v; j += WG) {
        let z = logits[base + j];
        if (z > mine.m) {
            // rescale to the new maximum (the first value sets it)
            mine.s = moved_s(mine, z);
            mine.shifted = moved_shifted(mine, z);
            mine.m = z;
        }
        mine.s += exp(z - mine.m);
        mine.shifted += z - mine.m;
        mine.n += 1.0;
    }
    let all = workgroup_merge(mine, lidx);
    let m = all.m;
    let s = all.s;  // ≥ 1: the max contributes exp(0)
    let log_s = log(s);
    let mean_shifted = all.shifted / f32(v);
    let lse = m + log_s;

    let t = targets[row];
    let counted = counts(t);
    let eps = params.label_smoothing;
    let beta = params.z_loss;
    // the invocation that owns z_t reads it before its own loop overwrites it
    let owner = select(0u, t % WG, counted);
    if (lidx == owner) {
        var loss = 0.0;
        if (counted) {
            let zt_shifted = logits[base + t] - m;
            loss = (1.0 - eps) * (log_s - zt_shifted) + eps * (log_s - mean_shifted) + beta * lse * lse;
        }
        losses[row] = loss;
        lse_out[row] = lse;
    }

    let scale = select(0.0, params.grad_scale * loss_scale.scale, counted);
    let p_scale = scale * (1.0 + 2.0 * beta * lse) / s;
    let smoothing = scale * eps / f32(v);
    let hit = scale * (1.0 - eps);
    for (var j = lidx; j < v; j += WG) {
        let p_term = p_scale * exp(logits[base + j] - m);
        logits[base + j] = p_term - smoothing - select(0.0, hit, j == t);
    }
}

// loss_sum: one workgroup. Invocation i adds rows i, i + WG, … in order,
// then a fixed tree adds the partial sums: bit-identical run to run.
// Bindings: 1 targets [R] (as above), then:
struct LossTotals {
    sum: f32,           // Σ row_losses, every row (rows that do not count hold 0)
    mean: f32,          // sum / counted; 0 when nothing counts (never NaN)
    counted: u32,       // targets < V and not the ignore index
    out_of_range: u32,  // targets ≥ V other than the ignore index
}

@group(0) @binding(2) var<storage, read> row_losses: array<f32>;    // [R]
@group(0) @binding(3) var<storage, read_write> totals: LossTotals;  // one

var<workgroup> wg_counted: atomic<u32>;
var<workgroup> wg_out_of_range: atomic<u32>;

@compute @workgroup_size(WG)
fn loss_sum(@builtin(local_invocation_index) lidx: u32) {
    var sum = 0.0;
    var counted = 0u;
    var out_of_range = 0u;
    for (var r = lidx; r < params.rows; r += WG) {
        sum += row_losses[r];
        let t = targets[r];
        counted += select(0u, 1u, counts(t));
        out_of_range += select(0u, 1u, t >= params.vocab && t != params.ignore_index);
    }
    atomicAdd(&wg_counted, counted);  // integer sums: any order gives the same total
    atomicAdd(&wg_out_of_range, out_of_range);
    let total = workgroup_sum(sum, lidx);  // its barriers also publish the atomics
    if (lidx == 0u) {
        let n = atomicLoad(&wg_counted);
        totals.sum = total;
        totals.mean = select(0.0, total / f32(n), n > 0u);
        totals.counted = n;
        totals.out_of_range = atomicLoad(&wg_out_of_range);
    }
}
