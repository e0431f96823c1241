//! `webtrain bench`: GPU time of each kernel at the seed's shapes and the
//! tiny preset's, as GFLOP/s and GB/s, against the adapter's fp32 peak where
//! known and against the copy bandwidth measured in the same run. One
//! module per kernel family builds its cases; this one times and prints them.

mod activation;
mod attention;
pub mod coop;
mod coop_variants;
mod embedding;
mod linear;
mod loss;
mod norm;
mod rope;

pub use linear::{gemm_keys, variants};
use serde::Serialize;
use webtrain::gpu::Dispatch;
use webtrain::kernels::Kernels;
use webtrain::rng::{SplitMix64, uniform};
use webtrain::{Gpu, Result};

/// Model sizes to bench at: rows = batch · seq.
pub struct Sizes {
    pub name: &'static str,
    batch: u32,
    seq: u32,
    d: u32,
    ffn: u32,
    vocab: u32,
    heads: u32,
    head_dim: u32,
}

/// The seed system's model: 12 heads of 64, d 768, ffn 2048, vocab 16384, batch 8 × 512.
pub const SEED: Sizes = Sizes {
    name: "seed",
    batch: 8,
    seq: 512,
    d: 768,
    ffn: 2048,
    vocab: 16384,
    heads: 12,
    head_dim: 64,
};
/// The seed's shapes with 6 heads of 128: attention's widest rows (two
/// 64-column lanes per invocation), to see whether they spill.
pub const SEED_DH128: Sizes = Sizes {
    name: "seed-dh128",
    heads: 6,
    head_dim: 128,
    ..SEED
};
/// The small preset at its benchmark batch, 8 × 256 (4 heads of 64 in
/// the kernels; the model's GQA 4:2 makes its q|k|v narrower).
pub const SMALL: Sizes = Sizes {
    name: "small",
    batch: 8,
    seq: 256,
    d: 256,
    ffn: 688,
    vocab: 4096,
    heads: 4,
    head_dim: 64,
};
/// The tiny preset at its benchmark batch, 8 × 64.
pub const TINY: Sizes = Sizes {
    name: "tiny",
    batch: 8,
    seq: 64,
    d: 64,
    ffn: 176,
    vocab: 301,
    heads: 4,
    head_dim: 16,
};

impl Sizes {
    fn rows(&self) -> u32 {
        self.batch * self.seq
    }

    /// Query (= key = value) width of one row: heads · head_dim.
    fn hd(&self) -> u32 {
        self.heads * self.head_dim
    }
}

/// The head dims whose attention kernels the table times.
pub fn head_dims(sizes: &[&Sizes]) -> Vec<u32> {
    sizes.iter().map(|s| s.head_dim).collect()
}

/// fp32 (non-tensor-core) peaks from the vendors' datasheets, by adapter name.
fn fp32_peak(adapter: &str) -> Option<f64> {
    [("H100", 66.9e12), ("H200", 66.9e12)]
        .iter()
        .find(|(n, _)| adapter.contains(n))
        .map(|&(_, p)| p)
}

#[derive(Serialize)]
struct Row {
    sizes: &'static str,
    kernel: String,
    /// The GEMM's tile variant (tuned or by rule); none for other kernels.
    #[serde(skip_serializing_if = "Option::is_none")]
    variant: Option<String>,
    shape: String,
    ms: f64,
    gflop_s: Option<f64>,
    gb_s: f64,
    of_fp32_peak: Option<f64>,
    of_copy_bandwidth: f64,
}

impl Row {
    /// The table's line on stderr.
    fn print(&self) {
        let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}", 100.0 * v));
        eprintln!(
            "{:<6} {:<24} {:<15} {:<22} {:>9.3} {:>9} {:>8.1} {:>7} {:>7.1}",
            self.sizes,
            self.kernel,
            self.variant.as_deref().unwrap_or("-"),
            self.shape,
            self.ms,
            self.gflop_s.map_or("-".into(), |g| format!("{g:.1}")),
            self.gb_s,
            pct(self.of_fp32_peak),
            100.0 * self.of_copy_bandwidth
        );
    }
}

/// One kernel's dispatches on their buffers, with the work they do.
struct Case {
    variant: Option<String>,
    shape: String,
    flops: f64,
    bytes: f64,
    dispatches: Vec<Dispatch>,
}

impl Case {
    /// A kernel measured by its memory traffic alone (no FLOPs counted).
    fn memory(shape: String, bytes: f64, dispatches: Vec<Dispatch>) -> Case {
        Case {
            variant: None,
            shape,
            flops: 0.0,
            bytes,
            dispatches,
        }
    }
}

type Build<'a> = Box<dyn FnOnce() -> Result<Case> + 'a>;
/// Named cases, each built only when asked for.
type Cases<'a> = Vec<(String, Build<'a>)>;
/// Builds one case at the sizes of its `Ctx`.
type Builder<'a> = fn(Ctx<'a>) -> Result<Case>;

