//! Twins of 12_optimizer.wgsl, in f64, following torch.optim.AdamW's order.

use crate::kernels::AdamHyper;

/// (norm of the finite gradients, clip scale, count of non-finite ones).
pub fn grad_stats(grads: &[f32], max_norm: f64) -> (f64, f64, u32) {
    let sum: f64 = grads.iter().filter(|g| g.is_finite()).map(|&g| (g as f64) * (g as f64)).sum();
    let norm = sum.sqrt();
    let clip = if max_norm > 0.0 && norm > max_norm { max_norm / norm } else { 1.0 };
    (norm, clip, grads.iter().filter(|g| !g.is_finite()).count() as u32)
}

/// AdamW step `t` over one block; non-finite gradients count as 0.
#[allow(clippy::too_many_arguments)] // the optimizer's whole state, as the kernel
pub fn adamw(h: &AdamHyper, t: u32, decays: bool, clip: f64, w: &mut [f64], g: &[f32], m: &mut [f64], v: &mut [f64]) {
    let wd = if decays { h.weight_decay } else { 0.0 };
    let step_size = h.lr / (1.0 - h.beta1.powi(t as i32));
    let bc2_sqrt = (1.0 - h.beta2.powi(t as i32)).sqrt();
    for i in 0..w.len() {
        let g = if g[i].is_finite() { g[i] as f64 * clip } else { 0.0 };
        m[i] += (1.0 - h.beta1) * (g - m[i]);
        v[i] = h.beta2 * v[i] + (1.0 - h.beta2) * g * g;
        w[i] = w[i] * (1.0 - h.lr * wd) - step_size * (m[i] / (v[i].sqrt() / bc2_sqrt + h.eps));
    }
}
