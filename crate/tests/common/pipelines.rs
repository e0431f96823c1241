//! The shader registry and pipeline builder, on a real device.

use webtrain::gpu::{KernelDesc, Slot, build_kernels};
use webtrain::shaders::ShaderFile;
use webtrain::{Error, Gpu, Result};

/// A kernel that does not compile is an error naming the file and line.
pub async fn broken_kernel_is_a_located_error(gpu: &Gpu) -> Result<()> {
    let broken = ShaderFile {
        name: "99_broken",
        source: "// ok\nfn oops() -> f32 { return undefined_thing; }\n",
    };
    let desc = KernelDesc {
        entry: "oops",
        slots: &[Slot::Uniform(0)],
    };
    match build_kernels(gpu, broken, [desc]).await {
        Err(Error::Shader {
            kernel: "99_broken",
            message,
            ..
        }) => {
            assert!(
                message.contains("shaders/99_broken.wgsl:2"),
                "message does not locate the line: {message}"
            );
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a broken kernel compiled"),
    }
    Ok(())
}

/// A lost device is an error a caller can observe and read, not a panic.
pub async fn lost_device_is_reported(_shared: &Gpu) -> Result<()> {
    let gpu = Gpu::new(&webtrain::GpuOptions::from_env()).await?;
    let k = webtrain::kernels::Infrastructure::new(&gpu).await?;
    let y = gpu.storage_buffer("y", 64)?;
    let fill = k.fill(&gpu, (&y).into(), 16, 1.0)?;
    gpu.device.destroy();
    let read = gpu.read_back::<f32>((&y).into()).await;
    let run = gpu.run(&[&fill]).await;
    assert!(
        read.is_err() && run.is_err(),
        "work on a destroyed device must fail: {read:?} {:?}",
        run.as_ref().err()
    );
    let reason = gpu.lost_reason();
    assert!(reason.is_some(), "the loss was not observed");
    match gpu.check_health() {
        Err(Error::DeviceLost { reason }) => assert!(reason.contains("Destroyed"), "{reason}"),
        other => panic!("expected DeviceLost, got {other:?}"),
    }
    Ok(())
}

/// Timestamp timing returns a positive, finite time for real work.
pub async fn timestamps_time_dispatches(gpu: &Gpu) -> Result<()> {
    if !gpu.caps.timestamps {
        return Err(Error::Unsupported(format!(
            "{:?} lacks timestamp queries, which both CI adapters have",
            gpu.info.name
        )));
    }
    let k = webtrain::kernels::Infrastructure::new(gpu).await?;
    let n = 1 << 22;
    let y = gpu.storage_buffer("y", 4 * n as u64)?;
    let fill = k.fill(gpu, (&y).into(), n, 2.0)?;
    let secs = gpu.time_dispatches(&[&fill], 10).await?;
    assert!(
        secs.is_finite() && secs > 0.0,
        "time per fill of 16 MiB: {secs} s"
    );
    Ok(())
}

/// Building the kernels compiles no pipeline; a dispatch creates its own
/// once, and a kernel set built again on the device reuses it.
pub async fn pipelines_are_created_when_first_dispatched(_shared: &Gpu) -> Result<()> {
    let gpu = Gpu::new(&webtrain::GpuOptions::from_env()).await?;
    let created = || gpu.pipelines.pipelines_created();
    let first = webtrain::kernels::Kernels::new(&gpu, &[16]).await?;
    assert_eq!(created(), 0, "building the kernels created pipelines");
    let y = gpu.storage_buffer("y", 64)?;
    first.infra.fill(&gpu, (&y).into(), 16, 1.0)?;
    first.infra.fill(&gpu, (&y).into(), 16, 2.0)?;
    assert_eq!(created(), 1, "one kernel dispatched twice");
    let again = webtrain::kernels::Kernels::new(&gpu, &[16]).await?;
    let fill = again.infra.fill(&gpu, (&y).into(), 16, 3.0)?;
    assert_eq!(created(), 1, "a kernel set built again compiled anew");
    gpu.run(&[&fill]).await?;
    assert_eq!(gpu.read_back::<f32>((&y).into()).await?, vec![3.0; 16]);
    Ok(())
}
