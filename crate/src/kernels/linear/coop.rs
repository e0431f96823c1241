//! f16 GEMMs on cooperative matrices (tensor cores, issue #30):
//! `out[M, N] (f32) = op(A) · op(B)` with f16 inputs and f32 accumulation,
//! from `03_linear_coop_global.wgsl` (fragments loaded from global memory),
//! `03_linear_coop_staged.wgsl` (K slices staged through workgroup
//! memory as f16) or `03_linear_coop_double.wgsl` (staged in two stages:
//! the next slice is fetched while the current one is multiplied). The
//! trainer runs a recipe's f16 products on them (`linear::units`), in
//! wgpu's syntax natively and in Dawn's in Chrome (`Fragments`).
//!
//! A variant is a fragment edge T (16 or 8, as the adapter's configurations
//! allow), SGM × SGN subgroups per workgroup each owning TM × TN fragments
//! (so a BM × BN = SGM·TM·T × SGN·TN·T workgroup tile), a K slice BK
//! (staged only), the layout and the accumulator's start (zero, or `out`
//! itself: `out += A·B`). The module is composed here: the enables, the
//! variant's constants, then the file with its `//#NAME` lines replaced by
//! statements unrolled over the TM × TN accumulators (named variables: the
//! NVIDIA compiler spilled an indexed accumulator array, see 03_linear).
//!
//! An emulated variant (`CoopVariant::emulated`) is the same staged source
//! with the fragment operations as plain code over the staged blocks
//! (`EMULATION`): each "subgroup" is T invocations, one per fragment row,
//! and no matrix unit or subgroup builtin is needed. It runs wherever
//! shader-f16 does (lavapipe, CI), so the tiling, staging and indexing the
//! GPU runs are checked against the CPU twin without one.

use std::fmt::Write as _;

use half::f16;

use crate::error::{Error, Result};
use crate::gpu::coop::MatrixUnits;
use crate::gpu::{BufferRange, Dispatch, Gpu, Grid};
use crate::rng::{SplitMix64, uniform};
use crate::shaders::{LINEAR_COOP_DOUBLE, LINEAR_COOP_GLOBAL, LINEAR_COOP_STAGED};

/// Where fragments are loaded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Staging {
    /// Straight from global memory.
    Global,
    /// Workgroup memory as `array<f16>`, stored a half at a time.
    Scalar,
    /// Workgroup memory as `array<vec4<f16>>` (coop loads through a vector
    /// pointer, stride in vec4s), stored 4 halves at a time.
    Vec4,
    /// As `Vec4`, in two stages: slice t + 1 goes global → registers →
    /// the other stage while slice t is multiplied; one barrier per slice.
    Double,
}

/// Which operands are given transposed (row-major either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoopLayout {
    /// A [M, K], B [K, N]: dX = dY·W.
    Nn,
    /// A [M, K], B given as [N, K]: Y = X·Wᵀ.
    Nt,
    /// A given as [K, M], B [K, N]: dW = dYᵀ·X.
    Tn,
}

impl CoopLayout {
    pub fn name(self) -> &'static str {
        match self {
            CoopLayout::Nn => "nn:dX",
            CoopLayout::Nt => "nt:fwd",
            CoopLayout::Tn => "tn:dW",
        }
    }

    fn a_t(self) -> bool {
        self == CoopLayout::Tn
    }

    fn b_t(self) -> bool {
        self == CoopLayout::Nt
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopVariant {
    /// The fragment's edge: 16 (NVIDIA) or 8.
    pub edge: u32,
    /// Subgroups per workgroup: rows × columns.
    pub sgm: u32,
    pub sgn: u32,
    /// Fragments per subgroup: rows × columns.
    pub tm: u32,
    pub tn: u32,
    /// The K slice staged per barrier pair (ignored by `Staging::Global`).
    pub bk: u32,
    pub staging: Staging,
    pub layout: CoopLayout,
    /// `out += A·B` (the accumulators start from `out`) instead of `out = A·B`.
    pub accumulate: bool,
    /// In which syntax the fragment operations are written.
    pub fragments: Fragments,
}

/// The syntax of a variant's fragment operations: one composed source,
/// three spellings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fragments {
    /// wgpu's `wgpu_cooperative_matrix` (natively: Vulkan, Metal).
    Wgpu,
    /// Dawn's `chromium_experimental_subgroup_matrix` (Chrome): loads and
    /// stores name the array and an offset, and read scalar f16 stages.
    Dawn,
    /// Plain code (`EMULATION`), on any adapter with shader-f16.
    Emulated,
}

impl Fragments {
    /// The syntax for `units`, and the invocations of one of their
    /// subgroups on `gpu` (T emulated lanes for edge T).
    pub fn of(units: MatrixUnits, gpu: &Gpu) -> (Fragments, u32, u32) {
        match units {
            MatrixUnits::Cooperative { edge } => {
                (Fragments::Wgpu, edge, gpu.info.subgroup_max_size)
            }
            MatrixUnits::Subgroup { edge, subgroup } => (Fragments::Dawn, edge, subgroup),
            MatrixUnits::Emulated => (Fragments::Emulated, 8, 8),
        }
    }

