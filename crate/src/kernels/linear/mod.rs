//! Launchers for 03_linear.wgsl: the forward of a linear layer (with its
//! fused epilogues) and both backward products, each one GEMM in its own
//! compiled layout (`gemm`), in the tile variant chosen for its shape on
//! this adapter (`tune`). In fp8, activations and gradients go through
//! E4M3 first (`fp8`), once per product, and the weights are read from
//! their E4M3 mirror, which `quantize_weights` writes once per optimizer
//! step.

pub mod coop;
mod fp8;
mod gemm;
pub mod tune;

use std::collections::HashMap;

pub use gemm::{BStorage, GemmKey, Layout, TileVariant};

use super::Weights;
use super::boundary::{SITE_NONE, SITE_PROJECTION};
use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu};
use crate::shaders::Numerics;
use fp8::{Fp8, Operand, Side, Tiles};
use gemm::{Epilogue, GemmModule, Params};

/// A linear layer `Y[rows, d_out] = X[rows, d_in] · W[d_out, d_in]ᵀ`.
#[derive(Clone, Copy, Debug)]
pub struct LinearShape {
    pub rows: u32,
    pub d_in: u32,
    pub d_out: u32,
    /// Where the second and third of weights stacked along d_out begin
    /// (`[W_q; W_k; W_v]`, `[W_gate; W_up]`), d_out where there are none:
    /// fp8's weight blocks and gradient tiles start afresh at each.
    pub parts: [u32; 2],
}

impl LinearShape {
    /// One weight.
    pub fn new(rows: u32, d_in: u32, d_out: u32) -> Self {
        LinearShape {
            rows,
            d_in,
            d_out,
            parts: [d_out; 2],
        }
    }

    /// Two or three weights of these heights stacked along d_out.
    pub fn stacked(rows: u32, d_in: u32, heights: &[u32]) -> Result<Self> {
        let (first, second, third) = match *heights {
            [a, b] => (a, b, 0),
            [a, b, c] => (a, b, c),
            _ => {
                return Err(Error::shape(
                    "linear",
                    "stacked weights",
                    "2 or 3",
                    heights.len(),
                ));
            }
        };
        let d_out = first + second + third;
        Ok(LinearShape {
            rows,
            d_in,
            d_out,
            parts: [first, first + second],
        })
    }

    fn check_parts(&self, op: &'static str) -> Result<()> {
        let [p1, p2] = self.parts;
        if p1 <= p2 && p2 <= self.d_out {
            return Ok(());
        }
        Err(Error::shape(
            op,
            "parts",
            format!("ascending, at most d_out {}", self.d_out),
            format!("{:?}", self.parts),
        ))
    }
}

