//! Twins of 12_optimizer.wgsl, in f64, following torch.optim.AdamW's order.
//!
//! The 8-bit state's twin computes the new moments in f32 with the kernel's
//! own formulas (correctly rounded + − × only), so it makes the same
//! quantization decision as the GPU, code for code; only the weight update
//! is evaluated in f64.

use crate::ops::adam::AdamHyper;
use crate::ops::loss_scale::{LossScale, LossScaling, MAX_SCALE, MIN_SCALE};

/// (norm of the finite gradients, clip scale, count of non-finite ones).
pub fn grad_stats(grads: &[f32], max_norm: f64) -> (f64, f64, u32) {
    let sum: f64 = grads
        .iter()
        .filter(|g| g.is_finite())
        .map(|&g| (g as f64) * (g as f64))
        .sum();
    let norm = sum.sqrt();
    (
        norm,
        clip_for(norm, max_norm),
        grads.iter().filter(|g| !g.is_finite()).count() as u32,
    )
}

/// finalize_grad_stats with loss scaling: `grads` carry `state.scale`.
/// Returns (the unscaled norm, AdamW's factor clip/scale, the non-finite
/// count, skip) and the next state. A step is skipped, as GradScaler skips
/// it, when any gradient is non-finite, and also when the loss is or Σg²
/// overflows f32 (as without scaling).
pub fn scaled_grad_stats(
    grads: &[f32],
    max_norm: f64,
    loss: f32,
    s: &LossScaling,
    state: LossScale,
) -> ((f64, f64, u32, bool), LossScale) {
    let (scaled, _, bad) = grad_stats(grads, 0.0);
    let scale = state.scale as f64;
    let norm = scaled / scale;
    let skip = !loss.is_finite() || bad > 0 || scaled * scaled > f32::MAX as f64;
    let stats = (norm, clip_for(norm, max_norm) / scale, bad, skip);
    (stats, next_loss_scale(s, state, skip))
}

fn clip_for(norm: f64, max_norm: f64) -> f64 {
    if max_norm > 0.0 && norm > max_norm {
        max_norm / norm
    } else {
        1.0
    }
}

/// GradScaler's update of the scale after a step: on a skip, backoff and
/// the clean count restarts; after `growth_interval` clean steps, growth.
/// Kept within [`MIN_SCALE`, `MAX_SCALE`].
pub fn next_loss_scale(s: &LossScaling, state: LossScale, skip: bool) -> LossScale {
    let mut next = state;
    if skip {
        next.scale = (state.scale * s.backoff).max(MIN_SCALE);
        next.clean = 0;
        next.skipped += 1;
    } else {
        next.clean += 1;
        if next.clean >= s.growth_interval {
            next.scale = (state.scale * s.growth).min(MAX_SCALE);
            next.clean = 0;
        }
    }
    next.changes += (next.scale != state.scale) as u32;
    next
}

/// Step `t`'s decay, step size and √(1 − β2^t), in f64 as torch computes them.
fn step_constants(h: &AdamHyper, t: u32, decays: bool) -> (f64, f64, f64) {
    let wd = if decays { h.weight_decay } else { 0.0 };
    let step_size = h.lr / (1.0 - h.beta1.powi(t as i32));
    (wd, step_size, (1.0 - h.beta2.powi(t as i32)).sqrt())
}

/// AdamW step `t` over one block; non-finite gradients count as 0.
#[allow(clippy::too_many_arguments)] // the optimizer's whole state, as the kernel
pub fn adamw(
    h: &AdamHyper,
    t: u32,
    decays: bool,
    clip: f64,
    w: &mut [f64],
    g: &[f32],
    m: &mut [f64],
    v: &mut [f64],
) {
    let (wd, step_size, bc2_sqrt) = step_constants(h, t, decays);
    for i in 0..w.len() {
        let g = if g[i].is_finite() {
            g[i] as f64 * clip
        } else {
            0.0
        };
        m[i] += (1.0 - h.beta1) * (g - m[i]);
        v[i] = h.beta2 * v[i] + (1.0 - h.beta2) * g * g;
        w[i] = w[i] * (1.0 - h.lr * wd) - step_size * (m[i] / (v[i].sqrt() / bc2_sqrt + h.eps));
    }
}

// ---------------------------------------------------------------------------
// 8-bit state: block-wise dynamic quantization (Dettmers et al., "8-bit
// optimizers via block-wise quantization"). Each moment is stored as one
// byte per value, 4 per u32 (element 4k+j in byte j of word k), plus one
// f32 scale per block of 256 values: the block's absmax after the update.