    /// The `enable` directive the syntax needs (none emulated), with its
    /// line end.
    pub fn directive(&self) -> &'static str {
        match self {
            Fragments::Wgpu => "enable wgpu_cooperative_matrix;\n",
            Fragments::Dawn => "enable chromium_experimental_subgroup_matrix;\n",
            Fragments::Emulated => "",
        }
    }

    /// `MatA`, `MatB` (f16) and `MatC` (f32) as the syntax's T × T
    /// fragment types (emulated ones are declared by their emulation).
    pub fn aliases(&self, t: u32) -> String {
        let types = match self {
            Fragments::Wgpu => [
                format!("coop_mat{t}x{t}<f16, A>"),
                format!("coop_mat{t}x{t}<f16, B>"),
                format!("coop_mat{t}x{t}<f32, C>"),
            ],
            Fragments::Dawn => [
                "subgroup_matrix_left<f16, T, T>".to_string(),
                "subgroup_matrix_right<f16, T, T>".to_string(),
                "subgroup_matrix_result<f32, T, T>".to_string(),
            ],
            Fragments::Emulated => return String::new(),
        };
        ["MatA", "MatB", "MatC"]
            .iter()
            .zip(types)
            .map(|(name, ty)| format!("alias {name} = {ty};\n"))
            .collect()
    }
}

impl CoopVariant {
    /// Fragments loaded from global memory, `out = A·B`, layout nn.
    pub const fn global(edge: u32, sg: (u32, u32), frags: (u32, u32)) -> CoopVariant {
        CoopVariant {
            edge,
            sgm: sg.0,
            sgn: sg.1,
            tm: frags.0,
            tn: frags.1,
            bk: edge,
            staging: Staging::Global,
            layout: CoopLayout::Nn,
            accumulate: false,
            fragments: Fragments::Wgpu,
        }
    }

    /// Staged through workgroup memory, `out = A·B`, layout nn.
    pub const fn staged(
        edge: u32,
        staging: Staging,
        sg: (u32, u32),
        frags: (u32, u32),
        bk: u32,
    ) -> CoopVariant {
        CoopVariant {
            bk,
            staging,
            ..CoopVariant::global(edge, sg, frags)
        }
    }

    pub const fn with_layout(self, layout: CoopLayout) -> CoopVariant {
        CoopVariant { layout, ..self }
    }

    pub const fn accumulating(self) -> CoopVariant {
        CoopVariant {
            accumulate: true,
            ..self
        }
    }

    /// The same tiles with the fragment operations emulated (staged only).
    pub const fn emulate(self) -> CoopVariant {
        CoopVariant {
            fragments: Fragments::Emulated,
            ..self
        }
    }

    /// The same tiles in Dawn's syntax (staged only), for Chrome.
    pub const fn in_dawn_syntax(self) -> CoopVariant {
        CoopVariant {
            fragments: Fragments::Dawn,
            ..self
        }
    }

    fn emulated(&self) -> bool {
        self.fragments == Fragments::Emulated
    }

    /// Invocations per subgroup on `gpu`: its subgroups' (Dawn's as the
    /// page was told them), or T emulated lanes.
    pub fn lanes(&self, gpu: &Gpu) -> u32 {
        match (self.fragments, gpu.matrix_units.as_ref()) {
            (Fragments::Emulated, _) => self.edge,
            (Fragments::Dawn, Some(Ok(MatrixUnits::Subgroup { subgroup, .. }))) => *subgroup,
            _ => gpu.info.subgroup_max_size,
        }
    }

    /// Halves per element of the staged blocks: vec4<f16> natively, f16
    /// where the variant says so or Dawn loads them (its loads take an
    /// offset into a scalar array).
    fn halves_per_element(&self) -> u32 {
        match (self.staging, self.fragments) {
            (Staging::Scalar, _) | (_, Fragments::Dawn) => 1,
            _ => 4,
        }
    }

    /// The workgroup tile's rows and columns.
    pub fn bm(&self) -> u32 {
        self.sgm * self.tm * self.edge
    }

    pub fn bn(&self) -> u32 {
        self.sgn * self.tn * self.edge
    }

    /// K consumed per iteration of the main loop.
    pub fn k_step(&self) -> u32 {
        match self.staging {
            Staging::Global => self.edge,
            Staging::Scalar | Staging::Vec4 | Staging::Double => self.bk,
        }
    }

    /// e.g. `staged-v4 T16 128x128x32 sg2x2 f4x4 nn:dX` (the layout, and
    /// which of the trainer's products has it).
    pub fn name(&self) -> String {
        let staging = match self.staging {
            Staging::Global => "global",
            Staging::Scalar => "staged-h",
            Staging::Vec4 => "staged-v4",
            Staging::Double => "double-v4",
        };
        let syntax = match self.fragments {
            Fragments::Wgpu => "",
            Fragments::Dawn => "dawn ",
            Fragments::Emulated => "emulated ",
        };
        format!(
            "{syntax}{staging} T{} {}x{}x{} sg{}x{} f{}x{} {}{}",
            self.edge,
            self.bm(),
            self.bn(),
            self.k_step(),
            self.sgm,
            self.sgn,
            self.tm,
            self.tn,
            self.layout.name(),
            if self.accumulate { " +=" } else { "" }
        )
    }

    /// The staged blocks' source rows and columns (halves), and their
    /// padded row strides: ((A rows, A cols, SA), (B rows, B cols, SB)).
    fn blocks(&self) -> ((u32, u32, u32), (u32, u32, u32)) {
        let (bm, bn, bk) = (self.bm(), self.bn(), self.bk);
        let (ar, ac) = if self.layout.a_t() {
            (bk, bm)
        } else {
            (bm, bk)
        };
        let (br, bc) = if self.layout.b_t() {
            (bn, bk)
        } else {
            (bk, bn)
        };
        ((ar, ac, ac + 8), (br, bc, bc + 8))
    }

    /// Workgroup memory the variant declares, in bytes.
    pub fn workgroup_bytes(&self) -> u32 {
        match self.staging {
            Staging::Global => 0,
            Staging::Scalar | Staging::Vec4 | Staging::Double => {
                let ((ar, _, sa), (br, _, sb)) = self.blocks();
                let stages = if self.staging == Staging::Double {
                    2
                } else {
                    1
                };
                stages * 2 * (ar * sa + br * sb)
            }
        }
    }

