//! f16 GEMMs on matrix units: `out[M, N] (f32) (=|+=) op(A) · op(B)` with
//! f16 inputs and f32 accumulation, from `03_linear_coop_global.wgsl`
//! (fragments loaded from global memory), `03_linear_coop_staged.wgsl` (K
//! slices staged through workgroup memory as f16) or
//! `03_linear_coop_double.wgsl` (two stages: the next slice is fetched
//! while the current one is multiplied).
//!
//! A variant is a fragment edge T (16 or 8, as the adapter's
//! configurations allow), SGM × SGN subgroups per workgroup each owning TM
//! × TN fragments (a BM × BN = SGM·TM·T × SGN·TN·T workgroup tile), a K
//! slice BK (staged only), the layout, the accumulator's start (zero, or
//! `out` itself) and the syntax (`units::syntax`). Emulated variants are
//! staged, on "subgroups" of T invocations, so the tiling, staging and
//! indexing the GPU runs are checked against the CPU twin without one.
//! Composition: `gemm_source.rs`; the built kernel: `gemm_launch.rs`.

use super::syntax::Syntax;
use crate::gpu::Gpu;
use crate::gpu::coop::MatrixUnits;

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
pub enum GemmLayout {
    /// A [M, K], B [K, N]: dX = dY·W.
    Nn,
    /// A [M, K], B given as [N, K]: Y = X·Wᵀ.
    Nt,
    /// A given as [K, M], B [K, N]: dW = dYᵀ·X.
    Tn,
}

impl GemmLayout {
    pub fn name(self) -> &'static str {
        match self {
            GemmLayout::Nn => "nn:dX",
            GemmLayout::Nt => "nt:fwd",
            GemmLayout::Tn => "tn:dW",
        }
    }

    pub fn a_t(self) -> bool {
        self == GemmLayout::Tn
    }

    pub fn b_t(self) -> bool {
        self == GemmLayout::Nt
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmVariant {
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
    pub layout: GemmLayout,
    /// `out += A·B` (the accumulators start from `out`) instead of `out = A·B`.
    pub accumulate: bool,
    /// The syntax its fragment operations are spelled in.
    pub syntax: Syntax,
}

impl GemmVariant {
    /// The variant the trainer runs its products on for `units`, in
    /// `layout`: the H200's best of the probe (double-buffered, 4×2
    /// subgroups of 2×4 fragments, K slices of 16; docs/PERFORMANCE.md) in
    /// wgpu's syntax or Dawn's, or the emulated 16×16×16 one.
    pub fn for_units(units: MatrixUnits, layout: GemmLayout, accumulate: bool) -> GemmVariant {
        let v = match units {
            MatrixUnits::Cooperative { edge } => {
                GemmVariant::staged(edge, Staging::Double, (4, 2), (2, 4), 16)
            }
            MatrixUnits::Subgroup { edge, .. } => {
                GemmVariant::staged(edge, Staging::Double, (4, 2), (2, 4), 16).in_dawn_syntax()
            }
            MatrixUnits::Emulated => {
                GemmVariant::staged(8, Staging::Double, (2, 2), (1, 1), 16).emulate()
            }
        };
        GemmVariant {
            layout,
            accumulate,
            ..v
        }
    }

    /// Fragments loaded from global memory, `out = A·B`, layout nn.
    pub const fn global(edge: u32, sg: (u32, u32), frags: (u32, u32)) -> GemmVariant {
        GemmVariant {
            edge,
            sgm: sg.0,
            sgn: sg.1,
            tm: frags.0,
            tn: frags.1,
            bk: edge,
            staging: Staging::Global,
            layout: GemmLayout::Nn,
            accumulate: false,
            syntax: Syntax::Wgpu,
        }
    }

    /// Staged through workgroup memory, `out = A·B`, layout nn.
    pub const fn staged(
        edge: u32,
        staging: Staging,
        sg: (u32, u32),
        frags: (u32, u32),
        bk: u32,
    ) -> GemmVariant {
        GemmVariant {
            bk,
            staging,
            ..GemmVariant::global(edge, sg, frags)
        }
    }

    pub const fn with_layout(self, layout: GemmLayout) -> GemmVariant {
        GemmVariant { layout, ..self }
    }

    pub const fn accumulating(self) -> GemmVariant {
        GemmVariant {
            accumulate: true,
            ..self
        }
    }

    /// The same tiles with the fragment operations emulated (staged only).
    pub const fn emulate(self) -> GemmVariant {
        GemmVariant {
            syntax: Syntax::Emulated,
            ..self
        }
    }

    /// The same tiles in Dawn's syntax (staged only), for Chrome.
    pub const fn in_dawn_syntax(self) -> GemmVariant {
        GemmVariant {
            syntax: Syntax::Dawn,
            ..self
        }
    }

    pub(super) fn emulated(&self) -> bool {
        self.syntax == Syntax::Emulated
    }

    /// Invocations per subgroup on `gpu`: its subgroups' (Dawn's as the
    /// page was told them), or T emulated lanes.
    pub fn lanes(&self, gpu: &Gpu) -> u32 {
        match (self.syntax, gpu.matrix_units.as_ref()) {
            (Syntax::Emulated, _) => self.edge,
            (Syntax::Dawn, Some(Ok(MatrixUnits::Subgroup { subgroup, .. }))) => *subgroup,
            _ => gpu.info.subgroup_max_size,
        }
    }

    /// Halves per element of the staged blocks: vec4<f16> natively, f16
    /// where the variant says so or Dawn loads them (its loads take an
    /// offset into a scalar array).
    pub(super) fn halves_per_element(&self) -> u32 {
        match (self.staging, self.syntax) {
            (Staging::Scalar, _) | (_, Syntax::Dawn) => 1,
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
        let syntax = self.syntax.prefix();
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
    pub(super) fn blocks(&self) -> ((u32, u32, u32), (u32, u32, u32)) {
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
    pub(super) fn unbuildable(&self, sg: u32) -> Option<String> {
        let wg = self.invocations(sg);
        if !matches!(self.edge, 8 | 16) || [self.sgm, self.sgn, self.tm, self.tn].contains(&0) {
            return Some("edge must be 8 or 16 and every count positive".into());
        }
        if self.emulated() && (self.staging == Staging::Global || sg != self.edge) {
            return Some("emulated fragments are staged, on subgroups of T lanes".into());
        }
        if self.syntax == Syntax::Dawn && self.staging == Staging::Global {
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
}
