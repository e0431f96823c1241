//! Twins of 02_norm.wgsl. Legend: R rows, D width.

/// `y = x / sqrt(mean(x²) + eps) * g` per row; also returns 1/rms per row.
pub fn rmsnorm_forward(x: &[f64], gain: &[f64], eps: f64) -> (Vec<f64>, Vec<f64>) {
    let d = gain.len();
    let mut y = vec![0.0; x.len()];
    let mut rrms = Vec::with_capacity(x.len() / d);
    for (row, out) in x.chunks(d).zip(y.chunks_mut(d)) {
        let r = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / d as f64 + eps).sqrt();
        for i in 0..d {
            out[i] = row[i] * r * gain[i];
        }
        rrms.push(r);
    }
    (y, rrms)
}

/// Adds the gradients of `rmsnorm_forward` for upstream `dy` into dx and dgain.
pub fn rmsnorm_backward(
    x: &[f64],
    gain: &[f64],
    rrms: &[f64],
    dy: &[f64],
    dx: &mut [f64],
    dgain: &mut [f64],
) {
    let d = gain.len();
    for (row, &r) in rrms.iter().enumerate() {
        let at = row * d..(row + 1) * d;
        let (x, dy, dx) = (&x[at.clone()], &dy[at.clone()], &mut dx[at]);
        let dot: f64 = (0..d).map(|i| gain[i] * dy[i] * x[i]).sum();
        let c = dot * r * r * r / d as f64;
        for i in 0..d {
            dx[i] += r * gain[i] * dy[i] - c * x[i];
            dgain[i] += dy[i] * x[i] * r;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::gradcheck::{assert_gradient, dot, wave};

    #[test]
    fn backward_is_the_gradient_of_forward() {
        let (rows, d, eps) = (3, 5, 1e-5);
        let (x, gain, dy) = (
            wave(rows * d, 0.77, 0.3),
            wave(d, 1.3, 0.3),
            wave(rows * d, 0.41, 0.3),
        );
        let (_, rrms) = rmsnorm_forward(&x, &gain, eps);
        let (mut dx, mut dgain) = (vec![0.0; x.len()], vec![0.0; d]);
        rmsnorm_backward(&x, &gain, &rrms, &dy, &mut dx, &mut dgain);
        assert_gradient(
            "rmsnorm dx",
            &x,
            &dx,
            |x| dot(&dy, &rmsnorm_forward(x, &gain, eps).0),
            1e-8,
            1e-6,
        );
        assert_gradient(
            "rmsnorm dgain",
            &gain,
            &dgain,
            |g| dot(&dy, &rmsnorm_forward(&x, g, eps).0),
            1e-8,
            1e-6,
        );
    }

    #[test]
    fn zero_rows_stay_finite() {
        let (y, rrms) = rmsnorm_forward(&[0.0; 4], &[1.0; 4], 1e-6);
        assert!(y.iter().all(|&v| v == 0.0) && (rrms[0] - 1e3).abs() < 1e-9);
    }
}
