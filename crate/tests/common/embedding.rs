//! 01_embedding.wgsl against reference/embedding.rs.

use half::f16;
use rand::Rng;
use webtrain::kernels::{Embedding, EmbeddingShape, Weights};
use webtrain::reference::embedding as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_close, assert_identical, rng, uniform};

fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// Awkward sizes, and the seed's real vocabulary and widths.
const SHAPES: &[(u32, u32, u32)] = &[(129, 257, 1000), (7, 1, 3), (512, 384, 16384), (64, 768, 16384)];

async fn lookup(gpu: &Gpu, k: &Embedding, shape: EmbeddingShape, tokens: &[u32], table: Weights<'_>) -> Result<(Vec<f32>, u32)> {
    let tb = gpu.upload("tokens", tokens)?;
    let out = gpu.storage_buffer("out", 4 * (shape.tokens * shape.d) as u64)?;
    let bad = gpu.storage_buffer("bad", 4)?;
    gpu.run(&[&k.lookup(gpu, shape, (&tb).into(), table, (&out).into(), (&bad).into())?]).await?;
    Ok((gpu.read_back((&out).into()).await?, gpu.read_back::<u32>((&bad).into()).await?[0]))
}

/// Tokens are random, with some >= V: those must give zero rows and be counted.
pub async fn embed_lookup_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Embedding::new(gpu).await?;
    let mut r = rng(10);
    for &(s, d, v) in SHAPES {
        let shape = EmbeddingShape { tokens: s, d, vocab: v };
        let table = uniform(&mut r, (v * d) as usize, -1.0, 1.0);
        let tokens: Vec<u32> = (0..s).map(|i| if i % 17 == 5 { v + i } else { r.random_range(0..v) }).collect();
        let (want, want_bad) = reference::lookup(&tokens, &to_f64(&table), d as usize);

        let tb = gpu.upload("table", &table)?;
        let (got, bad) = lookup(gpu, &k, shape, &tokens, Weights::F32((&tb).into())).await?;
        assert_identical(&format!("lookup {s}x{d} V={v}"), &got, &want.iter().map(|&x| x as f32).collect::<Vec<_>>());
        assert_eq!(bad, want_bad, "out-of-range tokens counted");

        // f16 table: the reference reads the same f16 values, widened exactly
        let halves: Vec<f16> = table.iter().map(|&x| f16::from_f32(x)).collect();
        let th = gpu.upload("table_h", &halves)?;
        let (got, bad) = lookup(gpu, &k, shape, &tokens, Weights::F16((&th).into())).await?;
        let (want, _) = reference::lookup(&tokens, &halves.iter().map(|h| h.to_f64()).collect::<Vec<_>>(), d as usize);
        assert_identical(&format!("lookup_w16 {s}x{d} V={v}"), &got, &want.iter().map(|&x| x as f32).collect::<Vec<_>>());
        assert_eq!(bad, want_bad, "out-of-range tokens counted (w16)");
    }
    Ok(())
}

async fn backward(gpu: &Gpu, k: &Embedding, shape: EmbeddingShape, tokens: &[u32], dout: &[f32]) -> Result<Vec<f32>> {
    let (tb, gb) = (gpu.upload("tokens", tokens)?, gpu.upload("dout", dout)?);
    let dtable = gpu.storage_buffer("dtable", 4 * (shape.vocab * shape.d) as u64)?;
    gpu.run(&[&k.backward(gpu, shape, (&tb).into(), (&gb).into(), (&dtable).into())?]).await?;
    gpu.read_back((&dtable).into()).await
}

pub async fn embed_backward_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Embedding::new(gpu).await?;
    let mut r = rng(11);
    for &(s, d, v) in SHAPES {
        let shape = EmbeddingShape { tokens: s, d, vocab: v };
        // a small vocabulary slice so tokens repeat often; a few out of range
        let tokens: Vec<u32> = (0..s).map(|i| if i % 23 == 4 { v } else { r.random_range(0..v.min(40)) }).collect();
        let mut dout = uniform(&mut r, (s * d) as usize, -1.0, 1.0);
        dout[3] = f32::NAN;
        dout[(s * d) as usize / 2] = f32::INFINITY;
        let got = backward(gpu, &k, shape, &tokens, &dout).await?;
        let mut want = vec![0.0; (v * d) as usize];
        reference::backward(&tokens, &to_f64(&dout), &mut want, d as usize);
        // k atomic adds of |g| < 1 in any order: partial sums stay below k and
        // each add rounds by at most 2^-24·k, so |error| <= k²·2^-24 for the
        // most repeated token. Measured worst (S=512, k≈25): 1.4e-6 on
        // lavapipe and on SwiftShader.
        let k_max = (0..v).map(|t| tokens.iter().filter(|&&x| x == t).count()).max().unwrap_or(0) as f64;
        assert_close(&format!("embed_backward {s}x{d} V={v}"), &got, &want, k_max * k_max * 2f64.powi(-24), 0.0);
    }
    Ok(())
}

/// The same token 10 times: all 10 contributions land, with dyadic values
/// whose sums are exact in f32 whatever the order of the atomic adds.
pub async fn embed_backward_sums_repeated_tokens_exactly(gpu: &Gpu) -> Result<()> {
    let k = Embedding::new(gpu).await?;
    let (s, d, v) = (12u32, 300u32, 50u32);
    let tokens: Vec<u32> = (0..s).map(|i| if (1..=10).contains(&i) { 7 } else { 3 }).collect();
    let dout: Vec<f32> = (0..s * d).map(|i| ((i % 13) as f32 - 6.0) * 0.125).collect();
    let got = backward(gpu, &k, EmbeddingShape { tokens: s, d, vocab: v }, &tokens, &dout).await?;
    let mut want = vec![0.0; (v * d) as usize];
    reference::backward(&tokens, &to_f64(&dout), &mut want, d as usize);
    assert_identical("ten repeats of token 7", &got, &want.iter().map(|&x| x as f32).collect::<Vec<_>>());
    Ok(())
}
