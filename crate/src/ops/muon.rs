//! Muon's settings and the numbers its kernels and CPU twin share
//! (Jordan et al. 2024; `torch.optim.Muon`'s order and defaults).

/// The quintic Newton–Schulz iteration's coefficients (a, b, c):
/// X ← a·X + (b·A + c·A²)·X with A = X·Xᵀ. They push every singular value
/// of the Frobenius-normalized matrix into roughly [0.7, 1.2] in five
/// iterations rather than converging to exactly 1.
pub const NS_COEFFICIENTS: (f64, f64, f64) = (3.4445, -4.7750, 2.0315);

/// Iterations per step.
pub const NS_STEPS: u32 = 5;

/// Added to the Frobenius norm before normalizing (torch's default).
pub const NS_EPS: f64 = 1e-7;

/// Muon's hyperparameters for one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MuonHyper {
    pub lr: f64,
    /// Nesterov momentum μ.
    pub momentum: f64,
    pub weight_decay: f64,
}

/// The orthogonalized update's scale for a `rows × cols` matrix:
/// Moonlight's 0.2·√max(rows, cols) (torch's `match_rms_adamw`), which
/// gives the update about the RMS of AdamW's (≈ 0.2), so a preset's
/// learning rate and weight decay carry over.
pub fn update_scale(rows: u32, cols: u32) -> f64 {
    0.2 * (rows.max(cols) as f64).sqrt()
}
