// fp8's pre-pass: a GEMM operand through E4M3, once, before the product
// (kernels/linear/fp8.rs). Each value is divided by its tile's power-of-two
// scale (the smallest with amax/scale ≤ 448, as UE8M0 scales), rounded to
// E4M3 and multiplied back — exact in f32 — so the GEMM reads the result
// as an ordinary f32 operand. Tiles are 1×128 (activations and gradients
// along K), 128×1 (the same, where K runs down the rows: dW) or 128×128
// (weights), and start afresh where each of stacked weights begins
// ([W_q; W_k; W_v], [W_gate; W_up]), so no scale spans two tensors.
// Saturated and flushed values are counted, once each.
//
// A workgroup takes a region of whole tiles: 8 rows × one 128-column block
// (1×128 tiles, a row per 32 lanes), 128 rows × 64 columns (128×1 tiles, a
// column per 4 lanes) or one 128×128 block; neighbouring lanes read
// neighbouring columns.

const FP8_BLOCK: u32 = 128u;

struct Params {
    rows: u32,
    cols: u32,
    ld: u32,           // row stride of x and y
    tile_rows: u32,    // 1 or FP8_BLOCK
    tile_cols: u32,    // 1 or FP8_BLOCK
    lane_cols: u32,    // lanes along a row: 32, 64 or 128
    region_rows: u32,  // rows of a workgroup's region (before parts cut it)
    region_cols: u32,
    row_parts: vec2<u32>,  // where stacked parts' 2nd and 3rd begin down the rows (rows if none)
    col_parts: vec2<u32>,  // ... along the columns (cols if none)
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;         // [rows, ld]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;   // [rows, ld], E4M3 values × scales

var<workgroup> lane_max: array<f32, WG>;
var<workgroup> saturated: atomic<u32>;
var<workgroup> flushed: atomic<u32>;

// The smallest power of two s with amax / s ≤ 448: amax = m·2^e with
// m in [1, 2) needs s = 2^(e−8) if m ≤ 1.75 (448 = 1.75·2^8), else 2^(e−7).
fn fp8_scale(amax: f32) -> f32 {
    if (amax == 0.0 || !is_finite(amax)) { return 1.0; }
    let bits = bitcast<u32>(amax);
    let e = max(i32((bits >> 23u) & 0xffu) - 127, -126);
    let k = clamp(e - 8 + select(0, 1, (bits & 0x7fffffu) > 0x600000u), -126, 127);
    return bitcast<f32>(u32(k + 127) << 23u);
}

// Block b of a dimension cut at its parts: [start, end) (part_block,
// 00_formats.wgsl, gives start and length).
fn part_range(b: u32, parts: vec2<u32>, len: u32, bl: u32) -> vec2<u32> {
    let r = part_block(b, parts, len, bl);
    return vec2<u32>(r.x, r.x + r.y);
}

@compute @workgroup_size(WG)
fn fp8_quantize(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let rows = part_range(wid.y, params.row_parts, params.rows, params.region_rows);
    let cols = part_range(wid.x, params.col_parts, params.cols, params.region_cols);
    let lane_rows = WG / params.lane_cols;
    let lr = lidx / params.lane_cols;
    let lc = lidx % params.lane_cols;

    var amax = 0.0;
    for (var r = rows.x + lr; r < rows.y; r += lane_rows) {
        for (var col = cols.x + lc; col < cols.y; col += params.lane_cols) {
            amax = max(amax, abs(x[r * params.ld + col]));
        }
    }
    lane_max[lidx] = amax;
    workgroupBarrier();
    // this lane's tile: its lane row (1×128 tiles: one row per lane row),
    // its lane column (128×1: one column per lane), or every lane (blocks)
    let ys = select(vec2<u32>(0u, lane_rows), vec2<u32>(lr, lr + 1u), params.tile_rows == 1u);
    let xs = select(vec2<u32>(0u, params.lane_cols), vec2<u32>(lc, lc + 1u), params.tile_cols == 1u);
    var tile_max = 0.0;
    for (var ly = ys.x; ly < ys.y; ly++) {
        for (var lx = xs.x; lx < xs.y; lx++) { tile_max = max(tile_max, lane_max[ly * params.lane_cols + lx]); }
    }
    let s = fp8_scale(tile_max);

    var sat = 0u;
    var flush = 0u;
    for (var r = rows.x + lr; r < rows.y; r += lane_rows) {
        for (var col = cols.x + lc; col < cols.y; col += params.lane_cols) {
            let i = r * params.ld + col;
            let v = x[i];
            let scaled = v * (1.0 / s);
            let q = e4m3(scaled);
            sat += select(0u, 1u, abs(scaled) > E4M3_MAX);
            flush += select(0u, 1u, q == 0.0 && v != 0.0);
            y[i] = q * s;
        }
    }
    if (sat > 0u) { atomicAdd(&saturated, sat); }
    if (flush > 0u) { atomicAdd(&flushed, flush); }
    workgroupBarrier();
    if (lidx == 0u) {
        let total_sat = atomicLoad(&saturated);
        let total_flush = atomicLoad(&flushed);
        if (total_sat > 0u) { atomicAdd(&boundary_counts[SITE_FP8_SATURATED], total_sat); }
        if (total_flush > 0u) { atomicAdd(&boundary_counts[SITE_FP8_FLUSHED], total_flush); }
    }
}
