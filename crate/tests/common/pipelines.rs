//! The shader registry and pipeline builder, on a real device.

use webtrain::gpu::{build_kernels, KernelDesc, Slot};
use webtrain::shaders::{ShaderFile, KERNEL_FILES};
use webtrain::{Error, Gpu, Result};

/// A kernel that does not compile is an error naming the file and line.
pub async fn broken_kernel_is_a_located_error(gpu: &Gpu) -> Result<()> {
    let broken = ShaderFile { name: "99_broken", source: "// ok\nfn oops() -> f32 { return undefined_thing; }\n" };
    let desc = KernelDesc { entry: "oops", slots: &[Slot::Uniform(0)] };
    match build_kernels(gpu, broken, [desc]).await {
        Err(Error::Shader { kernel: "99_broken", message, .. }) => {
            assert!(message.contains("shaders/99_broken.wgsl:2"), "message does not locate the line: {message}");
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a broken kernel compiled"),
    }
    Ok(())
}

/// Every registered file composes and compiles (a file with no launcher
/// yet would otherwise go unchecked).
pub async fn every_shader_file_compiles(gpu: &Gpu) -> Result<()> {
    for &file in KERNEL_FILES {
        build_kernels::<0>(gpu, file, []).await?;
    }
    Ok(())
}