    /// Invocations per workgroup on subgroups of `sg` invocations.
    pub fn invocations(&self, sg: u32) -> u32 {
        sg * self.sgm * self.sgn
    }

    /// Why the variant cannot be built for subgroups of `sg`, if it cannot.
    fn unbuildable(&self, sg: u32) -> Option<String> {
        let wg = self.invocations(sg);
        if !matches!(self.edge, 8 | 16) || [self.sgm, self.sgn, self.tm, self.tn].contains(&0) {
            return Some("edge must be 8 or 16 and every count positive".into());
        }
        if self.emulated() && (self.staging == Staging::Global || sg != self.edge) {
            return Some("emulated fragments are staged, on subgroups of T lanes".into());
        }
        if self.fragments == Fragments::Dawn && self.staging == Staging::Global {
            return Some("Dawn's fragments load from the scalar f16 stages".into());
        }
        if self.staging != Staging::Global {
            let ((ar, ac, _), (br, bc, _)) = self.blocks();
            if !self.bk.is_multiple_of(self.edge) || !self.bk.is_multiple_of(8) {
                return Some(format!(
                    "BK {} is not a multiple of {} and 8",
                    self.bk, self.edge
                ));
            }
            if (ar * ac / 8) % wg != 0 || (br * bc / 8) % wg != 0 {
                return Some(format!(
                    "the staged blocks' 8-half quads ({}, {}) do not divide among {wg} invocations",
                    ar * ac / 8,
                    br * bc / 8
                ));
            }
        }
        None
    }

    /// The composed WGSL for subgroups of `sg` invocations.
    pub fn source(&self, sg: u32) -> Result<String> {
        if let Some(why) = self.unbuildable(sg) {
            return Err(Error::Unsupported(format!(
                "coop GEMM {}: {why}",
                self.name()
            )));
        }
        let t = self.edge;
        let mut s = format!("enable f16;\n{}\n", self.fragments.directive());
        let _ = writeln!(s, "const T: u32 = {t}u;");
        match self.fragments {
            Fragments::Emulated => {
                let (a, b) = match self.halves_per_element() {
                    1 => ("sa[h]", "sb[h]"),
                    _ => ("sa[h / 4u][h % 4u]", "sb[h / 4u][h % 4u]"),
                };
                s.push_str(&EMULATION.replace("HALF_A", a).replace("HALF_B", b));
            }
            _ => s.push_str(&self.fragments.aliases(t)),
        }
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
        let file = match self.staging {
            Staging::Global => LINEAR_COOP_GLOBAL,
            Staging::Scalar | Staging::Vec4 | Staging::Double => {
                let ((ar, ac, sa), (br, bc, sb)) = self.blocks();
                let sv = self.halves_per_element();
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
                match self.staging {
                    Staging::Double => LINEAR_COOP_DOUBLE,
                    _ => LINEAR_COOP_STAGED,
                }
            }
        };
        s.push('\n');
        for line in file.source.lines() {
            match line.trim() {
                "//#INIT" => self.init(&mut s),
                "//#STEP" => self.step(&mut s),
                "//#STORE" => self.store(&mut s),
                "//#STAGE_A" => self.store_quad(&mut s, "sa", "w0", "w1"),
                "//#STAGE_B" => self.store_quad(&mut s, "sb", "w0", "w1"),
                "//#REGS" => self.regs(&mut s, sg),
                "//#FETCH" => self.fetch(&mut s, sg),
                "//#PUT" => self.put(&mut s, sg),
                // Dawn has `subgroup_id` too (a WGSL language feature), which
                // its uniformity analysis takes as the subgroup's: `li / SG`
                // is an error before subgroup-matrix calls
                "//#SUBGROUP" if self.emulated() => {
                    s.push_str("    let sg = li / SG;\n    lane = li % SG;\n");
                }
                "//#SUBGROUP" => {}
                "@builtin(subgroup_id) sg: u32," if self.emulated() => {}
                _ if line.contains("coopLoad") && self.fragments != Fragments::Wgpu => {
                    s.push_str(&match self.fragments {
                        Fragments::Dawn => dawn_load(line),
                        _ => emulated_load(line),
                    });
                    s.push('\n');
                }
                _ => {
                    s.push_str(line);
                    s.push('\n');
                }
            }
        }
        Ok(s)
    }

