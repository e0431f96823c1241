//! 12_optimizer.wgsl against reference/optimizer.
//!
//! One file per kernel family, as kernels.rs lists them, over 500 lines:
//! the family's tests share their fixtures.

use half::f16;
use webtrain::kernels::loss::LossTotals;
use webtrain::kernels::optimizer::partials_for;
use webtrain::kernels::{Adam8bitBuffers, AdamBuffers, AdamHyper, GradStats, Optimizer};
use webtrain::optim::ByteCode;
use webtrain::optim::{LossScale, LossScaling};
use webtrain::reference::optimizer as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_close, bf16_sr_apart, rng, uniform};

const HYPER: AdamHyper = AdamHyper {
    lr: 3e-3,
    beta1: 0.9,
    beta2: 0.95,
    eps: 1e-8,
    weight_decay: 0.1,
};

/// Gradients with some NaN and ±Inf among them.
fn gradients(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut g = uniform(&mut rng(seed), n, -scale, scale);
    for (k, i) in [(0, 5), (1, n / 3), (2, n - 1)] {
        g[i] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY][k];
    }
    g
}

/// A `LossTotals` {sum, mean, counted, out_of_range} with this mean.
fn loss_totals(gpu: &Gpu, mean: f32) -> Result<wgpu::Buffer> {
    gpu.upload(
        "loss",
        &[LossTotals {
            sum: mean * 8.0,
            mean,
            counted: 8,
            out_of_range: 0,
        }],
    )
}

/// The `GradStats` finalize would write for a step: clipped by
/// `clip_scale`, or (`skip`) a step to skip, its norm NaN.
fn step_stats(gpu: &Gpu, clip_scale: f32, skip: bool) -> Result<wgpu::Buffer> {
    gpu.upload(
        "stats",
        &[GradStats {
            norm: if skip { f32::NAN } else { 0.0 },
            clip_scale,
            nonfinite: 0,
            skip: skip as u32,
        }],
    )
}

