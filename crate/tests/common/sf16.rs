//! The sf16 numeric mode: each forward boundary stores the Q1.15 rounding
//! (Q1.31 first for matmul outputs) of what the exact kernel computes, and
//! counts its clamps; backward products stay exact.
//!
//! A kernel's f32 result differs from the f64 reference by a little, and a
//! rounding can turn that into one Q1.15 code. So each stored value must be
//! the boundary's rounding of some value within `tol` of the reference
//! (the rounding is monotone: it lies between the roundings of want ± tol),
//! on the Q1.15 grid; and each clamp count must lie between the values that
//! clamp for every such value and those that clamp for some.
//!
//! One file, over 500 lines: every sf16 boundary's test shares this
//! tolerance argument.

use rand::Rng;
use webtrain::kernels::attention::AttentionShape;
use webtrain::kernels::boundary::{self, Clamped};
use webtrain::kernels::{
    Activation, Attention, DecodeShape, Embedding, EmbeddingShape, Heads, Kernels, Linear,
    LinearShape, NormShape, Output, Qkv, RmsNorm, Weights,
};
use webtrain::model::Recipe;
use webtrain::reference::quantize::{q115, q131, sf16_matmul};
use webtrain::reference::{activation, attention, embedding, linear, norm};
use webtrain::shaders::Numerics;
use webtrain::{Gpu, Result};

use super::check::{F32_SPECIALS, assert_close, refs, rng, uniform};

const Q115_LIMIT: f64 = 0.999;

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Checks `got` against `want` (before the boundary) as the module comment
/// says; `stage(i, x)` is what element i's last Q1.15 rounding receives
/// when the kernel computes x. Returns (clamps certain, clamps possible).
fn assert_rounded(
    what: &str,
    got: &[f32],
    want: &[f64],
    tol: f64,
    stage: impl Fn(usize, f64) -> f64,
) -> (u32, u32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut clamps = (0, 0);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (below, above) = (stage(i, w - tol), stage(i, w + tol));
        let (lo, hi) = (q115(below as f32), q115(above as f32));
        assert!(
            lo <= g && g <= hi,
            "{what}: element {i}: got {g}, want the rounding of {w} ± {tol}: {lo} ..= {hi}"
        );
        assert!(
            (g * 32768.0).fract() == 0.0 && g.abs() as f64 <= Q115_LIMIT,
            "{what}: element {i}: {g} is not a Q1.15 value"
        );
        clamps.0 += (below > Q115_LIMIT || above < -Q115_LIMIT) as u32;
        clamps.1 += (above > Q115_LIMIT || below < -Q115_LIMIT) as u32;
    }
    clamps
}

fn assert_count(what: &str, counted: u32, (certain, possible): (u32, u32)) {
    assert!(
        certain > 0,
        "{what}: the inputs clamp nothing: the count is not tested"
    );
    assert!(
        certain <= counted && counted <= possible,
        "{what}: {counted} clamps counted, want {certain}..={possible}"
    );
}

async fn counted(gpu: &Gpu) -> Result<Clamped> {
    boundary::read(gpu).await
}

fn reset(gpu: &Gpu) {
    gpu.queue.write_buffer(
        &gpu.boundary_counts,
        0,
        &[0; 4 * webtrain::gpu::BOUNDARY_COUNTERS as usize],
    );
}

