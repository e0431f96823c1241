//! Muon: Newton–Schulz on the batched GEMMs (15_muon.wgsl) against
//! reference/muon.rs, and whole optimizer steps against the twin.

use webtrain::kernels::muon::{MuonStep, NsScratch};
use webtrain::kernels::{Infrastructure, Linear, MuonPart, NewtonSchulz};
use webtrain::model::{Config, Recipe};
use webtrain::ops::adam::AdamHyper;
use webtrain::ops::muon::{MuonHyper, update_scale};
use webtrain::optim::{HostState, LrSchedule, OptimConfig, OptimState, OptimizerKind};
use webtrain::reference::muon as reference;
use webtrain::reference::optimizer::{adamw, grad_stats};
use webtrain::train::{TrainConfig, Trainer};
use webtrain::{Gpu, Result};

use super::check::{assert_close, bf16_sr_apart, rng, uniform};
use super::model::SHAPE;

fn f64s(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| v as f64).collect()
}

/// Awkward parts: one row; more rows than columns (iterated transposed),
/// in a batch with gaps between matrices; a wide batch of three; square.
/// Each result against the twin, its singular values in the quintic's
/// band where the input's are ≥ 1 % of its norm; then the update.
pub async fn newton_schulz_matches_reference(gpu: &Gpu) -> Result<()> {
    let (linear, infra, ns) = (
        Linear::new(gpu).await?,
        Infrastructure::new(gpu).await?,
        NewtonSchulz::new(gpu).await?,
    );
    // (rows, cols, count, gap between matrices, first at)
    for (rows, cols, count, gap, at) in [
        (1u32, 37u32, 1u32, 0u32, 0u32),
        (53, 19, 2, 5, 3),
        (12, 40, 3, 64, 16),
        (24, 24, 2, 0, 0),
    ] {
        let part = MuonPart {
            rows,
            cols,
            at,
            stride: rows * cols + gap,
            count,
        };
        let (len, n) = (part.reach() as usize, (rows * cols) as usize);
        let x0 = uniform(&mut rng(900 + rows as u64), len, -1.0, 1.0);
        let w0 = uniform(&mut rng(901 + rows as u64), len, -0.1, 0.1);
        let grams = 4 * part.gram_len();
        let (x, next, gram, square, factors, w) = (
            gpu.upload("x", &x0)?,
            gpu.storage_buffer("next", 4 * len as u64)?,
            gpu.storage_buffer("gram", grams)?,
            gpu.storage_buffer("square", grams)?,
            gpu.storage_buffer("factors", 4 * count as u64)?,
            gpu.upload("w", &w0)?,
        );
        let s = NsScratch {
            x: &x,
            next: &next,
            gram: &gram,
            square: &square,
            factors: &factors,
        };
        let (lr, wd) = (0.02, 0.1);
        let hyper = MuonHyper {
            lr,
            momentum: 0.95,
            weight_decay: wd,
        };
        let step = gpu.uniform("muon_step", &MuonStep::new(&hyper, 1, None, 0));
        let stats = gpu.upload("stats", &[0.0f32, 1.0, 0.0, 0.0])?;
        let mut d = ns.orthogonalize(gpu, (&linear, &infra), &part, &s)?;
        let weights = ((&w).into(), false);
        d.push(ns.apply(gpu, &part, (&step, (&stats).into()), &next, weights)?);
        gpu.run(&d.iter().collect::<Vec<_>>()).await?;
        let (got, got_w) = (
            gpu.read_back::<f32>((&next).into()).await?,
            gpu.read_back::<f32>((&w).into()).await?,
        );
        for l in 0..count as usize {
            let at = at as usize + l * part.stride as usize;
            let what = format!("{rows}×{cols} matrix {l} of {count}");
            let input = f64s(&x0[at..at + n]);
            let want = reference::newton_schulz(&input, rows as usize, cols as usize);
            let o = &got[at..at + n];
            // five iterations of f32 GEMMs against f64: measured worst
            // |diff| 8.3e-7 (24×24; values up to ~0.7) on lavapipe
            assert_close(&format!("{what}: orthogonalized"), o, &want, 2e-6, 1e-5);
            let norm = input.iter().map(|v| v * v).sum::<f64>().sqrt();
            let well_posed = reference::singular_values(&input, rows as usize, cols as usize)
                .iter()
                .all(|s| s / norm >= 0.01);
            if well_posed {
                for sv in reference::singular_values(&f64s(o), rows as usize, cols as usize) {
                    assert!((0.68..=1.14).contains(&sv), "{what}: σ = {sv}");
                }
            }
            let scale = lr * update_scale(rows, cols);
            let want_w: Vec<f64> = (0..n)
                .map(|i| w0[at + i] as f64 * (1.0 - lr * wd) - scale * o[i] as f64)
                .collect();
            assert_close(
                &format!("{what}: weights"),
                &got_w[at..at + n],
                &want_w,
                1e-8,
                1e-6,
            );
        }
        assert!(
            (0..len).all(
                |i| ((i as i64 - at as i64).rem_euclid(part.stride as i64) as usize) < n
                    && i >= at as usize
                    || got_w[i] == w0[i]
            ),
            "{rows}×{cols}: weights outside the matrices untouched"
        );
    }
    Ok(())
}

