//! The linear layers' GEMMs: forward (f32 and f16 weights), dX and dW per
//! layer, and (`--what variants`) every GEMM in every tile variant.

use webtrain::gpu::Dispatch;
use webtrain::kernels::linear::tune::{TimedOperands, time_variants};
use webtrain::kernels::linear::{BStorage, GemmKey, TileVariant};
use webtrain::kernels::{LinearShape, Output, Weights};
use webtrain::{Gpu, Result};

use super::{Build, Case, Cases, Ctx, Sizes, fp32_peak};

/// The products of one linear layer: forward, dX, dW (f32 weights), forward (f16).
fn linear_keys(rows: u32, d_in: u32, d_out: u32) -> [GemmKey; 4] {
    let [forward, dx, dw] = GemmKey::of_linear(rows, d_in, d_out, BStorage::F32);
    let [forward_f16, ..] = GemmKey::of_linear(rows, d_in, d_out, BStorage::F16);
    [forward, dx, dw, forward_f16]
}

/// The linear layers of a model of sizes `s`: (name, d_in, d_out).
fn linear_layers(s: &Sizes) -> [(&'static str, u32, u32); 5] {
    let hd = s.hd();
    [
        ("q|k|v", s.d, 3 * hd),
        ("o", hd, s.d),
        ("gate|up", s.d, 2 * s.ffn),
        ("down", s.ffn, s.d),
        ("lm_head", s.d, s.vocab),
    ]
}

/// Every product the kernel table times, for the tuner to choose first.
pub fn gemm_keys(sizes: &[&Sizes]) -> Vec<GemmKey> {
    sizes
        .iter()
        .flat_map(|s| linear_layers(s).map(|(_, d_in, d_out)| linear_keys(s.rows(), d_in, d_out)))
        .flatten()
        .collect()
}

/// One linear layer at the bench's rows, with the work of its forward.
#[derive(Clone)]
struct Layer {
    shape: LinearShape,
    dims: String,
    flops: f64,
    /// x and W read, y written (f32).
    bytes: f64,
    keys: [GemmKey; 4],
}

impl Layer {
    fn new(rows: u32, d_in: u32, d_out: u32) -> Layer {
        let r = rows as f64;
        Layer {
            shape: LinearShape::new(rows, d_in, d_out),
            dims: format!("{rows}x{d_in}->{d_out}"),
            flops: 2.0 * r * d_in as f64 * d_out as f64,
            bytes: 4.0 * (r * d_in as f64 + (d_out * d_in) as f64 + r * d_out as f64),
            keys: linear_keys(rows, d_in, d_out),
        }
    }

    fn weights(&self) -> u32 {
        self.shape.d_out * self.shape.d_in
    }

    /// Random buffers the sizes of x (or dX), W (or dW) and y (or dY).
    fn operands(&self, c: Ctx, labels: [&str; 3]) -> Result<[wgpu::Buffer; 3]> {
        let (rows, d_in, d_out) = (self.shape.rows, self.shape.d_in, self.shape.d_out);
        let [x, w, y] = labels;
        c.bufs([(x, rows * d_in), (w, self.weights()), (y, rows * d_out)])
    }

    /// The case of product `key` (an index into `keys`), moving `bytes`.
    fn case(self, c: Ctx, key: usize, bytes: f64, dispatches: Vec<Dispatch>) -> Case {
        Case {
            variant: Some(c.k.linear.variant(&self.keys[key]).name()),
            shape: self.dims,
            flops: self.flops,
            bytes,
            dispatches,
        }
    }
}

/// Builds one product of a layer.
type Product<'a> = fn(Ctx<'a>, Layer) -> Result<Case>;

/// Every layer's forward (adding the residual after o and down); the
/// f16-weight forward, dX and dW of gate|up and lm_head.
pub(super) fn cases<'a>(c: Ctx<'a>) -> Cases<'a> {
    let mut out: Cases<'a> = Vec::new();
    for (layer, d_in, d_out) in linear_layers(c.s) {
        let l = Layer::new(c.s.rows(), d_in, d_out);
        let adds_residual = matches!(layer, "o" | "down");
        let label = if adds_residual {
            format!("{layer} +res")
        } else {
            layer.to_string()
        };
        let f = l.clone();
        out.push((
            format!("linear {label}"),
            Box::new(move || forward(c, f, adds_residual)),
        ));
        if layer != "gate|up" && layer != "lm_head" {
            continue;
        }
        let products: [(&str, Product<'a>); 3] = [
            ("f16 w", forward_f16),
            ("dX", backward_input),
            ("dW", backward_weight),
        ];
        for (what, build) in products {
            let l = l.clone();
            let b: Build<'a> = Box::new(move || build(c, l));
            out.push((format!("linear {layer} {what}"), b));
        }
    }
    out
}