pub async fn sf16_norm_and_swiglu_round_and_count(gpu: &Gpu) -> Result<()> {
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let (rows, d) = (37u32, 300u32);
    let mut r = rng(120);
    let (x, gain) = (
        uniform(&mut r, (rows * d) as usize, -2.0, 2.0),
        uniform(&mut r, d as usize, 0.5, 1.5),
    );
    let (xb, gb) = (gpu.upload("x", &x)?, gpu.upload("gain", &gain)?);
    let (y, rrms) = (
        gpu.storage_buffer("y", 4 * (rows * d) as u64)?,
        gpu.storage_buffer("rrms", 4 * rows as u64)?,
    );
    reset(gpu);
    let k = RmsNorm::new(gpu).await?;
    let shape = NormShape { rows, d, eps: 1e-5 };
    gpu.run(&[&k.forward(
        gpu,
        shape,
        (&xb).into(),
        Weights::F32((&gb).into()),
        (&y).into(),
        (&rrms).into(),
    )?])
    .await?;
    let (want, _) = norm::rmsnorm_forward(&f64s(&x), &f64s(&gain), 1e-5);
    // the exact kernel is within 1e-6 of these (|y| < 4; norm tests)
    let clamps = assert_rounded(
        "rmsnorm sf16",
        &gpu.read_back::<f32>((&y).into()).await?,
        &want,
        2e-6,
        |_, v| v,
    );
    assert_count("rmsnorm clamps", counted(gpu).await?.norm, clamps);

    let (ffn, rows) = (129u32, 33u32);
    let gu = uniform(&mut r, (2 * ffn * rows) as usize, -3.0, 3.0);
    let (gub, h) = (
        gpu.upload("gu", &gu)?,
        gpu.storage_buffer("h", 4 * (ffn * rows) as u64)?,
    );
    reset(gpu);
    let k = Activation::new(gpu).await?;
    gpu.run(&[&k.swiglu_forward_gu(gpu, (&gub).into(), (&h).into(), rows, ffn)?])
        .await?;
    let f = ffn as usize;
    let (gate, up): (Vec<f64>, Vec<f64>) = gu
        .chunks(2 * f)
        .flat_map(|row| (0..f).map(move |c| (row[c] as f64, row[f + c] as f64)))
        .unzip();
    let want = activation::swiglu_forward(&gate, &up);
    // |h| < 9: a few f32 roundings of sigmoid and two products
    let clamps = assert_rounded(
        "swiglu sf16",
        &gpu.read_back::<f32>((&h).into()).await?,
        &want,
        1e-5,
        |_, v| v,
    );
    assert_count("swiglu clamps", counted(gpu).await?.activation, clamps);
    Ok(())
}

pub async fn sf16_embedding_rounds_and_counts(gpu: &Gpu) -> Result<()> {
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let shape = EmbeddingShape {
        tokens: 77,
        d: 65,
        vocab: 301,
    };
    let mut r = rng(121);
    let table = uniform(&mut r, (shape.vocab * shape.d) as usize, -1.5, 1.5);
    let tokens: Vec<u32> = uniform(&mut r, shape.tokens as usize, 0.0, shape.vocab as f32)
        .iter()
        .map(|&t| t as u32)
        .collect();
    let (tb, tok) = (gpu.upload("table", &table)?, gpu.upload("tokens", &tokens)?);
    let (out, bad) = (
        gpu.storage_buffer("out", 4 * (shape.tokens * shape.d) as u64)?,
        gpu.storage_buffer("bad", 4)?,
    );
    reset(gpu);
    let k = Embedding::new(gpu).await?;
    gpu.run(&[&k.lookup(
        gpu,
        shape,
        (&tok).into(),
        Weights::F32((&tb).into()),
        (&out).into(),
        (&bad).into(),
    )?])
    .await?;
    let (want, _) = embedding::lookup(&tokens, &f64s(&table), shape.d as usize);
    let clamps = assert_rounded(
        "embedding sf16",
        &gpu.read_back::<f32>((&out).into()).await?,
        &want,
        0.0,
        |_, v| v,
    );
    assert_count("embedding clamps", counted(gpu).await?.embedding, clamps);
    Ok(())
}

