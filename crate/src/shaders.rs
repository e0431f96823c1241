//! The shader registry: every `shaders/*.wgsl` file under a named constant,
//! and the one place where a kernel file is composed into a module.
//!
//! A module is `f16 storage header` + `00_common.wgsl` + the formats
//! (`ops::formats::wgsl_constants` and `00_formats.wgsl`) + the kernel file. The
//! header is the only thing that differs between the two f16 storage modes:
//! both declare f16 tensors as `array<half2>` (two halves per 32-bit word),
//! native mode as `vec2<f16>` with `enable f16;`, packed mode as `u32` read
//! through `unpack2x16float`. Kernel sources are written once against
//! `half2`, `unpack_half2`, `pack_half2` and `half_at`.

use std::fmt;

/// One WGSL file of the `shaders/` folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShaderFile {
    pub name: &'static str,
    pub source: &'static str,
}

macro_rules! shader_file {
    ($name:literal) => {
        ShaderFile {
            name: $name,
            source: include_str!(concat!("../../shaders/", $name, ".wgsl")),
        }
    };
}

pub const F16_NATIVE: ShaderFile = shader_file!("00_f16_native");
pub const F16_PACKED: ShaderFile = shader_file!("00_f16_packed");
pub const COMMON: ShaderFile = shader_file!("00_common");
pub const FORMATS: ShaderFile = shader_file!("00_formats");
pub const INFRASTRUCTURE: ShaderFile = shader_file!("00_infrastructure");
pub const EMBEDDING: ShaderFile = shader_file!("01_embedding");
pub const NORM: ShaderFile = shader_file!("02_norm");
pub const LINEAR_B32: ShaderFile = shader_file!("03_linear_b32");
pub const LINEAR_B16: ShaderFile = shader_file!("03_linear_b16");
pub const LINEAR: ShaderFile = shader_file!("03_linear");
/// The GEMMs on matrix units: composed by `kernels::units`, not by `compose`.
pub const LINEAR_COOP_COMMON: ShaderFile = shader_file!("03_linear_coop_common");
pub const LINEAR_COOP_GLOBAL: ShaderFile = shader_file!("03_linear_coop_global");
pub const LINEAR_COOP_STAGED: ShaderFile = shader_file!("03_linear_coop_staged");
pub const LINEAR_COOP_DOUBLE: ShaderFile = shader_file!("03_linear_coop_double");
pub const ROPE: ShaderFile = shader_file!("04_rope");
pub const ATTENTION_COMMON: ShaderFile = shader_file!("05_attention_common");
pub const ATTENTION: ShaderFile = shader_file!("05_attention");
pub const ATTENTION_BACKWARD: ShaderFile = shader_file!("05_attention_backward");
pub const ATTENTION_MAP: ShaderFile = shader_file!("05_attention_map");
/// Attention on matrix units: composed by `kernels::units::attention`.
pub const ATTENTION_UNITS: ShaderFile = shader_file!("05_attention_units");
/// What the three share, and what the backward's two share: composed after
/// the prelude, ahead of each.
pub const ATTENTION_UNITS_COMMON: ShaderFile = shader_file!("05_attention_units_common");
pub const ATTENTION_UNITS_BACKWARD: ShaderFile = shader_file!("05_attention_units_backward");
pub const ATTENTION_UNITS_DQ: ShaderFile = shader_file!("05_attention_units_dq");
pub const ATTENTION_UNITS_DKV: ShaderFile = shader_file!("05_attention_units_dkv");
pub const ACTIVATION: ShaderFile = shader_file!("06_activation");
pub const LOSS: ShaderFile = shader_file!("07_loss");
pub const CAST: ShaderFile = shader_file!("08_cast");
pub const OPTIMIZER: ShaderFile = shader_file!("12_optimizer");
/// The optimizer's states: composed after `OPTIMIZER` (`OPTIMIZER_MODULE`).
pub const OPTIMIZER_STATES: ShaderFile = shader_file!("12_optimizer_states");
pub const HISTOGRAM: ShaderFile = shader_file!("13_histogram");
pub const QUANTIZE: ShaderFile = shader_file!("14_quantize");
/// QuEST, MS-EDEN, the noise sums, the Hadamard: after `QUANTIZE`.
pub const QUANTIZE_RECIPES: ShaderFile = shader_file!("14_quantize_recipes");
pub const MUON: ShaderFile = shader_file!("15_muon");
pub const UNITS_OPERANDS: ShaderFile = shader_file!("16_units_operands");