/// bf16-sr master weights in Muon's update (`muon_apply`): from bf16
/// weights, two steps of a batch with gaps, bound 256 elements into the
/// buffer, against the twin — the update in f32 as the kernel writes it,
/// then `bf16_sr` on the draw of (seed, step, MASTER_SR_STREAM, element of
/// the buffer). Every new weight a bf16 value; the gaps untouched. A
/// compiler may fuse the kernel's w·decay − lr·scale·o into an fma, so a
/// weight whose draw falls between the two results may round apart: those
/// must be one bf16 step apart and at most 1 in 1 000 (measured on
/// lavapipe: 0 of 2 014).
pub async fn muon_apply_bf16_sr_matches_reference(gpu: &Gpu) -> Result<()> {
    use webtrain::gpu::BufferRange;
    use webtrain::ops::adam::{MASTER_SR_STREAM, bf16_bits, bf16_sr, bf16_value};
    use webtrain::reference::formats::random_bits;
    let ns = NewtonSchulz::new(gpu).await?;
    let part = MuonPart {
        rows: 53,
        cols: 19,
        at: 3,
        stride: 53 * 19 + 5,
        count: 2,
    };
    let (len, n, before, seed) = (part.reach() as usize, 53 * 19, 256usize, 0x5eed_u32);
    let mut w0 = uniform(&mut rng(940), before + len, -0.1, 0.1);
    w0.iter_mut().for_each(|x| *x = bf16_value(bf16_bits(*x)));
    // stored as bf16 pairs; the matrices start at an odd element and leave
    // gaps, so words are shared with elements the update must leave alone
    let bits: Vec<u16> = w0.iter().map(|&x| bf16_bits(x)).collect();
    let wb = gpu.upload("w", &bits)?;
    let weights = BufferRange {
        buffer: &wb,
        offset: 2 * before as u64,
        size: 2 * len.next_multiple_of(2) as u64,
    };
    let stats = gpu.upload("stats", &[0.0f32, 1.0, 0.0, 0.0])?;
    let hyper = MuonHyper {
        lr: 0.02,
        momentum: 0.95,
        weight_decay: 0.1,
    };
    let mut w = w0.clone();
    for t in 1..=2u32 {
        let o = uniform(&mut rng(940 + t as u64), len, -1.0, 1.0);
        let ob = gpu.upload("o", &o)?;
        let uniform_step = MuonStep::new(&hyper, t, Some(seed), before as u32);
        let step = gpu.uniform("muon_step", &uniform_step);
        let d = ns.apply(gpu, &part, (&step, (&stats).into()), &ob, (weights, true))?;
        gpu.run(&[&d]).await?;
        let got: Vec<f32> = (gpu.read_back::<u16>((&wb).into()).await?.iter())
            .take(w0.len())
            .map(|&b| bf16_value(b))
            .collect();
        let scale = uniform_step.lr * update_scale(part.rows, part.cols) as f32;
        let mut apart = 0;
        for l in 0..part.count as usize {
            let at = part.at as usize + l * part.stride as usize;
            for (i, &oi) in o.iter().enumerate().skip(at).take(n) {
                let e = before + i;
                let exact = w[e] * uniform_step.decay - scale * oi;
                let r = random_bits(seed, t, MASTER_SR_STREAM, e as u32) & 0xffff;
                let want = bf16_sr(exact, r);
                let y = got[e];
                apart += usize::from(bf16_sr_apart(&format!("t={t} w[{i}]"), y, want));
                w[e] = y; // go on from the kernel's weights
            }
        }
        assert_eq!(got, w, "t={t}: elements outside the matrices untouched");
        if option_env!("WEBTRAIN_MEASURE").is_some() {
            eprintln!("measured Muon bf16-sr t={t}: {apart} of {} apart", 2 * n);
        }
        assert!(apart <= 2 * n / 1000, "t={t}: {apart} of {} apart", 2 * n);
    }
    Ok(())
}