/// The moments an update reads and writes: f32 or bf16, or 8-bit blocks.
enum Moments<'a> {
    Plain(AdamBuffers<'a>),
    Blocks(Adam8bitBuffers<'a>),
}

/// Runs the update of `n` parameters at the step in `step`.
async fn update(
    gpu: &Gpu,
    (k, step): (&Optimizer, &wgpu::Buffer),
    (n, decays): (usize, bool),
    stats: &wgpu::Buffer,
    moments: Moments<'_>,
) -> Result<()> {
    let (n, stats) = (n as u32, stats.into());
    let dispatch = match &moments {
        Moments::Plain(b) => k.update(gpu, &HYPER, decays, n, step, stats, b)?,
        Moments::Blocks(b) => k.update_8bit(gpu, &HYPER, decays, n, step, stats, b)?,
    };
    gpu.run(&[&dispatch]).await
}

/// A skipped step's set-up: the kernels, step 4 written, N_SKIPPED
/// weights `w` (in `wb`) and gradients (in `gb`) from seeds, an f16 mirror
/// of 1.0s and the stats of a skipped step.
struct Skipped {
    k: Optimizer,
    step: wgpu::Buffer,
    w: Vec<f32>,
    wb: wgpu::Buffer,
    gb: wgpu::Buffer,
    mirror: wgpu::Buffer,
    stats: wgpu::Buffer,
}

const N_SKIPPED: usize = 1001;

impl Skipped {
    async fn new(gpu: &Gpu, (w_seed, g_seed): (u64, u64)) -> Result<Skipped> {
        let k = Optimizer::new(gpu).await?;
        let step = k.step_buffer(gpu);
        k.write_step(gpu, &step, &HYPER, 4)?;
        let n = N_SKIPPED;
        let w = uniform(&mut rng(w_seed), n, -0.5, 0.5);
        let (wb, gb) = (
            gpu.upload("w", &w)?,
            gpu.upload("g", &gradients(g_seed, n, 0.1))?,
        );
        let mirror = gpu.upload("mirror", &vec![0x3c00_3c00u32; n.div_ceil(2)])?; // halves of 1.0
        let stats = step_stats(gpu, 1.0, true)?;
        Ok(Skipped {
            k,
            step,
            w,
            wb,
            gb,
            mirror,
            stats,
        })
    }

    /// The skipped update with `moments`.
    async fn update(&self, gpu: &Gpu, moments: Moments<'_>) -> Result<()> {
        let k = (&self.k, &self.step);
        update(gpu, k, (N_SKIPPED, true), &self.stats, moments).await
    }

    /// The weights and mirror untouched, the gradients zeroed.
    async fn check(&self, gpu: &Gpu) -> Result<()> {
        let got = gpu.read_back::<f32>((&self.wb).into()).await?;
        super::check::assert_identical("weights", &got, &self.w);
        assert!(
            gpu.read_back::<u32>((&self.mirror).into())
                .await?
                .iter()
                .all(|&h| h == 0x3c00_3c00),
            "mirror untouched"
        );
        assert_zeroed(gpu, &self.gb, "gradients zeroed").await
    }
}

async fn assert_zeroed(gpu: &Gpu, grads: &wgpu::Buffer, what: &str) -> Result<()> {
    assert!(
        gpu.read_back::<f32>(grads.into())
            .await?
            .iter()
            .all(|&x| x == 0.0),
        "{what}"
    );
    Ok(())
}

async fn stats_of(
    gpu: &Gpu,
    k: &Optimizer,
    blocks: &[&wgpu::Buffer],
    sizes: &[u32],
    max_norm: f32,
) -> Result<GradStats> {
    stats_with_loss(gpu, k, blocks, sizes, max_norm, 2.5, None).await
}

/// finalize's `GradStats`; with `scaling`, the gradients carry its
/// state's scale and the state buffer is updated in place.
async fn stats_with_loss(
    gpu: &Gpu,
    k: &Optimizer,
    blocks: &[&wgpu::Buffer],
    sizes: &[u32],
    max_norm: f32,
    loss: f32,
    scaling: Option<(&LossScaling, &wgpu::Buffer)>,
) -> Result<GradStats> {
    let total: u64 = sizes.iter().map(|&n| partials_for(n as u64)).sum();
    let partials = gpu.storage_buffer("partials", 8 * total)?;
    let stats = gpu.storage_buffer("stats", 16)?;
    let loss = loss_totals(gpu, loss)?;
    let mut dispatches = Vec::new();
    let mut offset = 0;
    for (g, &n) in blocks.iter().zip(sizes) {
        dispatches.push(k.reduce_norm_sq(gpu, (*g).into(), n, (&partials).into(), offset)?);
        offset += partials_for(n as u64) as u32;
    }
    dispatches.push(k.finalize(
        gpu,
        (&partials).into(),
        total as u32,
        max_norm,
        (&loss).into(),
        (&stats).into(),
        scaling.map(|(s, b)| (s, b.into())),
    )?);
    gpu.run(&dispatches.iter().collect::<Vec<_>>()).await?;
    Ok(gpu.read_back::<GradStats>((&stats).into()).await?[0])
}

/// Two blocks (as decay and no-decay) reduced into one norm; clip on and off.
pub async fn grad_stats_match_reference(gpu: &Gpu) -> Result<()> {
    let k = Optimizer::new(gpu).await?;
    let (a, b) = (gradients(70, 1_000_003, 0.01), gradients(71, 4_097, 1.0));
    let (ab, bb) = (gpu.upload("a", &a)?, gpu.upload("b", &b)?);
    let all: Vec<f32> = a.iter().chain(&b).copied().collect();
    for max_norm in [0.5f32, 1e9, 0.0] {
        let s = stats_of(
            gpu,
            &k,
            &[&ab, &bb],
            &[a.len() as u32, b.len() as u32],
            max_norm,
        )
        .await?;
        let (norm, clip, bad) = reference::grad_stats(&all, max_norm as f64);
        // fixed-order f32 sums of ~1e6 positive terms (16 per invocation, then
        // trees): measured relative error of the norm 3.8e-9 on lavapipe,
        // 1.1e-8 on SwiftShader
        assert_close("grad norm", &[s.norm], &[norm], 0.0, 2e-6);
        assert_close("clip scale", &[s.clip_scale], &[clip], 0.0, 2e-6);
        assert_eq!(s.nonfinite, bad);
        assert_eq!(s.skip, 0, "a finite loss and norm never skip");
    }
    for loss in [f32::NAN, f32::INFINITY] {
        let s = stats_with_loss(
            gpu,
            &k,
            &[&ab, &bb],
            &[a.len() as u32, b.len() as u32],
            0.5,
            loss,
            None,
        )
        .await?;
        assert_eq!(s.skip, 1, "a loss of {loss} must skip the step");
    }
    let huge = gpu.upload("huge", &vec![1e30f32; 1000])?;
    assert_eq!(
        stats_of(gpu, &k, &[&huge], &[1000], 1.0).await?.skip,
        1,
        "an overflowing Σg² must skip the step"
    );
    let again = stats_of(gpu, &k, &[&ab, &bb], &[a.len() as u32, b.len() as u32], 0.5).await?;
    let once = stats_of(gpu, &k, &[&ab, &bb], &[a.len() as u32, b.len() as u32], 0.5).await?;
    assert_eq!(
        again.norm.to_bits(),
        once.norm.to_bits(),
        "the norm must be bit-identical run to run"
    );
    Ok(())
}

/// With loss scaling, on gradients carrying the scale: the norm and AdamW's
/// factor are the unscaled run's to the bit (the factor divided by the
/// scale), as the twin says; a non-finite gradient skips the step and backs
/// the scale off; the scale grows after `growth_interval` clean steps, and
/// stays within 2^127.
pub async fn loss_scaling_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Optimizer::new(gpu).await?;
    let s = LossScaling {
        growth_interval: 3,
        ..LossScaling::default()
    };
    let clean = uniform(&mut rng(72), 40_000, -0.01, 0.01);
    let n = clean.len() as u32;
    let plain = gpu.upload("g", &clean)?;
    let top = 2f32.powi(126);
    let cases = [
        // (gradients, scale, clean steps so far): grows, stays, skips, grows at most to 2^126
        (clean.clone(), 1024.0, 2),
        (clean.clone(), 1024.0, 0),
        (gradients(73, 40_000, 0.01), 1024.0, 2),
        (clean.iter().map(|x| x * 2f32.powi(-64)).collect(), top, 2),
    ];
    let runs = [0.5f32, 0.0].map(|m| cases.iter().map(move |c| (m, c)));
    for (max_norm, (g, scale, count)) in runs.into_iter().flatten() {
        let scaled: Vec<f32> = g.iter().map(|x| x * scale).collect();
        let before = LossScale {
            scale: *scale,
            clean: *count,
            skipped: 5,
            changes: 1,
        };
        let state = gpu.upload("loss_scale", &[before])?;
        let grads = gpu.upload("g", &scaled)?;
        let got =
            stats_with_loss(gpu, &k, &[&grads], &[n], max_norm, 2.5, Some((&s, &state))).await?;
        let after = gpu.read_back::<LossScale>((&state).into()).await?[0];
        let ((norm, factor, bad, skip), next) =
            reference::scaled_grad_stats(&scaled, max_norm as f64, 2.5, &s, before);
        let what = format!("scale {scale}, {count} clean, max_norm {max_norm}");
        assert_eq!((got.skip != 0, got.nonfinite), (skip, bad), "{what}");
        assert_eq!(after, next, "{what}: the state as the twin updates it");
        if skip {
            continue;
        }
        assert_close("unscaled norm", &[got.norm], &[norm], 0.0, 2e-6);
        assert_close("clip / scale", &[got.clip_scale], &[factor], 0.0, 2e-6);
        if *scale == top {
            continue; // its unscaled gradients' squares are subnormal
        }
        let unscaled = stats_of(gpu, &k, &[&plain], &[n], max_norm).await?;
        assert_eq!(
            got.norm.to_bits(),
            unscaled.norm.to_bits(),
            "{what}: the unscaled run's norm"
        );
        assert_eq!(
            got.clip_scale * scale,
            unscaled.clip_scale,
            "{what}: the unscaled clip"
        );
    }
    let s = LossScaling { init: 3.0, ..s };
    assert!(
        s.validate().is_err(),
        "a scale that is not a power of two is refused"
    );
    Ok(())
}

