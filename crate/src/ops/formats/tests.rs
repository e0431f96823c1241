//! The formats' definitions against their published values, and the
//! blocks' layout.

use super::*;

#[test]
fn specs_give_the_published_extremes() {
    let want = [
        (Element::Bf16, f32::from_bits(0x7f7f_0000), 2f32.powi(-133)),
        (Element::F16, 65504.0, 2f32.powi(-24)),
        (Element::E4m3, 448.0, 2f32.powi(-9)),
        (Element::E5m2, 57344.0, 2f32.powi(-16)),
        (Element::E2m3, 7.5, 0.125),
        (Element::E3m2, 28.0, 0.0625),
        (Element::E2m1, 6.0, 0.5),
    ];
    for (e, max, min) in want {
        let f = e.spec();
        assert_eq!((f.max(), f.min_positive()), (max, min), "{}", f.name);
    }
    assert_eq!(Element::E4m3.spec().max(), E4M3_MAX);
    assert_eq!(Element::E4m3.spec().min_positive(), E4M3_MIN_POSITIVE);
}

#[test]
fn formats_parse_by_name_and_refuse_others() {
    for f in Format::ALL {
        assert_eq!(Format::parse(f.name).unwrap(), f);
    }
    // a renamed format reads by its old name
    let rceil = Format::parse("mxfp8-e4m3-ceil").unwrap();
    assert_eq!(
        (rceil.name, rceil.scaling),
        ("mxfp8-e4m3-rceil", Scaling::MxCeil)
    );
    let e = Format::parse("fp4").unwrap_err().to_string();
    assert!(
        e.contains("unknown format \"fp4\"") && e.contains("nvfp4"),
        "{e}"
    );
    let q = |name: &str, blocks| Quantization::new(Format::parse(name).unwrap(), blocks, None);
    let nv = q("nvfp4", Blocks::Square);
    assert!(nv.check([32, 48], "w").is_ok());
    let e = nv.check([40, 32], "w").unwrap_err().to_string();
    assert!(e.contains("40 rows") && e.contains("16×16"), "{e}");
    assert!(nv.check([32, 40], "w").is_err());
    let e = q("mxfp4", Blocks::Square).check([32, 32], "w").unwrap_err();
    assert!(e.to_string().contains("1-D blocks"), "{e}");
}

#[test]
fn column_blocks_run_down_the_rows() {
    let shape = [48, 3];
    // block 1 of a [_, 3] matrix in columns of 16: column 1, rows 0..16
    let want: Vec<usize> = (0..16).map(|r| r * 3 + 1).collect();
    let block = Blocks::Columns.block(16, 1, shape, [0, 0]);
    assert_eq!(
        block,
        Block {
            first: 1,
            len: 16,
            width: 1
        }
    );
    let got: Vec<usize> = (0..16)
        .map(|j| Blocks::Columns.index(block, j, 3))
        .collect();
    assert_eq!(got, want);
    let block = Blocks::Columns.block(16, 4, shape, [0, 0]);
    assert_eq!(Blocks::Columns.index(block, 2, 3), (16 + 2) * 3 + 1);
    assert_eq!(Blocks::Columns.count(16, shape, [0, 0]), 9);
}

