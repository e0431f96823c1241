//! Attention's products on matrix units, for a recipe whose attention
//! operands are f16: the forward (05_attention_units.wgsl) and the
//! backward's two passes (05_attention_units_dq.wgsl,
//! 05_attention_units_dkv.wgsl), spelled for the device's units as the
//! GEMMs are (`units::syntax`). `kernels::Attention` dispatches them in
//! place of the scalar kernels where they were built.

use std::fmt::Write as _;

use super::ComposedKernel;
use super::syntax::{Blocks, Syntax, spell};
use crate::error::Result;
use crate::gpu::coop::MatrixUnits;
use crate::gpu::{Gpu, Kernel, KernelDesc, Slot, build_composed_kernels};
use crate::shaders::{
    ATTENTION_COMMON, ATTENTION_UNITS, ATTENTION_UNITS_BACKWARD, ATTENTION_UNITS_COMMON,
    ATTENTION_UNITS_DKV, ATTENTION_UNITS_DQ, Composed, F16Storage, Module, Numerics, ShaderFile,
    compose_shared,
};

/// Workgroup memory the common prelude's tile takes at `TILE = 4` (the
/// units' kernel never touches it, but it is declared): two tiles of 4
/// rows of Dh floats and 4 × 64 score parts.
fn prelude_bytes(dh: u32) -> u32 {
    2 * 4 * dh * 4 + 4 * 64 * 4
}

/// The kernels on matrix units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKernel {
    /// Blocks of BR queries × BC keys.
    Forward,
    /// The query-major pass: BR queries × BC keys.
    Dq,
    /// The key-major pass: BR keys × BC queries.
    Dkv,
}

impl UnitKernel {
    fn file(self) -> ShaderFile {
        match self {
            UnitKernel::Forward => ATTENTION_UNITS,
            UnitKernel::Dq => ATTENTION_UNITS_DQ,
            UnitKernel::Dkv => ATTENTION_UNITS_DKV,
        }
    }

    /// The files it shares with the others, composed ahead of its own.
    fn shared(self) -> &'static [ShaderFile] {
        match self {
            UnitKernel::Forward => &[ATTENTION_UNITS_COMMON],
            UnitKernel::Dq | UnitKernel::Dkv => &[ATTENTION_UNITS_COMMON, ATTENTION_UNITS_BACKWARD],
        }
    }

    fn entry(self) -> &'static str {
        match self {
            UnitKernel::Forward => "attention_units_forward",
            UnitKernel::Dq => "attention_units_dq",
            UnitKernel::Dkv => "attention_units_dkv",
        }
    }

    /// The f16 blocks fragments of A and B are loaded from, and the f32
    /// ones accumulators are loaded from or stored to, as the file
    /// declares them (every one a scalar array).
    fn blocks(self) -> Blocks<'static> {
        let (halves, floats): (&[(&str, u32)], &[&str]) = match self {
            UnitKernel::Forward => (&[("sq", 1), ("sk", 1), ("sv", 1), ("sp", 1)], &["ss", "so"]),
            UnitKernel::Dq => (
                &[("sq", 1), ("sdo", 1), ("sk", 1), ("sv", 1), ("sds", 1)],
                &["ss", "sdp", "sdq"],
            ),
            UnitKernel::Dkv => (
                &[
                    ("sk", 1),
                    ("sv", 1),
                    ("sq", 1),
                    ("sdo", 1),
                    ("sp", 1),
                    ("sds", 1),
                ],
                &["ss", "sdp", "sdk", "sdv"],
            ),
        };
        Blocks { halves, floats }
    }

    /// Workgroup memory: (halves, floats) of its blocks at BR × BC, head
    /// dim `dh`.
    fn block_words(self, br: u32, bc: u32, dh: u32) -> (u32, u32) {
        let (dhp, bcp) = (dh + 8, bc + 8);
        match self {
            UnitKernel::Forward => (
                br * dhp + 2 * bc * dhp + br * bcp,
                br * bcp + br * dhp + 2 * br,
            ),
            UnitKernel::Dq => (
                2 * br * dhp + 2 * bc * dhp + br * bcp,
                2 * br * bcp + br * dhp + 2 * br,
            ),
            UnitKernel::Dkv => (
                2 * br * dhp + 2 * bc * dhp + 2 * br * bcp,
                2 * br * bcp + 2 * br * dhp + 2 * bc,
            ),
        }
    }
}

