use super::*;
use crate::rng::SplitMix64;

#[test]
fn codes_round_trip_and_are_monotone() {
    for (name, map, zero) in [
        ("m", Int8Maps::dynamic().m, 128u8),
        ("v", Int8Maps::dynamic().v, 0),
    ] {
        assert!(
            map.values.windows(2).all(|p| p[0] < p[1]),
            "{name}: values ascend"
        );
        assert!(
            (0..255)
                .all(|k| map.steps[k] > 0.0 && map.values[k] + map.steps[k] <= map.values[k + 1]),
            "{name}: steps within"
        );
        for scale in [1.0f32, 0.37, 3e-5, 2.5e3] {
            for r in [0, 1, 128, 255] {
                for k in 0..=255u8 {
                    assert_eq!(
                        map.quantize(map.dequantize(k, scale), scale, r),
                        k,
                        "{name}: byte {k} at scale {scale}, dither {r}"
                    );
                }
                assert_eq!(map.quantize(0.0, scale, r), zero, "{name}: 0 is exact");
                assert_eq!(map.quantize(scale, scale, r), 255, "{name}: absmax is 1");
                // for one dither the thresholds ascend
                let sweep: Vec<u8> = (0..=20_000)
                    .map(|i| map.quantize(scale * (i as f32 / 10_000.0 - 1.0), scale, r))
                    .collect();
                assert!(
                    sweep.windows(2).all(|p| p[0] <= p[1]),
                    "{name}: quantize is monotone"
                );
            }
        }
        assert_eq!(map.dequantize(zero, 2.0), 0.0);
    }
    let m = Int8Maps::dynamic().m;
    assert_eq!(
        (m.quantize(-2.0, 2.0, 255), m.values[0]),
        (0, -1.0),
        "-absmax is -1"
    );
}

/// Over the 256 dithers a value between two codes goes up in proportion
/// to its distance from the lower one: the rounding is unbiased.
#[test]
fn stochastic_rounding_is_unbiased() {
    for (name, map) in [("m", Int8Maps::dynamic().m), ("v", Int8Maps::dynamic().v)] {
        for k in [3usize, 100, 128, 129, 200, 254] {
            for frac in [0.0, 0.01, 0.3, 0.5, 0.77, 0.999] {
                let x = map.values[k] + frac * (map.values[k + 1] - map.values[k]);
                let mean = (0..256)
                    .map(|r| map.dequantize(map.quantize(x, 1.0, r), 1.0) as f64)
                    .sum::<f64>()
                    / 256.0;
                // dithers are multiples of 1/256 of a step (cut to 16 bits)
                let width = (map.values[k + 1] - map.values[k]) as f64;
                assert!(
                    (mean - x as f64).abs() <= width / 256.0 * 1.01 + 1e-12,
                    "{name}: byte {k} + {frac}: mean {mean} for {x}"
                );
            }
        }
    }
    // the dither is spread over 0..256
    let mut seen = [0u32; 256];
    (0..65_536).for_each(|i| seen[dither(i, 7, 1) as usize] += 1);
    assert!(
        seen.iter().all(|&c| (192..=320).contains(&c)),
        "dither histogram {:?}",
        &seen[..8]
    );
}

#[test]
fn moment_codes_reach_far_below_the_absmax() {
    let (m, v) = (moment1_points(), moment2_points());
    assert_eq!((m[127], m[128], m[129]), (-1e-7, 0.0, 1e-6));
    // v keeps a code down to 1e-14 of its block's largest
    assert_eq!(Int8Maps::dynamic().v.quantize(1e-14, 1.0, 0), 1);
    assert_eq!((v[0], v[1], v[255]), (0.0, 1e-7, 1.0));
}

