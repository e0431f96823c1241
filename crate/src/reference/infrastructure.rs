//! Twins of 00_infrastructure.wgsl.

pub fn fill(y: &mut [f32], value: f32) {
    y.fill(value);
}

pub fn scale(y: &mut [f32], alpha: f32) {
    for v in y {
        *v = (alpha as f64 * *v as f64) as f32;
    }
}

/// `y += alpha * x` rounded once, as the kernel's fused multiply-add.
pub fn axpy(x: &[f32], y: &mut [f32], alpha: f32) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi = (*yi as f64 + alpha as f64 * xi as f64) as f32;
    }
}

pub fn copy(x: &[f32], y: &mut [f32]) {
    y.copy_from_slice(x);
}
