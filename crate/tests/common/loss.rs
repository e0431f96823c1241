//! 07_loss.wgsl against reference/loss.rs. Legend: R rows, V vocabulary.

use rand::Rng;
use webtrain::kernels::Loss;
use webtrain::kernels::loss::{CrossEntropy, IGNORE_INDEX, LossTotals};
use webtrain::reference::loss as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_close, assert_identical, rng, uniform};

const SENTINEL: f32 = -1234.5;

// Losses and lse: WGSL holds log to 2^-21 absolute for arguments in
// [0.5, 2] (a confident row's sum), 3 ulp elsewhere; z_t − m and lse round
// once more. Measured, lavapipe / SwiftShader: 1.3e-7 / 1.0e-7 relative
// (7.1e-6 absolute at a loss of 160).
const LOSS_ATOL: f64 = 4.8e-7; // 2^-21
const LOSS_RTOL: f64 = 5e-7;
// dlogits: p_j carries exp's error and the rounding of z_j − m (|z − m|·2^-24,
// 1e-6 at 16): rtol 4e-6. Where p_j·(1 + 2β·lse) cancels against ε/V the
// error is that relative error of ε/V·grad_scale, ~1e-11 here; atol is in
// units of grad_scale. (A p_t within 1e-3 of 1 − ε would cancel against
// the target's term and need ~ulp(1)·grad_scale; no row here does.)
// Measured, atol needed at rtol 4e-6: lavapipe 5.8e-11, SwiftShader
// 1.2e-10 (times grad_scale); worst 1.1e-6 relative on both.
const DLOGITS_ATOL: f64 = 1e-9;
const DLOGITS_RTOL: f64 = 4e-6;
// Sums: each row's loss error plus the f32 sum's roundings (R/256 serial
// adds, then 8 tree levels). Measured 6.8e-8 relative on both adapters.
const SUM_RTOL: f64 = 1e-6;

struct Outputs {
    dlogits: Vec<f32>,
    losses: Vec<f32>,
    lse: Vec<f32>,
    totals: LossTotals,
}

/// Both kernels in one pass, as a training step runs them. Every buffer
/// has one extra row holding SENTINEL, which must survive.
async fn run(
    gpu: &Gpu,
    k: &Loss,
    ce: &CrossEntropy,
    logits: &[f32],
    targets: &[u32],
) -> Result<Outputs> {
    let (r, v) = (ce.rows as usize, ce.vocab as usize);
    let logits_b = gpu.upload("logits", &[logits, &vec![SENTINEL; v]].concat())?;
    let targets_b = gpu.upload("targets", targets)?;
    let losses_b = gpu.upload("losses", &vec![SENTINEL; r + 1])?;
    let lse_b = gpu.upload("lse", &vec![SENTINEL; r + 1])?;
    let totals_b = gpu.storage_buffer("totals", size_of::<LossTotals>() as u64)?;
    let (t, z, l, s) = (
        (&targets_b).into(),
        (&logits_b).into(),
        (&losses_b).into(),
        (&lse_b).into(),
    );
    gpu.run(&[
        &k.cross_entropy_forward_backward(gpu, ce, t, z, l, s)?,
        &k.loss_sum(gpu, ce, t, l, (&totals_b).into())?,
    ])
    .await?;
    let unguard = |mut v: Vec<f32>, n: usize, what: &str| {
        assert!(
            v[n..].iter().all(|&g| g == SENTINEL),
            "{what}: a row past R was written"
        );
        v.truncate(n);
        v
    };
    Ok(Outputs {
        dlogits: unguard(gpu.read_back((&logits_b).into()).await?, r * v, "dlogits"),
        losses: unguard(gpu.read_back((&losses_b).into()).await?, r, "losses"),
        lse: unguard(gpu.read_back((&lse_b).into()).await?, r, "lse"),
        totals: gpu.read_back::<LossTotals>((&totals_b).into()).await?[0],
    })
}

fn twin(ce: &CrossEntropy) -> reference::CrossEntropy {
    reference::CrossEntropy {
        vocab: ce.vocab as usize,
        ignore_index: ce.ignore_index,
        label_smoothing: ce.label_smoothing as f64,
        z_loss: ce.z_loss as f64,
        grad_scale: ce.grad_scale as f64,
    }
}

