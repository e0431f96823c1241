//! 01_embedding.wgsl against reference/embedding.rs.

use half::f16;
use rand::Rng;
use webtrain::kernels::embedding::TokenRuns;
use webtrain::kernels::{Embedding, EmbeddingShape, Weights};
use webtrain::reference::embedding as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_identical, assert_within, rng, uniform};

fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Awkward sizes, and the seed's real vocabulary and widths.
const SHAPES: &[(u32, u32, u32)] = &[
    (129, 257, 1000),
    (7, 1, 3),
    (512, 384, 16384),
    (64, 768, 16384),
];

async fn lookup(
    gpu: &Gpu,
    k: &Embedding,
    shape: EmbeddingShape,
    tokens: &[u32],
    table: Weights<'_>,
) -> Result<(Vec<f32>, u32)> {
    let tb = gpu.upload("tokens", tokens)?;
    let out = gpu.storage_buffer("out", 4 * (shape.tokens * shape.d) as u64)?;
    let bad = gpu.storage_buffer("bad", 4)?;
    gpu.run(&[&k.lookup(
        gpu,
        shape,
        (&tb).into(),
        table,
        (&out).into(),
        (&bad).into(),
    )?])
    .await?;
    Ok((
        gpu.read_back((&out).into()).await?,
        gpu.read_back::<u32>((&bad).into()).await?[0],
    ))
}

/// Tokens are random, with some >= V: those must give zero rows and be counted.
pub async fn embed_lookup_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Embedding::new(gpu).await?;
    let mut r = rng(10);
    for &(s, d, v) in SHAPES {
        let shape = EmbeddingShape {
            tokens: s,
            d,
            vocab: v,
        };
        let table = uniform(&mut r, (v * d) as usize, -1.0, 1.0);
        let tokens: Vec<u32> = (0..s)
            .map(|i| {
                if i % 17 == 5 {
                    v + i
                } else {
                    r.random_range(0..v)
                }
            })
            .collect();
        let (want, want_bad) = reference::lookup(&tokens, &to_f64(&table), d as usize);

        let tb = gpu.upload("table", &table)?;
        let (got, bad) = lookup(gpu, &k, shape, &tokens, Weights::F32((&tb).into())).await?;
        assert_identical(
            &format!("lookup {s}x{d} V={v}"),
            &got,
            &want.iter().map(|&x| x as f32).collect::<Vec<_>>(),
        );
        assert_eq!(bad, want_bad, "out-of-range tokens counted");

        // f16 table: the reference reads the same f16 values, widened exactly
        let halves: Vec<f16> = table.iter().map(|&x| f16::from_f32(x)).collect();
        let th = gpu.upload("table_h", &halves)?;
        let (got, bad) = lookup(gpu, &k, shape, &tokens, Weights::F16((&th).into())).await?;
        let (want, _) = reference::lookup(
            &tokens,
            &halves.iter().map(|h| h.to_f64()).collect::<Vec<_>>(),
            d as usize,
        );
        assert_identical(
            &format!("lookup_w16 {s}x{d} V={v}"),
            &got,
            &want.iter().map(|&x| x as f32).collect::<Vec<_>>(),
        );
        assert_eq!(bad, want_bad, "out-of-range tokens counted (w16)");
    }
    Ok(())
}

/// `embed_backward_sorted` on one batch, dtable starting at `init`.
async fn backward_sorted(
    gpu: &Gpu,
    k: &Embedding,
    shape: EmbeddingShape,
    tokens: &[u32],
    dout: &[f32],
    init: &[f32],
) -> Result<Vec<f32>> {
    let index = gpu.upload("runs", &TokenRuns::new(tokens, shape.vocab).to_words())?;
    let (gb, dtable) = (gpu.upload("dout", dout)?, gpu.upload("dtable", init)?);
    gpu.run(&[&k.backward_sorted(gpu, shape, (&index).into(), (&gb).into(), (&dtable).into())?])
        .await?;
    gpu.read_back((&dtable).into()).await
}

/// The f64 reference from `init`, and each element's bound on the error of
/// k sequential f32 adds (the run's k − 1, then one into dtable), every
/// partial sum below |init| + Σ|g|: k·2^-24·(|init| + Σ|g|).
fn sorted_reference(tokens: &[u32], dout: &[f32], init: &[f32], d: usize) -> (Vec<f64>, Vec<f64>) {
    let mut want = to_f64(init);
    reference::backward(tokens, &to_f64(dout), &mut want, d);
    let mut abs_sum: Vec<f64> = init.iter().map(|&x| (x as f64).abs()).collect();
    let abs_dout: Vec<f64> = dout.iter().map(|&g| (g as f64).abs()).collect();
    reference::backward(tokens, &abs_dout, &mut abs_sum, d);
    let vocab = init.len() / d;
    let mut k = vec![0.0; vocab];
    for &t in tokens.iter().filter(|&&t| (t as usize) < vocab) {
        k[t as usize] += 1.0;
    }
    let bound = abs_sum
        .iter()
        .enumerate()
        .map(|(i, &a)| k[i / d] * 2f64.powi(-24) * a)
        .collect();
    (want, bound)
}