/// TorchAO's FP8 state and bf16 moments against the house's casts
/// (`reference::formats`, equal to ml_dtypes'): every E4M3 byte's value
/// is the format's, codes and values round-trip, a value's byte is the
/// cast of its quotient by the scale (subnormal E4M3 quotients, ties and
/// f32 subnormals among them), and the scale floors a zero block at
/// 1e-12/448.
#[test]
fn fp8_and_bf16_state_are_the_casts_they_name() {
    use crate::ops::formats::Element;
    use crate::reference::formats::{decode, round_format};
    for c in (0..0x7fu8).chain(0x80..0xff) {
        let value = Fp8Code::value(c, 1.0);
        assert_eq!(
            value.to_bits(),
            decode(Element::E4m3, c as u32).to_bits(),
            "byte {c:#x}"
        );
        assert_eq!(Fp8Code::code(value, 1.0), c, "byte {c:#x} round-trips");
    }
    let mut rng = SplitMix64(41);
    let mut unit = || (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
    for i in 0..200_000 {
        let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
        // within the block: |x| ≤ absmax, down to 1e-6 of it; every 7th
        // on a tie between two E4M3 values, in a block whose scale is 2^k
        let (absmax, x) = if i % 7 == 0 {
            let k = (unit() * 200.0) as i32 - 100;
            let c = (unit() * 126.0) as u8;
            let mid = (Fp8Code::value(c, 1.0) + Fp8Code::value(c + 1, 1.0)) / 2.0;
            (448.0 * 2f32.powi(k), sign * mid * 2f32.powi(k))
        } else {
            let absmax = 10f32.powf(-30.0 + 60.0 * unit());
            (absmax, sign * absmax * 10f32.powf(-6.0 * unit()))
        };
        let scale = Fp8Code::scale(absmax);
        let want = round_format(x / scale, Element::E4m3);
        let got = Fp8Code::value(Fp8Code::code(x, scale), 1.0);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "x {x:e} in a block of {absmax:e}"
        );
        let y = f32::from_bits(rng_bits(i));
        if y.is_finite() {
            let want = round_format(y, Element::Bf16).to_bits() >> 16;
            assert_eq!(bf16_bits(y) as u32, want, "bf16 of {y:e}");
            assert_eq!(
                bf16_value(bf16_bits(y)).to_bits(),
                round_format(y, Element::Bf16).to_bits()
            );
        }
    }
    assert_eq!(Fp8Code::scale(0.0), 1e-12f32 / 448.0);
    assert_eq!(Fp8Code::scale(448.0), 1.0);
    assert_eq!(Fp8Code::code(0.0, Fp8Code::scale(0.0)), 0);
}

/// Arbitrary f32 bits (every exponent, subnormals and non-finite ones among them).
fn rng_bits(i: u32) -> u32 {
    dither(i, 5, 0) << 24 | dither(i, 6, 1) << 16 | dither(i, 7, 0) << 8 | dither(i, 8, 1)
}

/// From the zero state the first step is plain AdamW (the moments are
/// used before they are quantized), and the state it leaves is one of
/// the two codes around each moment.
#[test]
fn int8_adamw_is_adamw_up_to_its_codes() {
    let h = AdamHyper {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.1,
    };
    let mut rng = SplitMix64(7);
    let n = 1000;
    // five decades of magnitude within every block
    let g: Vec<f32> = (0..n)
        .map(|i| {
            ((rng.next_u64() >> 40) as f32 / (1 << 24) as f32 - 0.5) * 10f32.powi(-(i as i32 % 5))
        })
        .collect();
    let (mut w, mut m, mut v) = (vec![0.3; n], vec![0.0; n], vec![0.0; n]);
    let maps = Int8Maps::dynamic();
    let (mut wq, mut q) = (
        w.clone(),
        Adam8bitState::new(n, StateCode::Table(Box::new(maps.clone()))),
    );
    adamw(&h, 1, true, 0.5, &mut w, &g, &mut m, &mut v);
    adamw_8bit(&h, 1, true, 0.5, &mut wq, &g, &mut q);
    let worst = w
        .iter()
        .zip(&wq)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(
        worst < 1e-8,
        "worst |w − w_int8| {worst:e}: f32 moments give ~1e-7 of a step of lr"
    );
    let step = |map: &Int8Map, k: u8| {
        let k = k as usize;
        (map.values[k.saturating_sub(1)..=(k + 1).min(255)])
            .windows(2)
            .map(|p| p[1] - p[0])
            .fold(0.0, f32::max) as f64
    };
    for i in 0..n {
        let (cm, cv) = (q.code_at(&q.m, i), q.code_at(&q.v, i));
        let (sm, sv) = (q.m_scales[i / QBLOCK] as f64, q.v_scales[i / QBLOCK] as f64);
        assert!(
            (q.moment1(i) as f64 - m[i]).abs() <= step(&maps.m, cm) * sm,
            "m[{i}]: {} for {}",
            q.moment1(i),
            m[i]
        );
        assert!(
            (q.moment2(i) as f64 - v[i]).abs() <= step(&maps.v, cv) * sv,
            "v[{i}]: {} for {}",
            q.moment2(i),
            v[i]
        );
    }
}