    /// The TM × TN (row, column) fragment indices, row-major.
    fn frags(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.tm).flat_map(move |i| (0..self.tn).map(move |j| (i, j)))
    }

    /// The index in `out` of fragment (i, j)'s first row and column.
    fn index(&self, i: u32, j: u32) -> String {
        let t = self.edge;
        format!("(r0 + {}u) * p.n + c0 + {}u", i * t, j * t)
    }

    /// Fragment (i, j)'s first row and column of `out`, as arguments.
    fn corner(&self, i: u32, j: u32) -> String {
        let t = self.edge;
        format!("r0 + {}u, c0 + {}u", i * t, j * t)
    }

    fn init(&self, s: &mut String) {
        for (i, j) in self.frags() {
            let start = match (self.accumulate, self.fragments) {
                (true, Fragments::Wgpu) => {
                    format!("coopLoadT<MatC>(&out[{}], p.n)", self.index(i, j))
                }
                (true, Fragments::Dawn) => format!(
                    "subgroupMatrixLoad<MatC, row_major>(&out, {}, p.n)",
                    self.index(i, j)
                ),
                (true, Fragments::Emulated) => format!("load_c({})", self.corner(i, j)),
                (false, _) => "MatC()".to_string(),
            };
            let _ = writeln!(s, "    var c_{i}_{j} = {start};");
        }
    }

    fn step(&self, s: &mut String) {
        let t = self.edge;
        // rows and columns in load_a / load_b's terms: global or in-block
        let (r, c) = match self.staging {
            Staging::Global => ("r0", "c0"),
            Staging::Scalar | Staging::Vec4 | Staging::Double => ("lr0", "lc0"),
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
        let multiply_add = match self.fragments {
            Fragments::Dawn => "subgroupMatrixMultiplyAccumulate",
            _ => "coopMultiplyAdd",
        };
        for (i, j) in self.frags() {
            let _ = writeln!(
                s,
                "        c_{i}_{j} = {multiply_add}(a_{i}, b_{j}, c_{i}_{j});"
            );
        }
    }

    /// Every argument of `coopStoreT` is bound by a `let` first: naga
    /// 30.0.1 pushes the store statement before emitting the expressions
    /// its arguments create (it skips `interrupt_emitter`), and its SPIR-V
    /// writer then panics ("Expression [..] is not cached") — inside wgpu's
    /// `create_shader_module` on a device, found by this file's naga test.
    fn store(&self, s: &mut String) {
        if self.emulated() {
            for (i, j) in self.frags() {
                let _ = writeln!(s, "    store_c(c_{i}_{j}, {});", self.corner(i, j));
            }
            return;
        }
        let _ = writeln!(s, "    let ldc = p.n;");
        for (i, j) in self.frags() {
            let at = self.index(i, j);
            let _ = match self.fragments {
                Fragments::Dawn => writeln!(
                    s,
                    "    subgroupMatrixStore<row_major>(&out, {at}, c_{i}_{j}, ldc);"
                ),
                _ => writeln!(
                    s,
                    "    {{\n        let v = c_{i}_{j};\n        let ptr = &out[{at}];\n        coopStoreT(v, ptr, ldc);\n    }}"
                ),
            };
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
                row0: "select(gr0, kf, A_T)",
                col0: "select(kf, gr0, A_T)",
                ld: "lda",
            },
            Quads {
                block: "sb",
                src: "b",
                count: br * bc / 8 / wg,
                reg: "rb",
                cols: "B_COLS",
                stride: "SB",
                len: "B_LEN",
                row0: "select(kf, gc0, B_T)",
                col0: "select(gc0, kf, B_T)",
                ld: "ldb",
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

/// The fragment operations in plain code, for emulated variants (composed
/// after the variant's constants; the file's `coopLoad` lines become
/// `frag` calls, `emulated_load`). A fragment of A or B is where it starts
/// in its staged block and its stride, in halves, and whether it is read
/// column-major (`coopLoad`) or row-major (`coopLoadT`); A's are always in
/// `sa` and B's in `sb`. Lane l of a subgroup holds row l of each C
/// fragment; products of f16 values are exact in f32, summed in K order.
const EMULATION: &str = r#"
struct Frag {
    at: u32,
    stride: u32,
    col_major: bool,
}
alias MatA = Frag;
alias MatB = Frag;
alias MatC = array<f32, T>;

var<private> lane: u32;

fn frag(col_major: bool, at: u32, stride: u32) -> Frag {
    return Frag(at * SV, stride * SV, col_major);
}

// Element (i, j) of a fragment: its half in the block.
fn frag_at(f: Frag, i: u32, j: u32) -> u32 {
    return f.at + select(i * f.stride + j, j * f.stride + i, f.col_major);
}

fn half_a(h: u32) -> f32 {
    return f32(HALF_A);
}

fn half_b(h: u32) -> f32 {
    return f32(HALF_B);
}

fn coopMultiplyAdd(a: MatA, b: MatB, c: MatC) -> MatC {
    var acc = c;
    for (var k = 0u; k < T; k++) {
        let x = half_a(frag_at(a, lane, k));
        for (var j = 0u; j < T; j++) {
            acc[j] += x * half_b(frag_at(b, k, j));
        }
    }
    return acc;
}

fn load_c(r: u32, c: u32) -> MatC {
    var m: MatC;
    for (var j = 0u; j < T; j++) {
        m[j] = out[(r + lane) * p.n + c + j];
    }
    return m;
}

fn store_c(m: MatC, r: u32, c: u32) {
    for (var j = 0u; j < T; j++) {
        out[(r + lane) * p.n + c + j] = m[j];
    }
}
"#;

/// A staged file's `coopLoad<MatA>(&sa[AT], STRIDE)` line (or `coopLoadT`,
/// or B's in `sb`) as `frag(column-major, AT, STRIDE)`.
fn emulated_load(line: &str) -> String {
    let mut out = line.to_string();
    for (call, col_major) in [("coopLoadT<", "false"), ("coopLoad<", "true")] {
        for fragment in ["MatA>(&sa[", "MatB>(&sb["] {
            out = out.replace(&format!("{call}{fragment}"), &format!("frag({col_major}, "));
        }
    }
    out.replace("], ", ", ")
}

/// The same line in Dawn's syntax: `subgroupMatrixLoad<MatA, col_major>(&sa,
/// AT, STRIDE)` (row-major for `coopLoadT`).
fn dawn_load(line: &str) -> String {
    let mut out = line.to_string();
    for (call, major) in [("coopLoadT<", "row_major"), ("coopLoad<", "col_major")] {
        for (mat, block) in [("MatA", "sa"), ("MatB", "sb")] {
            out = out.replace(
                &format!("{call}{mat}>(&{block}["),
                &format!("subgroupMatrixLoad<{mat}, {major}>(&{block}, "),
            );
        }
    }
    out.replace("], ", ", ")
}

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

/// `Params` of the coop files.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    m: u32,
    n: u32,
    k: u32,
    pad: u32,
}

/// A built variant: its pipeline on one device.
pub struct CoopGemm {
    pub variant: CoopVariant,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

impl CoopGemm {
    /// Compiles `variant` for `gpu`'s subgroup size; a compile or pipeline
    /// error is returned (with the shader's messages), not raised.
    pub async fn new(gpu: &Gpu, variant: CoopVariant) -> Result<CoopGemm> {
        let name = variant.name();
        let failed = |message: String| Error::Gpu {
            op: format!("coop GEMM {name}"),
            message,
        };
        check_limits(gpu, &variant).map_err(failed)?;
        let source = variant.source(variant.lanes(gpu))?;
        let module = compile(gpu, &source).await.map_err(failed)?;
        let (pipeline, layout) = build_pipeline(gpu, &module).await.map_err(failed)?;
        Ok(CoopGemm {
            variant,
            pipeline,
            layout,
        })
    }

    /// Why (m, n, k) does not fit the variant's tiles, if it does not.
    pub fn misfit(&self, m: u32, n: u32, k: u32) -> Option<String> {
        let v = &self.variant;
        let (bm, bn, ks) = (v.bm(), v.bn(), v.k_step());
        (!m.is_multiple_of(bm) || !n.is_multiple_of(bn) || !k.is_multiple_of(ks) || k == 0)
            .then(|| format!("{m}x{n}x{k} is not a multiple of the {bm}x{bn}x{ks} tile"))
    }

    /// `out[m, n] (=|+=) op(a) · op(b)`: a holds M·K halves, b K·N halves
    /// (in the variant's layout), out M·N f32.
    pub fn dispatch(
        &self,
        gpu: &Gpu,
        a: BufferRange,
        b: BufferRange,
        out: BufferRange,
        (m, n, k): (u32, u32, u32),
    ) -> Result<Dispatch> {
        let op = "linear_coop";
        if let Some(why) = self.misfit(m, n, k) {
            return Err(Error::Unsupported(format!("{op}: {why}")));
        }
        for (what, range, bytes) in [
            ("a", a, 2 * m as u64 * k as u64),
            ("b", b, 2 * k as u64 * n as u64),
            ("out", out, 4 * m as u64 * n as u64),
        ] {
            if range.size < bytes {
                return Err(Error::shape(op, what, bytes, range.size));
            }
        }
        let (gx, gy) = (n / self.variant.bn(), m / self.variant.bm());
        let max = gpu.limits.max_compute_workgroups_per_dimension;
        if gx > max || gy > max {
            return Err(Error::Limit {
                op,
                what: "workgroups per dimension".into(),
                needed: gx.max(gy) as u64,
                limit: max as u64,
            });
        }
        let params = gpu.uniform("linear_coop", &Params { m, n, k, pad: 0 });
        let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(op),
            layout: &self.layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: params.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: a.binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: b.binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: out.binding(),
                },
            ],
        });
        Ok(Dispatch::from_parts(
            op,
            self.pipeline.clone(),
            bind_group,
            Grid { x: gx, y: gy, z: 1 },
        ))
    }
}

