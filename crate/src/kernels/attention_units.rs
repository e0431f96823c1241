//! Attention's products on matrix units (issue #30), for a recipe whose
//! attention operands are f16: the forward (05_attention_units.wgsl) and
//! the backward's two passes (05_attention_units_dq.wgsl,
//! 05_attention_units_dkv.wgsl), composed for the device's units as the
//! coop GEMMs are (`kernels::linear::coop`): wgpu's cooperative matrices,
//! Dawn's subgroup matrices, or the same operations in plain code
//! (emulated, for tests on any adapter with shader-f16). `Attention`
//! dispatches them in place of the scalar kernels where they were built.

use std::fmt::Write as _;

use crate::error::Result;
use crate::gpu::coop::MatrixUnits;
use crate::gpu::{Gpu, Kernel, KernelDesc, Slot, build_composed_kernels};
use crate::kernels::linear::coop::{ComposedKernel, Fragments};
use crate::shaders::{
    ATTENTION_COMMON, ATTENTION_UNITS, ATTENTION_UNITS_DKV, ATTENTION_UNITS_DQ, Composed,
    F16Storage, Module, Numerics, ShaderFile, compose_variant,
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

    fn entry(self) -> &'static str {
        match self {
            UnitKernel::Forward => "attention_units_forward",
            UnitKernel::Dq => "attention_units_dq",
            UnitKernel::Dkv => "attention_units_dkv",
        }
    }

    /// The f16 blocks fragments of A and B are loaded from, and the f32
    /// ones accumulators are loaded from or stored to, as the file
    /// declares them.
    fn blocks(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            UnitKernel::Forward => (&["sq", "sk", "sv", "sp"], &["ss", "so"]),
            UnitKernel::Dq => (&["sq", "sdo", "sk", "sv", "sds"], &["ss", "sdp", "sdq"]),
            UnitKernel::Dkv => (
                &["sk", "sv", "sq", "sdo", "sp", "sds"],
                &["ss", "sdp", "sdk", "sdv"],
            ),
        }
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
    pub fragments: Fragments,
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
        let (fragments, edge, subgroup) = Fragments::of(units, gpu);
        if !dh.is_multiple_of(edge) {
            return None;
        }
        let l = &gpu.limits;
        [(32, 32), (32, 16), (16, 16)]
            .into_iter()
            .map(|(br, bc)| UnitTiles {
                kernel,
                fragments,
                edge,
                subgroup,
                br,
                bc,
            })
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

    /// The composed module for head dim `dh`, in the units' syntax.
    pub fn compose(&self, numerics: Numerics, dh: u32) -> Composed {
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
        match self.fragments {
            Fragments::Emulated => constants.push_str(&emulation(self.kernel)),
            f => constants.push_str(&f.aliases(self.edge)),
        }
        let module = Module {
            prelude: Some(ATTENTION_COMMON),
            file: self.kernel.file(),
        };
        let mut composed = compose_variant(module, F16Storage::Native, numerics, &constants)
            .with_directives(self.fragments.directive());
        composed.source = spell(&composed.source, self.fragments, self.kernel);
        composed
    }
}

/// `kernel`'s tiles for `fragments` of `edge` on subgroups of `subgroup`,
/// blocks `br` × `bc` (what `choose` picks depends on the device).
fn tiles(
    (kernel, fragments): (UnitKernel, Fragments),
    (edge, subgroup): (u32, u32),
    (br, bc): (u32, u32),
) -> UnitTiles {
    UnitTiles {
        kernel,
        fragments,
        edge,
        subgroup,
        br,
        bc,
    }
}

/// Every kernel the tests compile: Dh 16, 48, 64, 128 where the edge
/// divides it, blocks 32×32 and 16×16, fragments of 16 and 8.
fn every_kernel(fragments: Fragments, subgroup: u32) -> Vec<(UnitTiles, u32)> {
    let mut out = Vec::new();
    for kernel in [UnitKernel::Forward, UnitKernel::Dq, UnitKernel::Dkv] {
        for edge in [16, 8] {
            let subgroup = if fragments == Fragments::Emulated {
                edge
            } else {
                subgroup
            };
            for dh in [16, 48, 64, 128].into_iter().filter(|d| d % edge == 0) {
                for blocks in [(32, 32), (16, 16)] {
                    out.push((tiles((kernel, fragments), (edge, subgroup), blocks), dh));
                }
            }
        }
    }
    out
}

