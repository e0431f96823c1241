//! `webtrain bench`: GPU time of each kernel at the seed's shapes and the
//! tiny preset's, as GFLOP/s and GB/s, against the adapter's fp32 peak where
//! known and against the copy bandwidth measured in the same run.

use serde::Serialize;
use webtrain::gpu::Dispatch;
use webtrain::kernels::embedding::TokenRuns;
use webtrain::kernels::linear::{BStorage, GemmKey};
use webtrain::kernels::loss::{CrossEntropy, IGNORE_INDEX};
use webtrain::kernels::rope::inv_freq;
use webtrain::kernels::*;
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

struct Case {
    variant: Option<String>,
    shape: String,
    flops: f64,
    bytes: f64,
    dispatches: Vec<Dispatch>,
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
            let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}", 100.0 * v));
            eprintln!(
                "{:<6} {:<24} {:<15} {:<22} {:>9.3} {:>9} {:>8.1} {:>7} {:>7.1}",
                row.sizes,
                row.kernel,
                row.variant.as_deref().unwrap_or("-"),
                row.shape,
                row.ms,
                row.gflop_s.map_or("-".into(), |g| format!("{g:.1}")),
                row.gb_s,
                pct(row.of_fp32_peak),
                100.0 * row.of_copy_bandwidth
            );
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
    let mut rng = webtrain::rng::SplitMix64(3);
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

type Build<'a> = Box<dyn FnOnce() -> Result<Case> + 'a>;

/// The products of one linear layer: forward, dX, dW (f32 weights), forward (f16).
fn linear_keys(rows: u32, d_in: u32, d_out: u32) -> [GemmKey; 4] {
    let [forward, dx, dw] = GemmKey::of_linear(rows, d_in, d_out, BStorage::F32);
    let [forward_f16, ..] = GemmKey::of_linear(rows, d_in, d_out, BStorage::F16);
    [forward, dx, dw, forward_f16]
}