/// sf16's quantizers bit for bit against reference/quantize.rs, through
/// the kernels that apply them: the embedding's boundary (Q1.15) on every
/// Q1.15 code, the ties between codes, the clamp's edges, specials and
/// random values over 60 binades; a projection's (Q1.31, then Q1.15) on
/// the finite ones, as X·I (exact in f32). Each clamp counted once.
pub async fn sf16_boundaries_round_as_their_twins(gpu: &Gpu) -> Result<()> {
    use webtrain::reference::quantize::q115_clamps;
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let around = |x: f32| [x, x.next_down(), x.next_up(), -x];
    let mut r = rng(11);
    let random =
        (0..20_000).map(|_| r.random_range(-1.0f32..1.0) * 2f32.powi(r.random_range(-40..20)));
    let mut xs: Vec<f32> = (-32768..32768i32)
        .flat_map(|c| [c as f32 / 32768.0, (c as f32 + 0.5) / 32768.0])
        .chain(
            [Q115_LIMIT as f32, 2.0f32.powi(-16) + 2.0f32.powi(-33)]
                .into_iter()
                .flat_map(around),
        )
        .chain(F32_SPECIALS.iter().copied().chain([1.0, -1.0]))
        .chain(random)
        .collect();
    let d = 64;
    xs.resize(xs.len().next_multiple_of(d), 0.0);
    let rows = xs.len() / d;
    // `zeros`: ±0 alike (a product's sum starts at +0, and a GPU may
    // flush an f32 subnormal to either zero)
    let same = |what: &str, got: &[f32], xs: &[f32], twin: fn(f32) -> f32, zeros: bool| {
        let differ: Vec<String> = (0..xs.len())
            .filter(|&i| {
                let (g, want) = (got[i], twin(xs[i]));
                let equal = g.to_bits() == want.to_bits() || zeros && g == 0.0 && want == 0.0;
                !(equal || g.is_nan() && want.is_nan())
            })
            .take(5)
            .map(|i| format!("{:e} -> {:e}, want {:e}", xs[i], got[i], twin(xs[i])))
            .collect();
        assert!(differ.is_empty(), "{what}: {differ:?}");
    };
    let clamps = |xs: &[f32]| xs.iter().filter(|&&x| q115_clamps(x)).count() as u32;

    // the embedding: row t of the table is token t's, stored through Q1.15
    let shape = EmbeddingShape {
        tokens: rows as u32,
        d: d as u32,
        vocab: rows as u32,
    };
    let tokens: Vec<u32> = (0..rows as u32).collect();
    let (tb, tok) = (gpu.upload("table", &xs)?, gpu.upload("tokens", &tokens)?);
    let (out, bad) = (
        gpu.storage_buffer("out", 4 * xs.len() as u64)?,
        gpu.storage_buffer("bad", 4)?,
    );
    reset(gpu);
    let k = Embedding::new(gpu).await?;
    let table = Weights::F32((&tb).into());
    let lookup = k.lookup(
        gpu,
        shape,
        (&tok).into(),
        table,
        (&out).into(),
        (&bad).into(),
    )?;
    gpu.run(&[&lookup]).await?;
    same(
        "Q1.15",
        &gpu.read_back::<f32>((&out).into()).await?,
        &xs,
        q115,
        false,
    );
    assert_eq!(counted(gpu).await?.embedding, clamps(&xs), "Q1.15 clamps");

    // a projection X·I: y = x exactly, then the matmul's boundary
    let finite: Vec<f32> = xs
        .iter()
        .map(|&x| if x.is_finite() { x } else { 0.0 })
        .collect();
    let eye: Vec<f32> = (0..d * d).map(|i| (i / d == i % d) as u32 as f32).collect();
    let (xb, wb) = (gpu.upload("x", &finite)?, gpu.upload("eye", &eye)?);
    reset(gpu);
    let k = Linear::new(gpu).await?;
    let s = LinearShape::new(rows as u32, d as u32, d as u32);
    let w = Weights::F32((&wb).into());
    gpu.run(&refs(&k.forward(
        gpu,
        s,
        (&xb).into(),
        w,
        Output::Store((&out).into()),
    )?))
    .await?;
    let got = gpu.read_back::<f32>((&out).into()).await?;
    same("Q1.31 then Q1.15", &got, &finite, sf16_matmul, true);
    assert_eq!(
        counted(gpu).await?.projection,
        clamps(&finite),
        "matmul clamps"
    );
    Ok(())
}