/// The tiles of a kernel on matrix units for one head dim on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitTiles {
    pub kernel: UnitKernel,
    pub syntax: Syntax,
    /// The fragments' edge T and a subgroup's invocations.
    pub edge: u32,
    pub subgroup: u32,
    /// Rows per workgroup (queries, or keys in the key-major pass) and
    /// per streamed block (keys, or queries): multiples of T.
    pub br: u32,
    pub bc: u32,
}

impl UnitTiles {
    /// The largest blocks of 32×32, 32×16 or 16×16 whose workgroup fits
    /// `gpu`, for `kernel` at head dim `dh` on `units`; none where no
    /// fragment divides `dh` or nothing fits.
    pub fn choose(gpu: &Gpu, units: MatrixUnits, kernel: UnitKernel, dh: u32) -> Option<UnitTiles> {
        let (syntax, edge, subgroup) = Syntax::of(units, gpu);
        if !dh.is_multiple_of(edge) {
            return None;
        }
        let l = &gpu.limits;
        [(32, 32), (32, 16), (16, 16)]
            .into_iter()
            .map(|blocks| tiles((kernel, syntax), (edge, subgroup), blocks))
            .find(|t| {
                t.br.is_multiple_of(edge)
                    && t.bc.is_multiple_of(edge)
                    && t.workgroup_bytes(dh) <= l.max_compute_workgroup_storage_size
                    && t.invocations() <= l.max_compute_invocations_per_workgroup
                    && t.invocations() <= l.max_compute_workgroup_size_x
            })
    }

    /// Subgroups of a workgroup: one per T query rows.
    fn subgroups(&self) -> u32 {
        self.br / self.edge
    }

    pub fn invocations(&self) -> u32 {
        self.subgroup * self.subgroups()
    }

    /// Workgroup memory at head dim `dh`: the kernel's blocks and the
    /// prelude's tile.
    pub fn workgroup_bytes(&self, dh: u32) -> u32 {
        let (halves, floats) = self.kernel.block_words(self.br, self.bc, dh);
        2 * halves + 4 * floats + prelude_bytes(dh)
    }

    /// e.g. `dawn attention Dq T16 32x32 Dh 64`.
    pub fn name(&self, dh: u32) -> String {
        format!(
            "{}attention {:?} T{} {}x{} Dh {dh}",
            self.syntax.prefix(),
            self.kernel,
            self.edge,
            self.br,
            self.bc
        )
    }

    /// The composed module for head dim `dh`, in the units' syntax.
    pub fn compose(&self, numerics: Numerics, dh: u32) -> Result<Composed> {
        // the prelude's row layout (COLS, TILE) goes unused here: one lane a
        // row of 16-column chunks, 4-row tiles
        let mut constants = format!(
            "const DH: u32 = {dh}u;\nconst COLS: u32 = 16u;\nconst TILE: u32 = 4u;\nconst ATTN_F16: bool = true;\n"
        );
        for (name, v) in [
            ("T", self.edge),
            ("SG", self.subgroup),
            ("SGS", self.subgroups()),
            ("UWG", self.invocations()),
            ("BR", self.br),
            ("BC", self.bc),
            ("DHP", dh + 8),
            ("BCP", self.bc + 8),
        ] {
            let _ = writeln!(constants, "const {name}: u32 = {v}u;");
        }
        let key_major = self.kernel == UnitKernel::Dkv;
        let _ = writeln!(constants, "const KEY_MAJOR: bool = {key_major};");
        constants.push_str(&self.syntax.declarations(self.edge, &self.kernel.blocks()));
        let module = Module {
            prelude: Some(ATTENTION_COMMON),
            file: self.kernel.file(),
        };
        let mut composed = compose_shared(
            module,
            F16Storage::Native,
            numerics,
            &constants,
            self.kernel.shared(),
        )
        .with_directives(self.syntax.directive());
        composed.source = spell(
            &self.name(dh),
            &composed.source,
            self.syntax,
            &self.kernel.blocks(),
        )?;
        Ok(composed)
    }
}

/// `kernel`'s tiles for `syntax` of `edge` on subgroups of `subgroup`,
/// blocks `br` × `bc` (what `choose` picks depends on the device).
fn tiles(
    (kernel, syntax): (UnitKernel, Syntax),
    (edge, subgroup): (u32, u32),
    (br, bc): (u32, u32),
) -> UnitTiles {
    UnitTiles {
        kernel,
        syntax,
        edge,
        subgroup,
        br,
        bc,
    }
}

