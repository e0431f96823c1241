//! Launchers for 03_linear.wgsl: the forward of a linear layer (with its
//! fused epilogues) and both backward products, each one GEMM in its own
//! compiled layout (`gemm`), in the tile variant chosen for its shape on
//! this adapter (`tune`). Under a precision recipe each operand goes
//! through its format first, once per product (`operands`); weights that
//! both products read alike are quantized once per optimizer step instead
//! (`quantize_weights`) and read as they are.

mod gemm;
mod operands;
pub mod tune;
pub mod units;

use std::collections::HashMap;

pub use crate::gpu::coop::MatrixUnits;
pub use gemm::{BStorage, GemmKey, Layout, TileVariant};

use super::Weights;
use super::boundary::{SITE_NONE, SITE_PROJECTION};
use crate::error::{Error, Result};
use crate::gpu::coop::Route;
use crate::gpu::{Bind, BufferRange, Dispatch, Gpu};
use crate::ops::products::Products;
use gemm::{Epilogue, GemmModule, Params};
use operands::{Operands, Product, Shape, Side};
use units::Units;

/// A linear layer `Y[rows, d_out] = X[rows, d_in] · W[d_out, d_in]ᵀ`.
#[derive(Clone, Copy, Debug)]
pub struct LinearShape {
    pub rows: u32,
    pub d_in: u32,
    pub d_out: u32,
    /// Where the second and third of weights stacked along d_out begin
    /// (`[W_q; W_k; W_v]`, `[W_gate; W_up]`), d_out where there are none:
    /// the operands' blocks start afresh at each.
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
#[derive(Clone, Copy)]
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

/// One operand of a batch of products: a buffer, product 0's first
/// element in it, and the elements from one product's operand to the next.
#[derive(Clone, Copy)]
pub struct Strided<'a> {
    pub range: BufferRange<'a>,
    pub at: u32,
    pub stride: u32,
}

impl<'a> Strided<'a> {
    /// Bound whole, checked to hold `batch` operands of `len` elements.
    fn bind(self, batch: u32, len: u64) -> Bind<'a> {
        let last = self.at as u64 + (batch.max(1) as u64 - 1) * self.stride as u64;
        self.range.needs(4 * (last + len))
    }
}

