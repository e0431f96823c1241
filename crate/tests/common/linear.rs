//! 03_linear.wgsl against reference/linear.rs.
//!
//! One file per kernel family, as kernels.rs lists them, over 500 lines:
//! the family's tests share their fixtures.

use half::f16;
use rand::Rng;
use webtrain::gpu::coop::Route;
use webtrain::kernels::linear::units::UnitCounts;
use webtrain::kernels::linear::{Layout, MatrixUnits, TileVariant};
use webtrain::kernels::{Linear, LinearShape, Output, Weights};
use webtrain::reference::linear as reference;
use webtrain::{Gpu, Result};

use super::check::{assert_identical, assert_within, refs, rng, uniform};

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// An f32 sum of K products errs by about sqrt(K)·2^-24·Σ|a·b| when the
/// roundings are independent (K·2^-24·Σ|a·b| at worst). Allowed: 8× that,
/// plus 1e-30 for exact zeros. Measured worst |error|/bound: 0.13 on lavapipe
/// and on SwiftShader
/// (so about 1.04·sqrt(K)·2^-24·Σ|a·b|).
fn bound(k: usize, sum_abs: f64) -> f64 {
    8.0 * (k as f64).sqrt() * 2f64.powi(-24) * sum_abs + 1e-30
}

/// (rows, d_in, d_out): the awkward shapes and the seed's.
const FORWARD_SHAPES: &[(u32, u32, u32)] = &[
    (1000, 1000, 1000),
    (1, 4096, 4096),
    (4097, 257, 3),
    (129, 1000, 384),
    (64, 768, 2048),
];

pub async fn linear_forward_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Linear::new(gpu).await?;
    let mut r = rng(60);
    for &(rows, d_in, d_out) in FORWARD_SHAPES {
        let s = LinearShape::new(rows, d_in, d_out);
        let x = uniform(&mut r, (rows * d_in) as usize, -1.0, 1.0);
        let w = uniform(&mut r, (d_out * d_in) as usize, -1.0, 1.0);
        let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        // every output, or 3000 random ones of the largest product
        let all = (rows as u64 * d_out as u64) <= 600_000;
        let picks: Vec<(usize, usize)> = if all {
            (0..rows as usize)
                .flat_map(|i| (0..d_out as usize).map(move |o| (i, o)))
                .collect()
        } else {
            (0..3000)
                .map(|_| {
                    (
                        r.random_range(0..rows as usize),
                        r.random_range(0..d_out as usize),
                    )
                })
                .collect()
        };
        let (xb, wb, hb) = (
            gpu.upload("x", &x)?,
            gpu.upload("w", &w)?,
            gpu.upload("w_h", &wh)?,
        );
        let y = gpu.storage_buffer("y", 4 * (rows * d_out) as u64)?;
        for (name, weights, wref) in [
            ("f32", Weights::F32((&wb).into()), f64s(&w)),
            (
                "f16",
                Weights::F16((&hb).into()),
                wh.iter().map(|h| h.to_f64()).collect(),
            ),
        ] {
            gpu.run(&refs(&k.forward(
                gpu,
                s,
                (&xb).into(),
                weights,
                Output::Store((&y).into()),
            )?))
            .await?;
            let got: Vec<f32> = gpu.read_back((&y).into()).await?;
            let x64 = f64s(&x);
            let want: Vec<f64> = picks
                .iter()
                .map(|&(i, o)| reference::forward_at(&x64, &wref, d_in as usize, i, o))
                .collect();
            let tol: Vec<f64> = picks
                .iter()
                .map(|&(i, o)| {
                    bound(
                        d_in as usize,
                        reference::forward_abs_at(&x64, &wref, d_in as usize, i, o),
                    )
                })
                .collect();
            let got: Vec<f32> = picks
                .iter()
                .map(|&(i, o)| got[i * d_out as usize + o])
                .collect();
            assert_within(
                &format!("linear {name} {rows}x{d_in}->{d_out}"),
                &got,
                &want,
                &tol,
            );
        }
    }
    Ok(())
}