/// Forward products round (projection; residual after the o and down
/// projections); the backward's products, through the same entry point, do not.
pub async fn sf16_linear_rounds_forward_outputs_only(gpu: &Gpu) -> Result<()> {
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let s = LinearShape::new(67, 130, 90);
    let (rows, d_in, d_out) = (s.rows as usize, s.d_in as usize, s.d_out as usize);
    let mut r = rng(122);
    let (x, w) = (
        uniform(&mut r, rows * d_in, -1.0, 1.0),
        uniform(&mut r, d_out * d_in, -0.2, 0.2),
    );
    let res = uniform(&mut r, rows * d_out, -0.6, 0.6);
    let (xb, wb, rb) = (
        gpu.upload("x", &x)?,
        gpu.upload("w", &w)?,
        gpu.upload("residual", &res)?,
    );
    let (y, y_res) = (
        gpu.storage_buffer("y", 4 * (rows * d_out) as u64)?,
        gpu.storage_buffer("y_res", 4 * (rows * d_out) as u64)?,
    );
    let k = Linear::new(gpu).await?;
    let want = linear::forward(&f64s(&x), &f64s(&w), d_in);
    let tol = 1e-5; // |y| < 3 over 130 products; the exact kernel is within 1e-6

    reset(gpu);
    gpu.run(&refs(&k.forward(
        gpu,
        s,
        (&xb).into(),
        Weights::F32((&wb).into()),
        Output::Store((&y).into()),
    )?))
    .await?;
    let clamps = assert_rounded(
        "projection sf16",
        &gpu.read_back::<f32>((&y).into()).await?,
        &want,
        tol,
        |_, v| q131(v as f32) as f64,
    );
    assert_count("projection clamps", counted(gpu).await?.projection, clamps);

    reset(gpu);
    let add = Output::AddTo {
        residual: (&rb).into(),
        y: (&y_res).into(),
    };
    gpu.run(&refs(&k.forward(
        gpu,
        s,
        (&xb).into(),
        Weights::F32((&wb).into()),
        add,
    )?))
    .await?;
    let got = gpu.read_back::<f32>((&y_res).into()).await?;
    let clamps = assert_rounded("residual sf16", &got, &want, tol, |i, v| {
        (res[i] + sf16_matmul(v as f32)) as f64
    });
    let c = counted(gpu).await?;
    assert_count("residual clamps", c.residual, clamps);
    assert!(
        c.projection > 0,
        "the product joining the residual is a projection boundary too"
    );

    // dX = dY·W: a backward product, exact
    reset(gpu);
    let dy = uniform(&mut r, rows * d_out, -2.0, 2.0);
    let (dyb, dx) = (
        gpu.upload("dy", &dy)?,
        gpu.storage_buffer("dx", 4 * (rows * d_in) as u64)?,
    );
    gpu.run(&refs(&k.backward_input(
        gpu,
        s,
        (&dyb).into(),
        Weights::F32((&wb).into()),
        Output::Store((&dx).into()),
    )?))
    .await?;
    let mut want_dx = vec![0.0; rows * d_in];
    linear::backward_input(&f64s(&dy), &f64s(&w), d_in, &mut want_dx);
    assert_close(
        "backward dX in sf16",
        &gpu.read_back::<f32>((&dx).into()).await?,
        &want_dx,
        1e-5,
        1e-5,
    );
    assert_eq!(
        counted(gpu).await?.total(),
        0,
        "a backward product counted clamps"
    );
    Ok(())
}

/// sf16 attention's inputs: large scores, so many rows put nearly all
/// their weight on one key; and a first token's output is 0.999·v, so v
/// beyond ±1 clamps.
/// One lane per row (Dh 32, GQA 2:1), and two lanes per row (Dh 128, GQA
/// 4:1, one sequence): the kernels' two ways of summing a score.
const ATTENTION_SHAPES: [AttentionShape; 2] = [
    AttentionShape {
        batch: 2,
        seq_len: 37,
        heads: 4,
        kv_heads: 2,
        head_dim: 32,
    },
    AttentionShape {
        batch: 1,
        seq_len: 45,
        heads: 4,
        kv_heads: 1,
        head_dim: 128,
    },
];

