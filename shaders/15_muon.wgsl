// Muon's Newton–Schulz between the batched GEMMs (03_linear.wgsl), and its
// update. Legend: one part (say every layer's q) is `count` matrices of n
// elements, layer l's at `at + l·stride` in x, y and w; its Gram matrices
// A = X·Xᵀ (or Xᵀ·X when it has more rows than columns) are dim × dim,
// contiguous in gram and square. Per iteration the launcher runs
//   gram = X·Xᵀ; [first: ns_norms, ns_normalize_x, ns_normalize_gram];
//   square = gram·gram; ns_poly; ns_ax; Y += square·X
// and swaps X and Y; muon_apply then updates the weights from the last Y.

struct Part {
    n: u32,        // elements of one matrix
    stride: u32,   // from one layer's matrix to the next
    at: u32,       // layer 0's matrix
    count: u32,    // matrices
    dim: u32,      // the Gram matrices' side
    a: f32,        // the quintic's coefficients (ops/muon.rs)
    b: f32,
    c: f32,
    eps: f32,      // added to the Frobenius norm
    scale: f32,    // the update's: 0.2·√max(rows, cols)
}

// The step's values, rewritten by the host every step.
struct MuonStep {
    lr: f32,
    decay: f32,      // 1 − lr·weight_decay
    t: u32,          // the step, 1-based
    sr_seed: u32,    // bf16-sr master weights (MASTER_SR): their draws' seed,
    sr_stream: u32,  // ops::adam::MASTER_SR_STREAM,
    offset: u32,     // and the element of the weights buffer (binding's first + at)
}

// finalize_grad_stats' output (12_optimizer.wgsl)
struct GradStats {
    norm: f32,
    clip_scale: f32,
    nonfinite: u32,
    skip: u32,
}

@group(0) @binding(0) var<uniform> part: Part;
@group(0) @binding(1) var<uniform> muon_step: MuonStep;
@group(0) @binding(2) var<storage, read> stats: GradStats;
@group(0) @binding(3) var<storage, read> x: array<f32>;               // this iteration's X
@group(0) @binding(4) var<storage, read_write> y: array<f32>;         // the next X
@group(0) @binding(5) var<storage, read_write> gram: array<f32>;      // [count, dim, dim]
@group(0) @binding(6) var<storage, read_write> square: array<f32>;    // [count, dim, dim]
@group(0) @binding(7) var<storage, read_write> factors: array<f32>;   // [count]
// binding 8, weights: the master, as the variant declares it with
// load_weight and store_weight (kernels/optimizer/master.rs)

// Element e of the part's count·n: its index in x, y and w.
fn element_at(e: u32) -> u32 {
    return part.at + (e / part.n) * part.stride + e % part.n;
}

// One workgroup per matrix: 1 / (‖X‖_F + ε), ‖X‖_F² being A's trace.
@compute @workgroup_size(WG)
fn ns_norms(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lidx: u32) {
    let g = flat_group(wid, nwg);
    if (g >= part.count) { return; }  // uniform: the whole workgroup
    var sum = 0.0;
    for (var i = lidx; i < part.dim; i += WG) { sum += gram[(g * part.dim + i) * part.dim + i]; }
    let total = workgroup_sum(sum, lidx);
    if (lidx == 0u) { factors[g] = 1.0 / (sqrt(total) + part.eps); }
}

// X ← X / (‖X‖_F + ε), in place (bound as y)
@compute @workgroup_size(WG)
fn ns_normalize_x(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lidx: u32) {
    let e = flat_id(wid, nwg, lidx);
    if (e >= part.count * part.n) { return; }
    let at = element_at(e);
    y[at] = y[at] * factors[e / part.n];
}

// A ← A / (‖X‖_F + ε)²: the Gram matrix of the normalized X
@compute @workgroup_size(WG)
fn ns_normalize_gram(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidx: u32) {
    let e = flat_id(wid, nwg, lidx);
    let size = part.dim * part.dim;
    if (e >= part.count * size) { return; }
    let f = factors[e / size];
    gram[e] = gram[e] * f * f;
}

// B = b·A + c·A², into square
@compute @workgroup_size(WG)
fn ns_poly(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lidx: u32) {
    let e = flat_id(wid, nwg, lidx);
    if (e >= part.count * part.dim * part.dim) { return; }
    square[e] = part.b * gram[e] + part.c * square[e];
}

// Y = a·X, which the next product adds B·X to
@compute @workgroup_size(WG)
fn ns_ax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lidx: u32) {
    let e = flat_id(wid, nwg, lidx);
    if (e >= part.count * part.n) { return; }
    let at = element_at(e);
    y[at] = part.a * x[at];
}

// W ← W·(1 − lr·wd) − lr·scale·O, O the orthogonalized update (bound as x),
// rounded to bf16 stochastically with bf16-sr master weights (as AdamW's
// master_value: the same draws of the same element); a skipped step leaves
// W alone.
@compute @workgroup_size(WG)
fn muon_apply(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lidx: u32) {
    let e = flat_id(wid, nwg, lidx);
    if (e >= part.count * part.n || stats.skip != 0u) { return; }
    let at = element_at(e);
    let w_old = load_weight(at);
    let w = w_old * muon_step.decay - muon_step.lr * part.scale * x[at];
    if (!MASTER_SR) {
        store_weight(at, w_old, w);
        return;
    }
    let r = random_bits(muon_step.sr_seed, muon_step.t, muon_step.sr_stream, muon_step.offset + at);
    store_weight(at, w_old, bf16_sr(w, r & 0xffffu));
}
