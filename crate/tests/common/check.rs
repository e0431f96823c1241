//! Comparison against references, with failures that say where and by how much.

use half::f16;
use rand::RngCore;
use webtrain::rng::SplitMix64;

/// The tests' RNG: the library's one seeded RNG, behind rand's `Rng` for
/// the integer and float ranges the tests draw besides `uniform`.
pub struct TestRng(SplitMix64);

impl RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        (self.0.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.0.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

pub fn rng(seed: u64) -> TestRng {
    TestRng(SplitMix64(seed))
}

/// f32 values at the edges of every format: ±0, ±Inf, NaN, ±the largest,
/// the smallest normal, subnormals.
pub const F32_SPECIALS: [f32; 11] = [
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    f32::MAX,
    -f32::MAX,
    f32::MIN_POSITIVE,
    1e-40,
    -1e-40,
    f32::from_bits(1),
];

/// A decode's shape from (B, L, Lmax, H, Hkv, Dh).
pub fn decode_shape(
    (batch, len, max_len, heads, kv_heads, head_dim): (u32, u32, u32, u32, u32, u32),
) -> webtrain::kernels::DecodeShape {
    webtrain::kernels::DecodeShape {
        batch,
        len,
        max_len,
        heads,
        kv_heads,
        head_dim,
    }
}

/// `n` values uniform in `lo..hi`: the bench's and the tuner's generator
/// (webtrain::rng::uniform).
pub fn uniform(rng: &mut TestRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    webtrain::rng::uniform(&mut rng.0, n, lo, hi)
}

/// Asserts `|got - want| <= atol + rtol * |want|` everywhere; on failure
/// names the first bad index, both values, and the worst difference.
/// `want` may be f32 or the f64 of a reference twin.
pub fn assert_close<W: Copy + Into<f64>>(
    what: &str,
    got: &[f32],
    want: &[W],
    atol: f64,
    rtol: f64,
) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let want: Vec<f64> = want.iter().map(|&w| w.into()).collect();
    let mut first_bad = None;
    let mut worst = (0usize, 0f64);
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let g64 = g as f64;
        let diff = (g64 - w).abs();
        let ok = diff <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan()) || g64 == w;
        if !ok && first_bad.is_none() {
            first_bad = Some(i);
        }
        if diff > worst.1 || (diff.is_nan() && !worst.1.is_nan()) {
            worst = (i, diff);
        }
    }
    measured(what, worst.1, &want, got);
    if let Some(i) = first_bad {
        let bad = got
            .iter()
            .zip(&want)
            .filter(|&(&g, &w)| g as f64 != w)
            .count();
        panic!(
            "{what}: index {i}: got {} want {} (atol {atol:e}, rtol {rtol:e}); worst |diff| {:e} at {} (got {} want {}); {bad} of {} differ",
            got[i],
            want[i],
            worst.1,
            worst.0,
            got[worst.0],
            want[worst.0],
            got.len()
        );
    }
}

/// Asserts identical f16 bit patterns, any NaN matching any NaN.
pub fn assert_f16_identical(what: &str, inputs: &[f32], got: &[f16], want: &[f16]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let same = |g: f16, w: f16| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
    let bad: Vec<usize> = (0..got.len()).filter(|&i| !same(got[i], want[i])).collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{what}: index {i}: input {:e} ({:#010x}) gave f16 {:#06x} ({}) want {:#06x} ({}); {} of {} differ",
            inputs[i],
            inputs[i].to_bits(),
            got[i].to_bits(),
            got[i],
            want[i].to_bits(),
            want[i],
            bad.len(),
            got.len()
        );
    }
}

/// Asserts bit-identical f32 values, any NaN matching any NaN.
pub fn assert_identical(what: &str, got: &[f32], want: &[f32]) {
    assert_close(what, got, want, 0.0, 0.0);
}