/// Runs both kernels and checks every output against the twin.
async fn check(
    gpu: &Gpu,
    k: &Loss,
    what: &str,
    ce: &CrossEntropy,
    logits: &[f32],
    targets: &[u32],
) -> Result<Outputs> {
    let got = run(gpu, k, ce, logits, targets).await?;
    let twin = twin(ce);
    let wide: Vec<f64> = logits.iter().map(|&z| z as f64).collect();
    let want = reference::cross_entropy_forward_backward(&twin, &wide, targets);
    assert_close(
        &format!("{what}: losses"),
        &got.losses,
        &want.losses,
        LOSS_ATOL,
        LOSS_RTOL,
    );
    assert_close(
        &format!("{what}: lse"),
        &got.lse,
        &want.lse,
        LOSS_ATOL,
        LOSS_RTOL,
    );
    let scale = ce.grad_scale as f64;
    assert_close(
        &format!("{what}: dlogits"),
        &got.dlogits,
        &want.dlogits,
        DLOGITS_ATOL * scale,
        DLOGITS_RTOL,
    );
    let totals = reference::loss_sum(&twin, targets, &want.losses);
    assert_eq!(
        (got.totals.counted, got.totals.out_of_range),
        (totals.counted, totals.out_of_range),
        "{what}: counts"
    );
    assert_close(
        &format!("{what}: sum"),
        &[got.totals.sum],
        &[totals.sum],
        LOSS_ATOL,
        SUM_RTOL,
    );
    assert_close(
        &format!("{what}: mean"),
        &[got.totals.mean],
        &[totals.mean],
        LOSS_ATOL,
        SUM_RTOL,
    );
    Ok(got)
}

/// Targets in [0, V), with about one in `ignore_every` replaced by `ignore`.
fn targets(r: &mut impl Rng, rows: usize, vocab: u32, ignore: u32, ignore_every: u32) -> Vec<u32> {
    (0..rows)
        .map(|_| {
            if r.random_range(0..ignore_every) == 0 {
                ignore
            } else {
                r.random_range(0..vocab)
            }
        })
        .collect()
}

pub async fn cross_entropy_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Loss::new(gpu).await?;
    let mut r = rng(7);
    // (R, V, ε, β, ignore index): awkward shapes, the seed's vocabulary
    // (16 rows keep SwiftShader quick), V below one workgroup, and a pad
    // token inside the vocabulary as the ignore index.
    let cases = [
        (129, 1000, 0.0, 0.0, IGNORE_INDEX),
        (16, 16384, 0.1, 1e-4, IGNORE_INDEX),
        (7, 300, 0.2, 1e-3, 0),
        (3, 5, 0.0, 1e-2, IGNORE_INDEX),
    ];
    for (rows, vocab, eps, beta, ignore) in cases {
        let logits = uniform(&mut r, rows * vocab as usize, -8.0, 8.0);
        let t = targets(&mut r, rows, vocab, ignore, 8);
        let ce = CrossEntropy {
            label_smoothing: eps,
            z_loss: beta,
            ..CrossEntropy::mean(&t, vocab, ignore)
        };
        check(
            gpu,
            &k,
            &format!("R={rows} V={vocab} ε={eps} β={beta}"),
            &ce,
            &logits,
            &t,
        )
        .await?;
    }
    Ok(())
}

/// Equal logits (loss ln V), logits of ±80, one-hot rows hit and missed,
/// an ignored and out-of-range targets (never read, counted, no gradient).
pub async fn cross_entropy_edge_cases(gpu: &Gpu) -> Result<()> {
    let k = Loss::new(gpu).await?;
    let v = 1000usize;
    let mut r = rng(8);
    let mut logits = Vec::new();
    let mut t = Vec::new();
    let mut row = |z: Vec<f32>, target: u32| {
        logits.extend(z);
        t.push(target);
    };
    let onehot = |hot: usize| {
        (0..v)
            .map(|j| if j == hot { 80.0 } else { -80.0 })
            .collect::<Vec<f32>>()
    };
    row(vec![3.7; v], 5);
    row(vec![80.0; v], 999);
    row(vec![-80.0; v], 0);
    row(
        (0..v)
            .map(|_| if r.random_bool(0.5) { 80.0 } else { -80.0 })
            .collect(),
        17,
    );
    row(onehot(42), 42);
    row(onehot(42), 43);
    row(uniform(&mut r, v, -80.0, 80.0), 500);
    row(uniform(&mut r, v, -4.0, 4.0), IGNORE_INDEX);
    row(uniform(&mut r, v, -4.0, 4.0), v as u32);
    row(uniform(&mut r, v, -4.0, 4.0), u32::MAX - 1);
    let ce = CrossEntropy {
        label_smoothing: 0.1,
        z_loss: 1e-4,
        ..CrossEntropy::mean(&t, v as u32, IGNORE_INDEX)
    };
    let plain = CrossEntropy::mean(&t, v as u32, IGNORE_INDEX);
    for (what, ce) in [("plain", plain), ("ε=0.1 β=1e-4", ce)] {
        let got = check(gpu, &k, &format!("edge cases, {what}"), &ce, &logits, &t).await?;
        assert!(
            got.dlogits
                .iter()
                .chain(&got.losses)
                .chain(&got.lse)
                .all(|x| x.is_finite()),
            "{what}: not finite"
        );
        assert_eq!(
            (got.totals.counted, got.totals.out_of_range),
            (7, 2),
            "{what}: counts"
        );
        assert!(
            got.dlogits[7 * v..].iter().all(|&d| d == 0.0),
            "{what}: rows that do not count have gradients"
        );
        assert_eq!(
            &got.losses[7..],
            &[0.0; 3],
            "{what}: rows that do not count have losses"
        );
    }
    let got = run(gpu, &k, &plain, &logits, &t).await?;
    let ln_v = (v as f64).ln();
    assert_close(
        "equal logits: ln V",
        &got.losses[..3],
        &[ln_v; 3],
        LOSS_ATOL,
        LOSS_RTOL,
    );
    assert_close(
        "one-hot rows: 0 hit, 160 missed",
        &got.losses[4..6],
        &[0.0, 160.0],
        LOSS_ATOL,
        LOSS_RTOL,
    );
    Ok(())
}

