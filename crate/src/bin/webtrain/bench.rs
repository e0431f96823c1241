//! `webtrain bench`: GPU time of each kernel at the seed's shapes and the
//! tiny preset's, as GFLOP/s and GB/s, against the adapter's fp32 peak where
//! known and against the copy bandwidth measured in the same run.

use serde::Serialize;
use webtrain::gpu::Dispatch;
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
pub const SEED: Sizes = Sizes { name: "seed", batch: 8, seq: 512, d: 768, ffn: 2048, vocab: 16384, heads: 12, head_dim: 64 };
/// Provisional tiny preset (the trainer issue fixes the presets).
pub const TINY: Sizes = Sizes { name: "tiny", batch: 4, seq: 64, d: 128, ffn: 384, vocab: 2048, heads: 4, head_dim: 32 };

/// fp32 (non-tensor-core) peaks from the vendors' datasheets, by adapter name.
fn fp32_peak(adapter: &str) -> Option<f64> {
    [("H100", 66.9e12), ("H200", 66.9e12)].iter().find(|(n, _)| adapter.contains(n)).map(|&(_, p)| p)
}

#[derive(Serialize)]
struct Row {
    sizes: &'static str,
    kernel: &'static str,
    shape: String,
    ms: f64,
    gflop_s: Option<f64>,
    gb_s: f64,
    of_fp32_peak: Option<f64>,
    of_copy_bandwidth: f64,
}

struct Case {
    kernel: &'static str,
    shape: String,
    flops: f64,
    bytes: f64,
    dispatches: Vec<Dispatch>,
}

struct Kernels {
    infra: Infrastructure,
    linear: Linear,
    norm: RmsNorm,
    rope: Rope,
    act: Activation,
    loss: Loss,
    embed: Embedding,
    attn: Attention,
}

pub async fn run(gpu: &Gpu, sizes: &[&Sizes], reps: u32, only: Option<&str>) -> Result<()> {
    let k = Kernels {
        infra: Infrastructure::new(gpu).await?,
        linear: Linear::new(gpu).await?,
        norm: RmsNorm::new(gpu).await?,
        rope: Rope::new(gpu).await?,
        act: Activation::new(gpu).await?,
        loss: Loss::new(gpu).await?,
        embed: Embedding::new(gpu).await?,
        attn: Attention::new(gpu).await?,
    };
    let copy_bw = copy_bandwidth(gpu, &k, reps).await?;
    eprintln!("adapter {} — copy bandwidth {:.1} GB/s (the memory limit below)", gpu.info.name, copy_bw / 1e9);
    let peak = fp32_peak(&gpu.info.name);
    eprintln!("{:<6} {:<24} {:<22} {:>9} {:>9} {:>8} {:>7} {:>7}", "sizes", "kernel", "shape", "ms", "GFLOP/s", "GB/s", "%peak", "%copy");
    for s in sizes {
        for case in cases(gpu, &k, s)? {
            if only.is_some_and(|o| !case.kernel.contains(o)) {
                continue;
            }
            let refs: Vec<&Dispatch> = case.dispatches.iter().collect();
            gpu.time_dispatches(&refs, 1).await?; // warm-up
            let secs = gpu.time_dispatches(&refs, reps).await?;
            let gflop_s = (case.flops > 0.0).then(|| case.flops / secs / 1e9);
            let row = Row {
                sizes: s.name,
                kernel: case.kernel,
                shape: case.shape,
                ms: secs * 1e3,
                gflop_s,
                gb_s: case.bytes / secs / 1e9,
                of_fp32_peak: peak.zip(gflop_s).map(|(p, g)| g * 1e9 / p),
                of_copy_bandwidth: case.bytes / secs / copy_bw,
            };
            let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.1}", 100.0 * v));
            eprintln!(
                "{:<6} {:<24} {:<22} {:>9.3} {:>9} {:>8.1} {:>7} {:>7.1}",
                row.sizes, row.kernel, row.shape, row.ms, row.gflop_s.map_or("-".into(), |g| format!("{g:.1}")),
                row.gb_s, pct(row.of_fp32_peak), 100.0 * row.of_copy_bandwidth
            );
            println!("{}", serde_json::to_string(&row).map_err(|e| webtrain::Error::Unsupported(e.to_string()))?);
        }
    }
    Ok(())
}

/// Bytes per second of `copy` over 64 MiB (or the largest binding).
async fn copy_bandwidth(gpu: &Gpu, k: &Kernels, reps: u32) -> Result<f64> {
    let n = (64u64 << 20).min(gpu.limits.max_storage_buffer_binding_size) / 4;
    let (x, y) = (gpu.storage_buffer("x", 4 * n)?, gpu.storage_buffer("y", 4 * n)?);
    let d = k.infra.copy(gpu, (&x).into(), (&y).into(), n as u32)?;
    gpu.time_dispatches(&[&d], 1).await?;
    Ok(8.0 * n as f64 / gpu.time_dispatches(&[&d], reps).await?)
}