/// Y = R + X·Wᵀ, Y += X·Wᵀ, and Y = X·Wᵀ into one [rows, 2·ffn] `[gate | up]`
/// from stacked `[W_gate; W_up]` as the MLP runs it, on an odd ffn.
pub async fn linear_forward_epilogues(gpu: &Gpu) -> Result<()> {
    let k = Linear::new(gpu).await?;
    let mut r = rng(61);
    let (rows, d_in, ffn) = (77u32, 130u32, 333u32);
    let s = LinearShape::stacked(rows, d_in, &[ffn, ffn])?;
    let x = uniform(&mut r, (rows * d_in) as usize, -1.0, 1.0);
    let w = uniform(&mut r, (2 * ffn * d_in) as usize, -1.0, 1.0);
    let prior = uniform(&mut r, (rows * 2 * ffn) as usize, -1.0, 1.0);
    let (x64, w64) = (f64s(&x), f64s(&w));
    let plain = reference::forward(&x64, &w64, d_in as usize);
    let tol: Vec<f64> = (0..plain.len())
        .map(|i| {
            bound(
                d_in as usize + 1,
                reference::forward_abs_at(
                    &x64,
                    &w64,
                    d_in as usize,
                    i / (2 * ffn) as usize,
                    i % (2 * ffn) as usize,
                ) + 1.0,
            )
        })
        .collect();
    let with_prior: Vec<f64> = plain
        .iter()
        .zip(&prior)
        .map(|(p, &q)| p + q as f64)
        .collect();
    let (xb, wb) = (gpu.upload("x", &x)?, gpu.upload("w", &w)?);

    let (res, y) = (
        gpu.upload("residual", &prior)?,
        gpu.storage_buffer("y", 4 * prior.len() as u64)?,
    );
    let out = Output::AddTo {
        residual: (&res).into(),
        y: (&y).into(),
    };
    gpu.run(&refs(&k.forward(
        gpu,
        s,
        (&xb).into(),
        Weights::F32((&wb).into()),
        out,
    )?))
    .await?;
    assert_within(
        "linear + residual",
        &gpu.read_back::<f32>((&y).into()).await?,
        &with_prior,
        &tol,
    );

    let acc = gpu.upload("acc", &prior)?;
    gpu.run(&refs(&k.forward(
        gpu,
        s,
        (&xb).into(),
        Weights::F32((&wb).into()),
        Output::Accumulate((&acc).into()),
    )?))
    .await?;
    assert_within(
        "linear +=",
        &gpu.read_back::<f32>((&acc).into()).await?,
        &with_prior,
        &tol,
    );

    let gu = gpu.upload("gu", &prior)?; // stored over, not added to
    gpu.run(&refs(&k.forward(
        gpu,
        s,
        (&xb).into(),
        Weights::F32((&wb).into()),
        Output::Store((&gu).into()),
    )?))
    .await?;
    assert_within(
        "linear gate|up",
        &gpu.read_back::<f32>((&gu).into()).await?,
        &plain,
        &tol,
    );
    Ok(())
}

/// dX += dY·W (f32 and f16 weights) and dW += dYᵀ·X, onto prior values.
pub async fn linear_backward_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Linear::new(gpu).await?;
    let mut r = rng(62);
    for &(rows, d_in, d_out) in &[(129u32, 1000u32, 384u32), (4097, 257, 3), (5, 64, 4096)] {
        let s = LinearShape::new(rows, d_in, d_out);
        let x = uniform(&mut r, (rows * d_in) as usize, -1.0, 1.0);
        let w = uniform(&mut r, (d_out * d_in) as usize, -1.0, 1.0);
        let dy = uniform(&mut r, (rows * d_out) as usize, -1.0, 1.0);
        let dx0 = uniform(&mut r, x.len(), -1.0, 1.0);
        let dw0 = uniform(&mut r, w.len(), -1.0, 1.0);
        let (x64, w64, dy64) = (f64s(&x), f64s(&w), f64s(&dy));
        let mut want_dx = f64s(&dx0);
        reference::backward_input(&dy64, &w64, d_in as usize, &mut want_dx);
        let mut want_dw = f64s(&dw0);
        reference::backward_weight(&dy64, &x64, d_in as usize, &mut want_dw);
        // per-element Σ|terms| (the prior value counts as one term)
        let mut dx_abs = vec![1.0; x.len()];
        reference::backward_input(
            &dy64.iter().map(|v| v.abs()).collect::<Vec<_>>(),
            &w64.iter().map(|v| v.abs()).collect::<Vec<_>>(),
            d_in as usize,
            &mut dx_abs,
        );
        let mut dw_abs = vec![1.0; w.len()];
        reference::backward_weight(
            &dy64.iter().map(|v| v.abs()).collect::<Vec<_>>(),
            &x64.iter().map(|v| v.abs()).collect::<Vec<_>>(),
            d_in as usize,
            &mut dw_abs,
        );

        let (xb, wb, dyb) = (
            gpu.upload("x", &x)?,
            gpu.upload("w", &w)?,
            gpu.upload("dy", &dy)?,
        );
        let (dxb, dwb) = (gpu.upload("dx", &dx0)?, gpu.upload("dw", &dw0)?);
        let mut products = k.backward_input(
            gpu,
            s,
            (&dyb).into(),
            Weights::F32((&wb).into()),
            Output::Accumulate((&dxb).into()),
        )?;
        products.extend(k.backward_weight(gpu, s, (&dyb).into(), (&xb).into(), (&dwb).into())?);
        gpu.run(&refs(&products)).await?;
        let tol_dx: Vec<f64> = dx_abs
            .iter()
            .map(|&a| bound(d_out as usize + 1, a))
            .collect();
        let tol_dw: Vec<f64> = dw_abs
            .iter()
            .map(|&a| bound(rows as usize + 1, a))
            .collect();
        assert_within(
            &format!("linear dx {rows}x{d_in}->{d_out}"),
            &gpu.read_back::<f32>((&dxb).into()).await?,
            &want_dx,
            &tol_dx,
        );
        assert_within(
            &format!("linear dw {rows}x{d_in}->{d_out}"),
            &gpu.read_back::<f32>((&dwb).into()).await?,
            &want_dw,
            &tol_dw,
        );

        // f16 weights, and dX stored over what it held: the reference reads the same halves
        let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        let hb = gpu.upload("w_h", &wh)?;
        let dxh = gpu.upload("dx", &dx0)?;
        gpu.run(&refs(&k.backward_input(
            gpu,
            s,
            (&dyb).into(),
            Weights::F16((&hb).into()),
            Output::Store((&dxh).into()),
        )?))
        .await?;
        let mut want_dxh = vec![0.0; x.len()];
        reference::backward_input(
            &dy64,
            &wh.iter().map(|h| h.to_f64()).collect::<Vec<_>>(),
            d_in as usize,
            &mut want_dxh,
        );
        assert_within(
            &format!("linear dx w16 {rows}x{d_in}->{d_out}"),
            &gpu.read_back::<f32>((&dxh).into()).await?,
            &want_dxh,
            &tol_dx,
        );
    }
    Ok(())
}