/// Three steps (bias correction changes each step) with clipping, decay on
/// and off, non-finite gradients; gradients zeroed; the f16 mirror equals
/// the cast of the new master weights, bit for bit.
pub async fn adamw_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Optimizer::new(gpu).await?;
    let step = k.step_buffer(gpu);
    for (n, decays, with_mirror) in [
        (100_003usize, true, false),
        (4_097, false, true),
        (1, true, true),
    ] {
        let w0 = uniform(&mut rng(72), n, -0.5, 0.5);
        let (wb, mb, vb) = (
            gpu.upload("w", &w0)?,
            gpu.storage_buffer("m", 4 * n as u64)?,
            gpu.storage_buffer("v", 4 * n as u64)?,
        );
        let mirror = gpu.storage_buffer("mirror", webtrain::gpu::f16_bytes(n as u64))?;
        let (mut w, mut m, mut v) = (
            w0.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            vec![0.0; n],
            vec![0.0; n],
        );
        for t in 1..=3u32 {
            let g = if n > 10 {
                gradients(73 + t as u64, n, 0.05)
            } else {
                vec![0.02]
            };
            let gb = gpu.upload("g", &g)?;
            let stats = step_stats(gpu, 0.5, false)?;
            k.write_step(gpu, &step, &HYPER, t)?;
            let buffers = AdamBuffers {
                weights: (&wb).into(),
                grads: (&gb).into(),
                moment1: (&mb).into(),
                moment2: (&vb).into(),
                bf16: false,
                mirror: with_mirror.then(|| (&mirror).into()),
                sr_seed: None,
            };
            let moments = Moments::Plain(buffers);
            update(gpu, (&k, &step), (n, decays), &stats, moments).await?;
            reference::adamw(&HYPER, t, decays, 0.5, &mut w, &g, &mut m, &mut v);
            let got: Vec<f32> = gpu.read_back((&wb).into()).await?;
            // m and v mix terms up to |clip·g| = 0.025 and its square; a sum
            // near 0 keeps the few-ulp error of those terms: atol is 4 ulp
            // of 0.025 (1.2e-8) and of 6.3e-4 (3e-10). w rounds twice per
            // step (2 ulp of |w|) plus the update's own error (~lr·1e-6).
            // Measured worst after 3 steps (|w| <= 0.5): w 1.4e-7, m 1.9e-9,
            // v 2.6e-11 on lavapipe; 1.25e-7, 2.0e-9, 2.6e-11 on SwiftShader.
            assert_close(
                &format!("adamw n={n} t={t} weights"),
                &got,
                &w,
                5e-8,
                2.4e-7,
            );
            assert_close(
                &format!("adamw n={n} t={t} m"),
                &gpu.read_back::<f32>((&mb).into()).await?,
                &m,
                1.2e-8,
                2.4e-7,
            );
            assert_close(
                &format!("adamw n={n} t={t} v"),
                &gpu.read_back::<f32>((&vb).into()).await?,
                &v,
                3e-10,
                2.4e-7,
            );
            zeroed_and_mirrored(gpu, &gb, with_mirror.then_some(&mirror), &got, t).await?;
        }
    }
    Ok(())
}

