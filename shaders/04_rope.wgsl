// Rotary position embedding, HF `rotate_half` layout, in place.
// Legend: R rows (tokens; sequences of T back to back), Dh head dim (even).
// Rotates `heads` heads starting at column `col0` of rows `row_stride`
// apart: q alone (H heads), k alone (Hkv heads), or q and k together in a
// fused [q | k | v] row (H + Hkv heads from column 0).
// Pair j < Dh/2 of a head is (a, b) = (x[j], x[j + Dh/2]), turned by the
// angle pos·inv_freq[j] (an f32 product, as HF computes it), where
// pos = row % T + pos_offset:
//   rope_forward:  (a, b) -> (a·cos − b·sin, b·cos + a·sin)
//   rope_backward: the inverse rotation, applied to the gradient.

struct Params {
    rows: u32,        // R
    seq_len: u32,     // T
    pos_offset: u32,  // position of each sequence's first row (KV-cache decoding)
    heads: u32,
    head_dim: u32,    // Dh
    row_stride: u32,  // elements from one row to the next
    col0: u32,        // first column of the first rotated head
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> inv_freq: array<f32>;  // [Dh/2]
@group(0) @binding(2) var<storage, read_write> x: array<f32>;   // [R, row_stride], in place

// Angles reach pos·1 rad, and k·2π in plain f32 loses bits. 2π in parts of
// at most 9 significant bits (the last, f32) makes every k·part exact for
// k < 2^15 (positions below about 200 000): the reduced angle errs by ~5e-7.
const TWO_PI_1: f32 = 6.28125;                 // 201 / 2^5
const TWO_PI_2: f32 = 0.001934051513671875;    // 507 / 2^18
const TWO_PI_3: f32 = 1.255422830581665e-06;   // 337 / 2^28
const TWO_PI_4: f32 = 2.430840251310684e-10;
const INV_TWO_PI: f32 = 0.15915494;

fn reduce_angle(a: f32) -> f32 {
    let k = round(a * INV_TWO_PI);
    return (((a - k * TWO_PI_1) - k * TWO_PI_2) - k * TWO_PI_3) - k * TWO_PI_4;
}

// WGSL promises sin and cos only to 2^-11 absolute, and SwiftShader's err by
// 2e-4: evaluated here instead, on a quarter turn (Taylor to y^9 and y^10,
// truncation below 3e-8 for |y| <= π/4), they agree across adapters.
const HALF_PI_1: f32 = 1.5703125;              // 201 / 2^7: q·part exact for |q| <= 2
const HALF_PI_2: f32 = 4.838267923e-4;
const TWO_OVER_PI: f32 = 0.63661977;

// (sin a, cos a) for a reduced angle |a| <= π.
fn sin_cos(a: f32) -> vec2<f32> {
    let q = round(a * TWO_OVER_PI);
    let y = (a - q * HALF_PI_1) - q * HALF_PI_2;
    let y2 = y * y;
    let s = y * (1.0 + y2 * (-1.0 / 6.0 + y2 * (1.0 / 120.0 + y2 * (-1.0 / 5040.0 + y2 * (1.0 / 362880.0)))));
    let c = 1.0 + y2 * (-0.5 + y2 * (1.0 / 24.0 + y2 * (-1.0 / 720.0 + y2 * (1.0 / 40320.0 + y2 * (-1.0 / 3628800.0)))));
    switch (i32(q) & 3) {
        case 0: { return vec2<f32>(s, c); }
        case 1: { return vec2<f32>(c, -s); }
        case 2: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}

// One invocation per rotated pair; sign −1 turns the other way.
fn rotate_pair(t: u32, sign: f32) {
    let half = params.head_dim / 2u;
    let j = t % half;
    let head = (t / half) % params.heads;
    let row = t / (half * params.heads);
    let pos = row % params.seq_len + params.pos_offset;
    let sc = sin_cos(reduce_angle(f32(pos) * inv_freq[j]));
    let s = sign * sc.x;
    let c = sc.y;
    let at = row * params.row_stride + params.col0 + head * params.head_dim + j;
    let a = x[at];
    let b = x[at + half];
    x[at] = a * c - b * s;
    x[at + half] = b * c + a * s;
}

@compute @workgroup_size(WG)
fn rope_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lidx: u32) {
    let t = flat_id(wid, nwg, lidx);
    if (t >= params.rows * params.heads * (params.head_dim / 2u)) { return; }
    rotate_pair(t, 1.0);
}

@compute @workgroup_size(WG)
fn rope_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lidx: u32) {
    let t = flat_id(wid, nwg, lidx);
    if (t >= params.rows * params.heads * (params.head_dim / 2u)) { return; }
    rotate_pair(t, -1.0);
}