/// Many repeats, tokens >= V (skipped), NaN and ±Inf in dout (skipped), a
/// non-zero dtable to add into; S not a multiple of 256, D not of 4. The
/// last shape's S·D > 65 535·256 forces the 2-D grid.
pub async fn embed_backward_sorted_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Embedding::new(gpu).await?;
    let mut r = rng(12);
    for &(s, d, v) in &[
        (1037u32, 72u32, 301u32),
        (7, 1, 3),
        (300, 257, 5000),
        (16385, 1024, 64),
    ] {
        let shape = EmbeddingShape {
            tokens: s,
            d,
            vocab: v,
        };
        // mostly a 40-token slice of the vocabulary, so tokens repeat ~S/40 times
        let tokens: Vec<u32> = (0..s)
            .map(|i| match i % 23 {
                4 => v + i % 3,
                9 => r.random_range(0..v),
                _ => r.random_range(0..v.min(40)),
            })
            .collect();
        let mut dout = uniform(&mut r, (s * d) as usize, -1.0, 1.0);
        let n = dout.len();
        dout[3 % n] = f32::NAN;
        dout[n / 2] = f32::INFINITY;
        dout[n - 1] = f32::NEG_INFINITY;
        let init = uniform(&mut r, (v * d) as usize, -1.0, 1.0);
        let got = backward_sorted(gpu, &k, shape, &tokens, &dout, &init).await?;
        let what = format!("embed_backward_sorted {s}x{d} V={v}");
        // The summation bound above, up to S/40 ≈ 410 adds of |g| < 1.
        // Measured worst |error|/bound 0.27 on lavapipe (both storage
        // modes), 0.30 on SwiftShader; worst absolute 1.7e-6 / 9.5e-7 (S=1037).
        let (want, bound) = sorted_reference(&tokens, &dout, &init, d as usize);
        assert_within(&what, &got, &want, &bound);
        // and exactly the bits of an f32 twin adding in the kernel's order
        let mut exact = init.clone();
        reference::backward_sorted_f32(&tokens, &dout, &mut exact, d as usize);
        assert_identical(&format!("{what}, in order"), &got, &exact);
    }
    Ok(())
}

/// Heavy repetition (one token S times, then three tokens): two runs give the
/// same bits, added into a non-zero dtable.
pub async fn embed_backward_sorted_is_deterministic_and_adds(gpu: &Gpu) -> Result<()> {
    let k = Embedding::new(gpu).await?;
    let mut r = rng(13);
    let (s, d, v) = (4099u32, 36u32, 50u32);
    let shape = EmbeddingShape {
        tokens: s,
        d,
        vocab: v,
    };
    let batches: [Vec<u32>; 2] = [
        vec![7; s as usize],
        (0..s).map(|_| [3, 17, 49][r.random_range(0..3)]).collect(),
    ];
    for (b, tokens) in batches.iter().enumerate() {
        let dout = uniform(&mut r, (s * d) as usize, -1.0, 1.0);
        let init = uniform(&mut r, (v * d) as usize, -4.0, 4.0);
        let first = backward_sorted(gpu, &k, shape, tokens, &dout, &init).await?;
        let again = backward_sorted(gpu, &k, shape, tokens, &dout, &init).await?;
        assert_identical(
            &format!("embed_backward_sorted batch {b}, rerun"),
            &again,
            &first,
        );
        let mut exact = init.clone();
        reference::backward_sorted_f32(tokens, &dout, &mut exact, d as usize);
        assert_identical(
            &format!("embed_backward_sorted batch {b}, in order"),
            &first,
            &exact,
        );
        // k = S = 4099 adds: measured worst |error|/bound 7.3e-4 on lavapipe
        // (both storage modes), 7.6e-4 on SwiftShader; absolute 8.5e-5 / 1.0e-4
        let (want, bound) = sorted_reference(tokens, &dout, &init, d as usize);
        assert_within(
            &format!("embed_backward_sorted batch {b}"),
            &first,
            &want,
            &bound,
        );
    }
    Ok(())
}

/// How the trainer uses it: one dispatch built for S, then per batch only
/// the index and dout rewritten with `write_buffer`; later batches have fewer
/// distinct tokens (then none in range), and dtable accumulates across them.
pub async fn embed_backward_sorted_reuses_its_dispatch(gpu: &Gpu) -> Result<()> {
    let k = Embedding::new(gpu).await?;
    let mut r = rng(14);
    let (s, d, v) = (515u32, 40u32, 700u32);
    let shape = EmbeddingShape {
        tokens: s,
        d,
        vocab: v,
    };
    let index = gpu.storage_buffer("runs", 4 * TokenRuns::words(s))?;
    let dout = gpu.storage_buffer("dout", 4 * (s * d) as u64)?;
    let mut exact = uniform(&mut r, (v * d) as usize, -1.0, 1.0);
    let dtable = gpu.upload("dtable", &exact)?;
    let dispatch = k.backward_sorted(
        gpu,
        shape,
        (&index).into(),
        (&dout).into(),
        (&dtable).into(),
    )?;
    let batches: [Vec<u32>; 3] = [
        (0..s).map(|_| r.random_range(0..v)).collect(), // ~370 distinct
        (0..s).map(|i| [5, 640][(i % 7 == 0) as usize]).collect(),
        vec![v; s as usize], // all out of range: nothing added
    ];
    for (b, tokens) in batches.iter().enumerate() {
        let runs = TokenRuns::new(tokens, v);
        let g = uniform(&mut r, (s * d) as usize, -1.0, 1.0);
        gpu.queue
            .write_buffer(&index, 0, bytemuck::cast_slice(&runs.to_words()));
        gpu.queue.write_buffer(&dout, 0, bytemuck::cast_slice(&g));
        gpu.run(&[&dispatch]).await?;
        reference::backward_sorted_f32(tokens, &g, &mut exact, d as usize);
        let got = gpu.read_back((&dtable).into()).await?;
        assert_identical(
            &format!("embed_backward_sorted batch {b} (U = {})", runs.runs()),
            &got,
            &exact,
        );
    }
    Ok(())
}