/// The update zeroed the gradients and, with a mirror, wrote the cast of
/// the new master weights `got` into it, bit for bit.
async fn zeroed_and_mirrored(
    gpu: &Gpu,
    grads: &wgpu::Buffer,
    mirror: Option<&wgpu::Buffer>,
    got: &[f32],
    t: u32,
) -> Result<()> {
    assert_zeroed(gpu, grads, "gradients must be zeroed").await?;
    if let Some(mirror) = mirror {
        let halves: Vec<f16> = gpu.read_back(mirror.into()).await?;
        let cast: Vec<u16> = got
            .iter()
            .map(|&x| webtrain::reference::cast::f32_to_f16(x).to_bits())
            .collect();
        assert_eq!(
            halves[..got.len()]
                .iter()
                .map(|h| h.to_bits())
                .collect::<Vec<_>>(),
            cast,
            "mirror of step {t}"
        );
    }
    Ok(())
}

/// A skipped step (the stats say so) leaves weights, moments and the f16
/// mirror untouched and still zeroes the gradients.
pub async fn adamw_skipped_step_changes_nothing_but_gradients(gpu: &Gpu) -> Result<()> {
    let skipped = Skipped::new(gpu, (80, 83)).await?;
    let n = N_SKIPPED;
    let (m, v) = (
        uniform(&mut rng(81), n, -0.1, 0.1),
        uniform(&mut rng(82), n, 0.0, 0.1),
    );
    let (mb, vb) = (gpu.upload("m", &m)?, gpu.upload("v", &v)?);
    let moments = Moments::Plain(AdamBuffers {
        bf16: false,
        mirror: Some((&skipped.mirror).into()),
        weights: (&skipped.wb).into(),
        grads: (&skipped.gb).into(),
        moment1: (&mb).into(),
        moment2: (&vb).into(),
        sr_seed: None,
    });
    skipped.update(gpu, moments).await?;
    super::check::assert_identical("m", &gpu.read_back::<f32>((&mb).into()).await?, &m);
    super::check::assert_identical("v", &gpu.read_back::<f32>((&vb).into()).await?, &v);
    skipped.check(gpu).await
}

/// Gradients whose magnitudes span four decades within every block of 256
/// (so the dynamic codes' lower decades are used), NaN and ±Inf among them.
fn spread_gradients(seed: u64, n: usize) -> Vec<f32> {
    let decades = uniform(&mut rng(seed + 1000), n, -4.0, 0.0);
    gradients(seed, n, 0.05)
        .iter()
        .zip(decades)
        .map(|(&g, d)| g * 10f32.powf(d))
        .collect()
}

/// Asserts identical packed codes, naming the first element that differs.
fn assert_codes(what: &str, got: &[u32], want: &[u32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bytes = |w: &[u32]| w.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (got, want) = (bytes(got), bytes(want));
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i] != want[i]).collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{what}: element {i}: byte {} want {}; {} of {} differ",
            got[i],
            want[i],
            bad.len(),
            got.len()
        );
    }
}

/// 8-bit AdamW (block-wise int8 codes, and TorchAO's E4M3): three steps
/// with clipping, decay on and off, non-finite gradients, partial words and
/// blocks, with and without the f16 mirror. The moments are computed in f32
/// by the kernel's own formulas on both sides, so the codes and the block
/// scales must be the reference's exactly; gradients zeroed; the mirror
/// equals the cast of the new master weights, bit for bit.
pub async fn adamw_8bit_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Optimizer::new(gpu).await?;
    let step = k.step_buffer(gpu);
    for code in [
        ByteCode::Dynamic,
        ByteCode::E4m3,
        ByteCode::Linear,
        ByteCode::Int4,
    ] {
        adamw_8bit_code_matches_reference(gpu, (&k, &step), code).await?;
    }
    Ok(())
}

