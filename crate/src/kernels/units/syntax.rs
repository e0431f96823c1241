//! The one speller of the matrix-unit kernels. Every unit shader (the
//! GEMM's files and attention's) is written once with neutral fragment
//! operations, and spelled here for wgpu's cooperative matrices, Dawn's
//! subgroup matrices or plain code (emulated: any adapter with shader-f16).
//!
//! The neutral operations, each a call whose arguments may be any WGSL
//! expressions (nested parentheses included), offsets and strides in
//! elements of the named array:
//!   FRAG_A(block, at, stride)   an f16 fragment of A, row-major
//!   FRAG_AT(block, at, stride)  the same, column-major (A given transposed)
//!   FRAG_B / FRAG_BT            B's, row- and column-major
//!   FRAG_C(block, at, stride)   an f32 accumulator, row-major
//!   STORE_C(block, at, c, stride)
//!   MMA(a, b, c)                a·b + c
//!   SCALE_C(c, s)               an accumulator times the f32 scalar s
//! and two marker lines: `//#SUBGROUP_ID` (the entry's `subgroup_id`
//! parameter, absent emulated) and `//#SUBGROUP` (where an emulated
//! subgroup finds itself from `li`). `MatA`, `MatB` and `MatC` are the
//! fragment types (`Syntax::declarations`), `MatC()` a zero accumulator.

use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::gpu::coop::MatrixUnits;

/// The syntax a unit kernel is spelled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syntax {
    /// wgpu's `wgpu_cooperative_matrix` (natively: Vulkan, Metal).
    Wgpu,
    /// Dawn's `chromium_experimental_subgroup_matrix` (Chrome): loads and
    /// stores name the array and an offset, and read scalar f16 arrays.
    Dawn,
    /// Plain code, on any adapter with shader-f16: a "subgroup" is T
    /// invocations, lane l holding row l of each accumulator.
    Emulated,
}

/// The arrays a kernel's fragments are loaded from or stored to: f16 ones
/// (name, halves per element: 1, or 4 for `vec4<f16>`) and f32 ones.
pub struct Blocks<'a> {
    pub halves: &'a [(&'a str, u32)],
    pub floats: &'a [&'a str],
}

impl Syntax {
    /// The syntax for `units`, its fragments' edge, and the invocations of
    /// one of its subgroups on `gpu` (T emulated lanes for edge T).
    pub fn of(units: MatrixUnits, gpu: &Gpu) -> (Syntax, u32, u32) {
        match units {
            MatrixUnits::Cooperative { edge } => (Syntax::Wgpu, edge, gpu.info.subgroup_max_size),
            MatrixUnits::Subgroup { edge, subgroup } => (Syntax::Dawn, edge, subgroup),
            MatrixUnits::Emulated => (Syntax::Emulated, 8, 8),
        }
    }

    /// The `enable` directive the syntax needs (none emulated), with its
    /// line end.
    pub fn directive(self) -> &'static str {
        match self {
            Syntax::Wgpu => "enable wgpu_cooperative_matrix;\n",
            Syntax::Dawn => "enable chromium_experimental_subgroup_matrix;\n",
            Syntax::Emulated => "",
        }
    }

    /// `MatA`, `MatB` (f16) and `MatC` (f32) as T × T fragments, after the
    /// constant T: type aliases, or the emulation over `blocks`.
    pub fn declarations(self, t: u32, blocks: &Blocks) -> String {
        let types = match self {
            Syntax::Wgpu => [
                format!("coop_mat{t}x{t}<f16, A>"),
                format!("coop_mat{t}x{t}<f16, B>"),
                format!("coop_mat{t}x{t}<f32, C>"),
            ],
            Syntax::Dawn => [
                "subgroup_matrix_left<f16, T, T>".to_string(),
                "subgroup_matrix_right<f16, T, T>".to_string(),
                "subgroup_matrix_result<f32, T, T>".to_string(),
            ],
            Syntax::Emulated => return emulation(blocks),
        };
        ["MatA", "MatB", "MatC"]
            .iter()
            .zip(types)
            .map(|(name, ty)| format!("alias {name} = {ty};\n"))
            .collect()
    }

    pub fn prefix(self) -> &'static str {
        match self {
            Syntax::Wgpu => "",
            Syntax::Dawn => "dawn ",
            Syntax::Emulated => "emulated ",
        }
    }
}