/// Every kernel the tests compile: Dh 16, 48, 64, 128 where the edge
/// divides it, blocks 32×32 and 16×16, fragments of 16 and 8.
fn every_kernel(syntax: Syntax, subgroup: u32) -> Vec<(UnitTiles, u32)> {
    let mut out = Vec::new();
    for kernel in [UnitKernel::Forward, UnitKernel::Dq, UnitKernel::Dkv] {
        for edge in [16, 8] {
            let subgroup = if syntax == Syntax::Emulated {
                edge
            } else {
                subgroup
            };
            for dh in [16, 48, 64, 128].into_iter().filter(|d| d % edge == 0) {
                for blocks in [(32, 32), (16, 16)] {
                    out.push((tiles((kernel, syntax), (edge, subgroup), blocks), dh));
                }
            }
        }
    }
    out
}

/// Dawn's spelling of every kernel of `every_kernel` on subgroups of
/// `subgroup`: what the page would compile, for the check that Tint
/// accepts them (tests/e2e/dawn.test.mjs).
pub fn dawn_sources(subgroup: u32) -> Result<Vec<ComposedKernel>> {
    every_kernel(Syntax::Dawn, subgroup)
        .into_iter()
        .map(|(t, dh)| {
            Ok(ComposedKernel {
                name: t.name(dh),
                entry: t.kernel.entry(),
                source: t.compose(Numerics::Exact, dh)?.source,
                invocations: t.invocations(),
                workgroup_bytes: t.workgroup_bytes(dh),
            })
        })
        .collect()
}

/// `kernel` on `units` for head dim `dh`, binding `slots` (its scalar
/// twin's: kernels/attention.rs), and its tiles; none where no tile fits.
pub(crate) async fn build(
    gpu: &Gpu,
    units: MatrixUnits,
    (kernel, slots): (UnitKernel, &'static [Slot]),
    dh: u32,
) -> Result<Option<(Kernel, UnitTiles)>> {
    let Some(tiles) = UnitTiles::choose(gpu, units, kernel, dh) else {
        return Ok(None);
    };
    let composed = tiles.compose(gpu.numerics(), dh)?;
    let file = (kernel.file(), F16Storage::Native);
    let desc = KernelDesc {
        entry: kernel.entry(),
        slots,
    };
    let [built] = build_composed_kernels(gpu, file, composed, [desc]).await?;
    Ok(Some((built, tiles)))
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use wgpu::naga;

    /// naga parses and validates the forward in wgpu's spelling (with
    /// every capability: lavapipe has no cooperative matrices) and
    /// emulated, and writes its SPIR-V; Dawn's is Tint's to check (e2e),
    /// and here only spelled.
    #[test]
    fn units_forward_validates_with_naga() {
        for syntax in [Syntax::Wgpu, Syntax::Emulated] {
            for (t, dh) in every_kernel(syntax, 32) {
                let source = t.compose(Numerics::Exact, dh).unwrap().source;
                let what = format!("{syntax:?} {t:?} Dh {dh}");
                let module = naga::front::wgsl::parse_str(&source)
                    .unwrap_or_else(|e| panic!("{what}:\n{}", e.emit_to_string(&source)));
                let info = naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::all(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("{what}:\n{}", e.emit_to_string(&source)));
                // SPIR-V as wgpu's Vulkan backend writes it (naga's writer
                // has panicked on coop stores before: units::syntax)
                let options = naga::back::spv::Options {
                    lang_version: (1, 6),
                    ..Default::default()
                };
                naga::back::spv::write_vec(&module, &info, &options, None)
                    .unwrap_or_else(|e| panic!("{what}: SPIR-V: {e}"));
            }
        }
        for k in dawn_sources(32).unwrap() {
            for name in ["FRAG_", "STORE_C(", "MMA(", "coopLoad", "coopStore"] {
                let code: Vec<&str> = k
                    .source
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect();
                assert!(!code.join("\n").contains(name), "{}: {name}", k.name);
            }
            assert!(
                k.source.contains("subgroupMatrixLoad<MatB, col_major>(&s"),
                "{}",
                k.name
            );
        }
    }

    /// Blocks fit the device or are smaller: Dh 128 takes 16×16 within
    /// 32 KiB of workgroup memory, Dh 64 32×16.
    #[test]
    fn blocks_shrink_to_fit() {
        let t = |blocks| tiles((UnitKernel::Forward, Syntax::Wgpu), (16, 32), blocks);
        assert!(t((32, 32)).workgroup_bytes(128) > 32 * 1024);
        assert!(t((16, 16)).workgroup_bytes(128) <= 32 * 1024);
        assert!(t((32, 16)).workgroup_bytes(64) <= 32 * 1024);
        assert_eq!(t((32, 32)).invocations(), 64);
    }
}