async fn adamw_8bit_code_matches_reference(
    gpu: &Gpu,
    (k, step): (&Optimizer, &wgpu::Buffer),
    code: ByteCode,
) -> Result<()> {
    for (n, decays, with_mirror, clip) in [
        (100_003usize, true, false, 0.5f32),
        (4_097, false, true, 1.0),
        (1, true, true, 0.5),
    ] {
        let w0 = uniform(&mut rng(90), n, -0.5, 0.5);
        let wb = gpu.upload("w", &w0)?;
        let (state_bytes, scale_bytes) = (code.code_bytes(n as u64), code.scale_bytes(n as u64));
        let (mq, vq) = (
            gpu.storage_buffer("m codes", state_bytes)?,
            gpu.storage_buffer("v codes", state_bytes)?,
        );
        let (ms, vs) = (
            gpu.storage_buffer("m scales", scale_bytes)?,
            gpu.storage_buffer("v scales", scale_bytes)?,
        );
        let mirror = gpu.storage_buffer("mirror", webtrain::gpu::f16_bytes(n as u64))?;
        let mut w: Vec<f64> = w0.iter().map(|&x| x as f64).collect();
        let mut state = reference::Adam8bitState::new(
            n,
            match code {
                ByteCode::Dynamic => {
                    reference::StateCode::Table(Box::new(reference::Int8Maps::dynamic()))
                }
                ByteCode::E4m3 => reference::StateCode::E4m3,
                ByteCode::Linear => reference::StateCode::linear(),
                ByteCode::Int4 => reference::StateCode::Int4,
            },
        );
        for t in 1..=3u32 {
            let g = if n > 10 {
                spread_gradients(91 + t as u64, n)
            } else {
                vec![0.02]
            };
            let gb = gpu.upload("g", &g)?;
            let stats = step_stats(gpu, clip, false)?;
            k.write_step(gpu, step, &HYPER, t)?;
            let buffers = Adam8bitBuffers {
                code,
                weights: (&wb).into(),
                grads: (&gb).into(),
                m_codes: (&mq).into(),
                v_codes: (&vq).into(),
                m_scales: (&ms).into(),
                v_scales: (&vs).into(),
                mirror: with_mirror.then(|| (&mirror).into()),
                first: 0,
                sr_seed: None,
            };
            let moments = Moments::Blocks(buffers);
            update(gpu, (k, step), (n, decays), &stats, moments).await?;
            reference::adamw_8bit(&HYPER, t, decays, clip, &mut w, &g, &mut state);
            let what = |x: &str| format!("adamw_8bit {code:?} n={n} t={t} {x}");
            assert_codes(
                &what("m codes"),
                &gpu.read_back::<u32>((&mq).into()).await?,
                &state.m,
            );
            assert_codes(
                &what("v codes"),
                &gpu.read_back::<u32>((&vq).into()).await?,
                &state.v,
            );
            // A scale is its block's largest new moment. A compiler may fuse
            // the products and sums of v = β2·v + (1−β2)·g·g (g = raw·clip)
            // into fewer roundings, as WGSL allows. Measured: identical on
            // lavapipe and SwiftShader; on NVIDIA's Vulkan driver 154 of 391
            // v scales differ, by at most 2 ulp, with every code and every m
            // scale identical.
            let two_ulp = 2f64.powi(-22);
            super::check::assert_identical(
                &what("m scales"),
                &gpu.read_back::<f32>((&ms).into()).await?,
                &state.m_scales,
            );
            assert_close(
                &what("v scales"),
                &gpu.read_back::<f32>((&vs).into()).await?,
                &state.v_scales,
                0.0,
                two_ulp,
            );
            // the same m and v as the reference: only the update's f32
            // evaluation (sqrt, two divisions: not correctly rounded in
            // WGSL) and the master's rounding differ, as for adamw_update.
            // Measured worst after 3 steps (|w| <= 0.5): 9.6e-8 on lavapipe,
            // 1.3e-7 on SwiftShader; codes and scales identical on both.
            let got: Vec<f32> = gpu.read_back((&wb).into()).await?;
            assert_close(&what("weights"), &got, &w, 5e-8, 2.4e-7);
            zeroed_and_mirrored(gpu, &gb, with_mirror.then_some(&mirror), &got, t).await?;
        }
    }
    Ok(())
}