/// The largest errors of a check.
pub struct CoopErrors {
    pub abs: f64,
    /// |err| / |cpu| (|cpu| > 0)
    pub rel: f64,
    /// |err| / Σ|a·b| (+ |out₀|): what the bound is on
    pub share: f64,
}

/// Runs the variant once at 3 × 5 workgroup tiles and 7 K steps (48 × 80 ×
/// 112 for one 16×16 fragment per workgroup) against its CPU twin: the
/// f64 product of the same f16 inputs (plus `out`'s start when it
/// accumulates; a sentinel every output must replace when it does not).
pub async fn check(gpu: &Gpu, g: &CoopGemm) -> Result<(String, CoopErrors)> {
    let v = g.variant;
    let (m, n, k) = (3 * v.bm(), 5 * v.bn(), 7 * v.k_step());
    let halves = |count: u32, seed: u64| -> Vec<f16> {
        uniform(&mut SplitMix64(seed), count as usize, -1.0, 1.0)
            .into_iter()
            .map(f16::from_f32)
            .collect()
    };
    let (a, b) = (halves(m * k, 11), halves(k * n, 12));
    // accumulating: out starts random; storing: a sentinel every output must replace
    let out0: Vec<f32> = match v.accumulate {
        true => uniform(&mut SplitMix64(13), (m * n) as usize, -1.0, 1.0),
        false => vec![12345.0; (m * n) as usize],
    };
    let (ab, bb, ob) = (
        gpu.upload("a", &a)?,
        gpu.upload("b", &b)?,
        gpu.upload("out", &out0)?,
    );
    let d = g.dispatch(gpu, (&ab).into(), (&bb).into(), (&ob).into(), (m, n, k))?;
    gpu.run(&[&d]).await?;
    let got: Vec<f32> = gpu.read_back((&ob).into()).await?;
    // op(A)[i, p] and op(B)[p, j] as the layout stores them
    let a_at = |i: u32, p: u32| match v.layout {
        CoopLayout::Tn => a[(p * m + i) as usize],
        _ => a[(i * k + p) as usize],
    };
    let b_at = |p: u32, j: u32| match v.layout {
        CoopLayout::Nt => b[(j * k + p) as usize],
        _ => b[(p * n + j) as usize],
    };
    let mut e = CoopErrors {
        abs: 0.0,
        rel: 0.0,
        share: 0.0,
    };
    for i in 0..m {
        for j in 0..n {
            let (mut sum, mut mag) = match v.accumulate {
                true => {
                    let c = out0[(i * n + j) as usize] as f64;
                    (c, c.abs())
                }
                false => (0.0, 0.0),
            };
            for p in 0..k {
                let t = a_at(i, p).to_f64() * b_at(p, j).to_f64();
                sum += t;
                mag += t.abs();
            }
            let err = (got[(i * n + j) as usize] as f64 - sum).abs();
            let err = if err.is_nan() { f64::INFINITY } else { err };
            e.abs = e.abs.max(err);
            if sum != 0.0 {
                e.rel = e.rel.max(err / sum.abs());
            }
            e.share = e.share.max(if mag > 0.0 { err / mag } else { err });
        }
    }
    Ok((format!("{m}x{n}x{k}"), e))
}

