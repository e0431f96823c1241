//! f16 products on matrix units (`kernels::units`). Where a recipe's six operands
//! are f16 (amp-f16: autocast's numerics), a product whose shape fits the
//! cooperative-matrix variant's tiles runs there: its operands go through
//! the recipe's pre-pass as on the scalar path (the same f16 values, the
//! same counts), are narrowed to f16 bits (`Cast::narrow_f16`, ±Inf kept)
//! and multiplied with f32 accumulation in the product's layout — the
//! forward Y = X·Wᵀ (nt), dX = dY·W (nn) and dW += dYᵀ·X (tn). Other shapes
//! take the scalar GEMMs. Results equal the scalar path's up to the order
//! of the f32 sums.
//!
//! Natively the device's cooperative matrices serve, in Chrome Dawn's
//! subgroup matrices; an emulated variant serves tests on any adapter with
//! shader-f16, so the path is checked where no matrix unit is.

use std::sync::Mutex;

use super::Output;
use super::gemm::{BStorage, GemmKey};
use crate::error::Result;
use crate::gpu::coop::MatrixUnits;
use crate::gpu::{BufferRange, Dispatch, Gpu};
use crate::kernels::units::{GemmLayout, GemmVariant, UnitGemm};
use crate::kernels::{Cast, Infrastructure};
use crate::ops::formats::Format;
use crate::ops::products::{Operand, OperandFormat, Products};

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

/// Whether `products` are all f16 with nearest rounding and no transform:
/// what matrix units multiply exactly.
pub fn serve(products: &Products) -> bool {
    let f16 = Format::parse("f16").expect("f16 is a format");
    products
        .all()
        .iter()
        .all(|o| *o == Operand::of(OperandFormat::Format(f16)))
}

/// The products' operands as f16 words: the product's first and second.
const SIDES: usize = 2;

/// The unit GEMMs a `Linear` runs its f16 products on, with the kernels
/// and scratch that feed them.
pub struct Units {
    pub units: MatrixUnits,
    forward: UnitGemm,
    forward_add: UnitGemm,
    dx: UnitGemm,
    dx_add: UnitGemm,
    dw_add: UnitGemm,
    cast: Cast,
    infra: Infrastructure,
    halves: [Mutex<Option<wgpu::Buffer>>; SIDES],
}

impl Units {
    pub async fn new(gpu: &Gpu, units: MatrixUnits) -> Result<Units> {
        let gemm = |layout, accumulate| {
            UnitGemm::new(gpu, GemmVariant::for_units(units, layout, accumulate))
        };
        Ok(Units {
            units,
            forward: gemm(GemmLayout::Nt, false).await?,
            forward_add: gemm(GemmLayout::Nt, true).await?,
            dx: gemm(GemmLayout::Nn, false).await?,
            dx_add: gemm(GemmLayout::Nn, true).await?,
            dw_add: gemm(GemmLayout::Tn, true).await?,
            cast: Cast::new(gpu).await?,
            infra: Infrastructure::new(gpu).await?,
            halves: Default::default(),
        })
    }

    /// Whether an `m × n × k` product fits the tiles (every layout's are alike).
    pub fn fits(&self, m: u32, n: u32, k: u32) -> bool {
        self.forward.misfit(m, n, k).is_none()
    }

    /// `Y (=|+=|= R +) X·Wᵀ` from the pre-passes' f16 values `x` [m, k] and `w` [n, k].
    pub fn forward(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (x, w): (BufferRange, BufferRange),
        out: Output,
        (m, n, k): (u32, u32, u32),
    ) -> Result<()> {
        let [xh, wh] = self.narrow(gpu, d, [(x, m * k), (w, n * k)])?;
        let (gemm, y) = match out {
            Output::Store(y) => (&self.forward, y),
            Output::Accumulate(y) => (&self.forward_add, y),
            Output::AddTo { residual, y } => {
                d.push(self.infra.copy(gpu, residual, y, m * n)?);
                (&self.forward_add, y)
            }
        };
        d.push(gemm.dispatch(gpu, (&xh).into(), (&wh).into(), y, (m, n, k))?);
        Ok(())
    }

    /// `dX = dY·W`, or `dX += dY·W` (`accumulate`), from `dy` [m, k] and `w` [k, n].
    pub fn backward_input(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (dy, w): (BufferRange, BufferRange),
        (dx, accumulate): (BufferRange, bool),
        (m, n, k): (u32, u32, u32),
    ) -> Result<()> {
        let [dyh, wh] = self.narrow(gpu, d, [(dy, m * k), (w, k * n)])?;
        let gemm = match accumulate {
            false => &self.dx,
            true => &self.dx_add,
        };
        d.push(gemm.dispatch(gpu, (&dyh).into(), (&wh).into(), dx, (m, n, k))?);
        Ok(())
    }

    /// `dW += dYᵀ·X` from `dy` [k, m] and `x` [k, n].
    pub fn backward_weight(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        (dy, x): (BufferRange, BufferRange),
        dw: BufferRange,
        (m, n, k): (u32, u32, u32),
    ) -> Result<()> {
        let [dyh, xh] = self.narrow(gpu, d, [(dy, k * m), (x, k * n)])?;
        d.push(
            self.dw_add
                .dispatch(gpu, (&dyh).into(), (&xh).into(), dw, (m, n, k))?,
        );
        Ok(())
    }

    /// Each operand (`len` values) as f16 words in its scratch, in order.
    fn narrow(
        &self,
        gpu: &Gpu,
        d: &mut Vec<Dispatch>,
        operands: [(BufferRange, u32); SIDES],
    ) -> Result<[wgpu::Buffer; SIDES]> {
        let mut out = Vec::with_capacity(SIDES);
        for (side, (x, len)) in operands.into_iter().enumerate() {
            let h = self.scratch(gpu, side, 2 * len as u64)?;
            d.push(self.cast.narrow_f16(gpu, x, (&h).into(), len)?);
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