/// The neutral operations, longest first where one name begins another.
const OPERATIONS: [&str; 8] = [
    "FRAG_AT", "FRAG_BT", "FRAG_A", "FRAG_B", "FRAG_C", "STORE_C", "SCALE_C", "MMA",
];

/// `source` (kernel `kernel`'s) with every neutral operation and marker
/// spelled in `syntax`; an operation that cannot be read is an error
/// naming the kernel and the line.
pub fn spell(kernel: &str, source: &str, syntax: Syntax, blocks: &Blocks) -> Result<String> {
    let mut out = String::with_capacity(source.len() + source.len() / 8);
    for (n, line) in source.lines().enumerate() {
        let failed = |message: String| Error::Spelling {
            kernel: kernel.to_string(),
            line: n + 1,
            message,
        };
        let emulated = syntax == Syntax::Emulated;
        match line.trim() {
            "//#SUBGROUP_ID" if !emulated => out.push_str("    @builtin(subgroup_id) sg: u32,"),
            "//#SUBGROUP_ID" => {}
            // Dawn has `subgroup_id` too (a WGSL language feature), which its
            // uniformity analysis takes as the subgroup's: `li / SG` would be
            // an error before subgroup-matrix calls
            "//#SUBGROUP" if emulated => out.push_str("    let sg = li / SG;\n    lane = li % SG;"),
            "//#SUBGROUP" => {}
            t if t.starts_with("//") => out.push_str(line),
            _ => out.push_str(&spell_line(line, syntax, blocks).map_err(failed)?),
        }
        out.push('\n');
    }
    Ok(out)
}

/// Each operation of `line`, innermost arguments first.
fn spell_line(line: &str, syntax: Syntax, blocks: &Blocks) -> std::result::Result<String, String> {
    let mut line = line.to_string();
    while let Some((at, name)) = next_operation(&line) {
        let open = at + name.len();
        let (args, close) = arguments(&line, open)?;
        let spelled = spell_call(name, &args, syntax, blocks)?;
        line.replace_range(at..=close, &spelled);
    }
    Ok(line)
}

