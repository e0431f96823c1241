// Matrix products C = A·B over strided views, in 64×64 output tiles.
// Legend: C is [M, N] with rows c_row apart, the shared dimension is K,
// A(i, p) = a[i·a_row + p·a_col], B(p, j) = load_b(p·b_row + j·b_col)
// (load_b comes from the prelude: 03_linear_b32 or 03_linear_b16).
// With HF weights W [out, in] and activations X [rows, in]:
//   forward    Y = X·Wᵀ     M=rows N=out K=in    A=X (in, 1)    B=Wᵀ (1, in)
//   backward  dX += dY·W    M=rows N=in  K=out   A=dY (out, 1)  B=W (in, 1)
//   backward  dW += dYᵀ·X   M=out  N=in  K=rows  A=dYᵀ (1, out) B=X (in, 1)
// Each workgroup of 16×16 invocations computes a tile; invocation (tx, ty)
// owns rows ty + 16r and columns tx + 16s (r, s < 4), so its stores are
// coalesced and its shared-memory reads broadcast or hit distinct banks.

const TILE: u32 = 64u;         // output tile side
const KSTEP: u32 = 16u;        // shared-dimension slice per stage
const PAD: u32 = TILE + 1u;    // shared row stride: +1 spreads columns over banks

struct Params {
    m: u32,
    n: u32,
    k: u32,
    a_row: u32,
    a_col: u32,
    b_row: u32,
    b_col: u32,
    c_row: u32,
    site: u32,   // the forward boundary of this product's output, or SITE_NONE
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;            // A
// @binding(2): B, declared by the prelude
@group(0) @binding(3) var<storage, read> residual: array<f32>;     // [M, N], matmul_add
@group(0) @binding(4) var<storage, read_write> c: array<f32>;      // [M, N]

var<workgroup> tile_a: array<f32, KSTEP * PAD>;  // [KSTEP][TILE]
var<workgroup> tile_b: array<f32, KSTEP * PAD>;  // [KSTEP][TILE]

// Stages one K slice of A and B into shared memory, zero past M, N, K.
// Consecutive invocations step whichever index is contiguous in memory.
fn stage(m0: u32, n0: u32, k0: u32, lidx: u32) {
    let a_p_fast = params.a_col == 1u;
    let b_p_fast = params.b_row == 1u;
    for (var e = lidx; e < KSTEP * TILE; e += WG) {
        let pa = select(e / TILE, e % KSTEP, a_p_fast);
        let ia = select(e % TILE, e / KSTEP, a_p_fast);
        var va = 0.0;
        if (m0 + ia < params.m && k0 + pa < params.k) {
            va = a[(m0 + ia) * params.a_row + (k0 + pa) * params.a_col];
        }
        tile_a[pa * PAD + ia] = va;

        let pb = select(e / TILE, e % KSTEP, b_p_fast);
        let jb = select(e % TILE, e / KSTEP, b_p_fast);
        var vb = 0.0;
        if (n0 + jb < params.n && k0 + pb < params.k) {
            vb = load_b((k0 + pb) * params.b_row + (n0 + jb) * params.b_col);
        }
        tile_b[pb * PAD + jb] = vb;
    }
}

// This invocation's 4×4 block of the tile's products, f32 accumulation.
// Contains barriers: call from uniform control flow.
fn tile_product(wid: vec3<u32>, lidx: u32) -> array<vec4<f32>, 4> {
    let tx = lidx % 16u;
    let ty = lidx / 16u;
    var acc: array<vec4<f32>, 4>;
    for (var k0 = 0u; k0 < params.k; k0 += KSTEP) {
        stage(wid.y * TILE, wid.x * TILE, k0, lidx);
        workgroupBarrier();
        for (var p = 0u; p < KSTEP; p++) {
            let row = p * PAD;
            let av = vec4<f32>(tile_a[row + ty], tile_a[row + ty + 16u], tile_a[row + ty + 32u], tile_a[row + ty + 48u]);
            let bv = vec4<f32>(tile_b[row + tx], tile_b[row + tx + 16u], tile_b[row + tx + 32u], tile_b[row + tx + 48u]);
            acc[0] += av.x * bv;
            acc[1] += av.y * bv;
            acc[2] += av.z * bv;
            acc[3] += av.w * bv;
        }
        workgroupBarrier();
    }
    return acc;
}

// Row and column of output (r, s) of this invocation.
fn out_at(wid: vec3<u32>, lidx: u32, r: u32, s: u32) -> vec2<u32> {
    return vec2<u32>(wid.y * TILE + lidx / 16u + 16u * r, wid.x * TILE + lidx % 16u + 16u * s);
}

fn inside(at: vec2<u32>) -> bool {
    return at.x < params.m && at.y < params.n;
}

// C = A·B
@compute @workgroup_size(WG)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    for (var r = 0u; r < 4u; r++) {
        for (var s = 0u; s < 4u; s++) {
            let at = out_at(wid, lidx, r, s);
            if (inside(at)) { c[at.x * params.c_row + at.y] = matmul_boundary(acc[r][s], params.site); }
        }
    }
}

// C = R + A·B: a projection added to the residual stream.
@compute @workgroup_size(WG)
fn matmul_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    for (var r = 0u; r < 4u; r++) {
        for (var s = 0u; s < 4u; s++) {
            let at = out_at(wid, lidx, r, s);
            if (inside(at)) {
                let i = at.x * params.c_row + at.y;
                let product = matmul_boundary(acc[r][s], params.site);
                c[i] = boundary(residual[i] + product, select(SITE_RESIDUAL, SITE_NONE, params.site == SITE_NONE));
            }
        }
    }
}

// C += A·B: gradients, which accumulate.
@compute @workgroup_size(WG)
fn matmul_accumulate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lidx: u32) {
    let acc = tile_product(wid, lidx);
    for (var r = 0u; r < 4u; r++) {
        for (var s = 0u; s < 4u; s++) {
            let at = out_at(wid, lidx, r, s);
            if (inside(at)) { c[at.x * params.c_row + at.y] += acc[r][s]; }
        }
    }
}
