//! A recipe's products on matrix units (`kernels::units`). Every value a
//! quantized recipe feeds a product is an f16 value times a scale that can
//! leave the product (../docs/KERNELS.md, "16_units_operands.wgsl"): its
//! operands go through the recipe's pre-pass as on the scalar path (the
//! same values, the same counts), then each times a multiplier into f16
//! bits, every value that would not be exact counted; a gate then runs
//! the product on the units — f32 accumulation, the epilogue multiplying
//! the multipliers back out — where no value was inexact, and on the
//! scalar GEMM where one was, choosing on the device through both GEMMs'
//! indirect dispatch arguments. The forward Y = X·Wᵀ (nt), dX = dY·W (nn)
//! and dW += dYᵀ·X (tn) alike; shapes that do not fit the tiles, and
//! products with an f32 operand, take the scalar GEMMs. Results equal the
//! scalar path's up to the order of the f32 sums (and, for NVFP4, the f32
//! roundings of its tensor scale).
//!
//! Natively the device's cooperative matrices serve, in Chrome Dawn's
//! subgroup matrices; an emulated variant serves tests on any adapter with
//! shader-f16, so the path is checked where no matrix unit is.

use std::sync::Mutex;

use bytemuck::{Pod, Zeroable};

use super::Output;
use super::gemm::{BStorage, GemmKey};
use super::operands::Product;
use crate::error::Result;
use crate::gpu::coop::{MatrixUnits, Route};
use crate::gpu::{
    BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot, build_variant_kernels, f16_bytes,
};
use crate::kernels::Infrastructure;
use crate::kernels::units::{GemmLayout, GemmVariant, UnitGemm};
use crate::ops::formats::{Element, Format, Scaling};
use crate::ops::products::{Operand, OperandFormat, Products};
use crate::shaders::UNITS_OPERANDS;

/// Whether `units` run product `key`: B in f32 (the weights' master; an
/// f16 mirror is not a recipe's operand) and its shape a multiple of the
/// tiles (every layout's are alike).
pub fn serves_shape(units: MatrixUnits, key: GemmKey) -> bool {
    let v = GemmVariant::for_units(units, GemmLayout::Nt, false);
    key.b == BStorage::F32
        && key.k > 0
        && [(key.m, v.bm()), (key.n, v.bn()), (key.k, v.k_step())]
            .iter()
            .all(|(size, tile)| size.is_multiple_of(*tile))
}

/// How an operand's values become f16 values: what it is multiplied by
/// (`UNITS_*` in 16_units_operands.wgsl).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Multiplier {
    /// 1: f16 values (amp-f16).
    Plain = 0,
    /// The power of two that takes the operand's amax into [2^14, 2^15):
    /// formats whose scales are powers of two.
    Pow2 = 1,
    /// NVFP4's tensor scale, 6·448 / amax.
    Nvfp4 = 2,
    /// Four Over Six's, 6·256 / amax.
    FourOverSix = 3,
}

impl Multiplier {
    /// The multiplier of operand `o`, or `None` where its values are not
    /// an f16 value times a scale (f32 operands: the product stays scalar).
    /// Every element of `ops::formats` has at most f16's 11 significant bits.
    pub fn of(o: &Operand) -> Option<Multiplier> {
        let OperandFormat::Format(f) = o.format else {
            return None;
        };
        Some(match (f.element, f.scaling) {
            (Element::F16, Scaling::None) => Multiplier::Plain,
            (_, Scaling::Nvfp4) => Multiplier::Nvfp4,
            // (q·scale)·g, g not one of the multipliers: the product stays scalar
            (_, Scaling::MsEden) => return None,
            // QuEST's 2^k reaches past f16's range; Tseng's S is no power of two
            (_, Scaling::Quest | Scaling::Tseng) => return None,
            (_, Scaling::FourOverSix | Scaling::FourOverSixMae) => Multiplier::FourOverSix,
            _ => Multiplier::Pow2,
        })
    }

    fn wgsl_constants() -> String {
        [
            ("PLAIN", Self::Plain),
            ("POW2", Self::Pow2),
            ("NVFP4", Self::Nvfp4),
            ("FOUR_OVER_SIX", Self::FourOverSix),
        ]
        .iter()
        .map(|(name, m)| format!("const UNITS_{name}: u32 = {}u;\n", *m as u32))
        .collect()
    }
}

/// Whether `product`'s operands are both f16 values times a multiplier
/// (what `Units::takes`).
pub(super) fn suits(products: &Products, product: Product) -> bool {
    multipliers(products)[product as usize].is_some()
}

