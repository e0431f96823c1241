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

use webtrain::kernels::attention::AttentionShape;
use webtrain::kernels::boundary::{self, Clamped};
use webtrain::kernels::{
    Activation, Attention, Embedding, EmbeddingShape, Heads, Linear, LinearShape, NormShape,
    Output, Qkv, RmsNorm, Weights,
};
use webtrain::reference::quantize::{q115, q131, sf16_matmul};
use webtrain::reference::{activation, attention, embedding, linear, norm};
use webtrain::shaders::Numerics;
use webtrain::{Gpu, Result};

use super::check::{assert_close, rng, uniform};

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

/// Forward products round (projection; residual after the o and down
/// projections); the backward's products, through the same entry point, do not.
pub async fn sf16_linear_rounds_forward_outputs_only(gpu: &Gpu) -> Result<()> {
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let s = LinearShape {
        rows: 67,
        d_in: 130,
        d_out: 90,
    };
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
    gpu.run(&[&k.forward(
        gpu,
        s,
        (&xb).into(),
        Weights::F32((&wb).into()),
        Output::Store((&y).into()),
    )?])
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
    gpu.run(&[&k.forward(gpu, s, (&xb).into(), Weights::F32((&wb).into()), add)?])
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
    gpu.run(&[&k.backward_input(
        gpu,
        s,
        (&dyb).into(),
        Weights::F32((&wb).into()),
        Output::Store((&dx).into()),
    )?])
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

/// Probabilities normalized then rounded (softmax write-back), the output
/// P·V rounded as a matmul's; lse as in the exact mode.
pub async fn sf16_attention_rounds_probabilities_and_output(gpu: &Gpu) -> Result<()> {
    let gpu = &gpu.with_numerics(Numerics::Sf16);
    let s = AttentionShape {
        batch: 2,
        seq_len: 37,
        heads: 4,
        kv_heads: 2,
        head_dim: 32,
    };
    let (rows, dh) = ((s.batch * s.seq_len) as usize, s.head_dim as usize);
    let (qw, kw) = (s.heads as usize * dh, s.kv_heads as usize * dh);
    let mut r = rng(123);
    // large scores: many rows put nearly all their weight on one key
    let (q, k, v) = (
        uniform(&mut r, rows * qw, -2.0, 2.0),
        uniform(&mut r, rows * kw, -2.0, 2.0),
        uniform(&mut r, rows * kw, -1.5, 1.5),
    );
    let (qb, kb, vb) = (
        gpu.upload("q", &q)?,
        gpu.upload("k", &k)?,
        gpu.upload("v", &v)?,
    );
    let (o, lse) = (
        gpu.storage_buffer("o", 4 * (rows * qw) as u64)?,
        gpu.storage_buffer("lse", 4 * (rows * s.heads as usize) as u64)?,
    );
    let heads = |b, width| Heads {
        data: b,
        row_stride: width as u32,
        col: 0,
    };
    let x = Qkv {
        q: heads((&qb).into(), qw),
        k: heads((&kb).into(), kw),
        v: heads((&vb).into(), kw),
    };
    reset(gpu);
    gpu.run(&[&Attention::new(gpu)
        .await?
        .forward(gpu, s, x, (&o).into(), (&lse).into())?])
        .await?;
    let (got_o, got_lse) = (
        gpu.read_back::<f32>((&o).into()).await?,
        gpu.read_back::<f32>((&lse).into()).await?,
    );

    let (q64, k64, v64) = (f64s(&q), f64s(&k), f64s(&v));
    let (_, want_lse) = attention::forward(&s, &q64, &k64, &v64);
    assert_close("lse in sf16", &got_lse, &want_lse, 2e-5, 2e-6);
    // o's reference rounds each probability as the kernel does; a code that
    // the kernel's f32 softmax rounds the other way moves o by ≤ 2^-15·|v|,
    // so o may differ from it by up to a code per key
    let (tol_p, scale) = (1e-5, 1.0 / (dh as f64).sqrt());
    let (mut softmax_clamps, mut want_o, mut tol_o) =
        ((0, 0), vec![0.0; rows * qw], vec![0.0; rows * qw]);
    let group = (s.heads / s.kv_heads) as usize;
    for b in 0..s.batch as usize {
        for t in 0..s.seq_len as usize {
            for h in 0..s.heads as usize {
                let row = b * s.seq_len as usize + t;
                let qh = &q64[row * qw + h * dh..][..dh];
                let key =
                    |j: usize| &k64[(b * s.seq_len as usize + j) * kw + (h / group) * dh..][..dh];
                let val =
                    |j: usize| &v64[(b * s.seq_len as usize + j) * kw + (h / group) * dh..][..dh];
                let scores: Vec<f64> = (0..=t)
                    .map(|j| scale * qh.iter().zip(key(j)).map(|(a, c)| a * c).sum::<f64>())
                    .collect();
                let lse = want_lse[row * s.heads as usize + h];
                for (j, sc) in scores.iter().enumerate() {
                    let p = (sc - lse).exp();
                    softmax_clamps.0 += (p - tol_p > Q115_LIMIT) as u32;
                    softmax_clamps.1 += (p + tol_p > Q115_LIMIT) as u32;
                    let pq = q115(p as f32) as f64;
                    for (c, vv) in val(j).iter().enumerate() {
                        want_o[row * qw + h * dh + c] += pq * vv;
                        tol_o[row * qw + h * dh + c] += (tol_p + 2f64.powi(-15)) * vv.abs();
                    }
                }
            }
        }
    }
    let mut output_clamps = (0, 0);
    for (i, (&g, &w)) in got_o.iter().zip(&want_o).enumerate() {
        let (below, above) = (w - tol_o[i] - 1e-6, w + tol_o[i] + 1e-6);
        output_clamps.0 += (below > Q115_LIMIT || above < -Q115_LIMIT) as u32;
        output_clamps.1 += (above > Q115_LIMIT || below < -Q115_LIMIT) as u32;
        let (lo, hi) = (sf16_matmul(below as f32), sf16_matmul(above as f32));
        assert!(
            lo <= g && g <= hi,
            "attention o sf16: element {i}: got {g}, want {lo} ..= {hi}"
        );
        assert!(
            (g * 32768.0).fract() == 0.0,
            "attention o sf16: element {i}: {g} is not a Q1.15 value"
        );
    }
    let c = counted(gpu).await?;
    assert_count("softmax clamps", c.softmax, softmax_clamps);
    // a first token's output is 0.999·v: v beyond ±1 clamps
    assert_count("attention output clamps", c.attention, output_clamps);
    Ok(())
}