pub use crate::ops::adam::{
    ByteCode, Fp8Code, Int4Code, Int8Map, Int8Maps, LinearCode, QBLOCK, bf16_bits, bf16_value,
    dither, moment1_points, moment2_points,
};

/// What the bytes of 8-bit state stand for.
#[derive(Clone, Debug)]
pub enum StateCode {
    /// Tables, rounded stochastically (int8: `Int8Maps::dynamic`).
    Table(Box<Int8Maps>),
    /// TorchAO's FP8 state.
    E4m3,
    /// TorchAO's 4-bit state: nibbles, blocks of 128.
    Int4,
    /// m on 8-bit Muon's linear code, to nearest; v on this table,
    /// stochastically (`StateCode::linear`: int8's).
    Linear(Box<Int8Map>),
}

impl StateCode {
    /// int8-linear's: v on the dynamic table.
    pub fn linear() -> Self {
        StateCode::Linear(Box::new(Int8Maps::dynamic().v))
    }

    /// How its codes are packed and blocked.
    pub fn geometry(&self) -> ByteCode {
        match self {
            StateCode::Table(_) => ByteCode::Dynamic,
            StateCode::E4m3 => ByteCode::E4m3,
            StateCode::Int4 => ByteCode::Int4,
            StateCode::Linear(_) => ByteCode::Linear,
        }
    }
}

/// Packed block-wise AdamW state of `n` values: codes 4 (int4: 8) per
/// word, scales per block, as the kernel's buffers hold them. All zeros is
/// the initial state.
#[derive(Clone, Debug)]
pub struct Adam8bitState {
    pub code: StateCode,
    pub m: Vec<u32>,
    pub v: Vec<u32>,
    pub m_scales: Vec<f32>,
    pub v_scales: Vec<f32>,
}

impl Adam8bitState {
    pub fn new(n: usize, code: StateCode) -> Self {
        let g = code.geometry();
        let (words, blocks) = (g.code_bytes(n as u64) as usize / 4, n.div_ceil(g.block()));
        Adam8bitState {
            code,
            m: vec![0; words],
            v: vec![0; words],
            m_scales: vec![0.0; blocks],
            v_scales: vec![0.0; blocks],
        }
    }

    /// Element `i`'s code in `words`.
    pub fn code_at(&self, words: &[u32], i: usize) -> u8 {
        self.code.geometry().code_at(bytemuck::cast_slice(words), i)
    }

    /// The dequantized first moment of element `i`.
    pub fn moment1(&self, i: usize) -> f32 {
        let block = self.code.geometry().block();
        let (c, s) = (self.code_at(&self.m, i), self.m_scales[i / block]);
        match &self.code {
            StateCode::Table(maps) => maps.m.dequantize(c, s),
            StateCode::E4m3 => Fp8Code::value(c, s),
            StateCode::Int4 => Int4Code::value(c, s, &Int4Code::maps()[0]),
            StateCode::Linear(_) => LinearCode::value(c, s),
        }
    }

    pub fn moment2(&self, i: usize) -> f32 {
        let block = self.code.geometry().block();
        let (c, s) = (self.code_at(&self.v, i), self.v_scales[i / block]);
        match &self.code {
            StateCode::Table(maps) => maps.v.dequantize(c, s),
            StateCode::E4m3 => Fp8Code::value(c, s),
            StateCode::Int4 => Int4Code::value(c, s, &Int4Code::maps()[1]),
            StateCode::Linear(v) => v.dequantize(c, s),
        }
    }

    /// The scales a block whose new moments reach `(m_max, v_max)` stores.
    fn scales(&self, m_max: f32, v_max: f32) -> (f32, f32) {
        match self.code {
            StateCode::Table(_) | StateCode::Linear(_) => (m_max, v_max),
            StateCode::E4m3 => (Fp8Code::scale(m_max), Fp8Code::scale(v_max)),
            StateCode::Int4 => (Int4Code::scale(m_max), Int4Code::scale(v_max)),
        }
    }

    /// The codes of element `i`'s new moments (m, v) under the block's
    /// scales, at step `t`.
    fn codes(&self, i: usize, (m, v): (f32, f32), (sm, sv): (f32, f32), t: u32) -> (u8, u8) {
        match &self.code {
            StateCode::Table(maps) => (
                maps.m.quantize(m, sm, dither(i as u32, t, 0)),
                maps.v.quantize(v, sv, dither(i as u32, t, 1)),
            ),
            StateCode::E4m3 => (Fp8Code::code(m, sm), Fp8Code::code(v, sv)),
            StateCode::Int4 => {
                let [m4, v4] = Int4Code::maps();
                (Int4Code::code(m, sm, &m4), Int4Code::code(v, sv, &v4))
            }
            StateCode::Linear(map) => (
                LinearCode::code(m, sm),
                map.quantize(v, sv, dither(i as u32, t, 1)),
            ),
        }
    }
}

