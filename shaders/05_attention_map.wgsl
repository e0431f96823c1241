// attention_map: the attention probabilities of a forward that ran, for
// looking at (the inspector's heatmaps), never in a training step.
// Legend in 05_attention.wgsl. From the forward's rotated q and k and its
// saved lse, P[b, h, t, s] = exp(q_t·k_s / sqrt(Dh) − lse[b·T + t, h]) for
// keys s ≤ t, 0 above the diagonal: the forward's softmax, one exp per
// entry instead of its running max. In sf16 each is rounded to Q1.15 as
// the forward rounds what it multiplies V by (q115(exp(s − m) / l)); the
// two can differ by one step of 2^-15 where exp(s − lse) and exp(s − m) / l
// round apart. Nothing is counted: the clamp counters are training's.
// One invocation per entry of P [B, H, T, T].
@group(0) @binding(5) var<storage, read> lse: array<f32>;               // [B·T, H]
@group(0) @binding(6) var<storage, read_write> probs: array<f32>;       // [B, H, T, T]

@compute @workgroup_size(WG)
fn attention_map(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lidx: u32) {
    let i = flat_id(wid, nwg, lidx);
    let t_len = params.seq_len;
    if (i >= params.batch * params.heads * t_len * t_len) { return; }
    let key = i % t_len;
    let t = (i / t_len) % t_len;
    let h = (i / (t_len * t_len)) % params.heads;
    let b = i / (t_len * t_len * params.heads);
    if (key > t) {
        probs[i] = 0.0;
        return;
    }
    let kvh = h / (params.heads / params.kv_heads);
    let qa = q_at(b * t_len + t, h);
    let ka = k_at(b * t_len + key, kvh);
    var s = 0.0;
    for (var c = 0u; c < DH4; c++) { s += dot(q[qa + c], k[ka + c]); }
    let p = exp(s * params.scale - lse[(b * t_len + t) * params.heads + h]);
    probs[i] = select(p, q115(p), NUMERICS == SF16);
}
