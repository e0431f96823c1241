//! Generation with the KV cache (model/decode.rs): kv_append against its
//! twin, and token-by-token decoding against the training forward of the
//! whole sequence (GPU) and reference/model.rs (CPU), tiny preset.
//! Legend: B sequences, T tokens, V vocab, L cache length, Lmax capacity.

use std::ops::ControlFlow;

use webtrain::kernels::{Attention, Heads, Kernels};
use webtrain::model::decode::{Decoder, Generation, Sampling, sample};
use webtrain::model::{BatchShape, Config, MasterStorage, Model, ParamLayout, Pass, Recipe};
use webtrain::reference::attention as reference;
use webtrain::reference::model as reference_model;
use webtrain::rng::SplitMix64;
use webtrain::{Gpu, Result};

use super::check::{assert_close_to_scale, assert_identical, decode_shape, rng, uniform};
use super::model::{tokens, weights};

/// Two sequences of an awkward length (not a multiple of 16 or 64).
const SHAPE: BatchShape = BatchShape { batch: 2, seq: 45 };

/// kv_append writes row L − 1 of each sequence from a fused [q | k | v]
/// row and nothing else: exact, at the first, a middle and the last row.
pub async fn kv_append_matches_reference(gpu: &Gpu) -> Result<()> {
    let a = Attention::new(gpu, &[32]).await?;
    let (batch, max_len, heads, kv_heads, head_dim) = (3u32, 7u32, 4u32, 2u32, 32u32);
    let (hdh, kvdh) = ((heads * head_dim) as usize, (kv_heads * head_dim) as usize);
    let stride = hdh + 2 * kvdh;
    let mut r = rng(97);
    let cache_len = batch as usize * max_len as usize * kvdh;
    let (mut k_want, mut v_want) = (
        uniform(&mut r, cache_len, -1.0, 1.0),
        uniform(&mut r, cache_len, -1.0, 1.0),
    );
    let (k_cache, v_cache) = (
        gpu.upload("k_cache", &k_want)?,
        gpu.upload("v_cache", &v_want)?,
    );
    for len in [1, 4, max_len] {
        let qkv = uniform(&mut r, batch as usize * stride, -1.0, 1.0);
        let part = |col: usize| -> Vec<f32> {
            qkv.chunks(stride)
                .flat_map(|row| row[col..col + kvdh].to_vec())
                .collect()
        };
        reference::kv_append(
            batch as usize,
            max_len as usize,
            len as usize,
            &part(hdh),
            &part(hdh + kvdh),
            &mut k_want,
            &mut v_want,
        );
        let qkv_buffer = gpu.upload("qkv", &qkv)?;
        let view = |col: usize| Heads {
            data: (&qkv_buffer).into(),
            row_stride: stride as u32,
            col: col as u32,
        };
        let s = decode_shape((batch, len, max_len, heads, kv_heads, head_dim));
        gpu.run(&[&a.kv_append(
            gpu,
            s,
            view(hdh),
            view(hdh + kvdh),
            (&k_cache).into(),
            (&v_cache).into(),
        )?])
        .await?;
        assert_identical(
            &format!("kv_append k_cache L={len}"),
            &gpu.read_back::<f32>((&k_cache).into()).await?,
            &k_want,
        );
        assert_identical(
            &format!("kv_append v_cache L={len}"),
            &gpu.read_back::<f32>((&v_cache).into()).await?,
            &v_want,
        );
    }
    let buf = gpu.storage_buffer("x", 1 << 16)?;
    let view = Heads {
        data: (&buf).into(),
        row_stride: stride as u32,
        col: hdh as u32,
    };
    for len in [0, max_len + 1] {
        let s = decode_shape((batch, len, max_len, heads, kv_heads, head_dim));
        assert!(
            a.kv_append(gpu, s, view, view, (&buf).into(), (&buf).into())
                .is_err(),
            "L = {len} must be refused"
        );
    }
    Ok(())
}