/// One element of a low-precision state's step, as the kernels compute it:
/// the moments read `(m_old, v_old)` updated in f32 (non-finite gradients
/// as 0), the weight updated from them (in f64 here); returns the new
/// moments, for the state to store in its kind.
fn f32_moments_step(
    h: &AdamHyper,
    (t, decays): (u32, bool),
    clip: f32,
    w: &mut f64,
    raw: f32,
    (m_old, v_old): (f32, f32),
) -> (f32, f32) {
    let (wd, step_size, bc2_sqrt) = step_constants(h, t, decays);
    let (b1, b2) = (h.beta1 as f32, h.beta2 as f32);
    let g = if raw.is_finite() { raw * clip } else { 0.0 };
    let m = m_old + (1.0 - b1) * (g - m_old);
    let v = b2 * v_old + (1.0 - b2) * g * g;
    *w = *w * (1.0 - h.lr * wd) - step_size * (m as f64 / ((v as f64).sqrt() / bc2_sqrt + h.eps));
    (m, v)
}

/// AdamW step `t` with 8-bit state, as `adamw_8bit_update` (and
/// `adamw_fp8_update`, `adamw_int4_update`): the moments are dequantized,
/// updated in f32 and used unquantized for this step's weight update (in
/// f64 here), then coded against the block's new absmax: int8
/// stochastically, with the dither of (element, step); fp8 and int4 to
/// nearest. Codes past `w.len()` in the last word hold the code of 0.
pub fn adamw_8bit(
    h: &AdamHyper,
    t: u32,
    decays: bool,
    clip: f32,
    w: &mut [f64],
    g: &[f32],
    s: &mut Adam8bitState,
) {
    let n = w.len();
    let geo = s.code.geometry();
    let (block, per_word) = (geo.block(), geo.per_word() as usize);
    for (b, start) in (0..n).step_by(block).enumerate() {
        let end = (start + block).min(n);
        let (mut m_new, mut v_new) = ([0f32; QBLOCK], [0f32; QBLOCK]);
        for i in start..end {
            let old = (s.moment1(i), s.moment2(i));
            (m_new[i - start], v_new[i - start]) =
                f32_moments_step(h, (t, decays), clip, &mut w[i], g[i], old);
        }
        let m_max = m_new.iter().fold(0f32, |a, x| a.max(x.abs()));
        let v_max = v_new.iter().fold(0f32, |a, &x| a.max(x));
        let scales = s.scales(m_max, v_max);
        (s.m_scales[b], s.v_scales[b]) = scales;
        for i in start..end.next_multiple_of(per_word) {
            let (cm, cv) = s.codes(i, (m_new[i - start], v_new[i - start]), scales, t);
            geo.set_code(bytemuck::cast_slice_mut(&mut s.m), i, cm);
            geo.set_code(bytemuck::cast_slice_mut(&mut s.v), i, cv);
        }
    }
}

/// AdamW step `t` with bf16 moments (two per word, element 2k+j in half j
/// of word k), as `adamw_bf16_update`: the moments are read, updated in f32
/// and used so for the weights (in f64 here), then stored to nearest even.
#[allow(clippy::too_many_arguments)] // the optimizer's whole state, as the kernel
pub fn adamw_bf16(
    h: &AdamHyper,
    t: u32,
    decays: bool,
    clip: f32,
    w: &mut [f64],
    g: &[f32],
    m: &mut [u16],
    v: &mut [u16],
) {
    for i in 0..w.len() {
        let old = (bf16_value(m[i]), bf16_value(v[i]));
        let (m_new, v_new) = f32_moments_step(h, (t, decays), clip, &mut w[i], g[i], old);
        (m[i], v[i]) = (bf16_bits(m_new), bf16_bits(v_new));
    }
}

#[cfg(test)]
mod tests {
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
                (0..255).all(
                    |k| map.steps[k] > 0.0 && map.values[k] + map.steps[k] <= map.values[k + 1]
                ),
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
                ((rng.next_u64() >> 40) as f32 / (1 << 24) as f32 - 0.5)
                    * 10f32.powi(-(i as i32 % 5))
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
            let lr = 1e-2
                * (0.1 + 0.45 * (1.0 + (std::f64::consts::PI * t as f64 / steps as f64).cos()));
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
}
