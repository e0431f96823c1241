//! Twins of 06_activation.wgsl. Both activations are x·σ(z): z = x for
//! silu, z = 2u for tanh-GeLU, using 1 + tanh(u) = 2σ(2u) (the test
//! `gelu_is_the_tanh_formula` checks the identity). Written with σ(z) and
//! σ(−z), so the far tails keep their digits: the textbook 1 + tanh(u) is
//! 0 in f64 below x ≈ −6. Backwards return fresh gradients.

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_C: f64 = 0.044715;

/// 1/(1 + e^−z); below z = −709 e^−z overflows to inf and σ = 0, as it should.
fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// (2u, d(2u)/dx): GeLU's sigmoid argument and its slope.
fn gelu_arg(x: f64) -> (f64, f64) {
    (
        2.0 * SQRT_2_OVER_PI * (x + GELU_C * x * x * x),
        2.0 * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * x * x),
    )
}

/// d/dx [x·σ(z(x))] = σ(z) + x·σ(z)·σ(−z)·z'
fn x_sigmoid_grad(x: f64, z: f64, dz: f64) -> f64 {
    sigmoid(z) + x * sigmoid(z) * sigmoid(-z) * dz
}

/// `h = silu(gate) * up`
pub fn swiglu_forward(gate: &[f64], up: &[f64]) -> Vec<f64> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| g * sigmoid(g) * u)
        .collect()
}

/// `(dgate, dup) = (dh·up·silu'(gate), dh·silu(gate))`
pub fn swiglu_backward(dh: &[f64], gate: &[f64], up: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut dgate = vec![0.0; dh.len()];
    let mut dup = vec![0.0; dh.len()];
    for i in 0..dh.len() {
        let g = gate[i];
        dgate[i] = dh[i] * up[i] * x_sigmoid_grad(g, g, 1.0);
        dup[i] = dh[i] * g * sigmoid(g);
    }
    (dgate, dup)
}

/// `y = 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)))`
pub fn gelu_forward(x: &[f64]) -> Vec<f64> {
    x.iter().map(|&v| v * sigmoid(gelu_arg(v).0)).collect()
}

/// `dx = dy·gelu'(x)`
pub fn gelu_backward(dy: &[f64], x: &[f64]) -> Vec<f64> {
    let mut dx = vec![0.0; x.len()];
    for i in 0..x.len() {
        let (z, dz) = gelu_arg(x[i]);
        dx[i] = dy[i] * x_sigmoid_grad(x[i], z, dz);
    }
    dx
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::gradcheck::{assert_gradient, dot};

    /// A fixed spread over [-scale, scale]. Activations get ±6 (tails and
    /// zero crossings of the derivatives); upstream gradients stay small so
    /// the finite differences' rounding noise (ε·|Σ dy·y| / h) stays < 1e-9.
    fn inputs(n: usize, seed: u64, scale: f64) -> Vec<f64> {
        (0..n)
            .map(|i| ((i as u64 * 2_654_435_761 + seed) % 1201) as f64 / 600.0 * scale - scale)
            .collect()
    }

    #[test]
    fn swiglu_backward_is_the_gradient_of_its_forward() {
        let (gate, up, dh) = (inputs(64, 1, 6.0), inputs(64, 7, 1.0), inputs(64, 13, 1.0));
        let (dgate, dup) = swiglu_backward(&dh, &gate, &up);
        assert_gradient(
            "swiglu dgate",
            &gate,
            &dgate,
            |g| dot(&dh, &swiglu_forward(g, &up)),
            1e-8,
            1e-7,
        );
        assert_gradient(
            "swiglu dup",
            &up,
            &dup,
            |u| dot(&dh, &swiglu_forward(&gate, u)),
            1e-8,
            1e-7,
        );
    }

    #[test]
    fn gelu_backward_is_the_gradient_of_its_forward() {
        let (x, dy) = (inputs(64, 3, 6.0), inputs(64, 5, 1.0));
        assert_gradient(
            "gelu dx",
            &x,
            &gelu_backward(&dy, &x),
            |x| dot(&dy, &gelu_forward(x)),
            1e-8,
            1e-7,
        );
    }

    #[test]
    fn gelu_is_the_tanh_formula() {
        // where 1 + tanh does not cancel
        let x = inputs(64, 11, 3.0);
        for (&v, y) in x.iter().zip(gelu_forward(&x)) {
            let textbook = 0.5 * v * (1.0 + (SQRT_2_OVER_PI * (v + GELU_C * v * v * v)).tanh());
            assert!((y - textbook).abs() <= 1e-15, "x = {v}: {y} vs {textbook}");
        }
    }

    #[test]
    fn large_inputs_stay_finite() {
        let x = [100.0, -100.0, 1e4, -1e4, 1e30, -1e30];
        let ones = [1.0; 6];
        let (dgate, dup) = swiglu_backward(&ones, &x, &ones);
        let outputs = [
            swiglu_forward(&x, &ones),
            dgate,
            dup,
            gelu_forward(&x),
            gelu_backward(&ones, &x),
        ];
        assert!(
            outputs.iter().flatten().all(|v| v.is_finite()),
            "{outputs:?}"
        );
    }
}