/// The GEMM modules built on one device, and which serves each shape.
pub struct Linear {
    /// Built variants, each in every layout and B storage it serves.
    modules: Vec<GemmModule>,
    /// The variant for a shape the tuner timed or a kernel config pinned;
    /// other shapes take `fallback`.
    picks: HashMap<GemmKey, TileVariant>,
    fallback: TileVariant,
    /// The recipe's operand pre-passes; `None` where every operand is f32.
    operands: Option<Operands>,
    /// Matrix units for the recipe's products, where asked and offered and
    /// some product's operands are f16 values times a scale, and whether
    /// they serve each shape the tuner timed them for.
    units: Option<Units>,
    unit_picks: HashMap<GemmKey, bool>,
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
    /// f32 operands, the adapter's picks (`tune::picks`), others by the
    /// adapter's rule.
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        Self::with_products(gpu, Products::default(), 0).await
    }

    /// Operands as `products` say, `seed` seeding their random draws.
    pub async fn with_products(gpu: &Gpu, products: Products, seed: u32) -> Result<Self> {
        Self::with_units(gpu, products, seed, None).await
    }

    /// As `with_products`, with products on `units` where their operands
    /// are f16 values times a scale (`units::serve`) and their shape fits.
    pub async fn with_units(
        gpu: &Gpu,
        products: Products,
        seed: u32,
        units: Option<MatrixUnits>,
    ) -> Result<Self> {
        let mut linear = Self::with_picks(gpu, tune::rule(gpu), tune::picks(gpu)).await?;
        linear.operands = Operands::new(gpu, products, seed).await?;
        linear.units = match units.filter(|_| units::serve(&products)) {
            Some(u) => Some(Units::new(gpu, u, &products).await?),
            None => None,
        };
        linear.unit_picks = tune::unit_picks(gpu);
        Ok(linear)
    }

    /// The matrix units the products run on, if any.
    pub fn matrix_units(&self) -> Option<MatrixUnits> {
        self.units.as_ref().map(|u| u.units)
    }

    /// The units `product` of shape `key` runs on, or why it runs on the
    /// scalar GEMM: the units take it where its operands are f16 values
    /// times a scale (`operands`, the pre-passes' two), its shape fits their
    /// tiles and the tuner timed them faster than the tile variants (or did
    /// not time it: software adapters, no timestamps, emulated units).
    fn route<T>(
        &self,
        key: GemmKey,
        product: Product,
        operands: Option<T>,
    ) -> std::result::Result<(&Units, T), Route> {
        let units = self.units.as_ref();
        let suits = match units {
            Some(u) => u.takes(product),
            // the same test without units, so that a run counts alike either way
            None => self
                .operands
                .as_ref()
                .is_none_or(|o| units::suits(&o.products, product)),
        };
        let operands = operands.filter(|_| suits).ok_or(Route::Operand)?;
        let u = units.ok_or(Route::NoUnits)?;
        if !u.fits((key.m, key.n, key.k)) {
            Err(Route::Shape)
        } else if !self.unit_picks.get(&key).copied().unwrap_or(true) {
            Err(Route::Slower)
        } else {
            Ok((u, operands))
        }
    }

    /// Every product in `variant`, f32 operands (tests pin their variant this way).
    pub async fn with_variant(gpu: &Gpu, variant: TileVariant) -> Result<Self> {
        Self::with_picks(gpu, variant, HashMap::new()).await
    }

    /// `fallback` for every shape but those `picks` names, f32 operands.
    async fn with_picks(
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
        Ok(Linear {
            modules,
            picks,
            fallback,
            operands: None,
            units: None,
            unit_picks: HashMap::new(),
        })
    }

    /// The step the next submission's stochastic rounding draws for.
    pub fn write_step(&self, gpu: &Gpu, step: u32, measure_noise: bool) {
        if let Some(o) = &self.operands {
            o.write_step(gpu, step, measure_noise);
        }
    }

    /// Zeroes the operands' counters, if any are quantized, and the units'.
    pub fn clear_counts(&self, encoder: &mut wgpu::CommandEncoder) {
        if let Some(o) = &self.operands {
            o.clear_counts(encoder);
        }
        if let Some(u) = &self.units {
            u.clear_counts(encoder);
        }
    }

    /// The operands' counters into `dst` at `offset` (`Operands::copy_counts`).
    pub fn copy_counts(&self, encoder: &mut wgpu::CommandEncoder, dst: &wgpu::Buffer, offset: u64) {
        if let Some(o) = &self.operands {
            o.copy_counts(encoder, dst, offset);
        }
    }

    /// The gradient operands' noise sums into `dst` at `offset`
    /// (`Operands::copy_noise`).
    pub fn copy_noise(&self, encoder: &mut wgpu::CommandEncoder, dst: &wgpu::Buffer, offset: u64) {
        if let Some(o) = &self.operands {
            o.copy_noise(encoder, dst, offset);
        }
    }

    /// The units' `UnitCounts` words into `dst` at `offset`, if units serve.
    pub fn copy_unit_counts(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        dst: &wgpu::Buffer,
        offset: u64,
    ) {
        if let Some(u) = &self.units {
            u.copy_counts(encoder, dst, offset);
        }
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

    /// `batch` plain f32 products in `layout` of shape (m, n, k): no
    /// recipe, no boundary. Product z reads A and B at their operand's
    /// `at + z·stride` and stores C there (or adds to it, `accumulate`).
    /// Muon's Newton–Schulz runs on these.
    pub fn batched_f32(
        &self,
        gpu: &Gpu,
        (layout, m, n, k): (Layout, u32, u32, u32),
        accumulate: bool,
        batch: u32,
        [a, b, c]: [Strided; 3],
    ) -> Result<Dispatch> {
        let op = "linear_batched";
        let key = GemmKey::new(layout, BStorage::F32, m, n, k);
        let p = Params {
            a_at: a.at,
            a_stride: a.stride,
            b_at: b.at,
            b_stride: b.stride,
            c_at: c.at,
            c_stride: c.stride,
            ..Params::of(&key, SITE_NONE)
        };
        let (m, n, k) = (m as u64, n as u64, k as u64);
        let binds = [
            a.bind(batch, m * k),
            b.bind(batch, k * n),
            c.bind(batch, m * n),
        ];
        let epilogue = match accumulate {
            true => Epilogue::Accumulate,
            false => Epilogue::Store,
        };
        self.module(key)?
            .launch_batch(gpu, op, epilogue, (p, batch), &binds)
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
        // the pre-passes check their inputs; the product binds their scratch
        let [xq, wq] = self.prepare(
            gpu,
            &mut d,
            Product::Forward,
            (x, Shape::plain(s.rows, s.d_in, false)),
            (
                &w,
                Shape {
                    row_parts: s.parts,
                    ..Shape::plain(s.d_out, s.d_in, false)
                },
            ),
        )?;
        // what the units would read: both operands through the recipe's format
        let unit_operands = xq.as_ref().map(BufferRange::from).zip(quantized(&w, &wq));
        let x = xq
            .as_ref()
            .map_or(x, BufferRange::from)
            .needs(4 * rows * d_in);
        let w = weights_or(&w, &wq);
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
        let scalar = self.module(key)?.launch(gpu, op, epilogue, p, &binds)?;
        let mnk = (s.rows, s.d_out, s.d_in);
        let unit_key = GemmKey::new(Layout::Forward, BStorage::F32, s.rows, s.d_out, s.d_in);
        match self.route(unit_key, Product::Forward, unit_operands) {
            Ok((u, xw)) => {
                let scalar = Some(scalar.routed(Route::Gated));
                u.forward(gpu, &mut d, xw, (out, scalar), mnk)?
            }
            Err(why) => d.push(scalar.routed(why)),
        }
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
        let dy_shape = Shape {
            col_parts: s.parts,
            ..Shape::plain(s.rows, s.d_out, false)
        };
        let [dyq, wq] = self.prepare(
            gpu,
            &mut d,
            Product::Dgrad,
            (dy, dy_shape),
            (
                &w,
                Shape {
                    row_parts: s.parts,
                    ..Shape::plain(s.d_out, s.d_in, true)
                },
            ),
        )?;
        let unit_operands = dyq.as_ref().map(BufferRange::from).zip(quantized(&w, &wq));
        let dy = dyq.as_ref().map_or(dy, BufferRange::from);
        let w = weights_or(&w, &wq);
        let key = GemmKey::new(Layout::Dx, storage(&w), s.rows, s.d_in, s.d_out);
        let p = Params::of(&key, SITE_NONE);
        let binds = [
            dy.needs(4 * rows * d_out),
            w.range().needs(w.bytes(d_out * d_in)),
            dx.needs(4 * rows * d_in),
        ];
        let scalar = self.module(key)?.launch(gpu, op, epilogue, p, &binds)?;
        let mnk = (s.rows, s.d_in, s.d_out);
        let unit_key = GemmKey::new(Layout::Dx, BStorage::F32, s.rows, s.d_in, s.d_out);
        match self.route(unit_key, Product::Dgrad, unit_operands) {
            Ok((u, dyw)) => {
                let accumulate = epilogue == Epilogue::Accumulate;
                let scalar = Some(scalar.routed(Route::Gated));
                u.backward_input(gpu, &mut d, dyw, (dx, accumulate, scalar), mnk)?
            }
            Err(why) => d.push(scalar.routed(why)),
        }
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
        // both along the batch's rows (K)
        let (mut dyq, mut xq) = (None, None);
        if let Some(o) = &self.operands {
            let [a, b] = o.products.wgrad;
            let dy_shape = Shape::plain(s.rows, s.d_out, true);
            dyq = o.prepare(gpu, &mut d, (Product::Wgrad, Side::A, a), dy, dy_shape)?;
            let x_shape = Shape::plain(s.rows, s.d_in, true);
            xq = o.prepare(gpu, &mut d, (Product::Wgrad, Side::B, b), x, x_shape)?;
        }
        let key = GemmKey::new(Layout::Dw, BStorage::F32, s.d_out, s.d_in, s.rows);
        let unit_operands = dyq
            .as_ref()
            .map(BufferRange::from)
            .zip(xq.as_ref().map(BufferRange::from));
        let dy = dyq.as_ref().map_or(dy, BufferRange::from);
        let x = xq.as_ref().map_or(x, BufferRange::from);
        let p = Params::of(&key, SITE_NONE);
        let binds = [
            dy.needs(4 * rows * d_out),
            x.needs(4 * rows * d_in),
            dw.needs(4 * d_out * d_in),
        ];
        let scalar = self
            .module(key)?
            .launch(gpu, op, Epilogue::Accumulate, p, &binds)?;
        let mnk = (s.d_out, s.d_in, s.rows);
        match self.route(key, Product::Wgrad, unit_operands) {
            Ok((u, dyx)) => {
                let scalar = Some(scalar.routed(Route::Gated));
                u.backward_weight(gpu, &mut d, dyx, (dw, scalar), mnk)?
            }
            Err(why) => d.push(scalar.routed(why)),
        }
        Ok(d)
    }

    /// Whether `clip_masks` reads the master weights (the forward clips them).
    pub fn clips_weights(&self) -> bool {
        self.operands
            .as_ref()
            .is_some_and(|o| o.products.forward[1].clips())
    }

    /// QuEST's gradient masks, where the recipe's forward operands clip
    /// (`Operand::clips`): `dx` and `dw` as `backward_input` and
    /// `backward_weight` left them, each zeroed (in its operand's Hadamard
    /// basis) where the forward clipped `x` or `w` (the f32 master, which
    /// any copy the forward read was quantized from). A mask is a
    /// projection, so `dw` may hold earlier micro-batches' masked gradients.
    pub fn clip_masks(
        &self,
        gpu: &Gpu,
        s: LinearShape,
        (x, dx): (BufferRange, BufferRange),
        (w, dw): (BufferRange, BufferRange),
    ) -> Result<Vec<Dispatch>> {
        let mut d = Vec::new();
        let Some(o) = &self.operands else {
            return Ok(d);
        };
        let [x_op, w_op] = o.products.forward;
        if x_op.clips() {
            let shape = Shape::plain(s.rows, s.d_in, false);
            o.clip_mask(gpu, &mut d, x_op, (x, dx), shape)?;
        }
        if w_op.clips() {
            let shape = Shape {
                row_parts: s.parts,
                ..Shape::plain(s.d_out, s.d_in, false)
            };
            o.clip_mask(gpu, &mut d, w_op, (w, dw), shape)?;
        }
        Ok(d)
    }

    /// The weights `w` through the recipe's weight format (blocks starting
    /// afresh at each stacked part) into `y`, counted in the forward's W
    /// slot: once per optimizer step, where both products read them alike
    /// (`Products::shares_quantized_weights`). Its products read the
    /// result as `Weights::Quantized`.
    pub fn quantize_weights(
        &self,
        gpu: &Gpu,
        s: LinearShape,
        w: BufferRange,
        y: BufferRange,
    ) -> Result<Vec<Dispatch>> {
        s.check_parts("quantize_weights")?;
        let Some(o) = self
            .operands
            .as_ref()
            .filter(|o| o.products.shares_quantized_weights())
        else {
            return Err(Error::Unsupported(
                "linear: this recipe's products do not read one quantized copy of the weights"
                    .into(),
            ));
        };
        let shape = Shape {
            row_parts: s.parts,
            ..Shape::plain(s.d_out, s.d_in, false)
        };
        let mut d = Vec::new();
        let operand = (Product::Forward, Side::B, o.products.forward[1]);
        o.quantize_into(gpu, &mut d, operand, w, y, shape)?;
        Ok(d)
    }

    /// The forward's or dX's operands on their way in: the activation or
    /// gradient `a` and the weights `w` (of shape `w_shape`), each through
    /// the recipe's pre-pass for `product` (onto `d`) into its scratch, or
    /// `None` where the product reads it as it is (f32 operands, and
    /// weights quantized once per step).
    fn prepare(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        product: Product,
        (a, a_shape): (BufferRange, Shape),
        (w, w_shape): (&Weights, Shape),
    ) -> Result<[Option<wgpu::Buffer>; 2]> {
        let Some(o) = &self.operands else {
            return Ok([None, None]);
        };
        let [a_op, w_op] = match product {
            Product::Forward => o.products.forward,
            Product::Dgrad | Product::Wgrad => o.products.dgrad,
        };
        let copy = matches!(w, Weights::Quantized(_));
        if copy && !o.products.shares_quantized_weights() {
            return Err(Error::Unsupported(format!(
                "linear: quantized weights are read by recipes whose products share them; this one's {} weights are quantized per product",
                w_op.format.name()
            )));
        }
        if w.is_f16() && !w_op.is_identity() {
            return Err(Error::Unsupported(
                "linear: the f16 mirror is read as it is; a recipe that quantizes weights reads the f32 master".into(),
            ));
        }
        let aq = o.prepare(gpu, d, (product, Side::A, a_op), a, a_shape)?;
        let wq = match copy {
            true => {
                o.skip_number();
                None
            }
            false => o.prepare(gpu, d, (product, Side::B, w_op), w.range(), w_shape)?,
        };
        Ok([aq, wq])
    }
}

/// The weights a product reads: the pre-pass's scratch where there is one.
fn weights_or<'a>(w: &Weights<'a>, scratch: &'a Option<wgpu::Buffer>) -> Weights<'a> {
    match scratch {
        Some(b) => Weights::F32(b.into()),
        None => *w,
    }
}

/// The weights through the recipe's format, where they are: the pre-pass's
/// scratch or the copy quantized once per step (what matrix units read).
fn quantized<'a>(w: &Weights<'a>, scratch: &'a Option<wgpu::Buffer>) -> Option<BufferRange<'a>> {
    match (scratch, w) {
        (Some(b), _) => Some(b.into()),
        (None, Weights::Quantized(r)) => Some(*r),
        _ => None,
    }
}

fn storage(w: &Weights) -> BStorage {
    match w.is_f16() {
        false => BStorage::F32,
        true => BStorage::F16,
    }
}
