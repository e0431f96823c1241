//! Twins of 05_attention.wgsl and 05_attention_backward.wgsl, on contiguous
//! tensors: q, o `[B·T, H·Dh]`, k, v `[B·T, Hkv·Dh]`, lse `[B·T, H]`, row
//! b·T + t. Head h reads kv head h / (H/Hkv); scale 1/sqrt(Dh); causal.
//! A recipe's attention operands (`AttentionOperands`) round each factor
//! of a product (`factor`), each probability relative to the running max
//! as the kernels' online softmax has it: key by key in the forward, per
//! block of keys in decode (where the block's keys share one max).

use crate::ops::formats::Element;
use crate::ops::products::AttentionOperands;
use crate::ops::shapes::AttentionShape;
use crate::reference::formats::round_format;

/// A factor of one of attention's products as `ops` has it: f16 from the
/// f32 value the kernels compute (round_format's twin, 00_formats.wgsl),
/// so a probability rounds twice as on the GPU.
pub fn factor(x: f64, ops: AttentionOperands) -> f64 {
    match ops {
        AttentionOperands::F32 => x,
        AttentionOperands::F16 => round_format(x as f32, Element::F16) as f64,
    }
}

fn factors(x: &[f64], ops: AttentionOperands) -> Vec<f64> {
    x.iter().map(|&v| factor(v, ops)).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// Softmax-weighted sum of `values` by `q·key·scale`: (output, log-sum-exp).
/// Online, in blocks of `block` keys: a block's max, where it is new,
/// rescales the sums, each weight exp(s − m) multiplies its value as `ops`
/// rounds it, and the normalizer sums the weights unrounded.
pub fn attend<'a>(
    q: &[f64],
    keys: impl Iterator<Item = &'a [f64]>,
    values: impl Iterator<Item = &'a [f64]>,
    (scale, block): (f64, usize),
    ops: AttentionOperands,
) -> (Vec<f64>, f64) {
    let q = factors(q, ops);
    let scored: Vec<(f64, &[f64])> = keys
        .zip(values)
        .map(|(k, v)| (scale * dot(&q, &factors(k, ops)), v))
        .collect();
    let (mut m, mut l) = (f64::NEG_INFINITY, 0.0);
    let mut acc = vec![0.0; q.len()];
    for keys in scored.chunks(block.max(1)) {
        let m_new = keys.iter().map(|(s, _)| *s).fold(m, f64::max);
        let alpha = (m - m_new).exp();
        l *= alpha;
        acc.iter_mut().for_each(|a| *a *= alpha);
        m = m_new;
        for (s, v) in keys {
            let p = (s - m).exp();
            l += p;
            for (a, v) in acc.iter_mut().zip(*v) {
                *a += factor(p, ops) * factor(*v, ops);
            }
        }
    }
    (acc.iter().map(|a| a / l).collect(), m + l.ln())
}

fn scale(s: &AttentionShape) -> f64 {
    1.0 / (s.head_dim as f64).sqrt()
}

/// Head `h` of row `row` of a `[rows, heads·Dh]` tensor.
fn head(x: &[f64], row: usize, heads: u32, h: usize, dh: usize) -> &[f64] {
    let at = (row * heads as usize + h) * dh;
    &x[at..at + dh]
}

/// Output head `h` of token `t` of sequence `b`, and its lse.
pub fn forward_row(
    s: &AttentionShape,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (b, t, h): (usize, usize, usize),
    (ops, block): (AttentionOperands, usize),
) -> (Vec<f64>, f64) {
    let (dh, tl) = (s.head_dim as usize, s.seq_len as usize);
    let kvh = h / (s.heads / s.kv_heads) as usize;
    let keys = (0..=t).map(|j| head(k, b * tl + j, s.kv_heads, kvh, dh));
    let values = (0..=t).map(|j| head(v, b * tl + j, s.kv_heads, kvh, dh));
    attend(
        head(q, b * tl + t, s.heads, h, dh),
        keys,
        values,
        (scale(s), block),
        ops,
    )
}

/// (o, lse) of every row and head.
pub fn forward(
    s: &AttentionShape,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    ops: AttentionOperands,
) -> (Vec<f64>, Vec<f64>) {
    forward_in_blocks(s, (q, k, v), ops, 1)
}

/// `forward` with keys in blocks of `block` sharing one max: the forward
/// on matrix units (05_attention_units.wgsl, blocks of BC keys).
pub fn forward_in_blocks(
    s: &AttentionShape,
    (q, k, v): (&[f64], &[f64], &[f64]),
    ops: AttentionOperands,
    block: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (mut o, mut lse) = (Vec::new(), Vec::new());
    for b in 0..s.batch as usize {
        for t in 0..s.seq_len as usize {
            for h in 0..s.heads as usize {
                let (row, l) = forward_row(s, q, k, v, (b, t, h), (ops, block));
                o.extend(row);
                lse.push(l);
            }
        }
    }
    (o, lse)
}