/// The training forward of the whole batch (mirror synced first), then
/// lm_head over its final norm: logits `[B·T, V]`.
async fn training_logits(
    gpu: &Gpu,
    k: &Kernels,
    model: &Model,
    inputs: &[u32],
) -> Result<Vec<f32>> {
    model.write_batch(gpu, inputs, inputs)?;
    model.run(gpu, Pass::Forward).await?;
    model.logits(gpu, k).await
}

/// Feeds `inputs` (`[B·T]`, row b·T + t) one position per step from the
/// start; returns every step's logits laid out like the forward's `[B·T, V]`.
async fn decode_all(
    gpu: &Gpu,
    k: &Kernels,
    model: &Model,
    d: &mut Decoder,
    inputs: &[u32],
    shape: BatchShape,
) -> Result<Vec<f32>> {
    let (b, t, v) = (
        shape.batch as usize,
        shape.seq as usize,
        model.config.vocab as usize,
    );
    let mut out = vec![0.0; b * t * v];
    d.reset();
    for pos in 0..t {
        let column: Vec<u32> = (0..b).map(|s| inputs[s * t + pos]).collect();
        let logits = d.step(gpu, k, model, &column).await?;
        for s in 0..b {
            out[(s * t + pos) * v..(s * t + pos + 1) * v]
                .copy_from_slice(&logits[s * v..(s + 1) * v]);
        }
    }
    Ok(out)
}

async fn matches_forward(gpu: &Gpu, precision: Recipe) -> Result<()> {
    let config = Config::preset("tiny")?;
    let k = Kernels::new(gpu, &[config.head_dim()]).await?;
    let layout = ParamLayout::new(&config);
    let w = weights(&layout, 95);
    let inputs = tokens(96, SHAPE.rows() as usize, config.vocab); // different tokens per sequence
    let model = Model::new(
        gpu,
        &k,
        (config.clone(), SHAPE, precision.clone()),
        (&w, MasterStorage::F32),
    )
    .await?;
    let forward = training_logits(gpu, &k, &model, &inputs).await?;
    let mut decoder = Decoder::new(gpu, &k, &model, SHAPE.batch, SHAPE.seq)?;
    let got = decode_all(gpu, &k, &model, &mut decoder, &inputs, SHAPE).await?;
    let want = reference_model::forward_backward(
        &config,
        &layout,
        &w,
        SHAPE,
        &inputs,
        &inputs,
        precision == Recipe::f16(),
    );
    let what = format!(
        "decode {} B={} T={}",
        precision.name(),
        SHAPE.batch,
        SHAPE.seq
    );

    // Against the training forward on the same adapter, every kernel but
    // attention is the same with the same sums, so position 0 (one key, no
    // sum) is bit-identical. Later positions differ by attention's order of
    // sums (decode's 256-key blocks and split p·V against the forward's
    // 16-key tiles: ~5e-8 in o), carried through 2 layers and lm_head.
    // Measured worst |error|/max, lavapipe (both storage modes) /
    // SwiftShader: fp32 7.1e-7 / 8.2e-7, f16 6.5e-7 / 6.4e-7.
    let v = config.vocab as usize;
    for s in 0..SHAPE.batch as usize {
        let row = s * SHAPE.seq as usize * v..(s * SHAPE.seq as usize + 1) * v;
        assert_identical(
            &format!("{what} sequence {s} position 0"),
            &got[row.clone()],
            &forward[row],
        );
    }
    let forward: Vec<f64> = forward.iter().map(|&x| x as f64).collect();
    assert_close_to_scale(&format!("{what} vs training forward"), &got, &forward, 2e-6);
    // Against the CPU model, held as the training forward is (model.rs:
    // measured 7.8e-7 there). Measured worst |error|/max, lavapipe (both
    // storage modes) / SwiftShader: fp32 6.4e-7 / 7.7e-7, f16 8.0e-7 / 9.7e-7.
    assert_close_to_scale(&format!("{what} vs reference"), &got, &want.logits, 5e-6);

    assert_eq!(decoder.position(), SHAPE.seq);
    let past = decoder.step(gpu, &k, &model, &[0, 0]).await;
    assert!(past.is_err(), "a step past max_len must be an error");
    Ok(())
}