/// The linear layers of a model of sizes `s`: (name, d_in, d_out).
fn linear_layers(s: &Sizes) -> [(&'static str, u32, u32); 5] {
    let hd = s.heads * s.head_dim;
    [
        ("q|k|v", s.d, 3 * hd),
        ("o", hd, s.d),
        ("gate|up", s.d, 2 * s.ffn),
        ("down", s.ffn, s.d),
        ("lm_head", s.d, s.vocab),
    ]
}

/// The head dims whose attention kernels the table times.
pub fn head_dims(sizes: &[&Sizes]) -> Vec<u32> {
    sizes.iter().map(|s| s.head_dim).collect()
}

/// Every product the kernel table times, for the tuner to choose first.
pub fn gemm_keys(sizes: &[&Sizes]) -> Vec<GemmKey> {
    sizes
        .iter()
        .flat_map(|s| {
            linear_layers(s).map(|(_, d_in, d_out)| linear_keys(s.batch * s.seq, d_in, d_out))
        })
        .flatten()
        .collect()
}

/// Every kernel at sizes `s`, each built only when asked for, so a case
/// that does not fit the adapter is skipped without stopping the others.
fn cases<'a>(gpu: &'a Gpu, k: &'a Kernels, s: &'a Sizes) -> Vec<(String, Build<'a>)> {
    let rows = s.batch * s.seq;
    let r = rows as f64;
    // random values in [-1, 1), not zeros: all-zero traffic can run faster than real data
    let buf = move |label: &str, floats: u32| {
        let mut rng = webtrain::rng::SplitMix64(floats as u64);
        let data: Vec<f32> = (0..floats)
            .map(|_| (rng.next_u64() >> 40) as f32 * 2f32.powi(-23) - 1.0)
            .collect();
        gpu.upload(label, &data)
    };
    let mut out: Vec<(String, Build<'a>)> = Vec::new();

    let hd = s.heads * s.head_dim;
    for (layer, d_in, d_out) in linear_layers(s) {
        let adds_residual = matches!(layer, "o" | "down");
        let label = if adds_residual {
            format!("{layer} +res")
        } else {
            layer.to_string()
        };
        let shape = LinearShape::new(rows, d_in, d_out);
        let dims = format!("{rows}x{d_in}->{d_out}");
        let flops = 2.0 * r * d_in as f64 * d_out as f64;
        let bytes = 4.0 * (r * d_in as f64 + (d_out * d_in) as f64 + r * d_out as f64);
        let keys = linear_keys(rows, d_in, d_out);
        let variant = move |i: usize| Some(k.linear.variant(&keys[i]).name());
        let case = move |bytes: f64, d: Vec<Dispatch>, v: Option<String>| Case {
            variant: v,
            shape: dims.clone(),
            flops,
            bytes,
            dispatches: d,
        };
        let c = case.clone();
        out.push((
            format!("linear {label}"),
            Box::new(move || {
                let (x, w, y) = (
                    buf("x", rows * d_in)?,
                    buf("w", d_out * d_in)?,
                    buf("y", rows * d_out)?,
                );
                let (x, wf) = ((&x).into(), Weights::F32((&w).into()));
                let d = match adds_residual {
                    true => {
                        let res = buf("residual", rows * d_out)?;
                        k.linear.forward(
                            gpu,
                            shape,
                            x,
                            wf,
                            Output::AddTo {
                                residual: (&res).into(),
                                y: (&y).into(),
                            },
                        )?
                    }
                    // gate|up as the model runs it: stacked [W_gate; W_up] into one [rows, 2·ffn]
                    false => k
                        .linear
                        .forward(gpu, shape, x, wf, Output::Store((&y).into()))?,
                };
                Ok(c(bytes, d, variant(0)))
            }),
        ));
        if layer != "gate|up" && layer != "lm_head" {
            continue;
        }
        let c = case.clone();
        out.push((
            format!("linear {layer} f16 w"),
            Box::new(move || {
                let (x, wh, y) = (
                    buf("x", rows * d_in)?,
                    gpu.storage_buffer("w_h", 2 * (d_out * d_in) as u64)?,
                    buf("y", rows * d_out)?,
                );
                let d = k.linear.forward(
                    gpu,
                    shape,
                    (&x).into(),
                    Weights::F16((&wh).into()),
                    Output::Store((&y).into()),
                )?;
                Ok(c(bytes - 2.0 * (d_out * d_in) as f64, d, variant(3)))
            }),
        ));
        let c = case.clone();
        out.push((
            format!("linear {layer} dX"),
            Box::new(move || {
                let (dx, w, dy) = (
                    buf("dx", rows * d_in)?,
                    buf("w", d_out * d_in)?,
                    buf("dy", rows * d_out)?,
                );
                let d = k.linear.backward_input(
                    gpu,
                    shape,
                    (&dy).into(),
                    Weights::F32((&w).into()),
                    Output::Accumulate((&dx).into()),
                )?;
                Ok(c(bytes + 4.0 * r * d_in as f64, d, variant(1)))
            }),
        ));
        out.push((
            format!("linear {layer} dW"),
            Box::new(move || {
                let (x, dw, dy) = (
                    buf("x", rows * d_in)?,
                    buf("dw", d_out * d_in)?,
                    buf("dy", rows * d_out)?,
                );
                let d = k.linear.backward_weight(
                    gpu,
                    shape,
                    (&dy).into(),
                    (&x).into(),
                    (&dw).into(),
                )?;
                Ok(case(bytes + 4.0 * (d_out * d_in) as f64, d, variant(2)))
            }),
        ));
    }

    let norm = NormShape {
        rows,
        d: s.d,
        eps: 1e-5,
    };
    let norm_dims = format!("{rows}x{}", s.d);
    let dims = norm_dims.clone();
    out.push((
        "rmsnorm forward".into(),
        Box::new(move || {
            let (x, g, y, rr) = (
                buf("x", rows * s.d)?,
                buf("gain", s.d)?,
                buf("y", rows * s.d)?,
                buf("rrms", rows)?,
            );
            let d = k.norm.forward(
                gpu,
                norm,
                (&x).into(),
                Weights::F32((&g).into()),
                (&y).into(),
                (&rr).into(),
            )?;
            Ok(Case {
                variant: None,
                shape: dims,
                flops: 0.0,
                // x read twice (its sum of squares, then y), y written
                bytes: 12.0 * r * s.d as f64,
                dispatches: vec![d],
            })
        }),
    ));
    out.push((
        "rmsnorm backward".into(),
        Box::new(move || {
            let (x, g, dy, rr) = (
                buf("x", rows * s.d)?,
                buf("gain", s.d)?,
                buf("dy", rows * s.d)?,
                buf("rrms", rows)?,
            );
            let (dx, dg, scratch) = (
                buf("dx", rows * s.d)?,
                buf("dgain", s.d)?,
                gpu.storage_buffer("scratch", norm.backward_scratch_bytes())?,
            );
            let b = NormBackward {
                x: (&x).into(),
                gain: Weights::F32((&g).into()),
                rrms: (&rr).into(),
                dy: (&dy).into(),
                dx: (&dx).into(),
                dgain: (&dg).into(),
                scratch: (&scratch).into(),
            };
            Ok(Case {
                variant: None,
                shape: norm_dims,
                flops: 0.0,
                // x and dy read twice (the row sums, then the columns), dx read and
                // written; the dgain partials written and read back, dgain updated
                bytes: 24.0 * r * s.d as f64
                    + 2.0 * norm.backward_scratch_bytes() as f64
                    + 8.0 * s.d as f64,
                dispatches: k.norm.backward(gpu, norm, &b)?.into(),
            })
        }),
    ));

    out.push((
        "rope q,k".into(),
        Box::new(move || {
            let width = 2 * hd;
            let rope = RopeShape {
                rows,
                seq_len: s.seq,
                pos_offset: 0,
                heads: 2 * s.heads,
                head_dim: s.head_dim,
                row_stride: width,
                col0: 0,
            };
            let (f, qk) = (
                gpu.upload("inv_freq", &inv_freq(s.head_dim, 10_000.0))?,
                buf("qk", rows * width)?,
            );
            let d = k.rope.forward(gpu, rope, (&f).into(), (&qk).into())?;
            Ok(Case {
                variant: None,
                shape: format!("{rows}x{width}"),
                flops: 0.0,
                bytes: 8.0 * r * width as f64,
                dispatches: vec![d],
            })
        }),
    ));

    // causal attention on a fused [q | k | v] row; FLOPs count the causal half
    let shape = AttentionShape {
        batch: s.batch,
        seq_len: s.seq,
        heads: s.heads,
        kv_heads: s.heads,
        head_dim: s.head_dim,
    };
    let pairs = s.batch as f64 * s.heads as f64 * (s.seq as f64).powi(2) * s.head_dim as f64 / 2.0;
    let io = 4.0 * r * (4 * hd + s.heads) as f64;
    let attn_dims = format!("{}x{}x{}h", s.batch, s.seq, s.heads);
    let dims = attn_dims.clone();
    out.push((
        "attention forward".into(),
        Box::new(move || {
            let (qkv, o, lse) = (
                buf("qkv", rows * 3 * hd)?,
                buf("o", rows * hd)?,
                buf("lse", rows * s.heads)?,
            );
            let heads = |col: u32| Heads {
                data: (&qkv).into(),
                row_stride: 3 * hd,
                col,
            };
            let d = k.attn.forward(
                gpu,
                shape,
                Qkv {
                    q: heads(0),
                    k: heads(hd),
                    v: heads(2 * hd),
                },
                (&o).into(),
                (&lse).into(),
            )?;
            Ok(Case {
                variant: None,
                shape: dims,
                flops: 4.0 * pairs,
                bytes: io,
                dispatches: vec![d],
            })
        }),
    ));
    out.push((
        "attention backward".into(),
        Box::new(move || {
            let (qkv, o, lse) = (
                buf("qkv", rows * 3 * hd)?,
                buf("o", rows * hd)?,
                buf("lse", rows * s.heads)?,
            );
            let (dqkv, delta) = (
                buf("dqkv", rows * 3 * hd)?,
                gpu.storage_buffer("delta", shape.backward_scratch_bytes())?,
            );
            fn view(data: &wgpu::Buffer, stride: u32, col: u32) -> Heads<'_> {
                Heads {
                    data: data.into(),
                    row_stride: stride,
                    col,
                }
            }
            let heads = |data, col| view(data, 3 * hd, col);
            let g = AttentionBackward {
                qkv: Qkv {
                    q: heads(&qkv, 0),
                    k: heads(&qkv, hd),
                    v: heads(&qkv, 2 * hd),
                },
                o: (&o).into(),
                d_o: (&o).into(),
                lse: (&lse).into(),
                dq: heads(&dqkv, 0),
                dkv: KvGrads {
                    data: (&dqkv).into(),
                    row_stride: 3 * hd,
                    k_col: hd,
                    v_col: 2 * hd,
                },
                delta: (&delta).into(),
            };
            Ok(Case {
                variant: None,
                shape: attn_dims,
                flops: 10.0 * pairs,
                bytes: 2.0 * io,
                dispatches: k.attn.backward(gpu, shape, &g)?.into(),
            })
        }),
    ));

    // on the fused [gate | up] rows the gate|up GEMM writes: n = rows·ffn
    // elements of h; forward reads 2n and writes n, backward reads 3n, writes 2n
    let n = rows * s.ffn;
    let ffn_dims = format!("{rows}x{}", s.ffn);
    let dims = ffn_dims.clone();
    out.push((
        "swiglu forward".into(),
        Box::new(move || {
            let (gu, h) = (buf("gu", 2 * n)?, buf("h", n)?);
            let d = k
                .act
                .swiglu_forward_gu(gpu, (&gu).into(), (&h).into(), rows, s.ffn)?;
            Ok(Case {
                variant: None,
                shape: dims,
                flops: 0.0,
                bytes: 12.0 * n as f64,
                dispatches: vec![d],
            })
        }),
    ));
    out.push((
        "swiglu backward".into(),
        Box::new(move || {
            let (dh, gu, dgu) = (buf("dh", n)?, buf("gu", 2 * n)?, buf("dgu", 2 * n)?);
            let d = k.act.swiglu_backward_gu(
                gpu,
                (&dh).into(),
                (&gu).into(),
                (&dgu).into(),
                rows,
                s.ffn,
            )?;
            Ok(Case {
                variant: None,
                shape: ffn_dims,
                flops: 0.0,
                bytes: 20.0 * n as f64,
                dispatches: vec![d],
            })
        }),
    ));

    let targets: Vec<u32> = (0..rows).map(|i| i % s.vocab).collect();
    let tokens = targets.clone();
    out.push((
        "cross-entropy fwd+bwd".into(),
        Box::new(move || {
            let ce = CrossEntropy::mean(&targets, s.vocab, IGNORE_INDEX);
            let (t, logits, losses, lse) = (
                gpu.upload("targets", &targets)?,
                buf("logits", rows * s.vocab)?,
                buf("losses", rows)?,
                buf("lse", rows)?,
            );
            let d = k.loss.cross_entropy_forward_backward(
                gpu,
                &ce,
                (&t).into(),
                (&logits).into(),
                (&losses).into(),
                (&lse).into(),
            )?;
            Ok(Case {
                variant: None,
                shape: format!("{rows}x{}", s.vocab),
                flops: 0.0,
                // logits read twice (online max and sums, then dlogits), written once
                bytes: 12.0 * r * s.vocab as f64,
                dispatches: vec![d],
            })
        }),
    ));

    let shape = EmbeddingShape {
        tokens: rows,
        d: s.d,
        vocab: s.vocab,
    };
    let embed_dims = format!("{rows}x{}", s.d);
    let (dims, tokens2) = (embed_dims.clone(), tokens.clone());
    out.push((
        "embed lookup".into(),
        Box::new(move || {
            let (t, table, emb, bad) = (
                gpu.upload("tokens", &tokens)?,
                buf("table", s.vocab * s.d)?,
                buf("emb", rows * s.d)?,
                buf("bad", 1)?,
            );
            let d = k.embed.lookup(
                gpu,
                shape,
                (&t).into(),
                Weights::F32((&table).into()),
                (&emb).into(),
                (&bad).into(),
            )?;
            Ok(Case {
                variant: None,
                shape: dims,
                flops: 0.0,
                bytes: 8.0 * r * s.d as f64,
                dispatches: vec![d],
            })
        }),
    ));
    out.push((
        "embed backward".into(),
        Box::new(move || {
            let runs = TokenRuns::new(&tokens2, s.vocab).to_words();
            let (t, table, dout) = (
                gpu.upload("token_runs", &runs)?,
                buf("dtable", s.vocab * s.d)?,
                buf("dout", rows * s.d)?,
            );
            let d = k.embed.backward_sorted(
                gpu,
                shape,
                (&t).into(),
                (&dout).into(),
                (&table).into(),
            )?;
            Ok(Case {
                variant: None,
                shape: embed_dims,
                flops: 0.0,
                bytes: 12.0 * r * s.d as f64,
                dispatches: vec![d],
            })
        }),
    ));
    out
}