/// With `WEBTRAIN_MEASURE=1` set when the tests are built, every comparison
/// prints its worst absolute and relative error (run with `--nocapture`):
/// how tolerance comments get their measured numbers, on each adapter.
fn measured(what: &str, worst_abs: f64, want: &[f64], got: &[f32]) {
    if option_env!("WEBTRAIN_MEASURE").is_none() {
        return;
    }
    let worst_rel = got
        .iter()
        .zip(want)
        .filter(|&(_, &w)| w != 0.0)
        .map(|(&g, &w)| ((g as f64 - w) / w).abs())
        .fold(0.0, f64::max);
    let line = format!("measure: {what}: worst abs {worst_abs:.3e}, worst rel {worst_rel:.3e}");
    #[cfg(target_arch = "wasm32")]
    web_sys::console::log_1(&line.into());
    #[cfg(not(target_arch = "wasm32"))]
    println!("{line}");
}

/// Asserts `|got[i] − want[i]| <= bound[i]` everywhere, for tolerances that
/// differ per element (e.g. a dot product's error scales with its Σ|a·b|).
/// With `WEBTRAIN_MEASURE`, prints the worst `|error| / bound` seen.
pub fn assert_within(what: &str, got: &[f32], want: &[f64], bound: &[f64]) {
    assert_eq!(
        (got.len(), want.len()),
        (bound.len(), bound.len()),
        "{what}: lengths"
    );
    let err = |i: usize| (got[i] as f64 - want[i]).abs();
    let worst = (0..got.len()).max_by(|&i, &j| (err(i) / bound[i]).total_cmp(&(err(j) / bound[j])));
    let Some(w) = worst else { return };
    if option_env!("WEBTRAIN_MEASURE").is_some() {
        let line = format!(
            "measure: {what}: worst |error|/bound {:.3e} ({:.3e} at {w})",
            err(w) / bound[w],
            err(w)
        );
        #[cfg(target_arch = "wasm32")]
        web_sys::console::log_1(&line.into());
        #[cfg(not(target_arch = "wasm32"))]
        println!("{line}");
    }
    // a NaN error compares as neither less nor equal: it fails
    let within = |i: usize| {
        matches!(
            err(i).partial_cmp(&bound[i]),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        )
    };
    if let Some(i) = (0..got.len()).find(|&i| !within(i)) {
        panic!(
            "{what}: index {i}: got {} want {} (bound {:e}); worst |error|/bound {:.3} at {w} (got {} want {})",
            got[i],
            want[i],
            bound[i],
            err(w) / bound[w],
            got[w],
            want[w]
        );
    }
}

/// Asserts `|got − want| <= tol · max|want|` everywhere: for values whose
/// error comes from long f32 chains and is best judged against the
/// tensor's scale (a model's logits and gradients). With
/// `WEBTRAIN_MEASURE`, prints the worst `|error| / max|want|`.
pub fn assert_close_to_scale(what: &str, got: &[f32], want: &[f64], tol: f64) {
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    assert!(
        scale > 0.0 || want.is_empty(),
        "{what}: the reference is all zeros, nothing is tested"
    );
    if option_env!("WEBTRAIN_MEASURE").is_some() {
        let worst = got
            .iter()
            .zip(want)
            .map(|(&g, &w)| (g as f64 - w).abs())
            .fold(0.0, f64::max);
        let line = format!(
            "measure: {what}: worst |error|/max|want| {:.3e} (max {scale:.3e})",
            worst / scale
        );
        #[cfg(target_arch = "wasm32")]
        web_sys::console::log_1(&line.into());
        #[cfg(not(target_arch = "wasm32"))]
        println!("{line}");
    }
    assert_within(what, got, want, &vec![tol * scale; want.len()]);
}

/// The dispatches of a launcher that returns several, as `Gpu::run` takes them.
pub fn refs(d: &[webtrain::gpu::Dispatch]) -> Vec<&webtrain::gpu::Dispatch> {
    d.iter().collect()
}

/// A weight bf16-sr rounded against its twin's: a bf16 value, and equal or
/// one bf16 step apart (where the kernel's update and the twin's straddle
/// the draw). True when apart.
pub fn bf16_sr_apart(what: &str, got: f32, want: f32) -> bool {
    assert_eq!(
        got.to_bits() & 0xffff,
        0,
        "{what} = {got}: not a bf16 value"
    );
    if got == want {
        return false;
    }
    assert_eq!(
        got.to_bits().abs_diff(want.to_bits()),
        0x1_0000,
        "{what}: {got} against the twin's {want}"
    );
    true
}
