//! Twins of 01_embedding.wgsl. Legend: S tokens, D d_model, V vocabulary.

/// `out[s] = table[tokens[s]]` ([S, D]); tokens >= V give zero rows.
/// Returns the output and the number of out-of-range tokens.
pub fn lookup(tokens: &[u32], table: &[f64], d: usize) -> (Vec<f64>, u32) {
    let vocab = table.len() / d;
    let mut out = vec![0.0; tokens.len() * d];
    let mut bad = 0;
    for (s, &t) in tokens.iter().enumerate() {
        if (t as usize) < vocab {
            out[s * d..(s + 1) * d].copy_from_slice(&table[t as usize * d..(t as usize + 1) * d]);
        } else {
            bad += 1;
        }
    }
    (out, bad)
}

/// `dtable[tokens[s]] += dout[s]`, skipping non-finite values and tokens >= V.
pub fn backward(tokens: &[u32], dout: &[f64], dtable: &mut [f64], d: usize) {
    let vocab = dtable.len() / d;
    for (s, &t) in tokens.iter().enumerate() {
        if (t as usize) >= vocab {
            continue;
        }
        for j in 0..d {
            let g = dout[s * d + j];
            if g.is_finite() {
                dtable[t as usize * d + j] += g;
            }
        }
    }
}

/// `backward` in f32, adding in `embed_backward_sorted`'s exact order, for
/// a bit-exact comparison: per row, the f32 sum of its token's finite dout
/// values in ascending position order, then one add into `dtable`. Rows of
/// tokens absent from the batch are not touched.
pub fn backward_sorted_f32(tokens: &[u32], dout: &[f32], dtable: &mut [f32], d: usize) {
    let vocab = dtable.len() / d;
    let mut positions = vec![Vec::new(); vocab];
    for (s, &t) in tokens.iter().enumerate() {
        if (t as usize) < vocab {
            positions[t as usize].push(s);
        }
    }
    for (t, ps) in positions
        .iter()
        .enumerate()
        .filter(|(_, ps)| !ps.is_empty())
    {
        for j in 0..d {
            let mut sum = 0f32;
            for &s in ps {
                let g = dout[s * d + j];
                if g.is_finite() {
                    sum += g;
                }
            }
            dtable[t * d + j] += sum;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::gradcheck::{assert_gradient, dot};

    #[test]
    fn backward_is_the_gradient_of_lookup() {
        let (d, tokens) = (3, [2u32, 0, 2, 4, 2]);
        let table: Vec<f64> = (0..5 * d).map(|i| (i as f64 * 0.37).sin()).collect();
        let dout: Vec<f64> = (0..tokens.len() * d)
            .map(|i| (i as f64 * 0.71).cos())
            .collect();
        let mut dtable = vec![0.0; table.len()];
        backward(&tokens, &dout, &mut dtable, d);
        assert_gradient(
            "embedding",
            &table,
            &dtable,
            |t| dot(&dout, &lookup(&tokens, t, d).0),
            1e-9,
            1e-7,
        );
    }

    #[test]
    fn out_of_range_tokens_give_zero_rows_and_no_gradient() {
        let table = vec![1.0; 4 * 2];
        let (out, bad) = lookup(&[1, 4, 9], &table, 2);
        assert_eq!((out, bad), (vec![1.0, 1.0, 0.0, 0.0, 0.0, 0.0], 2));
        let mut dtable = vec![0.0; 8];
        backward(&[4, 9], &[1.0; 4], &mut dtable, 2);
        assert!(dtable.iter().all(|&g| g == 0.0));
    }

    #[test]
    fn sorted_f32_twin_sums_like_backward() {
        // dyadic values: every order gives the exact sum
        let (d, tokens) = (2, [1u32, 3, 1, 7, 1]);
        let dout: Vec<f32> = (0..tokens.len() * d)
            .map(|i| i as f32 * 0.25 - 1.0)
            .collect();
        let (mut got, mut want) = (vec![0.5f32; 4 * d], vec![0.5f64; 4 * d]);
        backward_sorted_f32(&tokens, &dout, &mut got, d);
        backward(
            &tokens,
            &dout.iter().map(|&x| x as f64).collect::<Vec<_>>(),
            &mut want,
            d,
        );
        assert_eq!(got.iter().map(|&x| x as f64).collect::<Vec<_>>(), want);
    }
}