/// AdamW with bf16 moments: three steps as `adamw_matches_reference`,
/// odd lengths (a last word half used: its other half left alone), with
/// and without the mirror. The moments are computed in f32 by the same
/// formulas on both sides, so their bf16 bits must be the reference's
/// exactly (a compiler that fuses v's products, as NVIDIA's does for the
/// int8 scales below, could move a v across a rounding boundary: not
/// measured there).
pub async fn adamw_bf16_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Optimizer::new(gpu).await?;
    let step = k.step_buffer(gpu);
    for (n, decays, with_mirror) in [
        (100_003usize, true, false),
        (4_097, false, true),
        (1, true, true),
    ] {
        let w0 = uniform(&mut rng(74), n, -0.5, 0.5);
        // the half past n: a value the kernel must not touch
        let mut padded = vec![0u16; n.next_multiple_of(2)];
        padded[n..].fill(0x1234);
        let (wb, mb, vb) = (
            gpu.upload("w", &w0)?,
            gpu.upload("m", bytemuck::cast_slice::<u16, u32>(&padded))?,
            gpu.upload("v", bytemuck::cast_slice::<u16, u32>(&padded))?,
        );
        let mirror = gpu.storage_buffer("mirror", webtrain::gpu::f16_bytes(n as u64))?;
        let mut w: Vec<f64> = w0.iter().map(|&x| x as f64).collect();
        let (mut m, mut v) = (padded.clone(), padded.clone());
        for t in 1..=3u32 {
            let g = if n > 10 {
                spread_gradients(75 + t as u64, n)
            } else {
                vec![0.02]
            };
            let gb = gpu.upload("g", &g)?;
            let stats = step_stats(gpu, 0.5, false)?;
            k.write_step(gpu, &step, &HYPER, t)?;
            let buffers = AdamBuffers {
                weights: (&wb).into(),
                grads: (&gb).into(),
                moment1: (&mb).into(),
                moment2: (&vb).into(),
                bf16: true,
                mirror: with_mirror.then(|| (&mirror).into()),
                sr_seed: None,
            };
            update(
                gpu,
                (&k, &step),
                (n, decays),
                &stats,
                Moments::Plain(buffers),
            )
            .await?;
            let (mn, vn) = (&mut m[..n], &mut v[..n]);
            reference::adamw_bf16(&HYPER, t, decays, 0.5, &mut w, &g, mn, vn);
            let what = |x: &str| format!("adamw_bf16 n={n} t={t} {x}");
            for (name, buffer, want) in [("m", &mb, &m), ("v", &vb, &v)] {
                let got: Vec<u32> = gpu.read_back(buffer.into()).await?;
                let got: &[u16] = bytemuck::cast_slice(&got);
                let bad = (0..want.len()).find(|&i| got[i] != want[i]);
                assert!(bad.is_none(), "{}: element {bad:?} differs", what(name));
            }
            // as adamw_8bit_matches_reference: the update's f32 evaluation
            // and the master's rounding only
            let got: Vec<f32> = gpu.read_back((&wb).into()).await?;
            assert_close(&what("weights"), &got, &w, 5e-8, 2.4e-7);
            zeroed_and_mirrored(gpu, &gb, with_mirror.then_some(&mirror), &got, t).await?;
        }
    }
    Ok(())
}

/// A skipped step leaves the weights, the 8-bit moments, their scales and
/// the mirror untouched and still zeroes the gradients.
pub async fn adamw_8bit_skipped_step_changes_nothing_but_gradients(gpu: &Gpu) -> Result<()> {
    let skipped = Skipped::new(gpu, (95, 100)).await?;
    let n = N_SKIPPED;
    let codes = |seed| {
        uniform(&mut rng(seed), n.div_ceil(4), 0.0, 4.0e9)
            .iter()
            .map(|&x| x as u32)
            .collect::<Vec<u32>>()
    };
    let (m, v) = (codes(96), codes(97));
    let (m_scales, v_scales) = (
        uniform(&mut rng(98), n.div_ceil(256), 0.01, 0.1),
        uniform(&mut rng(99), n.div_ceil(256), 1e-4, 1e-3),
    );
    let (mq, vq, ms, vs) = (
        gpu.upload("m", &m)?,
        gpu.upload("v", &v)?,
        gpu.upload("ms", &m_scales)?,
        gpu.upload("vs", &v_scales)?,
    );
    let moments = Moments::Blocks(Adam8bitBuffers {
        code: ByteCode::Dynamic,
        mirror: Some((&skipped.mirror).into()),
        first: 0,
        weights: (&skipped.wb).into(),
        grads: (&skipped.gb).into(),
        m_codes: (&mq).into(),
        v_codes: (&vq).into(),
        m_scales: (&ms).into(),
        v_scales: (&vs).into(),
        sr_seed: None,
    });
    skipped.update(gpu, moments).await?;
    assert_codes("m codes", &gpu.read_back::<u32>((&mq).into()).await?, &m);
    assert_codes("v codes", &gpu.read_back::<u32>((&vq).into()).await?, &v);
    super::check::assert_identical(
        "m scales",
        &gpu.read_back::<f32>((&ms).into()).await?,
        &m_scales,
    );
    super::check::assert_identical(
        "v scales",
        &gpu.read_back::<f32>((&vs).into()).await?,
        &v_scales,
    );
    skipped.check(gpu).await
}