/// The variants `webtrain bench --what coop` tries for fragments of
/// `edge`, least risky first: a failure that loses the device then costs
/// the fewest results. Round 2 of issue #30's probe: the round-1 best
/// (staged-v4 128x128x32 sg4x2 f2x4, 79–100 TFLOP/s on an H200) and
/// sg2x2 f4x4 as references, then more subgroups and bigger tiles, K
/// slices of 16, double-buffered staging, and the trainer's layouts.
pub fn bench_variants(edge: u32) -> Vec<CoopVariant> {
    use Staging::{Double, Vec4};
    let e = edge;
    let best = CoopVariant::staged(e, Vec4, (4, 2), (2, 4), 32);
    let double = CoopVariant::staged(e, Double, (4, 2), (2, 4), 32);
    let all = [CoopLayout::Nt, CoopLayout::Tn];
    let mut v = vec![
        // references (round 1)
        best,
        CoopVariant::staged(e, Vec4, (2, 2), (4, 4), 32),
        // more subgroups, bigger tiles
        CoopVariant::staged(e, Vec4, (4, 2), (2, 2), 32), // 128x64, 8 subgroups
        CoopVariant::staged(e, Vec4, (2, 4), (4, 2), 32), // 128x128 transposed
        CoopVariant::staged(e, Vec4, (4, 4), (2, 2), 32), // 128x128, 16 subgroups
        CoopVariant::staged(e, Vec4, (4, 2), (4, 4), 32), // 256x128
        CoopVariant::staged(e, Vec4, (2, 4), (4, 4), 32), // 128x256
        CoopVariant::staged(e, Vec4, (8, 2), (2, 4), 32), // 256x128, 16 subgroups
        // K slices of 16 (more barriers, less staging)
        CoopVariant::staged(e, Vec4, (4, 2), (2, 4), 16),
        // double-buffered staging
        double,
        CoopVariant::staged(e, Double, (4, 2), (2, 4), 16),
        CoopVariant::staged(e, Double, (4, 4), (2, 2), 32),
        CoopVariant::staged(e, Double, (2, 2), (4, 4), 32),
        CoopVariant::staged(e, Double, (4, 2), (4, 4), 16), // 256x128
    ];
    // the trainer's layouts (nn above is dX = dY·W): nt its forward
    // Y = X·Wᵀ, tn += its weight gradient dW += dYᵀ·X
    for base in [best, double] {
        for layout in all {
            v.push(base.with_layout(layout));
        }
        v.push(base.with_layout(CoopLayout::Tn).accumulating());
    }
    v
}

/// Round 1's other variants (dominated on an H200): `bench --what coop
/// --only NAME` can still pick them, and the naga test builds them.
pub fn earlier_variants(edge: u32) -> Vec<CoopVariant> {
    use Staging::{Scalar, Vec4};
    let e = edge;
    let big = CoopVariant::staged(e, Vec4, (2, 2), (4, 4), 32);
    vec![
        CoopVariant::global(e, (1, 1), (1, 1)).accumulating(),
        CoopVariant::global(e, (1, 1), (1, 1)),
        CoopVariant::global(e, (2, 2), (2, 2)),
        CoopVariant::global(e, (2, 2), (4, 2)),
        CoopVariant::staged(e, Scalar, (2, 2), (4, 4), 32),
        CoopVariant::staged(e, Vec4, (2, 2), (2, 2), 32),
        CoopVariant::staged(e, Vec4, (2, 2), (4, 4), 64),
        big.with_layout(CoopLayout::Nt),
        big.with_layout(CoopLayout::Tn),
        big.with_layout(CoopLayout::Tn).accumulating(),
    ]
}