#[test]
fn parts_start_blocks_afresh_and_end_them_short() {
    // the tiny preset's FFN width: 176 = 5·32 + 16, and gate|up stacked
    let starts: Vec<(usize, usize)> = (0..6).map(|b| part_block(b, [0, 0], 176, 32)).collect();
    assert_eq!(starts[..2], [(0, 32), (32, 32)]);
    assert_eq!(starts[5], (160, 16));
    assert_eq!(line_blocks([176, 352], 352, 32), 12);
    assert_eq!(part_block(6, [176, 352], 352, 32), (176, 32));
    assert_eq!(part_block(11, [176, 352], 352, 32), (336, 16));
    // 130 rows cut at 64 and 96: [0, 64) [64, 96) [96, 128) [128, 130)
    let down: Vec<(usize, usize)> = (0..5).map(|b| part_block(b, [64, 96], 130, 32)).collect();
    assert_eq!(down, [(0, 32), (32, 32), (64, 32), (96, 32), (128, 2)]);
    let block = Blocks::Columns.block(32, 4 * 3 + 2, [130, 3], [64, 96]);
    assert_eq!(
        block,
        Block {
            first: 128 * 3 + 2,
            len: 2,
            width: 1
        }
    );
    // a row of 40 in NVFP4's 16: 16, 16, 8
    assert_eq!(Blocks::Rows.count(16, [2, 40], [0, 0]), 6);
    let block = Blocks::Rows.block(16, 5, [2, 40], [0, 0]);
    assert_eq!(
        block,
        Block {
            first: 40 + 32,
            len: 8,
            width: 8
        }
    );
    // cut points checked: in order, within the length, square ones in 16s
    let mx = Quantization::new(Format::parse("mxfp4").unwrap(), Blocks::Rows, None);
    assert!(
        Quantization {
            parts: [176, 352],
            ..mx
        }
        .check([4, 352], "w")
        .is_ok()
    );
    let e = Quantization {
        parts: [200, 100],
        ..mx
    }
    .check([4, 352], "w")
    .unwrap_err();
    assert!(e.to_string().contains("cut points"), "{e}");
    assert!(
        Quantization {
            parts: [8, 9],
            ..mx
        }
        .check([4, 8], "w")
        .is_err()
    );
    let nv = Quantization::new(Format::parse("nvfp4").unwrap(), Blocks::Square, None);
    assert!(
        Quantization {
            parts: [16, 48],
            ..nv
        }
        .check([64, 32], "w")
        .is_ok()
    );
    let e = Quantization {
        parts: [24, 48],
        ..nv
    }
    .check([64, 32], "w")
    .unwrap_err();
    assert!(
        e.to_string().contains("parts [24, 48] down the rows"),
        "{e}"
    );
}

/// The blockwise FP8's 128×128 weight blocks: cut short at the right
/// and bottom edges and where a stacked weight's part ends.
#[test]
fn square_blocks_cut_short_at_edges_and_parts() {
    // [W_gate; W_up] of the tiny preset's shape: 2 × 176 rows, 128 columns
    let (shape, parts) = ([352, 200], [176, 352]);
    let q = Quantization {
        parts: [176, 352],
        ..Quantization::new(
            Format::parse("e4m3-blockwise").unwrap(),
            Blocks::Square,
            None,
        )
    };
    assert!(q.check(shape, "w").is_ok());
    // down the rows [0, 128) [128, 176) [176, 304) [304, 352); across [0, 128) [128, 200)
    assert_eq!(q.block_count(shape), 4 * 2);
    let b = |i| Blocks::Square.block(128, i, shape, parts);
    assert_eq!(
        b(1),
        Block {
            first: 128,
            len: 128 * 72,
            width: 72
        }
    );
    assert_eq!(
        b(3),
        Block {
            first: 128 * 200 + 128,
            len: 48 * 72,
            width: 72
        }
    );
    assert_eq!(
        b(4),
        Block {
            first: 176 * 200,
            len: 128 * 128,
            width: 128
        }
    );
    assert_eq!(Blocks::Square.index(b(3), 72, 200), 129 * 200 + 128);
    // every value in exactly one block
    let mut seen = vec![0; 352 * 200];
    for i in 0..q.block_count(shape) {
        q.block_values(i, shape).for_each(|v| seen[v] += 1);
    }
    assert!(seen.iter().all(|&n| n == 1));
    // NVFP4's stay whole 16×16 tiles, as before
    let nv = Quantization::new(Format::parse("nvfp4").unwrap(), Blocks::Square, None);
    assert_eq!(nv.block_count([32, 48]), 6);
    assert_eq!(
        Blocks::Square.block(16, 4, [32, 48], [32, 32]).first,
        16 * 48 + 16
    );
}

#[test]
fn pow2_covers_subnormals() {
    assert_eq!(pow2(-127), f32::MIN_POSITIVE / 2.0);
    assert_eq!(pow2(-149), f32::from_bits(1));
    assert_eq!((pow2(-150), pow2(128)), (0.0, f32::INFINITY));
    assert_eq!(pow2(127), 2f32.powi(127));
}