/// Twin of 05_attention_map.wgsl: the probabilities `[B, H, T, T]`, query
/// rows, key columns, 0 above the diagonal.
pub fn probabilities(s: &AttentionShape, q: &[f64], k: &[f64]) -> Vec<f64> {
    let (dh, tl) = (s.head_dim as usize, s.seq_len as usize);
    let mut p = Vec::with_capacity(s.batch as usize * s.heads as usize * tl * tl);
    for b in 0..s.batch as usize {
        for h in 0..s.heads as usize {
            let kvh = h / (s.heads / s.kv_heads) as usize;
            for t in 0..tl {
                let qt = head(q, b * tl + t, s.heads, h, dh);
                let scores: Vec<f64> = (0..=t)
                    .map(|j| {
                        let kj = head(k, b * tl + j, s.kv_heads, kvh, dh);
                        scale(s) * qt.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>()
                    })
                    .collect();
                let m = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = scores.iter().map(|x| (x - m).exp()).sum();
                p.extend(scores.iter().map(|x| (x - m).exp() / sum));
                p.extend(std::iter::repeat_n(0.0, tl - t - 1));
            }
        }
    }
    p
}

/// (dq, dk, dv) for upstream `d_o`, from the forward's o and lse, each
/// product's factors as `ops` rounds them (Δ = dO·O reads o as it is).
#[allow(clippy::too_many_arguments)] // the backward's tensors, as the kernel binds them
pub fn backward(
    s: &AttentionShape,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    o: &[f64],
    d_o: &[f64],
    lse: &[f64],
    ops: AttentionOperands,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (q, k, v, d_o) = (
        &factors(q, ops),
        &factors(k, ops),
        &factors(v, ops),
        &factors(d_o, ops),
    );
    let (dh, tl, hs, kvs) = (
        s.head_dim as usize,
        s.seq_len as usize,
        s.heads as usize,
        s.kv_heads as usize,
    );
    let (mut dq, mut dk, mut dv) = (vec![0.0; q.len()], vec![0.0; k.len()], vec![0.0; v.len()]);
    let c = scale(s);
    for b in 0..s.batch as usize {
        for t in 0..tl {
            let row = b * tl + t;
            for h in 0..hs {
                let kvh = h / (hs / kvs);
                let (qt, dot) = (head(q, row, s.heads, h, dh), head(d_o, row, s.heads, h, dh));
                let delta: f64 = dot
                    .iter()
                    .zip(head(o, row, s.heads, h, dh))
                    .map(|(a, b)| a * b)
                    .sum();
                for j in 0..=t {
                    let key = b * tl + j;
                    let (kj, vj) = (
                        head(k, key, s.kv_heads, kvh, dh),
                        head(v, key, s.kv_heads, kvh, dh),
                    );
                    let p = (c * qt.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>()
                        - lse[row * hs + h])
                        .exp();
                    let ds = p * (dot.iter().zip(vj).map(|(a, b)| a * b).sum::<f64>() - delta);
                    let (ds, pv) = (factor(ds, ops), factor(p, ops));
                    for d in 0..dh {
                        dq[row * hs * dh + h * dh + d] += c * ds * kj[d];
                        dk[key * kvs * dh + kvh * dh + d] += c * ds * qt[d];
                        dv[key * kvs * dh + kvh * dh + d] += pv * dot[d];
                    }
                }
            }
        }
    }
    (dq, dk, dv)
}

/// One decode step: q `[B, H·Dh]` against cache rows 0..len of each
/// sequence, caches `[B, max_len, Hkv·Dh]`, keys in blocks of `block` (the
/// kernel's workgroup). Returns o `[B, H·Dh]`.
pub fn decode(
    s: &AttentionShape,
    (max_len, len, block): (usize, usize, usize),
    q: &[f64],
    k_cache: &[f64],
    v_cache: &[f64],
    ops: AttentionOperands,
) -> Vec<f64> {
    let dh = s.head_dim as usize;
    let mut o = Vec::new();
    for b in 0..s.batch as usize {
        for h in 0..s.heads as usize {
            let kvh = h / (s.heads / s.kv_heads) as usize;
            let keys = (0..len).map(|j| head(k_cache, b * max_len + j, s.kv_heads, kvh, dh));
            let values = (0..len).map(|j| head(v_cache, b * max_len + j, s.kv_heads, kvh, dh));
            let q = head(q, b, s.heads, h, dh);
            o.extend(attend(q, keys, values, (scale(s), block), ops).0);
        }
    }
    o
}