/// A block where no target counts: zero mean, zero gradients, no NaN.
pub async fn cross_entropy_with_nothing_counted_is_zero(gpu: &Gpu) -> Result<()> {
    let k = Loss::new(gpu).await?;
    let v = 300;
    let t = [IGNORE_INDEX, 300, IGNORE_INDEX, 7000];
    let ce = CrossEntropy {
        label_smoothing: 0.1,
        z_loss: 1e-4,
        ..CrossEntropy::mean(&t, v, IGNORE_INDEX)
    };
    assert_eq!(ce.grad_scale, 0.0);
    let logits = uniform(&mut rng(9), t.len() * v as usize, -4.0, 4.0);
    let got = check(gpu, &k, "nothing counted", &ce, &logits, &t).await?;
    assert_eq!(
        got.totals,
        LossTotals {
            sum: 0.0,
            mean: 0.0,
            counted: 0,
            out_of_range: 2
        }
    );
    assert!(got.dlogits.iter().all(|&d| d == 0.0));
    Ok(())
}

/// Many rows (more than one workgroup's worth, not a multiple of it):
/// bit-identical sums run to run, and the reference's sum.
pub async fn loss_sum_is_deterministic(gpu: &Gpu) -> Result<()> {
    let k = Loss::new(gpu).await?;
    let (rows, v) = (5003, 64u32);
    let mut r = rng(10);
    let t = targets(&mut r, rows, v + 3, IGNORE_INDEX, 10); // some ≥ V: out of range
    let ce = CrossEntropy::mean(&t, v, IGNORE_INDEX);
    let losses: Vec<f32> = t
        .iter()
        .map(|&t| {
            if t < v {
                r.random_range(0.0..12.0)
            } else {
                0.0
            }
        })
        .collect();
    let (t_b, l_b) = (gpu.upload("targets", &t)?, gpu.upload("losses", &losses)?);
    let mut runs = Vec::new();
    for _ in 0..2 {
        let totals = gpu.storage_buffer("totals", size_of::<LossTotals>() as u64)?;
        gpu.run(&[&k.loss_sum(gpu, &ce, (&t_b).into(), (&l_b).into(), (&totals).into())?])
            .await?;
        runs.push(gpu.read_back::<LossTotals>((&totals).into()).await?[0]);
    }
    assert_identical(
        "two runs",
        &[runs[0].sum, runs[0].mean],
        &[runs[1].sum, runs[1].mean],
    );
    let wide: Vec<f64> = losses.iter().map(|&l| l as f64).collect();
    let want = reference::loss_sum(&twin(&ce), &t, &wide);
    assert_eq!(
        (runs[0].counted, runs[0].out_of_range),
        (want.counted, want.out_of_range)
    );
    assert!(want.out_of_range > 0 && want.counted < rows as u32);
    assert_close("sum", &[runs[0].sum], &[want.sum], 0.0, SUM_RTOL);
    assert_close("mean", &[runs[0].mean], &[want.mean], 0.0, SUM_RTOL);
    Ok(())
}

/// Settings that make no sense are refused before anything runs.
pub async fn cross_entropy_checks_its_settings(gpu: &Gpu) -> Result<()> {
    let k = Loss::new(gpu).await?;
    let buf = gpu.storage_buffer("b", 4096)?;
    let ok = CrossEntropy::mean(&[1, 2], 10, IGNORE_INDEX); // fits the buffer
    let bad = [
        CrossEntropy { vocab: 0, ..ok },
        CrossEntropy {
            label_smoothing: 1.5,
            ..ok
        },
        CrossEntropy { z_loss: -1.0, ..ok },
        CrossEntropy { rows: 200, ..ok }, // logits would need 8000 bytes
    ];
    let b = || (&buf).into();
    for ce in bad {
        assert!(
            k.cross_entropy_forward_backward(gpu, &ce, b(), b(), b(), b())
                .is_err(),
            "accepted {ce:?}"
        );
    }
    Ok(())
}