struct AttentionInputs {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn attention_inputs(s: AttentionShape) -> AttentionInputs {
    let rows = (s.batch * s.seq_len) as usize;
    let (qw, kw) = (
        (s.heads * s.head_dim) as usize,
        (s.kv_heads * s.head_dim) as usize,
    );
    let mut r = rng(123);
    AttentionInputs {
        q: uniform(&mut r, rows * qw, -2.0, 2.0),
        k: uniform(&mut r, rows * kw, -2.0, 2.0),
        v: uniform(&mut r, rows * kw, -1.5, 1.5),
    }
}

/// What sf16 attention may store, per row of `[B·T, H·Dh]`: o's reference
/// rounds each probability as the kernels do, and a code that a kernel's
/// f32 softmax rounds the other way moves o by ≤ 2^-15·|v|, so o may
/// differ from it by up to a code per key (`tol_o`). `softmax[row]`: the
/// row's probabilities (all heads) that clamp surely / possibly.
struct Sf16Attention {
    want_lse: Vec<f64>,
    want_o: Vec<f64>,
    tol_o: Vec<f64>,
    softmax: Vec<(u32, u32)>,
}

fn sf16_attention_reference(s: AttentionShape, x: &AttentionInputs) -> Sf16Attention {
    let (rows, dh) = ((s.batch * s.seq_len) as usize, s.head_dim as usize);
    let (qw, kw) = (s.heads as usize * dh, s.kv_heads as usize * dh);
    let (q64, k64, v64) = (f64s(&x.q), f64s(&x.k), f64s(&x.v));
    let f32 = webtrain::ops::products::AttentionOperands::F32;
    let (_, want_lse) = attention::forward(&s, &q64, &k64, &v64, f32);
    let (tol_p, scale) = (1e-5, 1.0 / (dh as f64).sqrt());
    let mut want = Sf16Attention {
        want_o: vec![0.0; rows * qw],
        tol_o: vec![0.0; rows * qw],
        softmax: vec![(0, 0); rows],
        want_lse,
    };
    let group = (s.heads / s.kv_heads) as usize;
    for b in 0..s.batch as usize {
        for t in 0..s.seq_len as usize {
            let row = b * s.seq_len as usize + t;
            for h in 0..s.heads as usize {
                let qh = &q64[row * qw + h * dh..][..dh];
                let at = |j: usize| (b * s.seq_len as usize + j) * kw + (h / group) * dh;
                let lse = want.want_lse[row * s.heads as usize + h];
                for j in 0..=t {
                    let score = scale
                        * qh.iter()
                            .zip(&k64[at(j)..][..dh])
                            .map(|(a, c)| a * c)
                            .sum::<f64>();
                    let p = (score - lse).exp();
                    want.softmax[row].0 += (p - tol_p > Q115_LIMIT) as u32;
                    want.softmax[row].1 += (p + tol_p > Q115_LIMIT) as u32;
                    let pq = q115(p as f32) as f64;
                    for (c, vv) in v64[at(j)..][..dh].iter().enumerate() {
                        want.want_o[row * qw + h * dh + c] += pq * vv;
                        want.tol_o[row * qw + h * dh + c] += (tol_p + 2f64.powi(-15)) * vv.abs();
                    }
                }
            }
        }
    }
    want
}

/// Checks sf16 attention outputs `got` (row i of it is row `rows[i]` of the
/// forward's `[B·T, H·Dh]`) against the reference; returns the output
/// clamps certain and possible.
fn assert_sf16_attention_o(
    what: &str,
    s: AttentionShape,
    got: &[f32],
    want: &Sf16Attention,
    rows: &[usize],
) -> (u32, u32) {
    let qw = (s.heads * s.head_dim) as usize;
    assert_eq!(got.len(), rows.len() * qw, "{what}: length");
    let mut clamps = (0, 0);
    for (i, &g) in got.iter().enumerate() {
        let at = rows[i / qw] * qw + i % qw;
        let (below, above) = (
            want.want_o[at] - want.tol_o[at] - 1e-6,
            want.want_o[at] + want.tol_o[at] + 1e-6,
        );
        clamps.0 += (below > Q115_LIMIT || above < -Q115_LIMIT) as u32;
        clamps.1 += (above > Q115_LIMIT || below < -Q115_LIMIT) as u32;
        let (lo, hi) = (sf16_matmul(below as f32), sf16_matmul(above as f32));
        assert!(
            lo <= g && g <= hi,
            "{what}: element {i}: got {g}, want {lo} ..= {hi}"
        );
        assert!(
            (g * 32768.0).fract() == 0.0,
            "{what}: element {i}: {g} is not a Q1.15 value"
        );
    }
    clamps
}

fn qkv_heads<'a>(
    s: AttentionShape,
    q: &'a wgpu::Buffer,
    k: &'a wgpu::Buffer,
    v: &'a wgpu::Buffer,
) -> Qkv<'a> {
    let heads = |b: &'a wgpu::Buffer, n: u32| Heads {
        data: b.into(),
        row_stride: n * s.head_dim,
        col: 0,
    };
    Qkv {
        q: heads(q, s.heads),
        k: heads(k, s.kv_heads),
        v: heads(v, s.kv_heads),
    }
}