/// The moments of a bigram run.
#[derive(Clone)]
enum Bigram {
    F32,
    Bf16,
    Bytes(StateCode),
}

/// A bigram language model `softmax(U·E[a])` (V tokens, d = 16), trained
/// with minibatches from a random transition table with Zipfian token
/// frequencies: a block of 256 state values holds 16 tokens' embedding
/// rows, so rare and frequent tokens (gradients orders of magnitude
/// apart, and sparse) share a scale. Returns the exact expected
/// cross-entropy after `steps` AdamW steps, lr on a cosine to 10 %.
fn bigram_run(seed: u64, steps: u32, beta2: f64, state: Bigram) -> f64 {
    const V: usize = 64;
    const D: usize = 16;
    let mut rng = SplitMix64(seed);
    let mut unit = move || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let mut normal =
        || (-2.0 * unit().max(1e-300).ln()).sqrt() * (std::f64::consts::TAU * unit()).cos();
    let zipf: Vec<f64> = (0..V).map(|k| 1.0 / (k + 1) as f64).collect();
    let p: Vec<f64> = zipf.iter().map(|z| z / zipf.iter().sum::<f64>()).collect();
    let softmax = |l: &[f64]| {
        let top = l.iter().copied().fold(f64::MIN, f64::max);
        let e: Vec<f64> = l.iter().map(|x| (x - top).exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|x| x / s).collect::<Vec<f64>>()
    };
    let table: Vec<Vec<f64>> = (0..V)
        .map(|_| {
            softmax(
                &p.iter()
                    .map(|q| q.ln() + 3.0 * normal())
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let logits = |w: &[f64], a: usize| -> Vec<f64> {
        (0..V)
            .map(|b| (0..D).map(|k| w[a * D + k] * w[V * D + b * D + k]).sum())
            .collect()
    };
    let loss = |w: &[f64]| -> f64 {
        (0..V)
            .map(|a| {
                p[a] * softmax(&logits(w, a))
                    .iter()
                    .zip(&table[a])
                    .map(|(q, t)| -t * q.ln())
                    .sum::<f64>()
            })
            .sum()
    };
    let sample = |dist: &[f64], u: f64| {
        let mut c = 0.0;
        dist.iter()
            .position(|x| {
                c += x;
                c >= u
            })
            .unwrap_or(V - 1)
    };
    let n = 2 * V * D;
    let mut w: Vec<f64> = (0..n).map(|_| 0.02 * normal()).collect();
    let (mut m, mut v) = (vec![0.0; n], vec![0.0; n]);
    let mut q = match &state {
        Bigram::Bytes(code) => Some(Adam8bitState::new(n, code.clone())),
        _ => None,
    };
    let (mut m16, mut v16) = (vec![0u16; n], vec![0u16; n]);
    for t in 1..=steps {
        let mut g = vec![0.0f64; n];
        for _ in 0..16 {
            let a = sample(&p, unit());
            let b = sample(&table[a], unit());
            let probs = softmax(&logits(&w, a));
            for (c, pc) in probs.iter().enumerate() {
                let dl = (pc - f64::from(c == b)) / 16.0;
                for k in 0..D {
                    g[a * D + k] += dl * w[V * D + c * D + k];
                    g[V * D + c * D + k] += dl * w[a * D + k];
                }
            }
        }
        let g: Vec<f32> = g.iter().map(|&x| x as f32).collect();
        let lr =
            1e-2 * (0.1 + 0.45 * (1.0 + (std::f64::consts::PI * t as f64 / steps as f64).cos()));
        let h = AdamHyper {
            lr,
            beta1: 0.9,
            beta2,
            eps: 1e-8,
            weight_decay: 0.1,
        };
        match (&state, q.as_mut()) {
            (_, Some(s)) => adamw_8bit(&h, t, true, 1.0, &mut w, &g, s),
            (Bigram::Bf16, _) => adamw_bf16(&h, t, true, 1.0, &mut w, &g, &mut m16, &mut v16),
            _ => adamw(&h, t, true, 1.0, &mut w, &g, &mut m, &mut v),
        }
    }
    loss(&w)
}

/// The bar: int8 state within 0.5 % of fp32 state's final loss
/// (and bf16's and int8-linear's; fp8's, TorchAO's, diverges; int4's
/// within 5 %).
/// Mean over 3 seeds, β2 = 0.95 (LLaMA's). Measured with stochastic
/// rounding: dynamic +0.10 % (and +0.065 % at β2 = 0.99, +0.084 % at
/// 0.999, where round to nearest lost +0.29 % and +0.44 %: it cannot
/// register the slow drift of v between codes, docs/KERNELS.md); the
/// seed's linear code diverges (a v rounded to 0 under an m that is
/// not: m/eps).
#[test]
fn int8_state_trains_within_half_a_percent_of_fp32() {
    let mean = |state: Bigram| {
        (0..3)
            .map(|s| bigram_run(100 + s, 600, 0.95, state.clone()))
            .sum::<f64>()
            / 3.0
    };
    let table = |maps| Bigram::Bytes(StateCode::Table(Box::new(maps)));
    let fp32 = mean(Bigram::F32);
    let gap = |l: f64| (l - fp32) / fp32;
    let (dynamic, linear) = (
        gap(mean(table(Int8Maps::dynamic()))),
        gap(mean(table(Int8Maps::linear()))),
    );
    let (bf16, fp8, int4) = (
        gap(mean(Bigram::Bf16)),
        gap(mean(Bigram::Bytes(StateCode::E4m3))),
        gap(mean(Bigram::Bytes(StateCode::Int4))),
    );
    let m_linear = gap(mean(Bigram::Bytes(StateCode::linear())));

    let linear_text = if linear.is_finite() {
        format!("{:+.3} %", 100.0 * linear)
    } else {
        "diverged".into()
    };
    println!(
        "final loss: fp32 state {fp32:.5}; int8 dynamic {:+.3} %, int8 linear {linear_text}, int8-linear (m linear, v dynamic) {:+.3} %, bf16 {:+.3} %, fp8 {:+.3} %, int4 {:+.3} %",
        100.0 * dynamic,
        100.0 * m_linear,
        100.0 * bf16,
        100.0 * fp8,
        100.0 * int4
    );
    assert!(
        dynamic.abs() < 0.005,
        "dynamic int8 state: {:+.3} % from fp32",
        100.0 * dynamic
    );
    assert!(
        linear.is_nan() || linear > dynamic,
        "the linear code ({linear}) must do worse than the dynamic one ({dynamic})"
    );
    // bf16 moments (to nearest) measured +0.006 %. TorchAO's FP8 moments
    // diverge here as the linear code does: E4M3 spans 2^-9/448 ≈ 4e-6
    // of its block's absmax, v spans twice the decades of g, so a rare
    // token's v flushes to 0 under an m that does not: m/eps.
    assert!(
        bf16.abs() < 0.005,
        "bf16 state: {:+.3} % from fp32",
        100.0 * bf16
    );
    assert!(
        fp8.is_nan() || fp8 > dynamic,
        "fp8 state ({fp8}) measured worse than int8's dynamic code ({dynamic})"
    );
    // int8-linear (m on 8-bit Muon's linear code to nearest, v on the
    // dynamic table) measured −0.021 %: m's sign and scale survive a
    // linear code; v's small values are what need the dynamic one.
    assert!(
        m_linear.abs() < 0.005,
        "int8-linear state: {:+.3} % from fp32",
        100.0 * m_linear
    );
    // TorchAO's 4-bit state measured +2.57 %: it trains (v's map has no
    // zero, so v reads back at least scale/16 and m/√v stays bounded),
    // but 16 points a block lose more than int8's 256; the bound is
    // twice the measure.
    assert!(
        int4 > dynamic && int4 < 0.05,
        "int4 state: {:+.3} % from fp32, int8's {:+.3} %",
        100.0 * int4,
        100.0 * dynamic
    );
}