/// Each product's operands' multipliers, where both have one.
fn multipliers(products: &Products) -> [Option<[Multiplier; 2]>; 3] {
    let both = |[a, b]: [Operand; 2]| Some([Multiplier::of(&a)?, Multiplier::of(&b)?]);
    [
        both(products.forward),
        both(products.dgrad),
        both(products.wgrad),
    ]
}

/// Every operand f16 (amp-f16's products): what the tuner times units with.
pub fn f16_products() -> Products {
    let f16 = Format::parse("f16").expect("f16 is a format");
    let o = Operand::of(OperandFormat::Format(f16));
    Products {
        forward: [o; 2],
        dgrad: [o; 2],
        wgrad: [o; 2],
    }
}

/// Whether any of `products` can run on matrix units.
pub fn serve(products: &Products) -> bool {
    multipliers(products).iter().any(Option::is_some)
}

/// Where a step's products ran: through the units' gate — on them, or on
/// the scalar GEMM because a value was not exact (and the values that were
/// not) — or on the scalar GEMMs without reaching it, by reason (`Route`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnitCounts {
    pub on_units: u32,
    pub not_exact: u32,
    pub values_not_exact: u32,
    /// An operand not f16 values times a scale (f32, a layer kept wide).
    pub operand: u32,
    /// No units on the adapter, or `--matrix-units off`.
    pub no_units: u32,
    /// Not a multiple of the units' tiles.
    pub shape: u32,
    /// The tuner timed the scalar GEMM faster.
    pub slower: u32,
}

impl UnitCounts {
    /// The gate's counts alone (`Units::copy_counts`' words).
    pub fn from_words(w: &[u32; 4]) -> UnitCounts {
        UnitCounts::default().with_gate(w)
    }

    /// These counts with the gate's (`Units::copy_counts`' words).
    pub fn with_gate(self, w: &[u32; 4]) -> UnitCounts {
        UnitCounts {
            on_units: w[0],
            not_exact: w[1],
            values_not_exact: w[2],
            ..self
        }
    }

    /// The products that did not reach the gate among `routes`, counted.
    pub fn of_routes(routes: impl IntoIterator<Item = Route>) -> UnitCounts {
        let mut c = UnitCounts::default();
        for r in routes {
            match r {
                Route::Gated => {}
                Route::Operand => c.operand += 1,
                Route::NoUnits => c.no_units += 1,
                Route::Shape => c.shape += 1,
                Route::Slower => c.slower += 1,
            }
        }
        c
    }
}

/// The products' operands as f16 words: the product's first and second.
const SIDES: usize = 2;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct UnitsParams {
    n: u32,
    side: u32,
    mode: u32,
    _pad: u32,
}

/// The unit GEMM's and the scalar GEMM's workgroups, and the operands'
/// multipliers (`GateParams`).
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct GateParams {
    units: [u32; 4],
    scalar: [u32; 4],
    modes: [u32; 4],
}

const AMAX: KernelDesc = KernelDesc {
    entry: "units_amax",
    slots: &[
        Slot::Uniform(0),
        Slot::Read(1, "operand"),
        Slot::ReadWrite(3, "gate"),
    ],
};
const NARROW: KernelDesc = KernelDesc {
    entry: "units_narrow",
    slots: &[
        Slot::Uniform(0),
        Slot::Read(1, "operand"),
        Slot::ReadWrite(2, "halves"),
        Slot::ReadWrite(3, "gate"),
    ],
};
const GATE: KernelDesc = KernelDesc {
    entry: "units_gate",
    slots: &[
        Slot::ReadWrite(3, "gate"),
        Slot::Uniform(4),
        Slot::ReadWrite(5, "args"),
        Slot::ReadWrite(6, "scale"),
        Slot::ReadWrite(7, "counts"),
    ],
};

/// Bytes of the gate's arguments: the unit GEMM's x, y, z (and a pad),
/// then the scalar GEMM's.
const ARGS_BYTES: u64 = 32;
const SCALAR_ARGS: u64 = 16;

/// The unit GEMMs a `Linear` runs its products on, with the kernels and
/// scratch that feed them.
pub struct Units {
    pub units: MatrixUnits,
    /// Per product (`Product` order), its operands' multipliers where it
    /// may run on the units.
    multipliers: [Option<[Multiplier; 2]>; 3],
    forward: UnitGemm,
    forward_add: UnitGemm,
    dx: UnitGemm,
    dx_add: UnitGemm,
    dw_add: UnitGemm,
    amax: Kernel,
    narrow: Kernel,
    gate: Kernel,
    /// Between one product's kernels: the operands' amax and inexact values.
    gate_words: wgpu::Buffer,
    args: wgpu::Buffer,
    scale: wgpu::Buffer,
    /// The step's `UnitCounts` (four words).
    counts: wgpu::Buffer,
    infra: Infrastructure,
    halves: [Mutex<Option<wgpu::Buffer>>; SIDES],
}

