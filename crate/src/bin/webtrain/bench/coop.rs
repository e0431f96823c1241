//! `webtrain bench --what coop`: what the adapter offers as cooperative
//! matrices (tensor cores), then f16-input, f32-accumulate GEMMs on them
//! (`kernels::units`): each variant checked
//! against a CPU product first, then timed at the seed model's GEMM shapes
//! (M = 4096 rows) beside webtrain's fp32 forward GEMM at the same shape.
//! An adapter without them is reported, and the command succeeds.

use super::coop_variants::{bench_variants, earlier_variants};
use half::f16;
use webtrain::gpu::Dispatch;
use webtrain::gpu::coop::{CoopSupport, describe};
use webtrain::kernels::linear::{BStorage, GemmKey, tune};
use webtrain::kernels::units::{GemmVariant, UnitGemm};
use webtrain::kernels::{Linear, LinearShape, Output, Weights};
use webtrain::reference::units::{GemmErrors, gemm_errors};
use webtrain::rng::{SplitMix64, uniform};
use webtrain::{Error, Gpu, GpuOptions, Result};

/// The seed model's products at 4096 rows: (name, K = d_in, N = d_out).
const SHAPES: [(&str, u32, u32); 5] = [
    ("qkv", 768, 2304),
    ("o", 768, 768),
    ("gate|up", 768, 4096),
    ("down", 2048, 768),
    ("head", 768, 16384),
];
const ROWS: u32 = 4096;

/// Allowed |gpu − cpu| per output, as a share of Σ_k |a·b| (+ |out₀| when
/// accumulating): 2^-10. f16 × f16 products are exact in f32, and an f32
/// sum of K ≤ 448 terms errs by at most ~K·2^-24 ≈ 3e-5 of that (tensor
/// cores' own rounding of the sum stays near f32's), while a wrong layout,
/// index or fragment gives errors of order 1. The measured share is printed.
const TOLERANCE: f64 = 1.0 / 1024.0;

/// `only`: the variants whose name contains it, from round 1's too
/// (`earlier_variants`); otherwise `bench_variants`.
pub async fn run(options: &GpuOptions, reps: u32, only: Option<&str>) -> Result<()> {
    let (gpu, support) = Gpu::new_cooperative(options).await?;
    let info = &gpu.info;
    eprintln!(
        "adapter {} ({:?}, driver {} {}), subgroups {}..{}",
        info.name,
        info.backend,
        info.driver,
        info.driver_info,
        info.subgroup_min_size,
        info.subgroup_max_size
    );
    eprintln!(
        "cooperative matrices: adapter feature {}, device enabled {} (with shader-f16), {} configuration(s)",
        support.adapter_feature,
        support.enabled,
        support.configs.len()
    );
    for c in &support.configs {
        eprintln!("  {}", describe(c));
        let row = serde_json::json!({
            "coop_config": describe(c), "m": c.m_size, "n": c.n_size, "k": c.k_size,
            "ab": format!("{:?}", c.ab_type), "cr": format!("{:?}", c.cr_type),
            "saturating": c.saturating_accumulation,
        });
        println!("{row}");
    }
    if let Some(why) = support.unavailable(&gpu) {
        eprintln!("no cooperative matrix GEMM here: {why}");
        println!(
            "{}",
            serde_json::json!({ "coop": "unavailable", "why": why })
        );
        return Ok(());
    }
    if !gpu.caps.timestamps {
        eprintln!(
            "no timestamp queries on {:?}: nothing can be timed",
            info.name
        );
        return Ok(());
    }
    run_gemms(&gpu, &support, reps, only).await
}

async fn run_gemms(gpu: &Gpu, support: &CoopSupport, reps: u32, only: Option<&str>) -> Result<()> {
    let edge = if support.f16_f32(16).is_some() { 16 } else { 8 };
    let mut variants = bench_variants(edge);
    if edge == 16 && support.f16_f32(8).is_some() {
        variants.push(GemmVariant::global(8, (2, 2), (4, 2)));
    }
    if let Some(only) = only {
        variants.extend(earlier_variants(edge));
        variants.retain(|v| v.name().contains(only));
    }
    let sg = gpu.info.subgroup_max_size;
    for v in &variants {
        eprintln!(
            "variant {:<46} {:>5} invocations, {:>6} B workgroup memory",
            v.name(),
            v.invocations(sg),
            v.workgroup_bytes()
        );
    }
    let (built, failures) = build_and_check(gpu, variants).await?;
    time_shapes(gpu, &built, reps).await?;
    if failures.is_empty() {
        return Ok(());
    }
    for f in &failures {
        eprintln!("FAILED: {f}");
    }
    Err(Error::Unsupported(format!(
        "{} cooperative-matrix variant(s) failed (above)",
        failures.len()
    )))
}