/// Muon's momentum step in each coded state (bf16, fp8, int8, int8-linear,
/// int4) against a
/// twin written here from the kernel's formulas (m' = m + (1 − μ)(g − m),
/// Nesterov g + μ(m' − g), g = raw·clip, non-finite → 0) and the states'
/// codes (`ops::adam`): two steps over a partial last word and block, the
/// Nesterov directions and the coded momentum bit for bit.
pub async fn muon_momentum_matches_reference(gpu: &Gpu) -> Result<()> {
    use webtrain::kernels::optimizer::{MuonMomentum, bf16_state_bytes};
    use webtrain::ops::adam::{
        Fp8Code, Int4Code, Int8Maps, LinearCode, bf16_bits, bf16_value, dither,
    };
    let k = Optimizer::new(gpu).await?;
    let step = k.step_buffer(gpu);
    let (n, mu, clip) = (4_097usize, 0.95f32, 0.5f32);
    let (maps, m4) = (Int8Maps::dynamic(), Int4Code::maps()[0]);
    for state in [
        None,
        Some(ByteCode::E4m3),
        Some(ByteCode::Dynamic),
        Some(ByteCode::Linear),
        Some(ByteCode::Int4),
    ] {
        let (codes_bytes, scale_bytes) = match state {
            None => (bf16_state_bytes(n as u64), 4),
            Some(code) => (code.code_bytes(n as u64), code.scale_bytes(n as u64)),
        };
        let (mb, sb) = (
            gpu.storage_buffer("momentum", codes_bytes)?,
            gpu.storage_buffer("scales", scale_bytes)?,
        );
        let nb = gpu.storage_buffer("nesterov", 4 * n as u64)?;
        let mut m = vec![0f32; n]; // the twin's momentum, as read back each step
        let (mut words, mut scales) = (
            vec![0u32; codes_bytes as usize / 4],
            vec![0f32; scale_bytes as usize / 4],
        );
        for t in 1..=2u32 {
            let g = spread_gradients(80 + t as u64, n);
            let gb = gpu.upload("g", &g)?;
            let stats = step_stats(gpu, clip, false)?;
            k.write_step(gpu, &step, &HYPER, t)?;
            let momentum = match state {
                None => MuonMomentum::Bf16((&mb).into()),
                Some(code) => MuonMomentum::Bytes {
                    code,
                    codes: (&mb).into(),
                    scales: (&sb).into(),
                    first: 0,
                },
            };
            let d = k.muon_momentum(
                gpu,
                mu as f64,
                n as u32,
                (&step, (&stats).into()),
                (&gb).into(),
                momentum,
                (&nb).into(),
            )?;
            gpu.run(&[&d]).await?;
            // the twin
            let mut nesterov = vec![0f32; n];
            for i in 0..n {
                let gi = if g[i].is_finite() { g[i] * clip } else { 0.0 };
                m[i] += (1.0 - mu) * (gi - m[i]);
                nesterov[i] = gi + mu * (m[i] - gi);
            }
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
            match state {
                None => {
                    let halves: &mut [u16] = bytemuck::cast_slice_mut(bytes);
                    for i in 0..n {
                        halves[i] = bf16_bits(m[i]);
                        m[i] = bf16_value(halves[i]);
                    }
                }
                Some(code) => {
                    // the last word's codes past n hold the code of 0, as the kernel writes them
                    m.resize(n.next_multiple_of(code.per_word() as usize), 0.0);
                    for (b, block) in m.chunks_mut(code.block()).enumerate() {
                        let top = block.iter().fold(0f32, |a, x| a.max(x.abs()));
                        scales[b] = match code {
                            ByteCode::E4m3 => Fp8Code::scale(top),
                            ByteCode::Int4 => Int4Code::scale(top),
                            ByteCode::Dynamic | ByteCode::Linear => top,
                        };
                        for (j, x) in block.iter_mut().enumerate() {
                            let i = b * code.block() + j;
                            let s = scales[b];
                            let c = match code {
                                ByteCode::E4m3 => Fp8Code::code(*x, s),
                                ByteCode::Int4 => Int4Code::code(*x, s, &m4),
                                ByteCode::Linear => LinearCode::code(*x, s),
                                ByteCode::Dynamic => maps.m.quantize(*x, s, dither(i as u32, t, 0)),
                            };
                            code.set_code(bytes, i, c);
                            *x = match code {
                                ByteCode::E4m3 => Fp8Code::value(c, s),
                                ByteCode::Int4 => Int4Code::value(c, s, &m4),
                                ByteCode::Linear => LinearCode::value(c, s),
                                ByteCode::Dynamic => maps.m.dequantize(c, s),
                            };
                        }
                    }
                    m.truncate(n);
                }
            }
            let what = |x: &str| format!("muon_momentum {state:?} t={t} {x}");
            super::check::assert_identical(
                &what("nesterov"),
                &gpu.read_back::<f32>((&nb).into()).await?,
                &nesterov,
            );
            assert_codes(
                &what("momentum"),
                &gpu.read_back::<u32>((&mb).into()).await?,
                &words,
            );
            if state.is_some() {
                super::check::assert_identical(
                    &what("scales"),
                    &gpu.read_back::<f32>((&sb).into()).await?,
                    &scales,
                );
            }
            assert_zeroed(gpu, &gb, &what("gradients zeroed")).await?;
        }
    }
    Ok(())
}