impl Units {
    pub async fn new(gpu: &Gpu, units: MatrixUnits, products: &Products) -> Result<Units> {
        let gemm = |layout, accumulate| {
            UnitGemm::new(gpu, GemmVariant::for_units(units, layout, accumulate))
        };
        let [amax, narrow, gate] = build_variant_kernels(
            gpu,
            UNITS_OPERANDS,
            &Multiplier::wgsl_constants(),
            [AMAX, NARROW, GATE],
        )
        .await?;
        let args = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("units.args"),
            size: ARGS_BYTES,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::INDIRECT,
            mapped_at_creation: false,
        });
        Ok(Units {
            units,
            multipliers: multipliers(products),
            forward: gemm(GemmLayout::Nt, false).await?,
            forward_add: gemm(GemmLayout::Nt, true).await?,
            dx: gemm(GemmLayout::Nn, false).await?,
            dx_add: gemm(GemmLayout::Nn, true).await?,
            dw_add: gemm(GemmLayout::Tn, true).await?,
            amax,
            narrow,
            gate,
            gate_words: gpu.storage_buffer("units.gate", 16)?,
            args,
            scale: gpu.storage_buffer("units.scale", 8)?,
            counts: gpu.storage_buffer("units.counts", 16)?,
            infra: Infrastructure::new(gpu).await?,
            halves: Default::default(),
        })
    }

    /// Whether `product`'s operands are f16 values times a scale.
    pub fn takes(&self, product: Product) -> bool {
        self.multipliers[product as usize].is_some()
    }

    /// Whether an `m × n × k` shape fits the tiles (every layout's are alike).
    pub fn fits(&self, (m, n, k): (u32, u32, u32)) -> bool {
        self.forward.misfit(m, n, k).is_none()
    }

    /// Zeroes the step's counts, in `encoder`'s order.
    pub fn clear_counts(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.clear_buffer(&self.counts, 0, None);
    }

    /// Copies the step's `UnitCounts` words (16 bytes) to `dst` at `offset`.
    pub fn copy_counts(&self, encoder: &mut wgpu::CommandEncoder, dst: &wgpu::Buffer, offset: u64) {
        encoder.copy_buffer_to_buffer(&self.counts, 0, dst, offset, 16);
    }

    /// `Y (=|+=|= R +) X·Wᵀ` from the pre-passes' values `x` [m, k] and `w`
    /// [n, k], or `scalar` (the same product on the scalar GEMM) where one
    /// is not exact.
    pub fn forward(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (x, w): (BufferRange, BufferRange),
        (out, scalar): (Output, Option<Dispatch>),
        (m, n, k): (u32, u32, u32),
    ) -> Result<()> {
        let [xh, wh] = self.narrow(gpu, d, Product::Forward, [(x, m * k), (w, n * k)])?;
        let (gemm, y) = match out {
            Output::Store(y) => (&self.forward, y),
            Output::Accumulate(y) => (&self.forward_add, y),
            Output::AddTo { residual, y } => {
                // the scalar GEMM, if it runs, writes R + X·Wᵀ over it
                d.push(self.infra.copy(gpu, residual, y, m * n)?);
                (&self.forward_add, y)
            }
        };
        let unit = self.scaled(gpu, gemm, [&xh, &wh], y, (m, n, k))?;
        self.choose(gpu, d, Product::Forward, unit, scalar)
    }

    /// `dX = dY·W`, or `dX += dY·W` (`accumulate`), from `dy` [m, k] and
    /// `w` [k, n], or `scalar` where one is not exact.
    pub fn backward_input(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (dy, w): (BufferRange, BufferRange),
        (dx, accumulate, scalar): (BufferRange, bool, Option<Dispatch>),
        (m, n, k): (u32, u32, u32),
    ) -> Result<()> {
        let [dyh, wh] = self.narrow(gpu, d, Product::Dgrad, [(dy, m * k), (w, k * n)])?;
        let gemm = match accumulate {
            false => &self.dx,
            true => &self.dx_add,
        };
        let unit = self.scaled(gpu, gemm, [&dyh, &wh], dx, (m, n, k))?;
        self.choose(gpu, d, Product::Dgrad, unit, scalar)
    }

    /// `dW += dYᵀ·X` from `dy` [k, m] and `x` [k, n], or `scalar` where one
    /// is not exact.
    pub fn backward_weight(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (dy, x): (BufferRange, BufferRange),
        (dw, scalar): (BufferRange, Option<Dispatch>),
        (m, n, k): (u32, u32, u32),
    ) -> Result<()> {
        let [dyh, xh] = self.narrow(gpu, d, Product::Wgrad, [(dy, k * m), (x, k * n)])?;
        let unit = self.scaled(gpu, &self.dw_add, [&dyh, &xh], dw, (m, n, k))?;
        self.choose(gpu, d, Product::Wgrad, unit, scalar)
    }

    fn scaled(
        &self,
        gpu: &Gpu,
        gemm: &UnitGemm,
        [a, b]: [&wgpu::Buffer; 2],
        out: BufferRange,
        mnk: (u32, u32, u32),
    ) -> Result<Dispatch> {
        gemm.dispatch_scaled(gpu, (a.into(), b.into()), out, (&self.scale).into(), mnk)
    }

    /// The gate, then `unit` and `scalar`, one of which it gives no
    /// workgroups (`scalar` none: the tuner's timing, of exact operands).
    fn choose(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        product: Product,
        unit: Dispatch,
        scalar: Option<Dispatch>,
    ) -> Result<()> {
        let op = "units_gate";
        let modes = self.modes(product);
        let grid = |g: crate::gpu::Grid| [g.x, g.y, g.z, 0];
        let params = gpu.uniform(
            op,
            &GateParams {
                units: grid(unit.grid),
                scalar: scalar.as_ref().map_or([0; 4], |s| grid(s.grid)),
                modes: [modes[0] as u32, modes[1] as u32, 0, 0],
            },
        );
        let binds = [
            (&self.gate_words).into(),
            (&params).into(),
            (&self.args).into(),
            (&self.scale).into(),
            (&self.counts).into(),
        ];
        let one = crate::gpu::Grid { x: 1, y: 1, z: 1 };
        d.push(self.gate.dispatch(gpu, op, &binds, one)?);
        d.push(unit.indirect(&self.args, 0));
        d.extend(scalar.map(|s| s.indirect(&self.args, SCALAR_ARGS)));
        Ok(())
    }

    fn modes(&self, product: Product) -> [Multiplier; 2] {
        self.multipliers[product as usize].expect("a product the units serve")
    }

    /// Each operand (`len` values) as f16 words in its scratch, in order,
    /// its amax and inexact values in the gate's words.
    fn narrow(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        product: Product,
        operands: [(BufferRange, u32); SIDES],
    ) -> Result<[wgpu::Buffer; SIDES]> {
        let modes = self.modes(product);
        let mut out = Vec::with_capacity(SIDES);
        for (side, (x, len)) in operands.into_iter().enumerate() {
            let h = self.scratch(gpu, side, f16_bytes(len as u64))?;
            let params = |op| {
                gpu.uniform(
                    op,
                    &UnitsParams {
                        n: len,
                        side: side as u32,
                        mode: modes[side] as u32,
                        _pad: 0,
                    },
                )
            };
            let x = x.needs(4 * len as u64);
            let op = "units_amax";
            let p = params(op);
            let binds = [(&p).into(), x, (&self.gate_words).into()];
            d.push(
                self.amax
                    .dispatch(gpu, op, &binds, gpu.grid_1d(op, len as u64)?)?,
            );
            let op = "units_narrow";
            let p = params(op);
            let binds = [(&p).into(), x, (&h).into(), (&self.gate_words).into()];
            let words = (len as u64).div_ceil(2);
            d.push(
                self.narrow
                    .dispatch(gpu, op, &binds, gpu.grid_1d(op, words)?)?,
            );
            out.push(h);
        }
        Ok(out.try_into().expect("one per side"))
    }

    /// The f16 scratch of `side`, at least `bytes` (as `Operands::scratch`:
    /// products run in record order, each reading what it just wrote).
    fn scratch(&self, gpu: &Gpu, side: usize, bytes: u64) -> Result<wgpu::Buffer> {
        let mut slot = self.halves[side].lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = slot.as_ref().filter(|b| b.size() >= bytes) {
            return Ok(b.clone());
        }
        let b = gpu.storage_buffer(["units_a", "units_b"][side], bytes.next_multiple_of(16))?;
        *slot = Some(b.clone());
        Ok(b)
    }
}