/// Dawn's spelling of every kernel of `every_kernel` on subgroups of
/// `subgroup`: what the page would compile, for the check that Tint
/// accepts them (tests/e2e/dawn.test.mjs).
pub fn dawn_sources(subgroup: u32) -> Vec<ComposedKernel> {
    every_kernel(Fragments::Dawn, subgroup)
        .into_iter()
        .map(|(t, dh)| ComposedKernel {
            name: format!(
                "dawn attention {:?} T{} {}x{} Dh {dh}",
                t.kernel, t.edge, t.br, t.bc
            ),
            entry: t.kernel.entry(),
            source: t.compose(Numerics::Exact, dh).source,
            invocations: t.invocations(),
            workgroup_bytes: t.workgroup_bytes(dh),
        })
        .collect()
}

/// `kernel` on `units` for head dim `dh`, binding `slots` (its scalar
/// twin's: kernels/attention.rs), and its tiles; none where no tile fits.
pub(super) async fn build(
    gpu: &Gpu,
    units: MatrixUnits,
    (kernel, slots): (UnitKernel, &'static [Slot]),
    dh: u32,
) -> Result<Option<(Kernel, UnitTiles)>> {
    let Some(tiles) = UnitTiles::choose(gpu, units, kernel, dh) else {
        return Ok(None);
    };
    let composed = tiles.compose(gpu.numerics(), dh);
    let file = (kernel.file(), F16Storage::Native);
    let desc = KernelDesc {
        entry: kernel.entry(),
        slots,
    };
    let [built] = build_composed_kernels(gpu, file, composed, [desc]).await?;
    Ok(Some((built, tiles)))
}

/// The file's fragment operations spelled for `fragments` (05_attention_
/// units.wgsl's header says what each is), line for line.
fn spell(source: &str, fragments: Fragments, kernel: UnitKernel) -> String {
    let mut out = String::with_capacity(source.len());
    for line in source.lines() {
        let trimmed = line.trim();
        let emulated = fragments == Fragments::Emulated;
        let spelled = match trimmed {
            "//#SUBGROUP" if emulated => "    let sg = li / SG; lane = li % SG;".to_string(),
            "@builtin(subgroup_id) sg: u32," if emulated => String::new(),
            _ if trimmed.starts_with("//") => line.to_string(),
            _ => spell_calls(line, (fragments, kernel)),
        };
        out.push_str(&spelled);
        out.push('\n');
    }
    out
}

/// Each `NAME(args)` fragment operation of `line` in `fragments`' syntax.
fn spell_calls(line: &str, syntax: (Fragments, UnitKernel)) -> String {
    let mut line = line.to_string();
    for name in ["FRAG_BT", "FRAG_A", "FRAG_B", "FRAG_C", "STORE_C", "MMA"] {
        let open = format!("{name}(");
        while let Some(at) = line.find(&open) {
            let args_at = at + open.len();
            let close = args_at + line[args_at..].find(')').expect("a closing parenthesis");
            let args: Vec<&str> = line[args_at..close].split(", ").collect();
            let call = spell_call(name, &args, syntax);
            line.replace_range(at..=close, &call);
        }
    }
    line
}

fn spell_call(name: &str, args: &[&str], (fragments, kernel): (Fragments, UnitKernel)) -> String {
    let arg = |i: usize| args[i];
    match (fragments, name) {
        (Fragments::Dawn, "MMA") => {
            format!(
                "subgroupMatrixMultiplyAccumulate({}, {}, {})",
                arg(0),
                arg(1),
                arg(2)
            )
        }
        (_, "MMA") => format!("coopMultiplyAdd({}, {}, {})", arg(0), arg(1), arg(2)),
        (Fragments::Emulated, "FRAG_C") => format!("load_c_{}({}, {})", arg(0), arg(1), arg(2)),
        (Fragments::Emulated, "STORE_C") => {
            format!("store_c_{}({}, {}, {})", arg(0), arg(1), arg(2), arg(3))
        }
        (Fragments::Emulated, _) => {
            let index = kernel
                .blocks()
                .0
                .iter()
                .position(|a| *a == arg(0))
                .expect("a fragment of an f16 block");
            let col_major = name == "FRAG_BT";
            format!("Frag({}, {}, {col_major}, {index}u)", arg(1), arg(2))
        }
        (Fragments::Wgpu, "STORE_C") => format!(
            "{{ let v_ = {}; let p_ = &{}[{}]; coopStoreT(v_, p_, {}); }}",
            arg(2),
            arg(0),
            arg(1),
            arg(3)
        ),
        (Fragments::Wgpu, _) => {
            let (major, ty) = load_of(name);
            let load = if major == "col_major" {
                "coopLoad"
            } else {
                "coopLoadT"
            };
            format!("{load}<{ty}>(&{}[{}], {})", arg(0), arg(1), arg(2))
        }
        (Fragments::Dawn, "STORE_C") => format!(
            "subgroupMatrixStore<row_major>(&{}, {}, {}, {})",
            arg(0),
            arg(1),
            arg(2),
            arg(3)
        ),
        (Fragments::Dawn, _) => {
            let (major, ty) = load_of(name);
            format!(
                "subgroupMatrixLoad<{ty}, {major}>(&{}, {}, {})",
                arg(0),
                arg(1),
                arg(2)
            )
        }
    }
}

/// A load's majorness and fragment type.
fn load_of(name: &str) -> (&'static str, &'static str) {
    match name {
        "FRAG_A" => ("row_major", "MatA"),
        "FRAG_B" => ("row_major", "MatB"),
        "FRAG_BT" => ("col_major", "MatB"),
        _ => ("row_major", "MatC"),
    }
}

/// The fragment operations in plain code for `kernel` (as
/// `coop::EMULATION`): a "subgroup" is T invocations, lane l holding row l
/// of each accumulator; a fragment of A or B is its start, row stride,
/// majorness and block (its index among `UnitKernel::blocks`' f16 ones);
/// products of f16 values are exact in f32, summed in K order.
fn emulation(kernel: UnitKernel) -> String {
    let (halves, floats) = kernel.blocks();
    let mut s = String::from(EMULATION);
    s.push_str("fn frag_value(f: Frag, i: u32, j: u32) -> f32 {\n");
    s.push_str("    let h = f.at + select(i * f.stride + j, j * f.stride + i, f.col_major);\n");
    s.push_str("    switch f.block {\n");
    for (i, block) in halves.iter().enumerate() {
        let case = match i + 1 == halves.len() {
            true => "default".to_string(),
            false => format!("case {i}u"),
        };
        let _ = writeln!(s, "        {case}: {{ return f32({block}[h]); }}");
    }
    s.push_str("    }\n}\n");
    for block in floats {
        let _ = writeln!(
            s,
            "fn load_c_{block}(at: u32, stride: u32) -> MatC {{\n    var m: MatC;\n    \
             for (var j = 0u; j < T; j++) {{ m[j] = {block}[at + lane * stride + j]; }}\n    \
             return m;\n}}\nfn store_c_{block}(at: u32, m: MatC, stride: u32) {{\n    \
             for (var j = 0u; j < T; j++) {{ {block}[at + lane * stride + j] = m[j]; }}\n}}"
        );
    }
    s
}

const EMULATION: &str = r#"
struct Frag {
    at: u32,
    stride: u32,
    col_major: bool,
    block: u32,
}
alias MatA = Frag;
alias MatB = Frag;
alias MatC = array<f32, T>;

var<private> lane: u32;

fn coopMultiplyAdd(a: MatA, b: MatB, c: MatC) -> MatC {
    var acc = c;
    for (var k = 0u; k < T; k++) {
        let x = frag_value(a, lane, k);
        for (var j = 0u; j < T; j++) {
            acc[j] += x * frag_value(b, k, j);
        }
    }
    return acc;
}
"#;

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
        for fragments in [Fragments::Wgpu, Fragments::Emulated] {
            for (t, dh) in every_kernel(fragments, 32) {
                let source = t.compose(Numerics::Exact, dh).source;
                let what = format!("{fragments:?} {t:?} Dh {dh}");
                let module = naga::front::wgsl::parse_str(&source)
                    .unwrap_or_else(|e| panic!("{what}:\n{}", e.emit_to_string(&source)));
                let info = naga::valid::Validator::new(
                    naga::valid::ValidationFlags::all(),
                    naga::valid::Capabilities::all(),
                )
                .validate(&module)
                .unwrap_or_else(|e| panic!("{what}:\n{}", e.emit_to_string(&source)));
                // SPIR-V as wgpu's Vulkan backend writes it (naga's writer
                // has panicked on coop stores before: kernels/linear/coop.rs)
                let options = naga::back::spv::Options {
                    lang_version: (1, 6),
                    ..Default::default()
                };
                naga::back::spv::write_vec(&module, &info, &options, None)
                    .unwrap_or_else(|e| panic!("{what}: SPIR-V: {e}"));
            }
        }
        for k in dawn_sources(32) {
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
        let t = |blocks| tiles((UnitKernel::Forward, Fragments::Wgpu), (16, 32), blocks);
        assert!(t((32, 32)).workgroup_bytes(128) > 32 * 1024);
        assert!(t((16, 16)).workgroup_bytes(128) <= 32 * 1024);
        assert!(t((32, 16)).workgroup_bytes(64) <= 32 * 1024);
        assert_eq!(t((32, 32)).invocations(), 64);
    }
}
