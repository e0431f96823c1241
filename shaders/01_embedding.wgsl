// Token embedding: lookup (f32 or f16 table) and its backward, a scatter-add
// in a fixed order over host-sorted runs.
// Legend: S tokens, D d_model, V vocabulary, U distinct in-range tokens.

struct Params {
    tokens: u32,  // S
    d: u32,       // D
    vocab: u32,   // V
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;             // [S]

// embed_lookup, embed_lookup_w16: out[s] = table[tokens[s]]. A token >= V
// gives a zero row and is counted, so a tokenizer mismatch is visible
// instead of silently reading another row.
@group(0) @binding(2) var<storage, read> table: array<f32>;              // [V, D]
@group(0) @binding(2) var<storage, read> table_h: array<half2>;          // [V, D] f16
@group(0) @binding(3) var<storage, read_write> out: array<f32>;          // [S, D]
@group(0) @binding(4) var<storage, read_write> bad_tokens: atomic<u32>;  // += tokens >= V

// Output element i: its table index, and 1 if its token is in range.
fn lookup_index(i: u32) -> vec2<u32> {
    let s = i / params.d;
    let t = tokens[s];
    if (t >= params.vocab && i % params.d == 0u) {
        atomicAdd(&bad_tokens, 1u);
    }
    return vec2<u32>(t * params.d + i % params.d, select(0u, 1u, t < params.vocab));
}

@compute @workgroup_size(WG)
fn embed_lookup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.tokens * params.d) { return; }
    let at = lookup_index(i);
    out[i] = boundary(select(0.0, table[at.x], at.y == 1u), SITE_EMBEDDING);
}

@compute @workgroup_size(WG)
fn embed_lookup_w16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    if (i >= params.tokens * params.d) { return; }
    let at = lookup_index(i);
    out[i] = boundary(select(0.0, half_at(table_h[at.x >> 1u], at.x), at.y == 1u), SITE_EMBEDDING);
}

// embed_backward_sorted: dtable[tokens[s]] += dout[s], non-finite values
// and tokens >= V skipped. Positions sharing a token add into one row; a
// float add in whatever order atomics give would change the low bits run to
// run, so the sum is taken in a fixed order instead. The host groups the
// batch's positions by token (kernels::embedding::TokenRuns) into U runs;
// one invocation owns each (run, column), sums its run's dout in ascending
// position order, and adds the sum into dtable with a plain read-modify-
// write: no two invocations touch one element, so no atomics and the same
// bits every run. The grid covers the worst case, S runs x D columns, and
// invocations past this batch's U return, so a dispatch built once for S
// serves every batch: only the index is rewritten between steps.
// Index words, 3S + 2 of them: [U, starts[0..=S], ids[0..S], order[0..S]];
// run r is ids[r], at positions order[starts[r]..starts[r + 1]].
@group(0) @binding(1) var<storage, read> runs: array<u32>;          // [3S + 2] TokenRuns words
@group(0) @binding(2) var<storage, read> dout: array<f32>;           // [S, D]
@group(0) @binding(3) var<storage, read_write> dtable_f: array<f32>;  // [V, D], accumulated

@compute @workgroup_size(WG)
fn embed_backward_sorted(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                         @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    let s = params.tokens;
    if (i >= s * params.d) { return; }
    let run = i / params.d;
    if (run >= runs[0]) { return; }
    let id = runs[s + 2u + run];
    if (id >= params.vocab) { return; }
    let c = i % params.d;
    var sum = 0.0;
    for (var k = runs[1u + run]; k < runs[2u + run]; k += 1u) {
        let g = dout[runs[2u * s + 2u + k] * params.d + c];
        if (is_finite(g)) { sum += g; }
    }
    dtable_f[id * params.d + c] += sum;
}