pub async fn decoder_matches_forward_fp32(gpu: &Gpu) -> Result<()> {
    matches_forward(gpu, Recipe::fp32()).await
}

pub async fn decoder_matches_forward_f16(gpu: &Gpu) -> Result<()> {
    matches_forward(gpu, Recipe::f16()).await
}

/// Past max_len, a wrong token count, a token ≥ V and another model's
/// config are errors that leave the position alone; reset() reproduces the
/// same logits bit for bit; shapes past max_seq are refused up front.
pub async fn decoder_refuses_past_max_len_and_resets(gpu: &Gpu) -> Result<()> {
    let config = Config::preset("tiny")?;
    let k = Kernels::new(gpu, &[config.head_dim()]).await?;
    let shape = BatchShape { batch: 1, seq: 5 };
    let layout = ParamLayout::new(&config);
    let model = Model::new(
        gpu,
        &k,
        (config.clone(), shape, Recipe::fp32()),
        (&weights(&layout, 98), MasterStorage::F32),
    )
    .await?;
    let inputs = tokens(99, 5, config.vocab);
    let mut d = Decoder::new(gpu, &k, &model, 1, 5)?;
    let first = decode_all(gpu, &k, &model, &mut d, &inputs, shape).await?;
    assert!(
        d.step(gpu, &k, &model, &[1]).await.is_err(),
        "step 6 of max_len 5"
    );
    assert_eq!(d.position(), 5);
    d.reset();
    assert!(
        d.step(gpu, &k, &model, &[1, 2]).await.is_err(),
        "two tokens for one sequence"
    );
    assert!(
        d.step(gpu, &k, &model, &[config.vocab]).await.is_err(),
        "token V"
    );
    let other = Config {
        n_layers: 1,
        ..config.clone()
    };
    let other_model = Model::new(
        gpu,
        &k,
        (other.clone(), shape, Recipe::fp32()),
        (&weights(&ParamLayout::new(&other), 98), MasterStorage::F32),
    )
    .await?;
    assert!(
        d.step(gpu, &k, &other_model, &[1]).await.is_err(),
        "another model's config"
    );
    assert_eq!(d.position(), 0, "refused steps do not advance");
    let again = decode_all(gpu, &k, &model, &mut d, &inputs, shape).await?;
    assert_identical("decode after reset()", &again, &first);

    assert!(
        Decoder::new(gpu, &k, &model, 1, config.max_seq + 1).is_err(),
        "max_len past max_seq"
    );
    assert!(Decoder::new(gpu, &k, &model, 0, 5).is_err(), "batch 0");
    assert!(Decoder::new(gpu, &k, &model, 1, 0).is_err(), "max_len 0");
    Ok(())
}