/// `--what variants`: every GEMM of the sizes' model in every tile variant
/// that fits the adapter, the fastest marked: what the tuner chooses from.
pub async fn variants(gpu: &Gpu, sizes: &[&Sizes], only: Option<&str>) -> Result<()> {
    use webtrain::kernels::linear::TileVariant;
    use webtrain::kernels::linear::tune::{Operands, time_variants};
    let peak = fp32_peak(&gpu.info.name);
    eprintln!(
        "{:<6} {:<22} {:<20} {:<16} {:>9} {:>9} {:>7}",
        "sizes", "product", "M x N x K", "variant", "ms", "GFLOP/s", "%peak"
    );
    for s in sizes {
        for (layer, d_in, d_out) in linear_layers(s) {
            for key in linear_keys(s.batch * s.seq, d_in, d_out) {
                let (layout, b) = (key.layout, key.b);
                let name = format!(
                    "{layer} {}{}",
                    layout.name(),
                    if b == BStorage::F16 { " f16" } else { "" }
                );
                if only.is_some_and(|o| !name.contains(o)) {
                    continue;
                }
                let ops = match Operands::new(gpu, key) {
                    Ok(ops) => ops,
                    Err(e) => {
                        eprintln!("{:<6} {name:<22} skipped: {e}", s.name);
                        continue;
                    }
                };
                let flops = 2.0 * key.m as f64 * key.n as f64 * key.k as f64;
                let fitting: Vec<TileVariant> = TileVariant::ALL
                    .into_iter()
                    .filter(|v| v.fits(&gpu.limits, layout))
                    .collect();
                let times: Vec<(TileVariant, f64)> = fitting
                    .iter()
                    .copied()
                    .zip(time_variants(gpu, &fitting, &ops).await?)
                    .collect();
                let best = times.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
                for (v, secs) in times {
                    let gflop_s = flops / secs / 1e9;
                    let row = serde_json::json!({
                        "sizes": s.name, "product": name, "m": key.m, "n": key.n, "k": key.k,
                        "variant": v.name(), "ms": secs * 1e3, "gflop_s": gflop_s,
                        "of_fp32_peak": peak.map(|p| gflop_s * 1e9 / p), "fastest": secs == best,
                    });
                    eprintln!(
                        "{:<6} {name:<22} {:<20} {:<16} {:>9.3} {:>9.1} {:>7} {}",
                        s.name,
                        format!("{}x{}x{}", key.m, key.n, key.k),
                        v.name(),
                        secs * 1e3,
                        gflop_s,
                        peak.map_or("-".into(), |p| format!("{:.1}", 100.0 * gflop_s * 1e9 / p)),
                        if secs == best { "*" } else { "" }
                    );
                    println!("{row}");
                }
            }
        }
    }
    Ok(())
}