/// kv_append: row b of k and v `[B, Hkv·Dh]` into row `len − 1` of
/// sequence b of the caches `[B, max_len, Hkv·Dh]`; a copy, so f32.
pub fn kv_append(
    batch: usize,
    max_len: usize,
    len: usize,
    k: &[f32],
    v: &[f32],
    k_cache: &mut [f32],
    v_cache: &mut [f32],
) {
    let width = k.len() / batch;
    for b in 0..batch {
        let at = (b * max_len + len - 1) * width;
        k_cache[at..at + width].copy_from_slice(&k[b * width..(b + 1) * width]);
        v_cache[at..at + width].copy_from_slice(&v[b * width..(b + 1) * width]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::gradcheck::{assert_gradient, dot, wave};

    const SHAPE: AttentionShape = AttentionShape {
        batch: 2,
        seq_len: 5,
        heads: 4,
        kv_heads: 2,
        head_dim: 3,
    };

    /// q, k, v and dO of `SHAPE`.
    fn operands() -> [Vec<f64>; 4] {
        let rows = (SHAPE.batch * SHAPE.seq_len) as usize;
        let (nq, nkv) = (rows * 4 * 3, rows * 2 * 3);
        [
            wave(nq, 0.77, 0.4),
            wave(nkv, 1.31, 0.4),
            wave(nkv, 0.53, 0.4),
            wave(nq, 0.91, 0.4),
        ]
    }

    #[test]
    fn backward_is_the_gradient_of_forward() {
        let [q, k, v, d_o] = operands();
        let f32 = AttentionOperands::F32;
        let (o, lse) = forward(&SHAPE, &q, &k, &v, f32);
        let (dq, dk, dv) = backward(&SHAPE, &q, &k, &v, &o, &d_o, &lse, f32);
        let loss = |q: &[f64], k: &[f64], v: &[f64]| dot(&d_o, &forward(&SHAPE, q, k, v, f32).0);
        assert_gradient("attention dq", &q, &dq, |x| loss(x, &k, &v), 1e-8, 1e-6);
        assert_gradient("attention dk", &k, &dk, |x| loss(&q, x, &v), 1e-8, 1e-6);
        assert_gradient("attention dv", &v, &dv, |x| loss(&q, &k, x), 1e-8, 1e-6);
    }

    #[test]
    fn decode_is_the_forward_of_the_last_token() {
        let s = AttentionShape {
            batch: 2,
            seq_len: 4,
            heads: 4,
            kv_heads: 1,
            head_dim: 3,
        };
        let (q, k, v) = (
            wave(2 * 4 * 12, 0.37, 0.4),
            wave(2 * 4 * 3, 1.1, 0.4),
            wave(2 * 4 * 3, 0.7, 0.4),
        );
        let (o, _) = forward(&s, &q, &k, &v, AttentionOperands::F32);
        let last_q: Vec<f64> = (0..2)
            .flat_map(|b| q[(b * 4 + 3) * 12..(b * 4 + 4) * 12].to_vec())
            .collect();
        let want: Vec<f64> = (0..2)
            .flat_map(|b| o[(b * 4 + 3) * 12..(b * 4 + 4) * 12].to_vec())
            .collect();
        let got = decode(&s, (4, 4, 2), &last_q, &k, &v, AttentionOperands::F32);
        assert!(
            got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-15),
            "{got:?} vs {want:?}"
        );
    }

    #[test]
    fn scores_of_80_stay_finite() {
        let (o, lse) = attend(
            &[1.0],
            [[80.0].as_slice(), &[-80.0]].into_iter(),
            [[1.0].as_slice(), &[2.0]].into_iter(),
            (1.0, 1),
            AttentionOperands::F32,
        );
        assert!((o[0] - 1.0).abs() < 1e-60 && (lse - 80.0).abs() < 1e-12);
    }

    /// f16 operands: the forward is the f32 one of f16-rounded q, k, v up
    /// to the probabilities' rounding (half an f16 step each, 2^-11
    /// relative), and the gradients likewise up to P's and dS's.
    #[test]
    fn f16_operands_round_each_factor() {
        let [q, k, v, d_o] = operands();
        let (f16, f32) = (AttentionOperands::F16, AttentionOperands::F32);
        let (q16, k16, v16, d_o16) = (
            factors(&q, f16),
            factors(&k, f16),
            factors(&v, f16),
            factors(&d_o, f16),
        );
        assert!(q16.iter().zip(&q).any(|(a, b)| a != b));
        let (o, lse) = forward(&SHAPE, &q, &k, &v, f16);
        let (o_rounded, lse_rounded) = forward(&SHAPE, &q16, &k16, &v16, f32);
        let near =
            |a: &[f64], b: &[f64], tol: f64| a.iter().zip(b).all(|(a, b)| (a - b).abs() <= tol);
        // |v| ≤ 1: o moves by at most 2^-11 of Σ p|v| / l ≤ 2^-11
        assert!(near(&o, &o_rounded, 2f64.powi(-11)));
        assert!(!near(&o, &o_rounded, 0.0), "p is rounded");
        assert_eq!(lse, lse_rounded, "the normalizer sums p unrounded");
        let g = backward(&SHAPE, &q, &k, &v, &o, &d_o, &lse, f16);
        let g_rounded = backward(&SHAPE, &q16, &k16, &v16, &o, &d_o16, &lse, f32);
        for (a, b) in [(g.0, g_rounded.0), (g.1, g_rounded.1), (g.2, g_rounded.2)] {
            // each term moves by 2^-11 of itself; |terms| ≤ 3·|ds|·|k| < 4
            assert!(near(&a, &b, 4.0 * 3.0 * 2f64.powi(-11)));
        }
    }
}
