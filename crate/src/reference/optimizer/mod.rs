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
                (Int4Code::code(m, sm, m4), Int4Code::code(v, sv, v4))
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
mod tests;