/// bf16-sr master weights (TorchAO's `_fp32_to_bf16_sr`), stored as bf16
/// pairs (the plain kernel's neighbouring invocations share each word),
/// through the f32 and the block-wise (int4) launchers, bound 256 elements
/// into their buffer (the random bits are drawn by element of the whole buffer): two
/// steps from bf16 weights against the twin's update and `bf16_sr` with
/// the same bits. Every new weight is a bf16 value; the twin's f64 update
/// and the kernel's f32 one differ by a few f32 ulps, so where the 16
/// random bits fall within those of the dropped fraction the two round
/// apart: those (measured on lavapipe, both storage modes: 1, 0, 1, 0 of
/// 20 000 over the four steps; SwiftShader passes, not counted) must be one
/// bf16 step apart, and at most 1 in 1 000.
pub async fn adamw_bf16_sr_master_matches_reference(gpu: &Gpu) -> Result<()> {
    use webtrain::ops::adam::{MASTER_SR_STREAM, bf16_bits, bf16_sr, bf16_value};
    use webtrain::reference::formats::random_bits;
    let k = Optimizer::new(gpu).await?;
    let step = k.step_buffer(gpu);
    let (n, at, seed) = (20_000usize, 256usize, 0x5eed_u32);
    for code in [None, Some(ByteCode::Int4)] {
        let mut w0 = uniform(&mut rng(76), n + at, -0.5, 0.5);
        w0.iter_mut().for_each(|x| *x = bf16_value(bf16_bits(*x)));
        let bits: Vec<u16> = w0.iter().map(|&x| bf16_bits(x)).collect();
        let wb = gpu.upload("w", &bits)?;
        let weights = webtrain::gpu::BufferRange {
            buffer: &wb,
            offset: 2 * at as u64,
            size: 2 * n as u64,
        };
        let bytes = |b: u64| gpu.storage_buffer("state", b);
        let (mb, vb) = match code {
            None => (bytes(4 * n as u64)?, bytes(4 * n as u64)?),
            Some(c) => (
                bytes(c.code_bytes(n as u64))?,
                bytes(c.code_bytes(n as u64))?,
            ),
        };
        let scale_bytes = code.map_or(4, |c| c.scale_bytes(n as u64));
        let (ms, vs) = (bytes(scale_bytes)?, bytes(scale_bytes)?);
        let mut w: Vec<f64> = w0[at..].iter().map(|&x| x as f64).collect();
        let (mut m, mut v) = (vec![0.0; n], vec![0.0; n]);
        let mut blocks = reference::Adam8bitState::new(n, reference::StateCode::Int4);
        for t in 1..=2u32 {
            let g = spread_gradients(77 + t as u64, n);
            let gb = gpu.upload("g", &g)?;
            let stats = step_stats(gpu, 0.5, false)?;
            k.write_step(gpu, &step, &HYPER, t)?;
            let moments = match code {
                None => Moments::Plain(AdamBuffers {
                    weights,
                    grads: (&gb).into(),
                    moment1: (&mb).into(),
                    moment2: (&vb).into(),
                    bf16: false,
                    mirror: None,
                    sr_seed: Some(seed),
                }),
                Some(code) => Moments::Blocks(Adam8bitBuffers {
                    code,
                    weights,
                    grads: (&gb).into(),
                    m_codes: (&mb).into(),
                    v_codes: (&vb).into(),
                    m_scales: (&ms).into(),
                    v_scales: (&vs).into(),
                    mirror: None,
                    first: 0,
                    sr_seed: Some(seed),
                }),
            };
            update(gpu, (&k, &step), (n, true), &stats, moments).await?;
            match code {
                None => reference::adamw(&HYPER, t, true, 0.5, &mut w, &g, &mut m, &mut v),
                Some(_) => reference::adamw_8bit(&HYPER, t, true, 0.5, &mut w, &g, &mut blocks),
            }
            let got: Vec<u16> = gpu.read_back((&wb).into()).await?;
            let got: Vec<f32> = got.iter().map(|&b| bf16_value(b)).collect();
            assert_eq!(
                got[..at],
                w0[..at],
                "the elements before the binding are left alone"
            );
            let mut apart = 0;
            for (i, (x, &y)) in w.iter_mut().zip(&got[at..]).enumerate() {
                let r = random_bits(seed, t, MASTER_SR_STREAM, (at + i) as u32) & 0xffff;
                let want = bf16_sr(*x as f32, r);
                apart += usize::from(bf16_sr_apart(&format!("{code:?} t={t} w[{i}]"), y, want));
                *x = y as f64; // go on from the kernel's weights
            }
            if option_env!("WEBTRAIN_MEASURE").is_some() {
                eprintln!(
                    "measured bf16-sr {code:?} t={t}: {apart} of {n} one bf16 step from the twin"
                );
            }
            assert!(apart <= n / 1000, "{code:?} t={t}: {apart} of {n} apart");
        }
    }
    Ok(())
}
