//! The unit GEMMs' composed modules, checked without a GPU: naga
//! validates wgpu's and the emulated spelling and writes their SPIR-V;
//! Dawn's is Tint's to compile (tests/e2e/dawn.test.mjs), here only
//! spelled.

use super::*;
use crate::gpu::coop::MatrixUnits;
use wgpu::naga;

/// Every checked variant in both edges, on subgroups of 32 (NVIDIA)
/// and 8, and emulated.
fn every_variant() -> Vec<(GemmVariant, u32)> {
    let mut out = Vec::new();
    for edge in [16, 8] {
        for v in checked_gemms(edge) {
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
fn unit_gemms_validate_with_naga() {
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

/// The trainer's variants build on NVIDIA's subgroups of 32 within an
/// H200's limits (1024 invocations, 49152 B of workgroup memory).
#[test]
fn trainer_variants_fit_nvidia() {
    for layout in [GemmLayout::Nn, GemmLayout::Nt, GemmLayout::Tn] {
        let v = GemmVariant::for_units(MatrixUnits::Cooperative { edge: 16 }, layout, true);
        let (wg, bytes) = (v.invocations(32), v.workgroup_bytes());
        assert!(v.unbuildable(32).is_none(), "{}", v.name());
        assert!(wg <= 1024 && bytes <= 49152, "{}", v.name());
    }
    let double = GemmVariant::staged(16, Staging::Double, (4, 2), (2, 4), 32);
    let source = double.source(32).unwrap();
    assert!(source.contains("const A_PER: u32 = 2u;"));
    assert_eq!(double.workgroup_bytes(), 2 * 2 * (128 * 40 + 32 * 136));
}

/// Dawn's spelling of every variant (Tint compiles them in
/// tests/e2e/dawn.test.mjs; naga cannot): no wgpu coop call or type
/// left, and scalar stages.
#[test]
fn dawn_sources_spell_every_variant() {
    let sources = dawn_sources(32).unwrap();
    // what tests/e2e/dawn.test.mjs has Tint compile
    assert!(sources.len() > 100, "{} kernels", sources.len());
    // the trainer's variants are among them
    for layout in [GemmLayout::Nn, GemmLayout::Nt, GemmLayout::Tn] {
        let units = MatrixUnits::Subgroup {
            edge: 16,
            subgroup: 32,
        };
        let name = GemmVariant::for_units(units, layout, true).name();
        assert!(sources.iter().any(|k| k.name == name), "{name}");
    }
    for ComposedKernel { name, source, .. } in sources.iter().filter(|k| k.entry == "gemm") {
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
            "FRAG_",
            "MMA(",
            "coop_mat",
            "vec4<f16>, ",
        ] {
            assert!(!code.contains(wgpu_only), "{name}: {wgpu_only}\n{source}");
        }
        assert!(source.contains("enable chromium_experimental_subgroup_matrix;"));
        assert!(source.contains("subgroupMatrixMultiplyAccumulate(a_0, b_0, c_0_0)"));
        assert!(source.contains("alias SHalf = f16;"));
    }
    let v = GemmVariant::staged(16, Staging::Double, (4, 2), (2, 4), 16)
        .with_layout(GemmLayout::Tn)
        .accumulating()
        .in_dawn_syntax();
    let source = v.source(32).unwrap();
    assert!(source.contains(
        "subgroupMatrixLoad<MatA, col_major>(&sa, s * A_LEN + (kk * SA + r) / SV, SA / SV)"
    ));
    // the epilogue's scale: out over it as the accumulator starts, times it stored
    assert!(source.contains(
        "subgroupMatrixScalarMultiply(subgroupMatrixLoad<MatC, row_major>(&out, (tile.r0 + 0u) * p.n + tile.c0 + 16u, p.n), scale[1])"
    ));
    assert!(source.contains(
        "subgroupMatrixStore<row_major>(&out, (tile.r0 + 16u) * p.n + tile.c0 + 48u, subgroupMatrixScalarMultiply(c_1_3, scale[0]), ldc);"
    ));
}

#[test]
fn tiles_and_names() {
    let v = GemmVariant::staged(16, Staging::Vec4, (2, 2), (4, 4), 32);
    assert_eq!((v.bm(), v.bn(), v.k_step()), (128, 128, 32));
    assert_eq!(v.name(), "staged-v4 T16 128x128x32 sg2x2 f4x4 nn:dX");
    // A 128 × (32 + 8) halves, B 32 × (128 + 8)
    assert_eq!(v.workgroup_bytes(), 2 * (128 * 40 + 32 * 136));
    let t = v.with_layout(GemmLayout::Tn);
    assert_eq!(t.workgroup_bytes(), 2 * (32 * 136 + 32 * 136));
    assert!(v.source(32).unwrap().contains("coop_mat16x16<f32, C>"));
}