/// Every variant built and checked against the CPU; those that built (a
/// wrong one is still timed: the work is the same) and what failed.
async fn build_and_check(
    gpu: &Gpu,
    variants: Vec<GemmVariant>,
) -> Result<(Vec<UnitGemm>, Vec<String>)> {
    let mut built: Vec<UnitGemm> = Vec::new();
    let mut failures = Vec::new();
    eprintln!(
        "\ncorrectness (CPU: f64 product of the same f16-rounded inputs; bound {TOLERANCE:.2e} of sum |a*b|)"
    );
    for v in variants {
        let result = match UnitGemm::new(gpu, v).await {
            Ok(g) => match g.prepare(gpu).await {
                Ok(()) => check(gpu, &g).await.map(|r| (g, r)),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match result {
            Ok((g, (shape, err))) => {
                let ok = err.share <= TOLERANCE;
                eprintln!(
                    "  {:<46} {shape:<12} max |err| {:.3e}  max rel {:.3e}  max err/sum|ab| {:.3e}  {}",
                    v.name(),
                    err.abs,
                    err.rel,
                    err.share,
                    if ok { "ok" } else { "FAIL" }
                );
                println!(
                    "{}",
                    serde_json::json!({ "check": v.name(), "shape": shape, "max_abs": err.abs,
                        "max_rel": err.rel, "max_share": err.share, "ok": ok })
                );
                if ok {
                    built.push(g);
                } else {
                    failures.push(format!("{}: wrong results", v.name()));
                    // still timed below: the work is the same even if the layout is off
                    built.push(g);
                }
            }
            Err(e) => {
                eprintln!("  {:<46} FAILED: {e}", v.name());
                println!(
                    "{}",
                    serde_json::json!({ "check": v.name(), "error": e.to_string() })
                );
                failures.push(format!("{}: {e}", v.name()));
                gpu.check_health()?; // a lost device ends the run
            }
        }
    }
    Ok((built, failures))
}

/// Runs the variant once at 3 × 5 workgroup tiles and 7 K steps against
/// its CPU twin (the f64 product of the same f16 inputs, plus `out`'s
/// start when it accumulates; a sentinel every output must replace when
/// it does not).
async fn check(gpu: &Gpu, g: &UnitGemm) -> Result<(String, GemmErrors)> {
    let v = g.variant;
    let (m, n, k) = (3 * v.bm(), 5 * v.bn(), 7 * v.k_step());
    let halves = |count: u32, seed: u64| -> Vec<f16> {
        uniform(&mut SplitMix64(seed), count as usize, -1.0, 1.0)
            .into_iter()
            .map(f16::from_f32)
            .collect()
    };
    let (a, b) = (halves(m * k, 11), halves(k * n, 12));
    let out0: Vec<f32> = match v.accumulate {
        true => uniform(&mut SplitMix64(13), (m * n) as usize, -1.0, 1.0),
        false => vec![12345.0; (m * n) as usize],
    };
    let got = g.run_once(gpu, (&a, &b), &out0, (m, n, k)).await?;
    let layout = (v.layout.a_t(), v.layout.b_t());
    let start = v.accumulate.then_some(out0.as_slice());
    let dims = (m as usize, n as usize, k as usize);
    let e = gemm_errors(layout, dims, (&a, &b), start, &got);
    Ok((format!("{m}x{n}x{k}"), e))
}

/// The seed's shapes: webtrain's tuned fp32 forward, then each variant.
async fn time_shapes(gpu: &Gpu, built: &[UnitGemm], reps: u32) -> Result<()> {
    eprintln!(
        "\n{:<8} {:<18} {:<46} {:>9} {:>9}",
        "product", "M x N x K", "kernel", "ms", "TFLOP/s"
    );
    let keys: Vec<GemmKey> = SHAPES
        .iter()
        .map(|&(_, k, n)| GemmKey::of_linear(ROWS, k, n, BStorage::F32)[0])
        .collect();
    tune::prepare(gpu, &keys).await?;
    let linear = Linear::new(gpu).await?;
    for (name, k, n) in SHAPES {
        let m = ROWS;
        let dims = format!("{m}x{n}x{k}");
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        let print = |kernel: &str, secs: f64| {
            let tflops = flops / secs / 1e12;
            eprintln!(
                "{name:<8} {dims:<18} {kernel:<46} {:>9.3} {tflops:>9.1}",
                secs * 1e3
            );
            println!(
                "{}",
                serde_json::json!({ "product": name, "m": m, "n": n, "k": k, "kernel": kernel,
                    "ms": secs * 1e3, "tflop_s": tflops })
            );
        };
        match fp32_forward(gpu, &linear, m, k, n, reps).await {
            Ok((variant, secs)) => print(&format!("fp32 linear forward {variant}"), secs),
            Err(e) => eprintln!("{name:<8} {dims:<18} fp32 linear forward: {e}"),
        }
        // f16 operands shared by every variant at this shape (A [M, K] or
        // [K, M], B [K, N] or [N, K]: the same bytes serve every layout)
        let a = f16_buffer(gpu, "a", m * k, 1)?;
        let b = f16_buffer(gpu, "b", k * n, 2)?;
        let out = gpu.storage_buffer("out", 4 * m as u64 * n as u64)?;
        for g in built {
            let label = g.variant.name();
            if let Some(why) = g.misfit(m, n, k) {
                eprintln!("{name:<8} {dims:<18} {label:<46} skipped: {why}");
                continue;
            }
            match g.dispatch(gpu, (&a).into(), (&b).into(), (&out).into(), (m, n, k)) {
                Ok(d) => match median_secs(gpu, &d, reps).await {
                    Ok(secs) => print(&label, secs),
                    Err(e) => {
                        eprintln!("{name:<8} {dims:<18} {label:<46} failed: {e}");
                        gpu.check_health()?;
                    }
                },
                Err(e) => eprintln!("{name:<8} {dims:<18} {label:<46} skipped: {e}"),
            }
        }
    }
    Ok(())
}

/// `count` halves, uniform in [-1, 1).
fn f16_buffer(gpu: &Gpu, label: &str, count: u32, seed: u64) -> Result<wgpu::Buffer> {
    let data: Vec<f16> = uniform(&mut SplitMix64(seed), count as usize, -1.0, 1.0)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    gpu.upload(label, &data)
}

/// Seconds per dispatch: the GPU kept busy 0.1 s first, then the median
/// of 5 timings of `reps` dispatches each.
async fn median_secs(gpu: &Gpu, d: &Dispatch, reps: u32) -> Result<f64> {
    gpu.warm_up(&[d], 0.1).await?;
    let mut times = Vec::new();
    for _ in 0..5 {
        times.push(gpu.time_dispatches(&[d], reps.max(1)).await?);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[2])
}

/// webtrain's fp32 forward `Y = X·Wᵀ` at (rows m, d_in k, d_out n) in the
/// tuned variant: its name and seconds.
async fn fp32_forward(
    gpu: &Gpu,
    linear: &Linear,
    m: u32,
    k: u32,
    n: u32,
    reps: u32,
) -> Result<(String, f64)> {
    let shape = LinearShape::new(m, k, n);
    let x = gpu.upload(
        "x",
        &uniform(&mut SplitMix64(3), (m * k) as usize, -1.0, 1.0),
    )?;
    let w = gpu.upload(
        "w",
        &uniform(&mut SplitMix64(4), (n * k) as usize, -1.0, 1.0),
    )?;
    let y = gpu.storage_buffer("y", 4 * m as u64 * n as u64)?;
    let d = linear.forward(
        gpu,
        shape,
        (&x).into(),
        Weights::F32((&w).into()),
        Output::Store((&y).into()),
    )?;
    let [d] = <[Dispatch; 1]>::try_from(d)
        .map_err(|_| Error::Unsupported("fp32 forward: one dispatch expected".into()))?;
    let variant = linear
        .variant(&GemmKey::of_linear(m, k, n, BStorage::F32)[0])
        .name();
    Ok((variant, median_secs(gpu, &d, reps).await?))
}