/// Every tile variant the tuner may choose, in each layout and B storage,
/// against the CPU twin on shapes off every tile: M, N and K not multiples
/// of any tile or slice, K shorter than one slice, one row, stacked parts.
/// Every variant sums each output's products in the same order, so each
/// must also give the first variant's bits exactly.
pub async fn linear_variants_match_reference_and_each_other(gpu: &Gpu) -> Result<()> {
    let variants: Vec<TileVariant> = TileVariant::ALL
        .into_iter()
        .filter(|v| Layout::ALL.iter().all(|&l| v.fits(&gpu.limits, l)))
        .collect();
    assert!(
        variants.len() >= 2,
        "fewer than two variants fit: {variants:?}"
    );
    // each variant compiled once (SwiftShader compiles slowly)
    let mut built = Vec::new();
    for &v in &variants {
        built.push((v, Linear::with_variant(gpu, v).await?));
    }
    let mut r = rng(63);
    for (rows, d_in, heights) in [
        (131u32, 257u32, &[67u32][..]),
        (1, 70, &[5]),
        (45, 5, &[3]),
        (200, 130, &[40, 29, 60]),
    ] {
        let s = if heights.len() == 1 {
            LinearShape::new(rows, d_in, heights[0])
        } else {
            LinearShape::stacked(rows, d_in, heights)?
        };
        let (m, d_out) = (rows as usize, s.d_out as usize);
        let x = uniform(&mut r, m * d_in as usize, -1.0, 1.0);
        let w = uniform(&mut r, d_out * d_in as usize, -1.0, 1.0);
        let wh: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        let w16: Vec<f32> = wh.iter().map(|h| h.to_f32()).collect();
        let dy = uniform(&mut r, m * d_out, -1.0, 1.0);
        let dw0 = uniform(&mut r, w.len(), -1.0, 1.0);
        let (xb, wb, hb, dyb) = (
            gpu.upload("x", &x)?,
            gpu.upload("w", &w)?,
            gpu.upload("w_h", &wh)?,
            gpu.upload("dy", &dy)?,
        );
        let mut first: Option<Vec<Vec<f32>>> = None;
        for (v, k) in &built {
            let (y, y16) = (
                gpu.storage_buffer("y", 4 * (m * d_out) as u64)?,
                gpu.storage_buffer("y16", 4 * (m * d_out) as u64)?,
            );
            let (dx, dx16) = (
                gpu.storage_buffer("dx", 4 * x.len() as u64)?,
                gpu.storage_buffer("dx16", 4 * x.len() as u64)?,
            );
            let dw = gpu.upload("dw", &dw0)?;
            let (w32, w16b) = (Weights::F32((&wb).into()), Weights::F16((&hb).into()));
            let mut d = k.forward(gpu, s, (&xb).into(), w32, Output::Store((&y).into()))?;
            d.extend(k.forward(gpu, s, (&xb).into(), w16b, Output::Store((&y16).into()))?);
            d.extend(k.backward_input(gpu, s, (&dyb).into(), w32, Output::Store((&dx).into()))?);
            d.extend(k.backward_input(
                gpu,
                s,
                (&dyb).into(),
                w16b,
                Output::Store((&dx16).into()),
            )?);
            d.extend(k.backward_weight(gpu, s, (&dyb).into(), (&xb).into(), (&dw).into())?);
            gpu.run(&refs(&d)).await?;
            let mut got = Vec::new();
            for b in [&y, &y16, &dx, &dx16, &dw] {
                got.push(gpu.read_back::<f32>(b.into()).await?);
            }
            let what = |p: &str| format!("{p} of {s:?} in variant {}", v.name());
            assert_product(&what("forward"), &got[0], &x, &w, d_in as usize);
            assert_product(
                &what("forward, f16 weights"),
                &got[1],
                &x,
                &w16,
                d_in as usize,
            );
            assert_product(
                &what("dX"),
                &got[2],
                &dy,
                &transpose(&w, d_in as usize),
                d_out,
            );
            assert_product(
                &what("dX, f16 weights"),
                &got[3],
                &dy,
                &transpose(&w16, d_in as usize),
                d_out,
            );
            // dW onto its prior values: each output's terms, the prior one of them
            let (mut dw_want, mut dw_abs) = (f64s(&dw0), vec![1.0; dw0.len()]);
            reference::backward_weight(&f64s(&dy), &f64s(&x), d_in as usize, &mut dw_want);
            let abs = |v: &[f32]| v.iter().map(|a| a.abs() as f64).collect::<Vec<_>>();
            reference::backward_weight(&abs(&dy), &abs(&x), d_in as usize, &mut dw_abs);
            let tol: Vec<f64> = dw_abs.iter().map(|&a| bound(m + 1, a)).collect();
            assert_within(&what("dW"), &got[4], &dw_want, &tol);
            match &first {
                None => first = Some(got),
                Some(f) => {
                    for (i, (a, b)) in got.iter().zip(f).enumerate() {
                        let name = ["forward", "forward f16", "dX", "dX f16", "dW"][i];
                        assert_identical(
                            &format!("{} against {}", what(name), variants[0].name()),
                            a,
                            b,
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

/// A pinned kernel config is used as it is: its shape runs the pinned
/// variant, nothing is timed or replaced, other shapes take the rule's, and
/// the pinned product still computes right. Its own device: the shared
/// one's choices belong to the tests running beside it.
pub async fn linear_uses_the_pinned_variant(_shared: &Gpu) -> Result<()> {
    use webtrain::gpu::{GemmPick, KernelConfig};
    use webtrain::kernels::linear::BStorage;
    use webtrain::kernels::linear::GemmKey;
    use webtrain::kernels::linear::tune;
    let (rows, d_in, d_out) = (37u32, 11u32, 29u32);
    let key = GemmKey::new(Layout::Forward, BStorage::F32, rows, d_out, d_in);
    let pinned = TileVariant::ALL[TileVariant::ALL.len() - 1];
    let config = KernelConfig {
        adapter: "any".into(),
        driver: "any".into(),
        shaders: "any".into(),
        picks: vec![GemmPick {
            layout: "forward".into(),
            b: "f32".into(),
            m: rows,
            n: d_out,
            k: d_in,
            variant: pinned.name(),
            ms: None,
            units_ms: None,
        }],
        pinned: true,
    };
    let options = webtrain::GpuOptions {
        kernel_config: Some(config.clone()),
        ..webtrain::GpuOptions::from_env()
    };
    let gpu = &Gpu::new(&options).await?;
    tune::prepare(gpu, &[key]).await?;
    assert_eq!(gpu.kernel_config(), config, "a pinned config was changed");
    let k = Linear::new(gpu).await?;
    assert_ne!(
        pinned,
        tune::rule(gpu),
        "the test must pin another variant than the rule's"
    );
    assert_eq!(k.variant(&key), pinned);
    let other = GemmKey::new(Layout::Dx, BStorage::F32, rows, d_in, d_out);
    assert_eq!(k.variant(&other), tune::rule(gpu));

    let mut r = rng(64);
    let s = LinearShape::new(rows, d_in, d_out);
    let x = uniform(&mut r, (rows * d_in) as usize, -1.0, 1.0);
    let w = uniform(&mut r, (d_out * d_in) as usize, -1.0, 1.0);
    let (xb, wb) = (gpu.upload("x", &x)?, gpu.upload("w", &w)?);
    let y = gpu.storage_buffer("y", 4 * (rows * d_out) as u64)?;
    let d = k.forward(
        gpu,
        s,
        (&xb).into(),
        Weights::F32((&wb).into()),
        Output::Store((&y).into()),
    )?;
    gpu.run(&refs(&d)).await?;
    assert_product(
        "forward in the pinned variant",
        &gpu.read_back::<f32>((&y).into()).await?,
        &x,
        &w,
        d_in as usize,
    );
    Ok(())
}

/// Every value of one product against the reference on the given operands.
fn assert_product(what: &str, got: &[f32], a: &[f32], b_t: &[f32], k: usize) {
    let (a64, b64) = (f64s(a), f64s(b_t));
    let cols = b_t.len() / k;
    let (mut want, mut tol) = (Vec::new(), Vec::new());
    for i in 0..a.len() / k {
        for j in 0..cols {
            want.push(reference::forward_at(&a64, &b64, k, i, j));
            tol.push(bound(k, reference::forward_abs_at(&a64, &b64, k, i, j)));
        }
    }
    assert_within(what, got, &want, &tol);
}

fn transpose(x: &[f32], cols: usize) -> Vec<f32> {
    let rows = x.len() / cols;
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| x[r * cols + c]))
        .collect()
}

/// A recipe's products read their operands as the CPU twins quantize them
/// (`reference::formats`): blocks along each product's K — along the row
/// for the forward's X and W and dX's dY, down the column for dX's W and
/// dW's dY and X — starting afresh at the stacked parts, the last of each
/// short (d_in 80 = 2·32 + 16); NVFP4's 16×16 weight blocks; fp8's
/// 128-value blocks and 128×128 weight blocks, cut short at the edges and
/// the parts (90, 37, 73: three blocks in one 64-column output tile, off
/// the 16-value K slices); stochastic draws for the step the host wrote;
/// dW's inputs through the Hadamard transform. Rows span 4 decades, so
/// each block's scale matters. Quantized tensors are numbered in record
/// order (forward X, W; dX's dY, W; dW's dY, X), which the twins follow.
/// Where one quantized copy of the weights serves both products
/// (`Linear::quantize_weights`), it is the twin's, and the products read
/// it as they read their own quantization, bit for bit.
pub async fn linear_recipe_reads_its_formats(gpu: &Gpu) -> Result<()> {
    use webtrain::model::Recipe;
    use webtrain::ops::products::{Operand, OperandFormat, Products};
    let format = |name: &str| Operand::of(OperandFormat::parse(name).unwrap());
    let stochastic = |o: Operand| Operand {
        rounding: webtrain::ops::products::Rounding::Stochastic,
        ..o
    };
    // signs drawn per step here (the test's step is 7), fixed in nvfp4's
    let hadamard = |o: Operand| Operand {
        hadamard: true,
        hadamard_signs: webtrain::ops::products::HadamardSigns::PerStep,
        ..o
    };
    let mixed = Products {
        forward: [format("mxfp4"), format("mxfp8-e5m2")],
        dgrad: [format("e5m2-tensor"), stochastic(format("mxfp6-e2m3"))],
        wgrad: [
            hadamard(stochastic(format("mxfp8-e4m3"))),
            hadamard(format("bf16")),
        ],
    };
    let s = LinearShape::stacked(48, 80, &[48, 32, 16])?;
    let fp8 = LinearShape::stacked(67, 300, &[90, 37, 73])?;
    // Quartet II's 128-point transforms along dX's K (128) and dW's (128);
    // Quartet's forward K of 80: two blocks of 32 and a last of 16 (QuEST's
    // σ over its own 16), transforms of 16
    let quartet = LinearShape::stacked(128, 80, &[64, 32, 32])?;
    for (name, products, s) in [
        ("nvfp4", Recipe::named("nvfp4")?.products(), s),
        (
            "quartet-ii",
            Recipe::named("quartet-ii")?.products(),
            quartet,
        ),
        ("quartet", Recipe::named("quartet")?.products(), quartet),
        ("mixed", mixed, s),
        ("fp8", Recipe::fp8().products(), fp8),
    ] {
        check_recipe_products(gpu, name, products, s, 150, None).await?;
    }
    // the products on (emulated) matrix units: the same operands, every
    // product's shape a multiple of the tiles, all three on the units; and
    // one that is not (rows 40), on the scalar GEMMs
    if gpu.caps.shader_f16 {
        let units = Some(MatrixUnits::Emulated);
        for (name, products) in [
            ("amp-f16", Recipe::named("amp-f16")?.products()),
            ("nvfp4", Recipe::named("nvfp4")?.products()),
            ("mixed", mixed),
            ("fp8", Recipe::fp8().products()),
        ] {
            let name = format!("{name} on matrix units");
            check_recipe_products(gpu, &name, products, s, 151, units).await?;
        }
        let s = LinearShape::stacked(40, 80, &[48, 32, 16])?;
        let amp = Recipe::named("amp-f16")?.products();
        check_recipe_products(gpu, "amp-f16, rows 40", amp, s, 151, units).await?;
    }
    Ok(())
}

/// A linear's products on matrix units so far (`UnitCounts`), read back.
async fn unit_counts(gpu: &Gpu, k: &Linear) -> Result<UnitCounts> {
    let buffer = gpu.storage_buffer("unit counts", 16)?;
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    k.copy_unit_counts(&mut encoder, &buffer, 0);
    gpu.queue.submit([encoder.finish()]);
    let words = gpu.read_back::<u32>((&buffer).into()).await?;
    Ok(UnitCounts::from_words(
        &words.try_into().expect("four words"),
    ))
}

/// Every finite f16 value reaches the (emulated) units as itself: amp-f16's
/// forward of X [4096, 16] holding all 63 488 of them (zeros after) times
/// W = I gives X back, each output one exact product plus zeros.
pub async fn units_carry_every_f16_value(gpu: &Gpu) -> Result<()> {
    use webtrain::model::Recipe;
    if !gpu.caps.shader_f16 {
        return Ok(());
    }
    let (rows, d) = (4096, 16);
    let mut x: Vec<f32> = (0..=u16::MAX)
        .map(f16::from_bits)
        .filter(|h| h.is_finite())
        .map(f32::from)
        .collect();
    x.resize(rows * d, 0.0);
    let w: Vec<f32> = (0..d * d).map(|i| (i / d == i % d) as u32 as f32).collect();
    let p = Recipe::named("amp-f16")?.products();
    let k = Linear::with_units(gpu, p, 1, Some(MatrixUnits::Emulated)).await?;
    let (xb, wb) = (gpu.upload("x", &x)?, gpu.upload("w", &w)?);
    let y = gpu.storage_buffer("y", 4 * x.len() as u64)?;
    let s = LinearShape::new(rows as u32, d as u32, d as u32);
    let master = Weights::F32((&wb).into());
    let out = Output::Store((&y).into());
    gpu.run(&refs(&k.forward(gpu, s, (&xb).into(), master, out)?))
        .await?;
    let got = gpu.read_back::<f32>((&y).into()).await?;
    // −0 comes back +0: a sum of products with +0 terms
    let wrong = x.iter().zip(&got).position(|(a, b)| a != b);
    assert_eq!(wrong, None, "every f16 value through the units");
    let c = unit_counts(gpu, &k).await?;
    assert_eq!((c.on_units, c.not_exact), (1, 0), "{c:?}");
    Ok(())
}

/// mxfp8's products on matrix units where one row of X lies 2^-60 below
/// the rest: its MX blocks keep it, but times the tensor's multiplier it
/// is below f16's subnormals, so the gate sends the forward to the scalar
/// GEMM (bit for bit the product without units) and counts it and its
/// values; the backward products, whose operands stay within f16's
/// reach, run on the units.
pub async fn units_fall_back_where_a_value_is_not_exact(gpu: &Gpu) -> Result<()> {
    use webtrain::model::Recipe;
    if !gpu.caps.shader_f16 {
        return Ok(());
    }
    let p = Recipe::named("mxfp8")?.products();
    let s = LinearShape::new(32, 64, 48);
    let (rows, d_in, d_out) = (32, 64, 48);
    let mut r = rng(152);
    let mut x = uniform(&mut r, rows * d_in, 0.5, 1.0);
    x[5 * d_in..6 * d_in]
        .iter_mut()
        .for_each(|v| *v *= 2f32.powi(-60));
    let w = uniform(&mut r, d_out * d_in, -0.1, 0.1);
    let dy = uniform(&mut r, rows * d_out, -1e-3, 1e-3);
    let (xb, wb, dyb) = (
        gpu.upload("x", &x)?,
        gpu.upload("w", &w)?,
        gpu.upload("dy", &dy)?,
    );
    let master = Weights::F32((&wb).into());
    let mut results = Vec::new();
    for units in [None, Some(MatrixUnits::Emulated)] {
        let k = Linear::with_units(gpu, p, 1, units).await?;
        let y = gpu.storage_buffer("y", 4 * (rows * d_out) as u64)?;
        let dx = gpu.storage_buffer("dx", 4 * (rows * d_in) as u64)?;
        let dw = gpu.upload("dw", &vec![0f32; d_out * d_in])?;
        let mut d = k.forward(gpu, s, (&xb).into(), master, Output::Store((&y).into()))?;
        let out = Output::Store((&dx).into());
        d.extend(k.backward_input(gpu, s, (&dyb).into(), master, out)?);
        d.extend(k.backward_weight(gpu, s, (&dyb).into(), (&xb).into(), (&dw).into())?);
        gpu.run(&refs(&d)).await?;
        let mut got = Vec::new();
        for b in [&y, &dx, &dw] {
            got.push(gpu.read_back::<f32>(b.into()).await?);
        }
        if units.is_some() {
            let c = unit_counts(gpu, &k).await?;
            let want = UnitCounts {
                on_units: 2,
                not_exact: 1,
                values_not_exact: d_in as u32,
                ..UnitCounts::default()
            };
            assert_eq!(c, want, "the forward falls back, its row counted");
        }
        results.push(got);
    }
    assert_identical("the forward, fallen back", &results[1][0], &results[0][0]);
    for (i, what) in [(1, "dX"), (2, "dW")] {
        // the same sums in another order: apart by f32 roundings alone
        let (units, scalar) = (&results[1][i], &results[0][i]);
        let largest = scalar.iter().fold(0f32, |m, v| m.max(v.abs()));
        let gap = units
            .iter()
            .zip(scalar)
            .fold(0f32, |m, (u, s)| m.max((u - s).abs()));
        assert!(
            gap <= 1e-6 * largest,
            "{what} on the units: gap {gap}, largest {largest}"
        );
    }
    Ok(())
}

async fn check_recipe_products(
    gpu: &Gpu,
    name: &str,
    p: webtrain::ops::products::Products,
    s: LinearShape,
    seed: u64,
    units: Option<MatrixUnits>,
) -> Result<()> {
    use webtrain::ops::formats::{Blocks, Quantization, Stream};
    use webtrain::ops::products::{BlockShape, HadamardSigns, Operand, OperandFormat, Rounding};
    use webtrain::reference::formats::{hadamard, quantize};
    let (rows, d_in, d_out) = (s.rows as usize, s.d_in as usize, s.d_out as usize);
    let (run_seed, step) = (0x5eed, 7);
    // stochastic rounding's draws, or MS-EDEN's (its scales')
    let draws = |o: &Operand, f: webtrain::ops::formats::Format| {
        o.rounding == Rounding::Stochastic || f.scaling == webtrain::ops::formats::Scaling::MsEden
    };
    let k = Linear::with_units(gpu, p, run_seed, units).await?;
    assert_eq!(k.matrix_units(), units, "{name}: the units asked for serve");
    k.write_step(gpu, step, false);
    let mut r = rng(seed);
    // row i scaled by 2^(i mod 13 − 6): its blocks' scales differ
    let spread = |v: Vec<f32>, cols: usize| -> Vec<f32> {
        let scale = |i: usize| 2f32.powi((i / cols % 13) as i32 - 6);
        v.iter().enumerate().map(|(i, x)| x * scale(i)).collect()
    };
    let x = spread(uniform(&mut r, rows * d_in, -1.0, 1.0), d_in);
    let w = spread(uniform(&mut r, d_out * d_in, -0.1, 0.1), d_in);
    let dy = spread(uniform(&mut r, rows * d_out, -1e-3, 1e-3), d_out);
    // `v` [_, c] through `o`'s Hadamard transform (or its inverse) along K
    // (down the rows where `k_down`), if it has one
    let transform = |o: &Operand, v: &[f32], c: usize, k_down: bool, inverse: bool| {
        if !o.hadamard {
            return v.to_vec();
        }
        let signs = |step| {
            Some(Stream {
                seed: run_seed,
                step,
                tensor: 0,
            })
        };
        let signs = match o.hadamard_signs {
            HadamardSigns::Fixed => signs(0),
            HadamardSigns::PerStep => signs(step),
            HadamardSigns::None => None,
        };
        let (blocks, k) = match k_down {
            true => (Blocks::Columns, v.len() / c),
            false => (Blocks::Rows, c),
        };
        let size = o.hadamard_block(k).expect("K in sixteens");
        hadamard(v, signs, inverse, c, (blocks, size))
    };
    let rotate = |o: &Operand, v: &[f32], c: usize, k_down: bool| transform(o, v, c, k_down, false);
    // the twin of operand `o`, the `tensor`-th quantized: `v` [r, c] with K
    // down the rows (`k_down`) or along them, stacked parts beginning at
    // rows `row_parts` (blocks along a row see none)
    let twin = |o: Operand, tensor: u32, v: &[f32], c: usize, k_down: bool, row_parts: [u32; 2]| {
        let (blocks, parts) = match (o.blocks, k_down) {
            (BlockShape::Square, _) => (Blocks::Square, row_parts),
            (BlockShape::Line, false) => (Blocks::Rows, [0, 0]),
            (BlockShape::Line, true) => (Blocks::Columns, row_parts),
        };
        let v = rotate(&o, v, c, k_down);
        let OperandFormat::Format(format) = o.format else {
            return v;
        };
        let stream = Stream {
            seed: run_seed,
            step,
            tensor,
        };
        let q = Quantization {
            parts,
            ..Quantization::new(format, blocks, draws(&o, format).then_some(stream))
        };
        quantize(&q, &v, c).0
    };
    let none = [0, 0];
    // dX's dY: blocks along its rows, cut where the stacked parts' columns begin
    let twin_along = |o: Operand, tensor: u32, v: &[f32], c: usize, col_parts: [u32; 2]| {
        let v = &rotate(&o, v, c, false);
        let OperandFormat::Format(format) = o.format else {
            return v.to_vec();
        };
        let stream = Stream {
            seed: run_seed,
            step,
            tensor,
        };
        let q = Quantization {
            parts: col_parts,
            ..Quantization::new(format, Blocks::Rows, draws(&o, format).then_some(stream))
        };
        quantize(&q, v, c).0
    };
    let (xb, wb, dyb) = (
        gpu.upload("x", &x)?,
        gpu.upload("w", &w)?,
        gpu.upload("dy", &dy)?,
    );
    let (y, dx) = (
        gpu.storage_buffer("y", 4 * (rows * d_out) as u64)?,
        gpu.storage_buffer("dx", 4 * (rows * d_in) as u64)?,
    );
    let dw = gpu.upload("dw", &vec![0f32; d_out * d_in])?;
    let what = |product: &str| format!("{name} recipe, {product} of {s:?}");
    let master = Weights::F32((&wb).into());

    let out = Output::Store((&y).into());
    gpu.run(&refs(&k.forward(gpu, s, (&xb).into(), master, out)?))
        .await?;
    // each operand's number among those put through a format, in record order
    let id = |i: usize| {
        p.all()[..i]
            .iter()
            .filter(|o| matches!(o.format, OperandFormat::Format(_)))
            .count() as u32
    };
    let xq = twin(p.forward[0], id(0), &x, d_in, false, none);
    let wq = twin(p.forward[1], id(1), &w, d_in, false, s.parts);
    let got = gpu.read_back::<f32>((&y).into()).await?;
    assert_product(&what("forward"), &got, &xq, &wq, d_in);
    let y_master = got.clone();
    if units.is_some() {
        // joining the residual stream: Y = R + X·Wᵀ with R = the product
        // itself (a Linear of its own: its operands draw as the first's)
        let y2 = gpu.storage_buffer("y2", 4 * (rows * d_out) as u64)?;
        let out = Output::AddTo {
            residual: (&y).into(),
            y: (&y2).into(),
        };
        let k = Linear::with_units(gpu, p, run_seed, units).await?;
        k.write_step(gpu, step, false);
        gpu.run(&refs(&k.forward(gpu, s, (&xb).into(), master, out)?))
            .await?;
        let (a64, b64) = (f64s(&xq), f64s(&wq));
        let (mut want, mut tol) = (Vec::new(), Vec::new());
        for (at, &r) in got.iter().enumerate() {
            let (i, j) = (at / d_out, at % d_out);
            want.push(r as f64 + reference::forward_at(&a64, &b64, d_in, i, j));
            let abs = reference::forward_abs_at(&a64, &b64, d_in, i, j);
            tol.push(bound(d_in + 1, abs + (r as f64).abs()));
        }
        let y2 = gpu.read_back::<f32>((&y2).into()).await?;
        assert_within(&what("forward + residual"), &y2, &want, &tol);
    }

    let out = Output::Store((&dx).into());
    gpu.run(&refs(&k.backward_input(
        gpu,
        s,
        (&dyb).into(),
        master,
        out,
    )?))
    .await?;
    let dyq = twin_along(p.dgrad[0], id(2), &dy, d_out, s.parts);
    let wq = twin(p.dgrad[1], id(3), &w, d_in, true, s.parts);
    let got = gpu.read_back::<f32>((&dx).into()).await?;
    assert_product(&what("dX"), &got, &dyq, &transpose(&wq, d_in), d_out);

    if p.shares_quantized_weights() {
        // a Linear of its own, its products recorded before the copy as a
        // model records them, so that their draws are numbered as the first's
        let k = Linear::with_units(gpu, p, run_seed, units).await?;
        k.write_step(gpu, step, false);
        let buffer = gpu.storage_buffer("w_copy", 4 * (d_out * d_in) as u64)?;
        let copy = Weights::Quantized((&buffer).into());
        let forward = k.forward(gpu, s, (&xb).into(), copy, Output::Store((&y).into()))?;
        let out = Output::Store((&dx).into());
        let dgrad = k.backward_input(gpu, s, (&dyb).into(), copy, out)?;
        let d = k.quantize_weights(gpu, s, (&wb).into(), (&buffer).into())?;
        gpu.run(&refs(&d)).await?;
        let want = twin(p.forward[1], id(1), &w, d_in, false, s.parts);
        let copied = gpu.read_back::<f32>((&buffer).into()).await?;
        assert_identical(&what("the weights' copy"), &copied, &want);
        gpu.run(&refs(&forward)).await?;
        let y_copy = gpu.read_back::<f32>((&y).into()).await?;
        assert_identical(&what("forward from the copy"), &y_copy, &y_master);
        gpu.run(&refs(&dgrad)).await?;
        let dx_copy = gpu.read_back::<f32>((&dx).into()).await?;
        assert_identical(&what("dX from the copy"), &dx_copy, &got);
    }

    let d = k.backward_weight(gpu, s, (&dyb).into(), (&xb).into(), (&dw).into())?;
    gpu.run(&refs(&d)).await?;
    let dyq = twin(p.wgrad[0], id(4), &dy, d_out, true, none);
    let xq = twin(p.wgrad[1], id(5), &x, d_in, true, none);
    let got = gpu.read_back::<f32>((&dw).into()).await?;
    assert_product(
        &what("dW"),
        &got,
        &transpose(&dyq, d_out),
        &transpose(&xq, d_in),
        rows,
    );
    // dW's route, on its scalar GEMM's dispatch
    let fits = s.rows.is_multiple_of(16);
    // both operands in a format the units take (MS-EDEN's, QuEST's and
    // Tseng's values are not an f16 value times one of their multipliers)
    let formatted = p.wgrad.iter().all(|o| {
        use webtrain::ops::formats::Scaling::{MsEden, Quest, Tseng};
        matches!(o.format, OperandFormat::Format(f) if !matches!(f.scaling, MsEden | Quest | Tseng))
    });
    let route = match (units, formatted) {
        (_, false) => Route::Operand,
        (None, true) => Route::NoUnits,
        (Some(_), true) => [Route::Shape, Route::Gated][fits as usize],
    };
    assert_eq!(
        d.iter().find_map(|d| d.route),
        Some(route),
        "{name}: dW's route"
    );
    if p.forward.iter().any(Operand::clips) {
        // QuEST's masks on the GPU's dX and dW: each in its operand's
        // basis, zeroed where the forward clipped, taken back
        let unmasked = [gpu.read_back::<f32>((&dx).into()).await?, got.clone()];
        let d = k.clip_masks(
            gpu,
            s,
            ((&xb).into(), (&dx).into()),
            ((&wb).into(), (&dw).into()),
        )?;
        gpu.run(&refs(&d)).await?;
        let [x_op, w_op] = p.forward;
        for ((what, o, v, g), b) in [
            ("dX", x_op, &x, &unmasked[0]),
            ("dW", w_op, &w, &unmasked[1]),
        ]
        .into_iter()
        .zip([&dx, &dw])
        {
            let mut want = transform(&o, g, d_in, false, false);
            let rotated = rotate(&o, v, d_in, false);
            webtrain::reference::formats::quartet::quest_mask(&rotated, &mut want, d_in);
            let want = transform(&o, &want, d_in, false, true);
            let masked = gpu.read_back::<f32>(b.into()).await?;
            assert_identical(&format!("{name}: {what} masked"), &masked, &want);
            let zeroed = masked.iter().zip(g).filter(|(m, g)| *m != *g).count();
            assert!(zeroed > 0, "{name}: {what}'s mask changed nothing");
        }
    }
    if units.is_some() {
        // forward, dX and dW: all on the units where the shape fits
        let c = unit_counts(gpu, &k).await?;
        let want = [0, 3][fits as usize];
        assert_eq!((c.on_units, c.not_exact), (want, 0), "{name}: {c:?}");
    }
    Ok(())
}