/// Probabilities normalized then rounded (softmax write-back), the output
/// P·V rounded as a matmul's; lse as in the exact mode.
pub async fn sf16_attention_rounds_probabilities_and_output(gpu: &Gpu) -> Result<()> {
    for s in ATTENTION_SHAPES {
        sf16_attention_rounds(gpu, s).await?;
    }
    Ok(())
}

async fn sf16_attention_rounds(gpu: &Gpu, s: AttentionShape) -> Result<()> {
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let rows = (s.batch * s.seq_len) as usize;
    let x = attention_inputs(s);
    let (qb, kb, vb) = (
        gpu.upload("q", &x.q)?,
        gpu.upload("k", &x.k)?,
        gpu.upload("v", &x.v)?,
    );
    let (o, lse) = (
        gpu.storage_buffer("o", 4 * (rows * (s.heads * s.head_dim) as usize) as u64)?,
        gpu.storage_buffer("lse", 4 * (rows * s.heads as usize) as u64)?,
    );
    reset(gpu);
    gpu.run(&[&Attention::new(gpu, &[s.head_dim]).await?.forward(
        gpu,
        s,
        qkv_heads(s, &qb, &kb, &vb),
        (&o).into(),
        (&lse).into(),
    )?])
    .await?;
    let (got_o, got_lse) = (
        gpu.read_back::<f32>((&o).into()).await?,
        gpu.read_back::<f32>((&lse).into()).await?,
    );
    let want = sf16_attention_reference(s, &x);
    let what = format!("Dh={}", s.head_dim);
    assert_close(
        &format!("lse in sf16, {what}"),
        &got_lse,
        &want.want_lse,
        2e-5,
        2e-6,
    );
    let all: Vec<usize> = (0..rows).collect();
    let output_clamps =
        assert_sf16_attention_o(&format!("attention o sf16, {what}"), s, &got_o, &want, &all);
    let softmax_clamps = want
        .softmax
        .iter()
        .fold((0, 0), |a, c| (a.0 + c.0, a.1 + c.1));
    let c = counted(gpu).await?;
    assert_count("softmax clamps", c.softmax, softmax_clamps);
    assert_count("attention output clamps", c.attention, output_clamps);
    Ok(())
}

/// Generation rounds as the training forward does: attention_decode of
/// the new query at position L − 1 against cache rows 0..L stores what the
/// forward may store at row L − 1, and counts its clamps.
pub async fn sf16_decode_rounds_as_the_forward(gpu: &Gpu) -> Result<()> {
    for s in ATTENTION_SHAPES {
        sf16_decode_rounds(gpu, s).await?;
    }
    Ok(())
}