fn muon_config(state: OptimState) -> Result<TrainConfig> {
    Ok(TrainConfig {
        model: Config::preset("tiny")?,
        shape: SHAPE,
        precision: Recipe::fp32(),
        optim: OptimConfig {
            optimizer: OptimizerKind::Muon,
            state,
            schedule: LrSchedule::constant(0.01),
            ..OptimConfig::default()
        },
        seed: 3,
    })
}

/// Three optimizer steps of the tiny model (GQA: q, k and v of other
/// heights; gate and up taller than wide; an untied head after the
/// matrices) on random gradients, clipped: Muon's matrices and momentum,
/// and AdamW's embeddings, head and gains, against the twins.
pub async fn muon_steps_match_reference(gpu: &Gpu) -> Result<()> {
    let c = muon_config(OptimState::Fp32)?;
    let t = Trainer::new(gpu, c.clone()).await?;
    let layout = &t.model.layout;
    let muon = t
        .optimizer
        .muon
        .as_ref()
        .expect("a Muon config builds Muon");
    let w0 = t.model.read_weights(gpu).await?;
    let total = w0.len();
    let (mut w, mut m, mut v) = (f64s(&w0), vec![0.0; total], vec![0.0; total]);
    let o = &c.optim;
    let (adam, muon_hyper) = (
        AdamHyper {
            lr: 0.01,
            ..o.hyper(1)
        },
        MuonHyper {
            lr: 0.01,
            ..o.muon_hyper(1)
        },
    );
    for step in 1..=3u32 {
        let g = uniform(&mut rng(910 + step as u64), total, -0.01, 0.01);
        gpu.queue
            .write_buffer(&t.model.params.grads, 0, bytemuck::cast_slice(&g));
        t.optimizer.write_step(gpu, &t.k, step)?;
        gpu.run(&t.optimizer.dispatches.iter().collect::<Vec<_>>())
            .await?;
        let (_, clip, _) = grad_stats(&g, o.max_grad_norm as f64);
        assert!(clip < 1.0, "the gradients are clipped");
        for part in &muon.parts {
            let n = (part.rows * part.cols) as usize;
            for l in 0..part.count as usize {
                let at = (muon.span.start + part.at as u64) as usize + l * part.stride as usize;
                let r = at..at + n;
                let shape = (part.rows as usize, part.cols as usize);
                reference::muon(
                    &muon_hyper,
                    clip,
                    shape,
                    &mut w[r.clone()],
                    &g[r.clone()],
                    &mut m[r],
                );
            }
        }
        for tensor in layout.tensors.iter().filter(|t| !t.role.is_layer_linear()) {
            let r = tensor.offset as usize..(tensor.offset + tensor.len()) as usize;
            let (w, m, v) = (&mut w[r.clone()], &mut m[r.clone()], &mut v[r.clone()]);
            adamw(&adam, step, tensor.decays, clip, w, &g[r], m, v);
        }
        let got = t.model.read_weights(gpu).await?;
        let HostState::Fp32 { m: got_m, .. } = t.optimizer.read_state(gpu).await? else {
            unreachable!("fp32 state")
        };
        for tensor in &layout.tensors {
            let r = tensor.offset as usize..(tensor.offset + tensor.len()) as usize;
            let what = format!("step {step}: {}", tensor.name);
            // Muon's matrices: the update's error (newton_schulz_matches_reference)
            // times lr·scale (≤ 0.01·0.2·√176) plus the weight's rounding:
            // measured worst 2.6e-8 after 3 steps on lavapipe; AdamW's as
            // adamw_matches_reference
            let atol = if tensor.role.is_layer_linear() {
                1e-7
            } else {
                5e-8
            };
            assert_close(&what, &got[r.clone()], &w[r.clone()], atol, 2.4e-7);
            assert_close(
                &format!("{what} m"),
                &got_m[r.clone()],
                &m[r],
                1.2e-8,
                2.4e-7,
            );
        }
    }
    Ok(())
}

