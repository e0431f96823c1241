//! Quartet's parts on the GPU against their twins, bit for bit: QuEST's
//! quantizer on its ties, and its gradient mask (`quest_mask`) on blocks
//! that clip and blocks that do not. (Both MXFP4 formats' other blocks are
//! `formats::blocks_match_reference`'s and its neighbours'.)

use rand::Rng;
use webtrain::kernels::Quantize;
use webtrain::kernels::quantize::Spread;
use webtrain::ops::formats::{Blocks, Format, Quantization};
use webtrain::reference::formats::{self as formats_twin, quartet as twin};
use webtrain::{Gpu, Result};

use super::check::rng;

/// Rows of 88 (two blocks of 32 and one of 24) over 40 binades, blocks with outliers
/// (which clip), zero blocks, ±Inf and NaN, a block of 1e30 (its Σx²
/// overflows) and subnormals; the gradient random: the GPU zeroes the
/// twin's entries and no others, and some entries but not all.
pub async fn quest_mask_matches_reference(gpu: &Gpu) -> Result<()> {
    let k = Quantize::new(gpu).await?;
    let mut r = rng(61);
    let (rows, cols) = (24, 88);
    let mut h: Vec<f32> = (0..rows * cols)
        .map(|_| r.random_range(-1.0f32..1.0) * 2f32.powi(r.random_range(-20..20)))
        .collect();
    for row in 0..rows {
        let at = |j: usize| row * cols + j;
        match row % 6 {
            0 => h[at(5)] = 40.0 * h[at(6)].abs().max(1.0),
            1 => h[at(32)..at(64)].fill(0.0),
            2 => (h[at(3)], h[at(40)]) = (f32::INFINITY, f32::NAN),
            3 => h[at(64)..at(88)].fill(1e30),
            4 => h[at(0)..at(32)].iter_mut().for_each(|v| *v *= 1e-40),
            _ => {}
        }
    }
    let g: Vec<f32> = (0..rows * cols)
        .map(|_| r.random_range(-1.0f32..1.0))
        .collect();
    let (hb, gb) = (gpu.upload("h", &h)?, gpu.upload("g", &g)?);
    let shape = [rows as u64, cols as u64];
    let d = k.quest_mask(gpu, ((&hb).into(), (&gb).into()), shape)?;
    gpu.run(&[&d]).await?;
    let got: Vec<f32> = gpu.read_back((&gb).into()).await?;
    let mut want = g.clone();
    twin::quest_mask(&h, &mut want, cols);
    let differ: Vec<usize> = (0..g.len())
        .filter(|&i| got[i].to_bits() != want[i].to_bits())
        .collect();
    assert!(differ.is_empty(), "the mask differs at {differ:?}");
    let masked = want.iter().filter(|v| **v == 0.0).count();
    assert!(
        masked > 0 && masked < g.len() / 4,
        "{masked} of {} masked",
        g.len()
    );
    Ok(())
}

/// Blocks whose values sit on every QuEST threshold (t·2^k, both signs):
/// the GPU's ties go toward zero as the twin's, under either spread (its
/// own kernel takes none).
pub async fn quest_ties_match_reference(gpu: &Gpu) -> Result<()> {
    let x = twin::tie_blocks(77, 16);
    let format = Format::parse("mxfp4-quest")?;
    let q = Quantization::new(format, Blocks::Rows, None);
    let want = formats_twin::quantize(&q, &x, 64);
    for spread in Spread::ALL {
        let k = Quantize::new(gpu).await?.with_spread(spread);
        let (got, counts) = k.run(gpu, &q, &x, 64).await?;
        let differ: Vec<String> = (0..x.len())
            .filter(|&i| got[i].to_bits() != want.0[i].to_bits())
            .take(5)
            .map(|i| format!("[{i}] {:e} -> {:e}, want {:e}", x[i], got[i], want.0[i]))
            .collect();
        assert!(differ.is_empty(), "{spread:?}: {differ:?}");
        assert_eq!(counts, want.1, "{spread:?}: counts");
    }
    Ok(())
}