/// The first operation called in `line`: its start and name.
fn next_operation(line: &str) -> Option<(usize, &'static str)> {
    OPERATIONS
        .iter()
        .filter_map(|name| {
            let call = format!("{name}(");
            let mut from = 0;
            while let Some(i) = line[from..].find(&call) {
                let at = from + i;
                let word_start = at == 0
                    || !line[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_');
                if word_start {
                    return Some((at, *name));
                }
                from = at + 1;
            }
            None
        })
        .min_by_key(|(at, _)| *at)
}

/// The comma-separated arguments of the call whose `(` is at `open`, split
/// at depth one, and the index of its `)`.
fn arguments(line: &str, open: usize) -> std::result::Result<(Vec<String>, usize), String> {
    let mut depth = 0usize;
    let mut args = Vec::new();
    let mut start = open + 1;
    for (i, c) in line.char_indices().skip_while(|(i, _)| *i < open) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    args.push(line[start..i].trim().to_string());
                    return Ok((args, i));
                }
            }
            ',' if depth == 1 => {
                args.push(line[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    Err(format!(
        "no closing parenthesis for the call at column {}",
        open
    ))
}

fn spell_call(
    name: &str,
    args: &[String],
    syntax: Syntax,
    blocks: &Blocks,
) -> std::result::Result<String, String> {
    let want = match name {
        "STORE_C" => 4,
        "SCALE_C" => 2,
        _ => 3,
    };
    if args.len() != want {
        return Err(format!(
            "{name} takes {want} arguments, given {}: {args:?}",
            args.len()
        ));
    }
    let a = |i: usize| args[i].as_str();
    if name == "MMA" {
        return Ok(match syntax {
            Syntax::Wgpu => format!("coopMultiplyAdd({}, {}, {})", a(0), a(1), a(2)),
            Syntax::Dawn => format!(
                "subgroupMatrixMultiplyAccumulate({}, {}, {})",
                a(0),
                a(1),
                a(2)
            ),
            Syntax::Emulated => format!("mma_emulated({}, {}, {})", a(0), a(1), a(2)),
        });
    }
    if name == "SCALE_C" {
        return Ok(match syntax {
            Syntax::Wgpu => format!("({} * {})", a(1), a(0)),
            Syntax::Dawn => format!("subgroupMatrixScalarMultiply({}, {})", a(0), a(1)),
            Syntax::Emulated => format!("scale_emulated({}, {})", a(0), a(1)),
        });
    }
    let (block, at) = (a(0), a(1));
    if name == "STORE_C" {
        let (value, stride) = (a(2), a(3));
        return Ok(match syntax {
            // every argument bound by a `let` first: naga 30 otherwise emits
            // the store before its arguments' expressions, and its SPIR-V
            // writer panics ("Expression [..] is not cached")
            Syntax::Wgpu => format!(
                "{{ let v_ = {value}; let p_ = &{block}[{at}]; let s_ = {stride}; coopStoreT(v_, p_, s_); }}"
            ),
            Syntax::Dawn => {
                format!("subgroupMatrixStore<row_major>(&{block}, {at}, {value}, {stride})")
            }
            Syntax::Emulated => {
                float_block(blocks, block)?;
                format!("store_c_{block}({at}, {value}, {stride})")
            }
        });
    }
    let stride = a(2);
    let (ty, col_major) = match name {
        "FRAG_A" => ("MatA", false),
        "FRAG_AT" => ("MatA", true),
        "FRAG_B" => ("MatB", false),
        "FRAG_BT" => ("MatB", true),
        _ => ("MatC", false),
    };
    Ok(match syntax {
        Syntax::Wgpu => {
            let load = if col_major { "coopLoad" } else { "coopLoadT" };
            format!("{load}<{ty}>(&{block}[{at}], {stride})")
        }
        Syntax::Dawn => {
            let major = if col_major { "col_major" } else { "row_major" };
            format!("subgroupMatrixLoad<{ty}, {major}>(&{block}, {at}, {stride})")
        }
        Syntax::Emulated if ty == "MatC" => {
            float_block(blocks, block)?;
            format!("load_c_{block}({at}, {stride})")
        }
        Syntax::Emulated => {
            let (index, per) = blocks
                .halves
                .iter()
                .enumerate()
                .find(|(_, (b, _))| *b == block)
                .map(|(i, (_, per))| (i, *per))
                .ok_or_else(|| {
                    format!("{name} loads from {block}, not an f16 block of the kernel")
                })?;
            format!("Frag(({at}) * {per}u, ({stride}) * {per}u, {col_major}, {index}u)")
        }
    })
}

fn float_block(blocks: &Blocks, block: &str) -> std::result::Result<(), String> {
    match blocks.floats.contains(&block) {
        true => Ok(()),
        false => Err(format!("{block} is not an f32 block of the kernel")),
    }
}

/// The fragment operations in plain code over `blocks`. A fragment of A or
/// B is where it starts in its block and its row stride, in halves, its
/// majorness and its block (an index into `blocks.halves`); products of
/// f16 values are exact in f32, summed in K order.
fn emulation(blocks: &Blocks) -> String {
    let mut s = String::from(
        "struct Frag {\n    at: u32,\n    stride: u32,\n    col_major: bool,\n    block: u32,\n}\n\
         alias MatA = Frag;\nalias MatB = Frag;\nalias MatC = array<f32, T>;\n\n\
         var<private> lane: u32;\n\n\
         // Element (i, j) of a fragment: its half in the block.\n\
         fn frag_at(f: Frag, i: u32, j: u32) -> u32 {\n    \
         return f.at + select(i * f.stride + j, j * f.stride + i, f.col_major);\n}\n\n",
    );
    let half = |block: &str, per: u32, h: &str| match per {
        1 => format!("{block}[{h}]"),
        _ => format!("{block}[({h}) / {per}u][({h}) % {per}u]"),
    };
    let cases = |body: &dyn Fn(&str, u32) -> String| {
        let mut c = String::new();
        for (i, (block, per)) in blocks.halves.iter().enumerate() {
            let case = match i + 1 == blocks.halves.len() {
                true => "default".to_string(),
                false => format!("case {i}u"),
            };
            let _ = writeln!(c, "        {case}: {{\n{}        }}", body(block, *per));
        }
        c
    };
    // A's row for this lane first, then B's block read in one loop nest:
    // one branch per operand, none per element
    let a_row = cases(&|block, per| {
        format!(
            "            for (var k = 0u; k < T; k++) {{ x[k] = f32({}); }}\n",
            half(block, per, "frag_at(a, lane, k)")
        )
    });
    let b_product = cases(&|block, per| {
        format!(
            "            for (var k = 0u; k < T; k++) {{\n                \
             for (var j = 0u; j < T; j++) {{ acc[j] += x[k] * f32({}); }}\n            }}\n",
            half(block, per, "frag_at(b, k, j)")
        )
    });
    s.push_str(
        "fn scale_emulated(c: MatC, s: f32) -> MatC {\n    var m = c;\n    \
         for (var j = 0u; j < T; j++) { m[j] *= s; }\n    return m;\n}\n",
    );
    let _ = write!(
        s,
        "fn mma_emulated(a: MatA, b: MatB, c: MatC) -> MatC {{\n    \
         var x: array<f32, T>;\n    switch a.block {{\n{a_row}    }}\n    \
         var acc = c;\n    switch b.block {{\n{b_product}    }}\n    return acc;\n}}\n"
    );
    for block in blocks.floats {
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

#[cfg(test)]
mod tests {
    use super::*;

    const BLOCKS: Blocks = Blocks {
        halves: &[("sa", 4), ("sb", 1)],
        floats: &["out"],
    };

    #[test]
    fn nested_arguments_are_spelled_whole() {
        let line = "    acc = MMA(FRAG_AT(sa, s * A_LEN + (kk * SA + r) / SV, SA / SV), fb, acc);";
        let wgpu = spell_line(line, Syntax::Wgpu, &BLOCKS).unwrap();
        assert_eq!(
            wgpu,
            "    acc = coopMultiplyAdd(coopLoad<MatA>(&sa[s * A_LEN + (kk * SA + r) / SV], SA / SV), fb, acc);"
        );
        let dawn = spell_line(line, Syntax::Dawn, &BLOCKS).unwrap();
        assert!(dawn.contains(
            "subgroupMatrixLoad<MatA, col_major>(&sa, s * A_LEN + (kk * SA + r) / SV, SA / SV)"
        ));
        let emulated = spell_line(line, Syntax::Emulated, &BLOCKS).unwrap();
        assert!(emulated.contains(
            "mma_emulated(Frag((s * A_LEN + (kk * SA + r) / SV) * 4u, (SA / SV) * 4u, true, 0u), fb, acc)"
        ));
    }

    #[test]
    fn a_misspelled_operation_names_the_kernel_and_line() {
        let source = "fn f() {\n    let a = FRAG_A(sa, (x + 1, 4);\n}\n";
        let e = spell("gemm test", source, Syntax::Dawn, &BLOCKS).unwrap_err();
        assert!(
            e.to_string().contains("gemm test") && e.to_string().contains("line 2"),
            "{e}"
        );
        let e = spell(
            "k",
            "let c = FRAG_C(sq, 0u, 4u);",
            Syntax::Emulated,
            &BLOCKS,
        )
        .unwrap_err();
        assert!(e.to_string().contains("sq is not an f32 block"), "{e}");
        let e = spell("k", "let c = MMA(a, b);", Syntax::Wgpu, &BLOCKS).unwrap_err();
        assert!(e.to_string().contains("MMA takes 3 arguments"), "{e}");
    }

    #[test]
    fn names_that_only_end_in_an_operation_are_left_alone() {
        let line = "let x = MY_MMA(a, b, c) + FRAG_A2;";
        assert_eq!(spell_line(line, Syntax::Wgpu, &BLOCKS).unwrap(), line);
    }
}
