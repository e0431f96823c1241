//! Twin of 04_rope.wgsl.

use crate::ops::shapes::RopeShape;

/// Rotates `x` in place like the kernel; `sign` −1 is the backward. The
/// angle is the f32 product pos·inv_freq[j], as the kernel and HF form it;
/// its sine and cosine are exact (f64).
pub fn rope(x: &mut [f64], inv_freq: &[f32], s: RopeShape, sign: f64) {
    let half = (s.head_dim / 2) as usize;
    for row in 0..s.rows as usize {
        let pos = (row as u32 % s.seq_len + s.pos_offset) as f32;
        for head in 0..s.heads as usize {
            let base = row * s.row_stride as usize + s.col0 as usize + head * s.head_dim as usize;
            for j in 0..half {
                let angle = (pos * inv_freq[j]) as f64;
                let (sin, cos) = (sign * angle.sin(), angle.cos());
                let (a, b) = (x[base + j], x[base + j + half]);
                x[base + j] = a * cos - b * sin;
                x[base + j + half] = b * cos + a * sin;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::shapes::inv_freq;
    use crate::reference::gradcheck::{assert_gradient, dot, wave};

    const SHAPE: RopeShape = RopeShape {
        rows: 5,
        seq_len: 3,
        pos_offset: 7,
        heads: 2,
        head_dim: 4,
        row_stride: 11,
        col0: 2,
    };

    #[test]
    fn backward_is_the_gradient_of_forward() {
        let freq = inv_freq(4, 10_000.0);
        let n = (SHAPE.rows * SHAPE.row_stride) as usize;
        let (x, dy) = (wave(n, 0.53, 0.2), wave(n, 0.91, 0.2));
        let mut dx = dy.clone();
        rope(&mut dx, &freq, SHAPE, -1.0);
        let forward = |x: &[f64]| {
            let mut y = x.to_vec();
            rope(&mut y, &freq, SHAPE, 1.0);
            dot(&dy, &y)
        };
        assert_gradient("rope", &x, &dx, forward, 1e-9, 1e-7);
    }

    #[test]
    fn columns_outside_the_heads_are_untouched() {
        let freq = inv_freq(4, 10_000.0);
        let x0 = wave((SHAPE.rows * SHAPE.row_stride) as usize, 0.3, 0.2);
        let mut x = x0.clone();
        rope(&mut x, &freq, SHAPE, 1.0);
        for row in 0..5 {
            for col in [0, 1, 10] {
                assert_eq!(x[row * 11 + col], x0[row * 11 + col]);
            }
        }
    }
}