/// How f16 tensors are stored in WGSL. Chosen when a pipeline is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum F16Storage {
    /// `enable f16;` and `vec2<f16>` words: needs the `shader-f16` feature.
    Native,
    /// `u32` words unpacked with `unpack2x16float`: runs everywhere.
    Packed,
}

impl F16Storage {
    pub fn name(self) -> &'static str {
        match self {
            F16Storage::Native => "native",
            F16Storage::Packed => "packed",
        }
    }

    fn header(self) -> ShaderFile {
        match self {
            F16Storage::Native => F16_NATIVE,
            F16Storage::Packed => F16_PACKED,
        }
    }
}

impl fmt::Display for F16Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The numeric mode pipelines are built in (the precision modes of
/// DESIGN.md §4 that change what kernels compute, not what they read).
/// compose declares it as `const NUMERICS` ahead of 00_common.wgsl, whose
/// `boundary` functions act on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Numerics {
    /// f32 arithmetic as written.
    #[default]
    Exact,
    /// Q1.15 round trips at the forward boundaries, clamps counted.
    Sf16,
}

impl Numerics {
    /// The one-line header declaring the mode (codes as 00_common.wgsl's).
    fn header(self) -> ShaderFile {
        let source = match self {
            Numerics::Exact => "const NUMERICS: u32 = 0u;\n",
            Numerics::Sf16 => "const NUMERICS: u32 = 1u;\n",
        };
        ShaderFile {
            name: "(numerics)",
            source,
        }
    }
}

/// What pipelines are built from: a kernel file, after an optional prelude
/// file it builds on (03_linear's B in f32 or f16; the optimizer's and the
/// quantizers' first halves).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Module {
    pub prelude: Option<ShaderFile>,
    pub file: ShaderFile,
}

/// Every quantizer kernel: the formats, then the recipes' parts.
pub const QUANTIZE_MODULE: Module = Module {
    prelude: Some(QUANTIZE),
    file: QUANTIZE_RECIPES,
};

/// Every optimizer kernel: the norm, finalize and f32 AdamW, then the
/// low-precision states and Muon's momentum, one module.
pub const OPTIMIZER_MODULE: Module = Module {
    prelude: Some(OPTIMIZER),
    file: OPTIMIZER_STATES,
};

impl From<ShaderFile> for Module {
    fn from(file: ShaderFile) -> Module {
        Module {
            prelude: None,
            file,
        }
    }
}