async fn sf16_decode_rounds(gpu: &Gpu, s: AttentionShape) -> Result<()> {
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let (t, qw) = (s.seq_len as usize, (s.heads * s.head_dim) as usize);
    let x = attention_inputs(s);
    let want = sf16_attention_reference(s, &x);
    // the caches hold the forward's k and v rows as they are: Lmax = T
    let (kb, vb) = (gpu.upload("k_cache", &x.k)?, gpu.upload("v_cache", &x.v)?);
    let attention = Attention::new(gpu, &[s.head_dim]).await?;
    // L = 1: the one probability is 1 and clamps, per sequence and head
    for len in [1, 2, 20, s.seq_len] {
        let rows: Vec<usize> = (0..s.batch as usize)
            .map(|b| b * t + len as usize - 1)
            .collect();
        let q_new: Vec<f32> = rows
            .iter()
            .flat_map(|&r| x.q[r * qw..][..qw].to_vec())
            .collect();
        let qb = gpu.upload("q", &q_new)?;
        let o = gpu.storage_buffer("o", 4 * q_new.len() as u64)?;
        let d = DecodeShape {
            batch: s.batch,
            len,
            max_len: s.seq_len,
            heads: s.heads,
            kv_heads: s.kv_heads,
            head_dim: s.head_dim,
        };
        reset(gpu);
        gpu.run(&[&attention.decode(gpu, d, qkv_heads(s, &qb, &kb, &vb), (&o).into())?])
            .await?;
        let what = format!("attention decode sf16 L={len} Dh={}", s.head_dim);
        let got = gpu.read_back::<f32>((&o).into()).await?;
        let output_clamps = assert_sf16_attention_o(&what, s, &got, &want, &rows);
        let softmax_clamps = rows.iter().fold((0, 0), |a, &r| {
            (a.0 + want.softmax[r].0, a.1 + want.softmax[r].1)
        });
        let c = counted(gpu).await?;
        if len == 1 {
            assert_count(
                &format!("{what}: softmax clamps"),
                c.softmax,
                softmax_clamps,
            );
            assert_count(
                &format!("{what}: output clamps"),
                c.attention,
                output_clamps,
            );
        } else {
            let within = |(certain, possible): (u32, u32), n: u32| certain <= n && n <= possible;
            assert!(
                within(softmax_clamps, c.softmax),
                "{what}: {} softmax clamps, want {softmax_clamps:?}",
                c.softmax
            );
            assert!(
                within(output_clamps, c.attention),
                "{what}: {} output clamps, want {output_clamps:?}",
                c.attention
            );
        }
    }
    Ok(())
}

/// sf16-wide-head: the trainer's kernels keep the output head's product
/// exact (f32 logits beyond ±1, nothing counted) while every other product
/// still rounds to Q1.15; plain sf16 rounds the head too.
pub async fn sf16_wide_head_keeps_the_logits_exact(gpu: &Gpu) -> Result<()> {
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let s = LinearShape::new(19, 96, 301);
    let (rows, d_in, d_out) = (s.rows as usize, s.d_in as usize, s.d_out as usize);
    let mut r = rng(124);
    let (x, w) = (
        uniform(&mut r, rows * d_in, -1.0, 1.0),
        uniform(&mut r, d_out * d_in, -0.5, 0.5),
    );
    let (xb, wb) = (gpu.upload("x", &x)?, gpu.upload("w", &w)?);
    let y = gpu.storage_buffer("y", 4 * (rows * d_out) as u64)?;
    let want = linear::forward(&f64s(&x), &f64s(&w), d_in);
    assert!(
        want.iter().any(|v| v.abs() > 2.0),
        "products beyond the clamp"
    );
    let product = |linear: &Linear| {
        reset(gpu);
        let out = Output::Store((&y).into());
        linear.forward(gpu, s, (&xb).into(), Weights::F32((&wb).into()), out)
    };
    let tol = 1e-5; // |y| < 10 over 96 products; the exact kernel is within 2e-6

    let recipe = Recipe::sf16_wide_head();
    let wide = Kernels::with_products(gpu, recipe.kernel_products(), &[], 0).await?;
    gpu.run(&refs(&product(wide.head())?)).await?;
    let logits = gpu.read_back::<f32>((&y).into()).await?;
    assert_close("wide head's logits in sf16", &logits, &want, tol, 0.0);
    assert_eq!(
        counted(gpu).await?.total(),
        0,
        "the wide head counted clamps"
    );
    gpu.run(&refs(&product(&wide.linear)?)).await?;
    let rounded = gpu.read_back::<f32>((&y).into()).await?;
    let clamps = assert_rounded(
        "projection beside a wide head",
        &rounded,
        &want,
        tol,
        |_, v| q131(v as f32) as f64,
    );
    assert_count("projection clamps", counted(gpu).await?.projection, clamps);

    let recipe = Recipe::sf16();
    let narrow = Kernels::with_products(gpu, recipe.kernel_products(), &[], 0).await?;
    gpu.run(&refs(&product(narrow.head())?)).await?;
    let rounded = gpu.read_back::<f32>((&y).into()).await?;
    assert_rounded("sf16's head", &rounded, &want, tol, |_, v| {
        q131(v as f32) as f64
    });
    Ok(())
}
