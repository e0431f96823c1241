//! A GEMM variant's module: the enables, the variant's constants and its
//! fragment declarations, then its file with the `//#NAME` lines replaced
//! by statements unrolled over the TM × TN accumulators (named variables:
//! the NVIDIA compiler spilled an indexed accumulator array, see
//! 03_linear.wgsl), all spelled for the variant's syntax by
//! `syntax::spell`.

use std::fmt::Write as _;

use super::gemm::{GemmVariant, Staging};
use super::syntax::{Blocks, spell};
use crate::error::{Error, Result};
use crate::shaders::{
    LINEAR_COOP_COMMON, LINEAR_COOP_DOUBLE, LINEAR_COOP_GLOBAL, LINEAR_COOP_STAGED, ShaderFile,
};

/// One staged block's quads (8 halves) per invocation, as the
/// double-buffered file fetches and puts them: the block and its source,
/// the quads each invocation holds, their registers' prefix, the block's
/// constants (columns, padded stride, stage length), and the source's first
/// row and column at the slice `kf` and its row stride (WGSL expressions).
struct Quads {
    block: &'static str,
    src: &'static str,
    count: u32,
    reg: &'static str,
    cols: &'static str,
    stride: &'static str,
    len: &'static str,
    row0: &'static str,
    col0: &'static str,
    ld: &'static str,
}

impl GemmVariant {
    /// The file the variant's staging is written in.
    pub(super) fn file(&self) -> ShaderFile {
        match self.staging {
            Staging::Global => LINEAR_COOP_GLOBAL,
            Staging::Scalar | Staging::Vec4 => LINEAR_COOP_STAGED,
            Staging::Double => LINEAR_COOP_DOUBLE,
        }
    }

    /// The composed WGSL for subgroups of `sg` invocations.
    pub fn source(&self, sg: u32) -> Result<String> {
        if let Some(why) = self.unbuildable(sg) {
            return Err(Error::Unsupported(format!(
                "unit GEMM {}: {why}",
                self.name()
            )));
        }
        let t = self.edge;
        let sv = self.halves_per_element();
        // fragments load from the stages, or from global memory (wgpu only)
        let staged = [("sa", sv), ("sb", sv)];
        let global = [("a", 1), ("b", 1)];
        let blocks = Blocks {
            halves: match self.staging {
                Staging::Global => &global,
                _ => &staged,
            },
            floats: &["out"],
        };
        let mut s = format!("enable f16;\n{}\n", self.syntax.directive());
        let _ = writeln!(s, "const T: u32 = {t}u;");
        s.push_str(&self.syntax.declarations(t, &blocks));
        for (name, v) in [
            ("TM", self.tm),
            ("TN", self.tn),
            ("SGM", self.sgm),
            ("SGN", self.sgn),
            ("SG", sg),
            ("WG", self.invocations(sg)),
            ("BM", self.bm()),
            ("BN", self.bn()),
        ] {
            let _ = writeln!(s, "const {name}: u32 = {v}u;");
        }
        let _ = writeln!(s, "const A_T: bool = {};", self.layout.a_t());
        let _ = writeln!(s, "const B_T: bool = {};", self.layout.b_t());
        let src = match self.staging {
            Staging::Global => "f16",
            _ => "vec4<f16>",
        };
        let _ = writeln!(s, "alias Src = {src};");
        if self.staging != Staging::Global {
            let ((ar, ac, sa), (br, bc, sb)) = self.blocks();
            let elem = if sv == 1 { "f16" } else { "vec4<f16>" };
            let _ = writeln!(s, "alias SHalf = {elem};");
            for (name, v) in [
                ("BK", self.bk),
                ("SV", sv),
                ("A_ROWS", ar),
                ("A_COLS", ac),
                ("SA", sa),
                ("B_ROWS", br),
                ("B_COLS", bc),
                ("SB", sb),
                ("A_LEN", ar * sa / sv),
                ("B_LEN", br * sb / sv),
                ("A_PER", ar * ac / 8 / self.invocations(sg)),
                ("B_PER", br * bc / 8 / self.invocations(sg)),
            ] {
                let _ = writeln!(s, "const {name}: u32 = {v}u;");
            }
        }
        s.push('\n');
        let shared = LINEAR_COOP_COMMON.source.lines().chain([""]);
        for line in shared.chain(self.file().source.lines()) {
            match line.trim() {
                "//#INIT" => self.init(&mut s),
                "//#STEP" => self.step(&mut s),
                "//#STORE" => self.store(&mut s),
                "//#STAGE_A" => self.store_quad(&mut s, "sa", "w0", "w1"),
                "//#STAGE_B" => self.store_quad(&mut s, "sb", "w0", "w1"),
                "//#REGS" => self.regs(&mut s, sg),
                "//#FETCH" => self.fetch(&mut s, sg),
                "//#PUT" => self.put(&mut s, sg),
                _ => {
                    s.push_str(line);
                    s.push('\n');
                }
            }
        }
        spell(&self.name(), &s, self.syntax, &blocks)
    }

