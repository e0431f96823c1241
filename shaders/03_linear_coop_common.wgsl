// What the GEMMs on matrix units (03_linear_coop_global.wgsl, _staged,
// _double) share, composed ahead of each by kernels/units/gemm_source.rs
// (after the variant's constants; `Src`, the sources' element, is f16
// where fragments load from them, vec4<f16> where they are staged): the
// sizes, the bindings, and where a workgroup's tile lies.

struct Params {
    m: u32,
    n: u32,
    k: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<Src>;
@group(0) @binding(2) var<storage, read> b: array<Src>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
// The epilogue's scale s and 1 / s: out = s·(A·B) (+ out, accumulating),
// where a quantized recipe's operands reach the units multiplied by
// powers of two or tensor scales (16_units_operands.wgsl); 1 elsewhere.
@group(0) @binding(4) var<storage, read> scale: array<f32, 2>;

// Workgroup `wg`'s BM × BN block of out, seen by subgroup `sg`.
struct Tile {
    // the block's first row and column
    gr0: u32,
    gc0: u32,
    // the subgroup's first row and column inside the block, and in out
    lr0: u32,
    lc0: u32,
    r0: u32,
    c0: u32,
    // each source's row stride, in halves
    lda: u32,
    ldb: u32,
}

fn tile_of(wg: vec3<u32>, sg: u32) -> Tile {
    let gr0 = wg.y * BM;
    let gc0 = wg.x * BN;
    let lr0 = (sg / SGN) * (TM * T);
    let lc0 = (sg % SGN) * (TN * T);
    return Tile(gr0, gc0, lr0, lc0, gr0 + lr0, gc0 + lc0, select(p.k, p.m, A_T), select(p.n, p.k, B_T));
}

// Quad q (8 halves) of a staged block of `cols` columns whose source
// starts at `origin` (row, column), row stride `ld`: its vec4 index in the
// source, and its half in the block of row stride `stride`.
fn quad_at(q: u32, cols: u32, origin: vec2<u32>, ld: u32, stride: u32) -> vec2<u32> {
    let row = q / (cols / 8u);
    let col = (q % (cols / 8u)) * 8u;
    return vec2<u32>(((origin.x + row) * ld + origin.y + col) / 4u, row * stride + col);
}