/// What every family's cases are built from: the device, the kernels and
/// the sizes.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    gpu: &'a Gpu,
    k: &'a Kernels,
    s: &'a Sizes,
}

impl<'a> Ctx<'a> {
    /// `floats` random values in [-1, 1), seeded by their count.
    fn buf(&self, label: &str, floats: u32) -> Result<wgpu::Buffer> {
        let data = uniform(&mut SplitMix64(floats as u64), floats as usize, -1.0, 1.0);
        self.gpu.upload(label, &data)
    }

    /// A `buf` for each (label, floats).
    fn bufs<const N: usize>(&self, specs: [(&str, u32); N]) -> Result<[wgpu::Buffer; N]> {
        let bufs = specs
            .into_iter()
            .map(|(label, floats)| self.buf(label, floats))
            .collect::<Result<Vec<_>>>()?;
        let Ok(bufs) = bufs.try_into() else {
            unreachable!("one buffer per spec")
        };
        Ok(bufs)
    }

    /// The named cases of `builds`, each built when asked for.
    fn cases(self, builds: &[(&str, Builder<'a>)]) -> Cases<'a> {
        let named = |&(name, build): &(&str, Builder<'a>)| {
            let build: Build<'a> = Box::new(move || build(self));
            (name.to_string(), build)
        };
        builds.iter().map(named).collect()
    }

    /// One token (or target) per row, cycling through the vocabulary.
    fn tokens(&self) -> Vec<u32> {
        (0..self.s.rows()).map(|i| i % self.s.vocab).collect()
    }
}

/// Every kernel at sizes `s`, family by family, each built only when asked
/// for, so a case that does not fit the adapter is skipped without
/// stopping the others.
fn cases<'a>(gpu: &'a Gpu, k: &'a Kernels, s: &'a Sizes) -> Cases<'a> {
    let c = Ctx { gpu, k, s };
    [
        linear::cases(c),
        norm::cases(c),
        rope::cases(c),
        attention::cases(c),
        activation::cases(c),
        loss::cases(c),
        embedding::cases(c),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub async fn run(
    gpu: &Gpu,
    k: &Kernels,
    copy_bw: f64,
    sizes: &[&Sizes],
    reps: u32,
    only: Option<&str>,
) -> Result<()> {
    let peak = fp32_peak(&gpu.info.name);
    eprintln!(
        "{:<6} {:<24} {:<15} {:<22} {:>9} {:>9} {:>8} {:>7} {:>7}",
        "sizes", "kernel", "variant", "shape", "ms", "GFLOP/s", "GB/s", "%peak", "%copy"
    );
    for s in sizes {
        for (name, build) in cases(gpu, k, s) {
            if only.is_some_and(|o| !name.contains(o)) {
                continue;
            }
            let case = match build() {
                Ok(case) => case,
                Err(e) => {
                    eprintln!("{:<6} {name:<24} skipped: {e}", s.name);
                    continue;
                }
            };
            let refs: Vec<&Dispatch> = case.dispatches.iter().collect();
            gpu.warm_up(&refs, 0.05).await?;
            let secs = gpu.time_dispatches(&refs, reps).await?;
            let gflop_s = (case.flops > 0.0).then(|| case.flops / secs / 1e9);
            let row = Row {
                sizes: s.name,
                kernel: name,
                variant: case.variant,
                shape: case.shape,
                ms: secs * 1e3,
                gflop_s,
                gb_s: case.bytes / secs / 1e9,
                of_fp32_peak: peak.zip(gflop_s).map(|(p, g)| g * 1e9 / p),
                of_copy_bandwidth: case.bytes / secs / copy_bw,
            };
            row.print();
            println!(
                "{}",
                serde_json::to_string(&row)
                    .map_err(|e| webtrain::Error::Unsupported(e.to_string()))?
            );
        }
    }
    Ok(())
}

/// Bytes per second (read + written) of `copy_words` over 256 MiB (or the
/// largest binding): the memory ceiling every "%copy" is taken against.
pub async fn copy_bandwidth(gpu: &Gpu, k: &Kernels, reps: u32) -> Result<f64> {
    // 256 MiB each way: far past any adapter's cache, as the base preset's optimizer state is
    let words = (256u64 << 20).min(gpu.limits.max_storage_buffer_binding_size) / 16;
    // random words: a copy of zeros ran faster than the H100's HBM3 peak allows
    let mut rng = SplitMix64(3);
    let data: Vec<u32> = (0..4 * words).map(|_| rng.next_u64() as u32).collect();
    let (x, y) = (
        gpu.upload("x", &data)?,
        gpu.storage_buffer("y", 16 * words)?,
    );
    let d = k
        .infra
        .copy_words(gpu, (&x).into(), (&y).into(), words as u32)?;
    gpu.warm_up(&[&d], 0.2).await?;
    Ok(32.0 * words as f64 / gpu.time_dispatches(&[&d], reps).await?)
}