/// generate feeds the prompts then samples: greedy equals stepping and
/// taking each argmax by hand; every token drawn is streamed, once, in
/// order; a seed reproduces its draws; Break stops early; a generation
/// that cannot fit is refused before anything runs.
pub async fn generate_streams_the_tokens_it_samples(gpu: &Gpu) -> Result<()> {
    let config = Config::preset("tiny")?;
    let k = Kernels::new(gpu, &[config.head_dim()]).await?;
    let layout = ParamLayout::new(&config);
    let model = Model::new(
        gpu,
        &k,
        (
            config.clone(),
            BatchShape { batch: 1, seq: 8 },
            Recipe::fp32(),
        ),
        (&weights(&layout, 100), MasterStorage::F32),
    )
    .await?;
    let prompts = [vec![5u32, 17, 300], vec![42, 0, 7]];
    let mut d = Decoder::new(gpu, &k, &model, 2, 12)?;
    let greedy = Generation {
        max_new: 9,
        sampling: Sampling::GREEDY,
        seed: 0,
    };
    let mut streamed = vec![Vec::new(); 2];
    let mut streamed_probs = Vec::new();
    let got = d
        .generate(gpu, &k, &model, &prompts, &greedy, |next, probs| {
            streamed.iter_mut().zip(next).for_each(|(s, &t)| s.push(t));
            streamed_probs.extend_from_slice(probs);
            ControlFlow::Continue(())
        })
        .await?;
    assert_eq!(got, streamed, "every token is streamed");
    assert_eq!(d.position(), 3 + 9 - 1, "the last token drawn is not fed");

    // by hand: the same steps, argmax of each step's logits
    d.reset();
    let v = config.vocab as usize;
    let mut logits = Vec::new();
    for (&a, &b) in prompts[0].iter().zip(&prompts[1]) {
        logits = d.step(gpu, &k, &model, &[a, b]).await?;
    }
    let mut want = vec![Vec::new(); 2];
    let mut want_probs = Vec::new();
    for i in 0..9 {
        let next: Vec<u32> = logits
            .chunks(v)
            .map(|row| sample(row, &Sampling::GREEDY, &mut SplitMix64(0)))
            .collect::<Result<_>>()?;
        // the model's probability of each drawn token: the softmax of its row
        for (row, &t) in logits.chunks(v).zip(&next) {
            let m = row.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
            let total: f64 = row.iter().map(|&x| (x as f64 - m).exp()).sum();
            want_probs.push((row[t as usize] as f64 - m).exp() / total);
        }
        let argmax = |row: &[f32]| {
            (0..v).fold(0, |best, j| if row[j] > row[best] { j } else { best }) as u32
        };
        assert_eq!(
            next,
            logits.chunks(v).map(argmax).collect::<Vec<_>>(),
            "greedy is the argmax"
        );
        want.iter_mut().zip(&next).for_each(|(w, &t)| w.push(t));
        if i < 8 {
            logits = d.step(gpu, &k, &model, &next).await?;
        }
    }
    assert_eq!(got, want, "greedy generate vs stepping by hand");
    assert_eq!(
        streamed_probs.len(),
        want_probs.len(),
        "a probability per token"
    );
    for (p, w) in streamed_probs.iter().zip(&want_probs) {
        assert!(
            (p - w).abs() <= 1e-12 * w,
            "streamed probability {p} vs {w}"
        );
    }

    let hot = Generation {
        max_new: 9,
        sampling: Sampling {
            temperature: 1.5,
            top_k: 50,
        },
        seed: 7,
    };
    let go_on = |_: &[u32], _: &[f64]| ControlFlow::Continue(());
    let first = d.generate(gpu, &k, &model, &prompts, &hot, go_on).await?;
    let second = d.generate(gpu, &k, &model, &prompts, &hot, go_on).await?;
    assert_eq!(first, second, "the same seed draws the same tokens");
    assert!(first.iter().flatten().all(|&t| t < config.vocab));

    let mut calls = 0;
    let stopped = d
        .generate(gpu, &k, &model, &prompts, &hot, |_, _| {
            calls += 1;
            if calls == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .await?;
    assert_eq!(
        (calls, stopped[0].len(), stopped[1].len()),
        (2, 2, 2),
        "Break after the second token"
    );
    assert_eq!(
        stopped,
        first.iter().map(|s| s[..2].to_vec()).collect::<Vec<_>>(),
        "a stop keeps the draws so far"
    );

    let too_long = Generation {
        max_new: 11,
        ..greedy
    }; // 3 + 11 − 1 = 13 > 12
    assert!(
        d.generate(gpu, &k, &model, &prompts, &too_long, go_on)
            .await
            .is_err()
    );
    assert!(
        d.generate(gpu, &k, &model, &[vec![1u32, 2], vec![3]], &greedy, go_on)
            .await
            .is_err(),
        "prompts of different lengths"
    );
    assert!(
        d.generate(gpu, &k, &model, &[vec![1u32]], &greedy, go_on)
            .await
            .is_err(),
        "one prompt for two sequences"
    );
    Ok(())
}