/// y = x·Wᵀ, or y = residual + x·Wᵀ; gate|up as the model runs it: stacked
/// [W_gate; W_up] into one [rows, 2·ffn].
fn forward(c: Ctx, l: Layer, adds_residual: bool) -> Result<Case> {
    let [x, w, y] = l.operands(c, ["x", "w", "y"])?;
    let res;
    let out = if adds_residual {
        res = c.buf("residual", l.shape.rows * l.shape.d_out)?;
        Output::AddTo {
            residual: (&res).into(),
            y: (&y).into(),
        }
    } else {
        Output::Store((&y).into())
    };
    let wf = Weights::F32((&w).into());
    let d = c.k.linear.forward(c.gpu, l.shape, (&x).into(), wf, out)?;
    let bytes = l.bytes;
    Ok(l.case(c, 0, bytes, d))
}

/// The forward with f16 weights: half the weight bytes.
fn forward_f16(c: Ctx, l: Layer) -> Result<Case> {
    let (rows, d_in, d_out) = (l.shape.rows, l.shape.d_in, l.shape.d_out);
    let [x, y] = c.bufs([("x", rows * d_in), ("y", rows * d_out)])?;
    let wh = c.gpu.storage_buffer("w_h", 2 * l.weights() as u64)?;
    let (wh, y) = (Weights::F16((&wh).into()), Output::Store((&y).into()));
    let d = c.k.linear.forward(c.gpu, l.shape, (&x).into(), wh, y)?;
    let bytes = l.bytes - 2.0 * l.weights() as f64;
    Ok(l.case(c, 3, bytes, d))
}

/// dX += dY·W: dX read as well as written.
fn backward_input(c: Ctx, l: Layer) -> Result<Case> {
    let [dx, w, dy] = l.operands(c, ["dx", "w", "dy"])?;
    let (w, dx) = (Weights::F32((&w).into()), Output::Accumulate((&dx).into()));
    let d =
        c.k.linear
            .backward_input(c.gpu, l.shape, (&dy).into(), w, dx)?;
    let bytes = l.bytes + 4.0 * l.shape.rows as f64 * l.shape.d_in as f64;
    Ok(l.case(c, 1, bytes, d))
}

/// dW += dYᵀ·x: dW read as well as written.
fn backward_weight(c: Ctx, l: Layer) -> Result<Case> {
    let [x, dw, dy] = l.operands(c, ["x", "dw", "dy"])?;
    let (dy, x, dw) = ((&dy).into(), (&x).into(), (&dw).into());
    let d = c.k.linear.backward_weight(c.gpu, l.shape, dy, x, dw)?;
    let bytes = l.bytes + 4.0 * l.weights() as f64;
    Ok(l.case(c, 2, bytes, d))
}

/// `--what variants`: every GEMM of the sizes' model in every tile variant
/// that fits the adapter, the fastest marked: what the tuner chooses from.
pub async fn variants(gpu: &Gpu, sizes: &[&Sizes], only: Option<&str>) -> Result<()> {
    eprintln!(
        "{:<6} {:<22} {:<20} {:<16} {:>9} {:>9} {:>7}",
        "sizes", "product", "M x N x K", "variant", "ms", "GFLOP/s", "%peak"
    );
    for s in sizes {
        for (layer, d_in, d_out) in linear_layers(s) {
            for key in linear_keys(s.rows(), d_in, d_out) {
                let name = format!(
                    "{layer} {}{}",
                    key.layout.name(),
                    if key.b == BStorage::F16 { " f16" } else { "" }
                );
                if only.is_some_and(|o| !name.contains(o)) {
                    continue;
                }
                match TimedOperands::new(gpu, key) {
                    Ok(ops) => time_product(gpu, s, &name, key, &ops).await?,
                    Err(e) => eprintln!("{:<6} {name:<22} skipped: {e}", s.name),
                }
            }
        }
    }
    Ok(())
}

/// One product of `variants`: a row per tile variant that fits the adapter.
async fn time_product(
    gpu: &Gpu,
    s: &Sizes,
    name: &str,
    key: GemmKey,
    ops: &TimedOperands,
) -> Result<()> {
    let peak = fp32_peak(&gpu.info.name);
    let flops = 2.0 * key.m as f64 * key.n as f64 * key.k as f64;
    let fitting: Vec<TileVariant> = TileVariant::ALL
        .into_iter()
        .filter(|v| v.fits(&gpu.limits, key.layout))
        .collect();
    let times: Vec<(TileVariant, f64)> = fitting
        .iter()
        .copied()
        .zip(time_variants(gpu, &fitting, ops).await?)
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
    Ok(())
}