    /// The TM × TN (row, column) fragment indices, row-major.
    fn frags(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.tm).flat_map(move |i| (0..self.tn).map(move |j| (i, j)))
    }

    /// The index in `out` of fragment (i, j)'s first row and column.
    fn index(&self, i: u32, j: u32) -> String {
        let t = self.edge;
        format!("(tile.r0 + {}u) * p.n + tile.c0 + {}u", i * t, j * t)
    }

    fn init(&self, s: &mut String) {
        for (i, j) in self.frags() {
            // out over the epilogue's scale, so that scaling the sum adds it back
            let start = match self.accumulate {
                true => format!("SCALE_C(FRAG_C(out, {}, p.n), scale[1])", self.index(i, j)),
                false => "MatC()".to_string(),
            };
            let _ = writeln!(s, "    var c_{i}_{j} = {start};");
        }
    }

    fn step(&self, s: &mut String) {
        let t = self.edge;
        // rows and columns in load_a / load_b's terms: global or in-block
        let (r, c) = match self.staging {
            Staging::Global => ("tile.r0", "tile.c0"),
            Staging::Scalar | Staging::Vec4 | Staging::Double => ("tile.lr0", "tile.lc0"),
        };
        // the double-buffered file's loads name the stage first
        let st = if self.staging == Staging::Double {
            "st, "
        } else {
            ""
        };
        for i in 0..self.tm {
            let _ = writeln!(s, "        let a_{i} = load_a({st}{r} + {}u, kk);", i * t);
        }
        for j in 0..self.tn {
            let _ = writeln!(s, "        let b_{j} = load_b({st}kk, {c} + {}u);", j * t);
        }
        for (i, j) in self.frags() {
            let _ = writeln!(s, "        c_{i}_{j} = MMA(a_{i}, b_{j}, c_{i}_{j});");
        }
    }

    fn store(&self, s: &mut String) {
        let _ = writeln!(s, "    let ldc = p.n;");
        for (i, j) in self.frags() {
            let _ = writeln!(
                s,
                "    STORE_C(out, {}, SCALE_C(c_{i}_{j}, scale[0]), ldc);",
                self.index(i, j)
            );
        }
    }

    /// The two blocks' quads as the double-buffered file moves them.
    fn quads(&self, sg: u32) -> [Quads; 2] {
        let ((ar, ac, _), (br, bc, _)) = self.blocks();
        let wg = self.invocations(sg);
        [
            Quads {
                block: "sa",
                src: "a",
                count: ar * ac / 8 / wg,
                reg: "ra",
                cols: "A_COLS",
                stride: "SA",
                len: "A_LEN",
                row0: "select(tile.gr0, kf, A_T)",
                col0: "select(kf, tile.gr0, A_T)",
                ld: "tile.lda",
            },
            Quads {
                block: "sb",
                src: "b",
                count: br * bc / 8 / wg,
                reg: "rb",
                cols: "B_COLS",
                stride: "SB",
                len: "B_LEN",
                row0: "select(kf, tile.gc0, B_T)",
                col0: "select(tile.gc0, kf, B_T)",
                ld: "tile.ldb",
            },
        ]
    }

    /// The registers holding one slice's quads (two vec4<f16> each).
    fn regs(&self, s: &mut String, sg: u32) {
        for Quads { count, reg, .. } in self.quads(sg) {
            for q in 0..count {
                let _ = writeln!(s, "    var {reg}{q}_0: vec4<f16>;");
                let _ = writeln!(s, "    var {reg}{q}_1: vec4<f16>;");
            }
        }
    }

    /// Global → registers: the slice at K offset `kf`; invocation `li`'s
    /// quad q of a block is the block's quad li + q·WG (consecutive
    /// invocations read consecutive 16 bytes).
    fn fetch(&self, s: &mut String, sg: u32) {
        for Quads {
            src,
            count,
            reg,
            cols,
            row0,
            col0,
            ld,
            ..
        } in self.quads(sg)
        {
            for q in 0..count {
                let _ = writeln!(
                    s,
                    "        {{\n            let q = li + {q}u * WG;\n            let row = q / ({cols} / 8u);\n            let col = (q % ({cols} / 8u)) * 8u;\n            let at = (({row0} + row) * {ld} + {col0} + col) / 4u;\n            {reg}{q}_0 = {src}[at];\n            {reg}{q}_1 = {src}[at + 1u];\n        }}"
                );
            }
        }
    }

    /// Registers → stage `nx` of each block.
    fn put(&self, s: &mut String, sg: u32) {
        for Quads {
            block,
            count,
            reg,
            cols,
            stride,
            len,
            ..
        } in self.quads(sg)
        {
            for q in 0..count {
                let _ = writeln!(
                    s,
                    "        {{\n            let q = li + {q}u * WG;\n            let row = q / ({cols} / 8u);\n            let col = (q % ({cols} / 8u)) * 8u;\n            let o = nx * {len} + (row * {stride} + col) / SV;"
                );
                self.store_quad(s, block, &format!("{reg}{q}_0"), &format!("{reg}{q}_1"));
                let _ = writeln!(s, "        }}");
            }
        }
    }

    /// The 8 halves `w0`, `w1` (two vec4<f16>) into block `block` at its
    /// element `o`.
    fn store_quad(&self, s: &mut String, block: &str, w0: &str, w1: &str) {
        match self.halves_per_element() {
            1 => {
                for (h, c) in ["x", "y", "z", "w"].into_iter().enumerate() {
                    let _ = writeln!(s, "            {block}[o + {h}u] = {w0}.{c};");
                    let _ = writeln!(s, "            {block}[o + {}u] = {w1}.{c};", h + 4);
                }
            }
            _ => {
                let _ = writeln!(s, "            {block}[o] = {w0};");
                let _ = writeln!(s, "            {block}[o + 1u] = {w1};");
            }
        }
    }
}