/// Ten steps with low-precision momentum (int8, fp8, bf16, int4, int8-linear) beside fp32 on
/// the same gradients: the weights stay within a stated bound of each other.
pub async fn muon_8bit_momentum_tracks_fp32(gpu: &Gpu) -> Result<()> {
    let fp32 = Trainer::new(gpu, muon_config(OptimState::Fp32)?).await?;
    // measured on lavapipe, apart / moved after moving 8.38: int8 1.45 %,
    // fp8 2.8 % (E4M3 to nearest: 3 bits of significand, no dither), bf16
    // 0.18 %, int4 14.4 % (16 points a block, to nearest), int8-linear
    // 0.68 % (255 evenly spaced levels beat the dynamic tree's for m). Random gradients
    // each step are the hardest case for a coded momentum.
    for (state, bound) in [
        (OptimState::Int8, 0.02),
        (OptimState::Fp8, 0.04),
        (OptimState::Bf16, 0.005),
        (OptimState::Int4, 0.2),
        (OptimState::Int8Linear, 0.02),
    ] {
        let low = Trainer::new(gpu, muon_config(state)?).await?;
        let w0 = low.model.read_weights(gpu).await?;
        for step in 1..=10u32 {
            let g = uniform(&mut rng(930 + step as u64), w0.len(), -0.01, 0.01);
            for t in [&fp32, &low] {
                if state != OptimState::Int8 && std::ptr::eq(t, &fp32) {
                    continue; // fp32's ten steps ran beside int8's
                }
                gpu.queue
                    .write_buffer(&t.model.params.grads, 0, bytemuck::cast_slice(&g));
                t.optimizer.write_step(gpu, &t.k, step)?;
                gpu.run(&t.optimizer.dispatches.iter().collect::<Vec<_>>())
                    .await?;
            }
        }
        let (a, b) = (
            fp32.model.read_weights(gpu).await?,
            low.model.read_weights(gpu).await?,
        );
        let moved: f64 = a
            .iter()
            .zip(&w0)
            .map(|(a, w)| ((a - w) as f64).powi(2))
            .sum::<f64>()
            .sqrt();
        let apart: f64 = a
            .iter()
            .zip(&b)
            .map(|(a, b)| ((a - b) as f64).powi(2))
            .sum::<f64>()
            .sqrt();
        if option_env!("WEBTRAIN_MEASURE").is_some() {
            eprintln!("measured {state:?} momentum: {apart:e} apart after moving {moved:e}");
        }
        assert!(moved > 0.1, "the weights moved: {moved}");
        assert!(
            apart / moved < bound,
            "{state:?} momentum: {apart} apart after moving {moved}"
        );
    }
    Ok(())
}