/// The bench's and round 1's variants of fragments of `edge` in every
/// layout and accumulator start (wgpu's syntax): what the checks compile.
pub fn every_layout(edge: u32) -> Vec<CoopVariant> {
    let layouts = [CoopLayout::Nn, CoopLayout::Nt, CoopLayout::Tn];
    let mut out = Vec::new();
    for v in bench_variants(edge)
        .into_iter()
        .chain(earlier_variants(edge))
    {
        for layout in layouts {
            for accumulate in [false, true] {
                let v = CoopVariant {
                    layout,
                    accumulate,
                    ..v
                };
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// One composed kernel and what its pipeline needs of a device.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ComposedKernel {
    pub name: String,
    pub entry: &'static str,
    pub source: String,
    pub invocations: u32,
    pub workgroup_bytes: u32,
}

/// Every variant of `every_layout` in Dawn's syntax on subgroups of
/// `subgroup`: what the page would compile, for the check that Tint
/// accepts them (tests/e2e/dawn.test.mjs).
pub fn dawn_sources(subgroup: u32) -> Vec<ComposedKernel> {
    [16, 8]
        .into_iter()
        .flat_map(every_layout)
        .map(CoopVariant::in_dawn_syntax)
        .filter_map(|v| {
            Some(ComposedKernel {
                name: v.name(),
                entry: "gemm",
                source: v.source(subgroup).ok()?,
                invocations: v.invocations(subgroup),
                workgroup_bytes: v.workgroup_bytes(),
            })
        })
        .collect()
}

/// Whether `variant`'s workgroup fits the device's limits; why not.
fn check_limits(gpu: &Gpu, variant: &CoopVariant) -> std::result::Result<(), String> {
    let wg = variant.invocations(variant.lanes(gpu));
    let l = &gpu.limits;
    if wg > l.max_compute_invocations_per_workgroup || wg > l.max_compute_workgroup_size_x {
        return Err(format!("{wg} invocations per workgroup exceed the limits"));
    }
    if variant.workgroup_bytes() > l.max_compute_workgroup_storage_size {
        return Err(format!(
            "{} B of workgroup memory exceed the limit, {} B",
            variant.workgroup_bytes(),
            l.max_compute_workgroup_storage_size
        ));
    }
    Ok(())
}

/// `source` compiled in a validation scope; the compiler's messages where it fails.
async fn compile(gpu: &Gpu, source: &str) -> std::result::Result<wgpu::ShaderModule, String> {
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = gpu
        .device
        .create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("linear_coop"),
            source: wgpu::ShaderSource::Wgsl(source.into()),
        });
    if let Some(error) = scope.pop().await {
        let info = module.get_compilation_info().await;
        let messages: Vec<String> = info
            .messages
            .iter()
            .map(|m| match &m.location {
                Some(loc) => format!("line {}: {}", loc.line_number, m.message),
                None => m.message.clone(),
            })
            .collect();
        return Err(match messages.is_empty() {
            true => error.to_string(),
            false => messages.join("; "),
        });
    }
    Ok(module)
}

/// The `gemm` entry point's pipeline and its bind-group layout: the
/// uniform, A, B and the output.
async fn build_pipeline(
    gpu: &Gpu,
    module: &wgpu::ShaderModule,
) -> std::result::Result<(wgpu::ComputePipeline, wgpu::BindGroupLayout), String> {
    let buffer = |binding, read_only: bool| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    };
    let uniform = wgpu::BindGroupLayoutEntry {
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        ..buffer(0, true)
    };
    let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let layout = gpu
        .device
        .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("linear_coop"),
            entries: &[uniform, buffer(1, true), buffer(2, true), buffer(3, false)],
        });
    let pipeline_layout = gpu
        .device
        .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("linear_coop"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
    let pipeline = gpu
        .device
        .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("linear_coop"),
            layout: Some(&pipeline_layout),
            module,
            entry_point: Some("gemm"),
            compilation_options: Default::default(),
            cache: None,
        });
    if let Some(error) = scope.pop().await {
        return Err(error.to_string());
    }
    Ok((pipeline, layout))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use wgpu::naga;

    /// Every variant the bench can build, in both edges, every layout and
    /// accumulator start, on subgroups of 32 (NVIDIA) and 8, and emulated.
    fn every_variant() -> Vec<(CoopVariant, u32)> {
        let mut out = Vec::new();
        for edge in [16, 8] {
            for v in every_layout(edge) {
                for sg in [32, 8] {
                    if v.unbuildable(sg).is_none() {
                        out.push((v, sg));
                    }
                }
                if v.emulate().unbuildable(edge).is_none() {
                    out.push((v.emulate(), edge));
                }
            }
        }
        out
    }

    /// naga parses and validates each composed module with every capability
    /// (cooperative matrices included; lavapipe here has none, so only the
    /// GPU runs them), and writes it as SPIR-V 1.6 as wgpu's Vulkan backend
    /// would; where `spirv-val` is installed (spirv-tools), the SPIR-V is
    /// validated for Vulkan 1.3 too, if it knows cooperative matrices
    /// (SPIRV-Tools from 2024; Debian 12's 2023.1 does not).
    #[test]
    fn coop_shaders_validate_with_naga() {
        let variants = every_variant();
        assert!(variants.len() > 50, "{} variants", variants.len());
        let spirv_val = spirv_val_knows_cooperative_matrices();
        let dir = std::env::temp_dir().join(format!("webtrain-coop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (i, (v, sg)) in variants.iter().enumerate() {
            let source = v.source(*sg).unwrap();
            let module = naga::front::wgsl::parse_str(&source).unwrap_or_else(|e| {
                panic!(
                    "{} (sg {sg}):\n{}\n{source}",
                    v.name(),
                    e.emit_to_string(&source)
                )
            });
            let info = naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .unwrap_or_else(|e| {
                panic!(
                    "{} (sg {sg}):\n{}\n{source}",
                    v.name(),
                    e.emit_to_string(&source)
                )
            });
            let options = naga::back::spv::Options {
                lang_version: (1, 6),
                ..Default::default()
            };
            let words = naga::back::spv::write_vec(&module, &info, &options, None)
                .unwrap_or_else(|e| panic!("{} (sg {sg}): SPIR-V: {e}", v.name()));
            if spirv_val {
                let path = dir.join(format!("{i}.spv"));
                let words = without_workgroup_strides(&words);
                std::fs::write(&path, bytemuck::cast_slice::<u32, u8>(&words)).unwrap();
                let out = std::process::Command::new("spirv-val")
                    .args(["--target-env", "vulkan1.3"])
                    .arg(&path)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{} (sg {sg}): spirv-val: {}",
                    v.name(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        if !spirv_val {
            eprintln!("no spirv-val of 2024 or later: SPIR-V written but not validated");
        }
    }

    /// Whether `spirv-val` is on the PATH and from SPIRV-Tools 2024 or later
    /// (its `--version` starts `SPIRV-Tools v2023.1 …`).
    fn spirv_val_knows_cooperative_matrices() -> bool {
        let Ok(out) = std::process::Command::new("spirv-val")
            .arg("--version")
            .output()
        else {
            return false;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let year = text
            .split_once("SPIRV-Tools v")
            .and_then(|(_, v)| v.get(..4))
            .and_then(|y| y.parse::<u32>().ok());
        year.is_some_and(|y| y >= 2024)
    }

    /// `words` without the ArrayStride decorations of arrays that live in
    /// workgroup memory. naga decorates every array; spirv-val 2025 rejects
    /// that for Workgroup (VUID-StandaloneSpirv-None-10684), as it would
    /// every webtrain kernel with a workgroup array, which drivers run.
    fn without_workgroup_strides(words: &[u32]) -> Vec<u32> {
        const OP_TYPE_POINTER: u32 = 32;
        const OP_DECORATE: u32 = 71;
        const WORKGROUP: u32 = 4;
        const ARRAY_STRIDE: u32 = 6;
        let instructions = |words: &[u32]| {
            let mut at = 5; // the header
            let mut out = Vec::new();
            while at < words.len() {
                let count = (words[at] >> 16) as usize;
                out.push((at, count));
                at += count.max(1);
            }
            out
        };
        let ops = instructions(words);
        let workgroup_arrays: Vec<u32> = ops
            .iter()
            .filter(|&&(at, _)| words[at] & 0xffff == OP_TYPE_POINTER && words[at + 2] == WORKGROUP)
            .map(|&(at, _)| words[at + 3])
            .collect();
        let mut out = words[..5].to_vec();
        for (at, count) in ops {
            let op = &words[at..at + count];
            let drop = op[0] & 0xffff == OP_DECORATE
                && op[2] == ARRAY_STRIDE
                && workgroup_arrays.contains(&op[1]);
            if !drop {
                out.extend_from_slice(op);
            }
        }
        out
    }

    /// The bench's default variants all build on NVIDIA's subgroups of 32
    /// within an H200's limits (1024 invocations, 49152 B of workgroup
    /// memory); `--nocapture` prints each one's size.
    #[test]
    fn bench_variants_fit_nvidia() {
        for v in bench_variants(16) {
            let (wg, bytes) = (v.invocations(32), v.workgroup_bytes());
            eprintln!("{:<46} {wg:>5} invocations {bytes:>6} B", v.name());
            assert!(v.unbuildable(32).is_none(), "{}", v.name());
            assert!(wg <= 1024 && bytes <= 49152, "{}", v.name());
        }
        let double = CoopVariant::staged(16, Staging::Double, (4, 2), (2, 4), 32);
        let source = double.source(32).unwrap();
        if std::env::var_os("WEBTRAIN_COOP_SOURCE").is_some() {
            eprintln!("{source}");
        }
        assert!(source.contains("const A_PER: u32 = 2u;"));
        assert_eq!(double.workgroup_bytes(), 2 * 2 * (128 * 40 + 32 * 136));
    }

    /// Dawn's spelling of every variant (Tint compiles them in
    /// tests/e2e/dawn.test.mjs; naga cannot): no wgpu coop call or type
    /// left, and scalar stages.
    #[test]
    fn dawn_sources_spell_every_variant() {
        let sources = dawn_sources(32);
        // every variant the bench tries on NVIDIA is among them
        for v in bench_variants(16) {
            let name = v.in_dawn_syntax().name();
            assert!(sources.iter().any(|k| k.name == name), "{name}");
        }
        for ComposedKernel { name, source, .. } in &sources {
            assert!(name.starts_with("dawn "), "{name}");
            let code: Vec<&str> = source
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect();
            let code = code.join("\n");
            for wgpu_only in [
                "coopLoad",
                "coopStore",
                "coopMultiplyAdd",
                "coop_mat",
                "vec4<f16>, ",
            ] {
                assert!(!code.contains(wgpu_only), "{name}: {wgpu_only}\n{source}");
            }
            assert!(source.contains("enable chromium_experimental_subgroup_matrix;"));
            assert!(source.contains("subgroupMatrixMultiplyAccumulate(a_0, b_0, c_0_0)"));
            assert!(source.contains("alias SHalf = f16;"));
        }
        let v = CoopVariant::staged(16, Staging::Double, (4, 2), (2, 4), 16)
            .with_layout(CoopLayout::Tn)
            .accumulating()
            .in_dawn_syntax();
        let source = v.source(32).unwrap();
        assert!(source.contains(
            "subgroupMatrixLoad<MatA, col_major>(&sa, s * A_LEN + (kk * SA + r) / SV, SA / SV)"
        ));
        assert!(source.contains(
            "subgroupMatrixLoad<MatC, row_major>(&out, (r0 + 0u) * p.n + c0 + 16u, p.n)"
        ));
        assert!(source.contains(
            "subgroupMatrixStore<row_major>(&out, (r0 + 16u) * p.n + c0 + 48u, c_1_3, ldc);"
        ));
    }

    #[test]
    fn tiles_and_names() {
        let v = CoopVariant::staged(16, Staging::Vec4, (2, 2), (4, 4), 32);
        assert_eq!((v.bm(), v.bn(), v.k_step()), (128, 128, 32));
        assert_eq!(v.name(), "staged-v4 T16 128x128x32 sg2x2 f4x4 nn:dX");
        // A 128 × (32 + 8) halves, B 32 × (128 + 8)
        assert_eq!(v.workgroup_bytes(), 2 * (128 * 40 + 32 * 136));
        let t = v.with_layout(CoopLayout::Tn);
        assert_eq!(t.workgroup_bytes(), 2 * (32 * 136 + 32 * 136));
        assert!(v.source(32).unwrap().contains("coop_mat16x16<f32, C>"));
    }
}