fn cases(gpu: &Gpu, k: &Kernels, s: &Sizes) -> Result<Vec<Case>> {
    let rows = s.batch * s.seq;
    let r = rows as f64;
    let buf = |label: &str, floats: u32| gpu.storage_buffer(label, 4 * floats as u64);
    let mut out = Vec::new();

    // linear layers: (name, d_in, d_out, output)
    let qkv = s.heads * s.head_dim;
    for (kernel, d_in, d_out) in
        [("linear q|k|v", s.d, 3 * qkv), ("linear o +res", qkv, s.d), ("linear gate|up", s.d, 2 * s.ffn), ("linear down +res", s.ffn, s.d), ("linear lm_head", s.d, s.vocab)]
    {
        let shape = LinearShape { rows, d_in, d_out };
        let (x, w, y) = (buf("x", rows * d_in)?, buf("w", d_out * d_in)?, buf("y", rows * d_out)?);
        let flops = 2.0 * r * d_in as f64 * d_out as f64;
        let bytes = 4.0 * (r * d_in as f64 + (d_out * d_in) as f64 + r * d_out as f64);
        let output = match kernel {
            "linear gate|up" => {
                let up = buf("up", rows * d_out / 2)?;
                let gate = buf("gate", rows * d_out / 2)?;
                k.linear.forward(gpu, shape, (&x).into(), Weights::F32((&w).into()), Output::GateUp { gate: (&gate).into(), up: (&up).into() })?
            }
            k_ if k_.ends_with("+res") => {
                let res = buf("residual", rows * d_out)?;
                k.linear.forward(gpu, shape, (&x).into(), Weights::F32((&w).into()), Output::AddTo { residual: (&res).into(), y: (&y).into() })?
            }
            _ => k.linear.forward(gpu, shape, (&x).into(), Weights::F32((&w).into()), Output::Store((&y).into()))?,
        };
        out.push(Case { kernel, shape: format!("{rows}x{d_in}->{d_out}"), flops, bytes, dispatches: vec![output] });
        if kernel == "linear gate|up" || kernel == "linear lm_head" {
            let wh = gpu.storage_buffer("w_h", 2 * (d_out * d_in) as u64)?;
            let f16 = k.linear.forward(gpu, shape, (&x).into(), Weights::F16((&wh).into()), Output::Store((&y).into()))?;
            let bytes16 = bytes - 2.0 * (d_out * d_in) as f64;
            out.push(Case { kernel: "linear fwd (f16 w)", shape: format!("{rows}x{d_in}->{d_out}"), flops, bytes: bytes16, dispatches: vec![f16] });
            let dx = k.linear.backward_input(gpu, shape, (&y).into(), Weights::F32((&w).into()), (&x).into())?;
            out.push(Case { kernel: "linear dX += dY·W", shape: format!("{rows}x{d_in}->{d_out}"), flops, bytes: bytes + 4.0 * r * d_in as f64, dispatches: vec![dx] });
            let dw = k.linear.backward_weight(gpu, shape, (&y).into(), (&x).into(), (&w).into())?;
            let bytes_dw = bytes + 4.0 * (d_out * d_in) as f64;
            out.push(Case { kernel: "linear dW += dYᵀ·X", shape: format!("{rows}x{d_in}->{d_out}"), flops, bytes: bytes_dw, dispatches: vec![dw] });
        }
    }

    let norm = NormShape { rows, d: s.d, eps: 1e-5 };
    let (x, g, y, rr) = (buf("x", rows * s.d)?, buf("gain", s.d)?, buf("y", rows * s.d)?, buf("rrms", rows)?);
    let fwd = k.norm.forward(gpu, norm, (&x).into(), Weights::F32((&g).into()), (&y).into(), (&rr).into())?;
    out.push(Case { kernel: "rmsnorm forward", shape: format!("{rows}x{}", s.d), flops: 0.0, bytes: 8.0 * r * s.d as f64, dispatches: vec![fwd] });
    let (dx, dg) = (buf("dx", rows * s.d)?, buf("dgain", s.d)?);
    let scratch = gpu.storage_buffer("scratch", norm.backward_scratch_bytes())?;
    let b = NormBackward { x: (&x).into(), gain: Weights::F32((&g).into()), rrms: (&rr).into(), dy: (&y).into(), dx: (&dx).into(), dgain: (&dg).into(), scratch: (&scratch).into() };
    out.push(Case { kernel: "rmsnorm backward", shape: format!("{rows}x{}", s.d), flops: 0.0, bytes: 24.0 * r * s.d as f64, dispatches: k.norm.backward(gpu, norm, &b)?.into() });

    let width = 2 * s.heads * s.head_dim;
    let rope = RopeShape { rows, seq_len: s.seq, pos_offset: 0, heads: 2 * s.heads, head_dim: s.head_dim, row_stride: width, col0: 0 };
    let (f, qk) = (gpu.upload("inv_freq", &inv_freq(s.head_dim, 10_000.0))?, buf("qk", rows * width)?);
    out.push(Case { kernel: "rope q,k", shape: format!("{rows}x{width}"), flops: 0.0, bytes: 8.0 * r * width as f64, dispatches: vec![k.rope.forward(gpu, rope, (&f).into(), (&qk).into())?] });

    // causal attention on a fused [q | k | v] row; FLOPs count the causal half
    let hd = s.heads * s.head_dim;
    let shape = AttentionShape { batch: s.batch, seq_len: s.seq, heads: s.heads, kv_heads: s.heads, head_dim: s.head_dim };
    let (qkv, o, lse) = (buf("qkv", rows * 3 * hd)?, buf("o", rows * hd)?, buf("lse", rows * s.heads)?);
    let heads = |col: u32| Heads { data: (&qkv).into(), row_stride: 3 * hd, col };
    let x = Qkv { q: heads(0), k: heads(hd), v: heads(2 * hd) };
    let pairs = s.batch as f64 * s.heads as f64 * (s.seq as f64).powi(2) * s.head_dim as f64 / 2.0;
    let io = 4.0 * r * (4 * hd + s.heads) as f64;
    out.push(Case { kernel: "attention forward", shape: format!("{}x{}x{}h", s.batch, s.seq, s.heads), flops: 4.0 * pairs, bytes: io, dispatches: vec![k.attn.forward(gpu, shape, x, (&o).into(), (&lse).into())?] });
    let (dqkv, delta) = (buf("dqkv", rows * 3 * hd)?, gpu.storage_buffer("delta", shape.backward_scratch_bytes())?);
    let g = AttentionBackward {
        qkv: x,
        o: (&o).into(),
        d_o: (&o).into(),
        lse: (&lse).into(),
        dq: Heads { data: (&dqkv).into(), row_stride: 3 * hd, col: 0 },
        dkv: KvGrads { data: (&dqkv).into(), row_stride: 3 * hd, k_col: hd, v_col: 2 * hd },
        delta: (&delta).into(),
    };
    let bwd: Vec<Dispatch> = k.attn.backward(gpu, shape, &g)?.into();
    out.push(Case { kernel: "attention backward", shape: format!("{}x{}x{}h", s.batch, s.seq, s.heads), flops: 10.0 * pairs, bytes: 2.0 * io, dispatches: bwd });
    let n = rows * s.ffn;
    let (gate, up, h, dgate, dup) = (buf("gate", n)?, buf("up", n)?, buf("h", n)?, buf("dgate", n)?, buf("dup", n)?);
    out.push(Case { kernel: "swiglu forward", shape: format!("{rows}x{}", s.ffn), flops: 0.0, bytes: 12.0 * n as f64, dispatches: vec![k.act.swiglu_forward(gpu, (&gate).into(), (&up).into(), (&h).into(), n)?] });
    let bwd = k.act.swiglu_backward(gpu, (&h).into(), (&gate).into(), (&up).into(), (&dgate).into(), (&dup).into(), n)?;
    out.push(Case { kernel: "swiglu backward", shape: format!("{rows}x{}", s.ffn), flops: 0.0, bytes: 20.0 * n as f64, dispatches: vec![bwd] });

    let targets: Vec<u32> = (0..rows).map(|i| i % s.vocab).collect();
    let ce = CrossEntropy::mean(&targets, s.vocab, IGNORE_INDEX);
    let (t, logits, losses, lse) = (gpu.upload("targets", &targets)?, buf("logits", rows * s.vocab)?, buf("losses", rows)?, buf("lse", rows)?);
    let d = k.loss.cross_entropy_forward_backward(gpu, &ce, (&t).into(), (&logits).into(), (&losses).into(), (&lse).into())?;
    out.push(Case { kernel: "cross-entropy fwd+bwd", shape: format!("{rows}x{}", s.vocab), flops: 0.0, bytes: 8.0 * r * s.vocab as f64, dispatches: vec![d] });

    let shape = EmbeddingShape { tokens: rows, d: s.d, vocab: s.vocab };
    let (table, emb, bad) = (buf("table", s.vocab * s.d)?, buf("emb", rows * s.d)?, buf("bad", 1)?);
    let lookup = k.embed.lookup(gpu, shape, (&t).into(), Weights::F32((&table).into()), (&emb).into(), (&bad).into())?;
    out.push(Case { kernel: "embed lookup", shape: format!("{rows}x{}", s.d), flops: 0.0, bytes: 8.0 * r * s.d as f64, dispatches: vec![lookup] });
    let back = k.embed.backward(gpu, shape, (&t).into(), (&emb).into(), (&table).into())?;
    out.push(Case { kernel: "embed backward", shape: format!("{rows}x{}", s.d), flops: 0.0, bytes: 12.0 * r * s.d as f64, dispatches: vec![back] });
    Ok(out)
}