/// A composed module's source, which remembers where each part starts so a
/// compiler message's line can be traced back to its own file.
pub struct Composed {
    pub source: String,
    parts: Vec<(&'static str, u32)>, // (file name, first line in `source`, 1-based)
}

pub fn compose(module: impl Into<Module>, storage: F16Storage, numerics: Numerics) -> Composed {
    compose_variant(module, storage, numerics, "")
}

/// `compose`, with `constants` (WGSL `const` declarations choosing a
/// variant of the file, e.g. 03_linear's layout and tile sizes) ahead of
/// the prelude.
pub fn compose_variant(
    module: impl Into<Module>,
    storage: F16Storage,
    numerics: Numerics,
    constants: &str,
) -> Composed {
    compose_shared(module, storage, numerics, constants, &[])
}

/// `compose_variant`, with `shared` files (parts several kernel files
/// share, e.g. attention's on matrix units) after the prelude, ahead of
/// the kernel file.
pub fn compose_shared(
    module: impl Into<Module>,
    storage: F16Storage,
    numerics: Numerics,
    constants: &str,
    shared: &[ShaderFile],
) -> Composed {
    let module = module.into();
    let mut source = String::new();
    let mut parts = Vec::new();
    let mut line = 1;
    let variant = ShaderFile {
        name: "(variant)",
        source: "",
    };
    let format_constants = crate::ops::formats::wgsl_constants();
    let formats_header = ShaderFile {
        name: "(formats)",
        source: "",
    };
    for (part, text) in [
        Some((storage.header(), storage.header().source)),
        Some((numerics.header(), numerics.header().source)),
        Some((COMMON, COMMON.source)),
        Some((formats_header, format_constants.as_str())),
        Some((FORMATS, FORMATS.source)),
        (!constants.is_empty()).then_some((variant, constants)),
        module.prelude.map(|p| (p, p.source)),
    ]
    .into_iter()
    .flatten()
    .chain(shared.iter().map(|f| (*f, f.source)))
    .chain([(module.file, module.file.source)])
    {
        parts.push((part.name, line));
        source.push_str(text);
        if !text.ends_with('\n') {
            source.push('\n');
        }
        line += text.lines().count() as u32;
    }
    Composed { source, parts }
}

impl Composed {
    /// The source with `directives` (one per line: `enable …;`) ahead of
    /// everything, where WGSL wants them; lines are located as before.
    pub fn with_directives(mut self, directives: &str) -> Composed {
        let lines = directives.lines().count() as u32;
        self.source = format!("{directives}{}", self.source);
        self.parts.iter_mut().for_each(|(_, first)| *first += lines);
        self
    }

    /// A module composed elsewhere in one piece (the unit GEMMs' own
    /// composition): lines are located in the composed source itself.
    pub fn standalone(source: String) -> Composed {
        Composed {
            source,
            parts: vec![("(composed)", 1)],
        }
    }

    /// `shaders/NAME.wgsl:LINE` for a 1-based line of the composed source.
    pub fn locate(&self, line: u32) -> String {
        let (name, first) = self
            .parts
            .iter()
            .rev()
            .find(|(_, first)| *first <= line)
            .copied()
            .unwrap_or(("?", 1));
        format!("shaders/{name}.wgsl:{}", line - first + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_native_header_enables_f16_and_it_comes_first() {
        let native = compose(CAST, F16Storage::Native, Numerics::Exact).source;
        let packed = compose(CAST, F16Storage::Packed, Numerics::Exact).source;
        let first_code_line = |s: &str| s.lines().find(|l| !l.starts_with("//")).map(str::to_owned);
        assert_eq!(first_code_line(&native).as_deref(), Some("enable f16;"));
        assert!(!packed.contains("enable f16"));
        assert!(native.ends_with(CAST.source) && packed.ends_with(CAST.source));
    }

    #[test]
    fn locate_maps_composed_lines_back_to_files() {
        let c = compose(INFRASTRUCTURE, F16Storage::Packed, Numerics::Exact);
        let header_lines = F16_PACKED.source.lines().count() as u32 + 1; // + the NUMERICS line
        let common_lines = COMMON.source.lines().count() as u32
            + crate::ops::formats::wgsl_constants().lines().count() as u32
            + FORMATS.source.lines().count() as u32;
        assert_eq!(c.locate(1), "shaders/00_f16_packed.wgsl:1");
        assert_eq!(c.locate(header_lines), "shaders/(numerics).wgsl:1");
        assert_eq!(c.locate(header_lines + 1), "shaders/00_common.wgsl:1");
        assert_eq!(
            c.locate(header_lines + common_lines + 3),
            "shaders/00_infrastructure.wgsl:3"
        );
        let line = c
            .source
            .lines()
            .nth((header_lines + common_lines + 2) as usize)
            .unwrap();
        assert_eq!(line, INFRASTRUCTURE.source.lines().nth(2).unwrap());
    }
}
