//! Twins of 03_linear.wgsl. W is [d_out, d_in] (HF nn.Linear), X [rows, d_in].

/// `Y = X·Wᵀ`, [rows, d_out].
pub fn forward(x: &[f64], w: &[f64], d_in: usize) -> Vec<f64> {
    let (rows, d_out) = (x.len() / d_in, w.len() / d_in);
    let mut y = vec![0.0; rows * d_out];
    for r in 0..rows {
        for o in 0..d_out {
            y[r * d_out + o] = (0..d_in).map(|i| x[r * d_in + i] * w[o * d_in + i]).sum();
        }
    }
    y
}

/// One output of `forward`, for checking samples of very large products.
pub fn forward_at(x: &[f64], w: &[f64], d_in: usize, r: usize, o: usize) -> f64 {
    (0..d_in).map(|i| x[r * d_in + i] * w[o * d_in + i]).sum()
}

/// `Σ_i |x·w|` of one output: the scale of its f32 rounding error.
pub fn forward_abs_at(x: &[f64], w: &[f64], d_in: usize, r: usize, o: usize) -> f64 {
    (0..d_in)
        .map(|i| (x[r * d_in + i] * w[o * d_in + i]).abs())
        .sum()
}

/// `dX += dY·W`
pub fn backward_input(dy: &[f64], w: &[f64], d_in: usize, dx: &mut [f64]) {
    let d_out = w.len() / d_in;
    for r in 0..dy.len() / d_out {
        for i in 0..d_in {
            dx[r * d_in + i] += (0..d_out)
                .map(|o| dy[r * d_out + o] * w[o * d_in + i])
                .sum::<f64>();
        }
    }
}

/// `dW += dYᵀ·X`
pub fn backward_weight(dy: &[f64], x: &[f64], d_in: usize, dw: &mut [f64]) {
    let (rows, d_out) = (x.len() / d_in, dw.len() / d_in);
    for o in 0..d_out {
        for i in 0..d_in {
            dw[o * d_in + i] += (0..rows)
                .map(|r| dy[r * d_out + o] * x[r * d_in + i])
                .sum::<f64>();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::gradcheck::{assert_gradient, dot, wave};

    #[test]
    fn backwards_are_the_gradients_of_forward() {
        let (rows, d_in, d_out) = (3, 4, 5);
        let (x, w, dy) = (
            wave(rows * d_in, 0.7, 0.1),
            wave(d_out * d_in, 1.1, 0.1),
            wave(rows * d_out, 0.3, 0.1),
        );
        let (mut dx, mut dw) = (vec![0.0; x.len()], vec![0.0; w.len()]);
        backward_input(&dy, &w, d_in, &mut dx);
        backward_weight(&dy, &x, d_in, &mut dw);
        assert_gradient(
            "linear dx",
            &x,
            &dx,
            |x| dot(&dy, &forward(x, &w, d_in)),
            1e-9,
            1e-7,
        );
        assert_gradient(
            "linear dw",
            &w,
            &dw,
            |w| dot(&dy, &forward(&x, w, d_in)),
            1e-9,
            1e-7,
        );
    }
}