/// Where the forward's product goes.
pub enum Output<'a> {
    /// `Y = X·Wᵀ`; gate and up together as one `[rows, 2·ffn]` `[gate | up]`
    /// from the stacked `[W_gate; W_up]`, which `swiglu_*_gu` read.
    Store(BufferRange<'a>),
    /// `Y = R + X·Wᵀ`: a projection joining the residual stream.
    AddTo {
        residual: BufferRange<'a>,
        y: BufferRange<'a>,
    },
    /// `Y += X·Wᵀ`
    Accumulate(BufferRange<'a>),
}

/// The GEMM modules built on one device, and which serves each shape.
pub struct Linear {
    /// Built variants, each in every layout and B storage it serves.
    modules: Vec<GemmModule>,
    /// The variant for a shape the tuner timed or a kernel config pinned;
    /// other shapes take `fallback`.
    picks: HashMap<GemmKey, TileVariant>,
    fallback: TileVariant,
    /// fp8 numerics: the pre-pass that puts operands through E4M3.
    fp8: Option<Fp8>,
}

/// Every (layout, B storage) a product can take: dW reads f32 activations.
const MODULES: [(Layout, BStorage); 5] = [
    (Layout::Forward, BStorage::F32),
    (Layout::Forward, BStorage::F16),
    (Layout::Dx, BStorage::F32),
    (Layout::Dx, BStorage::F16),
    (Layout::Dw, BStorage::F32),
];

impl Linear {
    /// The adapter's picks (`tune::picks`), others by the adapter's rule.
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        Self::with_picks(gpu, tune::rule(gpu), tune::picks(gpu)).await
    }

    /// Every product in `variant` (tests pin their variant this way).
    pub async fn with_variant(gpu: &Gpu, variant: TileVariant) -> Result<Self> {
        Self::with_picks(gpu, variant, HashMap::new()).await
    }

    /// `fallback` for every shape but those `picks` names.
    pub async fn with_picks(
        gpu: &Gpu,
        fallback: TileVariant,
        picks: HashMap<GemmKey, TileVariant>,
    ) -> Result<Self> {
        let mut variants = vec![fallback];
        for v in picks.values() {
            if !variants.contains(v) {
                variants.push(*v);
            }
        }
        let mut modules = Vec::new();
        for v in variants {
            for (layout, b) in MODULES {
                modules.push(GemmModule::new(gpu, v, layout, b).await?);
            }
        }
        let fp8 = match gpu.numerics() {
            Numerics::Fp8 => Some(Fp8::new(gpu).await?),
            Numerics::Exact | Numerics::Sf16 => None,
        };
        Ok(Linear {
            modules,
            picks,
            fallback,
            fp8,
        })
    }

    /// The variant that serves `key`.
    pub fn variant(&self, key: &GemmKey) -> TileVariant {
        self.picks.get(key).copied().unwrap_or(self.fallback)
    }

    /// The module of `key`'s variant (every layout and B storage is built
    /// for each variant `Linear` holds).
    fn module(&self, key: GemmKey) -> Result<&GemmModule> {
        let v = self.variant(&key);
        self.modules
            .iter()
            .find(|m| m.variant == v && m.layout == key.layout && m.b == key.b)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "linear: variant {} of the {} layout was not built",
                    v.name(),
                    key.layout.name()
                ))
            })
    }

    /// `X·Wᵀ` into `out`.
    pub fn forward(
        &self,
        gpu: &Gpu,
        s: LinearShape,
        x: BufferRange,
        w: Weights,
        out: Output,
    ) -> Result<Vec<Dispatch>> {
        let op = "linear_forward";
        s.check_parts(op)?;
        let (rows, d_in, d_out) = (s.rows as u64, s.d_in as u64, s.d_out as u64);
        let mut d = Vec::new();
        // fp8: the quantizing pre-pass checks x; the product binds its scratch
        let xq = self.fp8_operands(
            gpu,
            &mut d,
            (x, Tiles::Rows, Operand::plain(s.rows, s.d_in)),
            &w,
        )?;
        let x = xq
            .as_ref()
            .map_or(x, BufferRange::from)
            .needs(4 * rows * d_in);
        let key = GemmKey::new(Layout::Forward, storage(&w), s.rows, s.d_out, s.d_in);
        let site = match out {
            Output::Accumulate(_) => SITE_NONE,
            Output::Store(_) | Output::AddTo { .. } => SITE_PROJECTION,
        };
        let p = Params::of(&key, site);
        let w = w.range().needs(w.bytes(d_out * d_in));
        let y_bytes = 4 * rows * d_out;
        let (epilogue, binds) = match out {
            Output::Store(y) => (Epilogue::Store, vec![x, w, y.needs(y_bytes)]),
            Output::AddTo { residual, y } => (
                Epilogue::Add,
                vec![x, w, residual.needs(y_bytes), y.needs(y_bytes)],
            ),
            Output::Accumulate(y) => (Epilogue::Accumulate, vec![x, w, y.needs(y_bytes)]),
        };
        d.push(self.module(key)?.launch(gpu, op, epilogue, p, &binds)?);
        Ok(d)
    }

    /// `dX = dY·W` (`Output::Store`) or `dX += dY·W` (`Output::Accumulate`),
    /// with the weights the forward used.
    pub fn backward_input(
        &self,
        gpu: &Gpu,
        s: LinearShape,
        dy: BufferRange,
        w: Weights,
        dx: Output,
    ) -> Result<Vec<Dispatch>> {
        let op = "linear_backward_input";
        s.check_parts(op)?;
        let (rows, d_in, d_out) = (s.rows as u64, s.d_in as u64, s.d_out as u64);
        let (epilogue, dx) = match dx {
            Output::Store(dx) => (Epilogue::Store, dx),
            Output::Accumulate(dx) => (Epilogue::Accumulate, dx),
            Output::AddTo { .. } => {
                return Err(Error::shape(op, "dx", "Store or Accumulate", "AddTo"));
            }
        };
        let mut d = Vec::new();
        let dy_operand = Operand {
            col_parts: s.parts,
            ..Operand::plain(s.rows, s.d_out)
        };
        let dyq = self.fp8_operands(gpu, &mut d, (dy, Tiles::Rows, dy_operand), &w)?;
        let dy = dyq.as_ref().map_or(dy, BufferRange::from);
        let key = GemmKey::new(Layout::Dx, storage(&w), s.rows, s.d_in, s.d_out);
        let p = Params::of(&key, SITE_NONE);
        let binds = [
            dy.needs(4 * rows * d_out),
            w.range().needs(w.bytes(d_out * d_in)),
            dx.needs(4 * rows * d_in),
        ];
        d.push(self.module(key)?.launch(gpu, op, epilogue, p, &binds)?);
        Ok(d)
    }

    /// `dW += dYᵀ·X`
    pub fn backward_weight(
        &self,
        gpu: &Gpu,
        s: LinearShape,
        dy: BufferRange,
        x: BufferRange,
        dw: BufferRange,
    ) -> Result<Vec<Dispatch>> {
        let op = "linear_backward_weight";
        let (rows, d_in, d_out) = (s.rows as u64, s.d_in as u64, s.d_out as u64);
        let mut d = Vec::new();
        // fp8: both along the batch's rows, 128 rows by 1 column
        let quantized = match &self.fp8 {
            None => None,
            Some(f) => {
                let (dyq, xq) = (
                    f.scratch(gpu, Side::A, 4 * rows * d_out)?,
                    f.scratch(gpu, Side::B, 4 * rows * d_in)?,
                );
                let (dy_o, x_o) = (
                    Operand::plain(s.rows, s.d_out),
                    Operand::plain(s.rows, s.d_in),
                );
                d.push(f.quantize(gpu, Tiles::Columns, dy_o, dy, (&dyq).into())?);
                d.push(f.quantize(gpu, Tiles::Columns, x_o, x, (&xq).into())?);
                Some((dyq, xq))
            }
        };
        let (dy, x) = match &quantized {
            Some((dyq, xq)) => (dyq.into(), xq.into()),
            None => (dy, x),
        };
        let key = GemmKey::new(Layout::Dw, BStorage::F32, s.d_out, s.d_in, s.rows);
        let p = Params::of(&key, SITE_NONE);
        let binds = [
            dy.needs(4 * rows * d_out),
            x.needs(4 * rows * d_in),
            dw.needs(4 * d_out * d_in),
        ];
        let module = self.module(key)?;
        d.push(module.launch(gpu, op, Epilogue::Accumulate, p, &binds)?);
        Ok(d)
    }

    /// fp8's weight mirror: `w` through E4M3 in 128×128 blocks (starting
    /// afresh at each stacked part) into `e4m3`, saturations and flushes
    /// counted. Only in fp8 numerics; its products read the result as
    /// `Weights::E4m3`.
    pub fn quantize_weights(
        &self,
        gpu: &Gpu,
        s: LinearShape,
        w: BufferRange,
        e4m3: BufferRange,
    ) -> Result<Dispatch> {
        s.check_parts("fp8_quantize")?;
        let Some(f) = &self.fp8 else {
            return Err(Error::Unsupported(
                "E4M3 weights are fp8's: this Linear was built in another numeric mode".into(),
            ));
        };
        let blocks = Operand {
            row_parts: s.parts,
            ..Operand::plain(s.d_out, s.d_in)
        };
        f.quantize(gpu, Tiles::Blocks, blocks, w, e4m3)
    }

    /// In fp8, the activation operand `x` through E4M3 in `tiles` into its
    /// scratch (the pre-pass pushed onto `d`), with the weights checked to
    /// be the E4M3 mirror; `None` in other modes.
    fn fp8_operands(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (x, tiles, shape): (BufferRange, Tiles, Operand),
        w: &Weights,
    ) -> Result<Option<wgpu::Buffer>> {
        let Some(f) = &self.fp8 else {
            return Ok(None);
        };
        if !matches!(w, Weights::E4m3(_)) {
            return Err(Error::Unsupported(
                "fp8 products read the weights' E4M3 mirror (Linear::quantize_weights), not the master or the f16 mirror".into(),
            ));
        }
        let xq = f.scratch(gpu, Side::A, 4 * shape.rows as u64 * shape.cols as u64)?;
        d.push(f.quantize(gpu, tiles, shape, x, (&xq).into())?);
        Ok(Some(xq))
    }
}

fn storage(w: &Weights) -> BStorage {
    match w.is_f16() {
        false => BStorage::F32,
        true => BStorage::F16,
    }
}
