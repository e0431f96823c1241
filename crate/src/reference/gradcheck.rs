//! Proves a reference backward against central finite differences of its
//! reference forward, in f64. A backward computes the vector-Jacobian product
//! dx = J(x)ᵀ·dy; so it must equal the gradient of the scalar dy·y(x).

/// Asserts `analytic[i] ≈ (L(x + h·e_i) − L(x − h·e_i)) / 2h` for every i,
/// within `atol + rtol·|fd|`. Central differences err by O(h²·f'''), so
/// with h = 1e-5 and smooth forwards the check is good to about 1e-8.
pub fn assert_gradient(
    what: &str,
    x: &[f64],
    analytic: &[f64],
    loss: impl Fn(&[f64]) -> f64,
    atol: f64,
    rtol: f64,
) {
    assert_eq!(x.len(), analytic.len(), "{what}: gradient length");
    let h = 1e-5;
    let mut xp = x.to_vec();
    for i in 0..x.len() {
        xp[i] = x[i] + h;
        let up = loss(&xp);
        xp[i] = x[i] - h;
        let down = loss(&xp);
        xp[i] = x[i];
        let fd = (up - down) / (2.0 * h);
        let diff = (analytic[i] - fd).abs();
        assert!(
            diff <= atol + rtol * fd.abs(),
            "{what}: d/dx[{i}]: backward {} vs finite difference {fd} (|diff| {diff:e})",
            analytic[i]
        );
    }
}

/// `Σ dy·y`: the scalar whose gradient a backward with upstream `dy` computes.
pub fn dot(dy: &[f64], y: &[f64]) -> f64 {
    dy.iter().zip(y).map(|(a, b)| a * b).sum()
}

/// `sin(i·step + phase)` for i in 0..n: smooth, varied test inputs.
pub fn wave(n: usize, step: f64, phase: f64) -> Vec<f64> {
    (0..n).map(|i| (i as f64 * step + phase).sin()).collect()
}
