//! Launchers for 03_linear.wgsl: the forward of a linear layer (with its
//! fused epilogues) and both backward products, each one strided GEMM.

use bytemuck::{Pod, Zeroable};

use super::Weights;
use super::boundary::{SITE_NONE, SITE_PROJECTION};
use crate::error::{Error, Result};
use crate::gpu::{BufferRange, Dispatch, Gpu, Grid, Kernel, KernelDesc, Slot, build_kernels};
use crate::shaders::{LINEAR, LINEAR_B16, LINEAR_B32, Module};

/// Output tile side: `TILE` in 03_linear.wgsl.
const TILE: u32 = 64;
/// fp8: a weight's scale covers this many columns (and rows) of it, an
/// activation's one column (row) of this many values along K: `FP8_BLOCK`.
const FP8_WEIGHT_TILE: u32 = 128;
const FP8_ACTIVATION_TILE: u32 = 1;

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

#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct Params {
    m: u32,
    n: u32,
    k: u32,
    a_row: u32,
    a_col: u32,
    b_row: u32,
    b_col: u32,
    c_row: u32,
    /// The output's forward boundary (`boundary::SITE_*`), or `SITE_NONE`.
    site: u32,
    /// fp8: columns of B sharing a scale (1; `FP8_WEIGHT_TILE` for weights);
    /// A's always 1 row.
    b_tile: u32,
    /// fp8: where stacked weights' parts begin along N and along K
    /// (`LinearShape::parts` on the side that indexes d_out).
    n_parts: [u32; 2],
    k_parts: [u32; 2],
    _pad: [u32; 2],
}

const STORE: KernelDesc = KernelDesc {
    entry: "matmul",
    slots: &[
        Slot::Uniform(0),   // params
        Slot::Read(1),      // a: A, strided
        Slot::Read(2),      // b: B, strided, f32 or f16 (prelude)
        Slot::ReadWrite(4), // c: [M, N]
        Slot::BoundaryCounts,
    ],
};
const ADD: KernelDesc = KernelDesc {
    entry: "matmul_add",
    slots: &[
        Slot::Uniform(0),   // params
        Slot::Read(1),      // a
        Slot::Read(2),      // b
        Slot::Read(3),      // residual: [M, N]
        Slot::ReadWrite(4), // c: [M, N]
        Slot::BoundaryCounts,
    ],
};
const ACCUMULATE: KernelDesc = KernelDesc {
    entry: "matmul_accumulate",
    slots: &[
        Slot::Uniform(0),   // params
        Slot::Read(1),      // a
        Slot::Read(2),      // b
        Slot::ReadWrite(4), // c: [M, N], accumulated
        Slot::BoundaryCounts,
    ],
};

/// The three epilogues, built for one way of reading B.
struct Variants {
    store: Kernel,
    add: Kernel,
    accumulate: Kernel,
}

impl Variants {
    async fn new(gpu: &Gpu, prelude: crate::shaders::ShaderFile) -> Result<Self> {
        let module = Module {
            prelude: Some(prelude),
            file: LINEAR,
        };
        let [store, add, accumulate] = build_kernels(gpu, module, [STORE, ADD, ACCUMULATE]).await?;
        Ok(Variants {
            store,
            add,
            accumulate,
        })
    }
}

pub struct Linear {
    b32: Variants,
    b16: Variants,
}

impl Linear {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        Ok(Linear {
            b32: Variants::new(gpu, LINEAR_B32).await?,
            b16: Variants::new(gpu, LINEAR_B16).await?,
        })
    }

    fn variants(&self, w: &Weights) -> &Variants {
        match w {
            Weights::F32(_) => &self.b32,
            Weights::F16(_) => &self.b16,
        }
    }

    /// `X·Wᵀ` into `out`.
    pub fn forward(
        &self,
        gpu: &Gpu,
        s: LinearShape,
        x: BufferRange,
        w: Weights,
        out: Output,
    ) -> Result<Dispatch> {
        let op = "linear_forward";
        s.check_parts(op)?;
        let (rows, d_in, d_out) = (s.rows as u64, s.d_in as u64, s.d_out as u64);
        gpu.check_binding(op, "x", &x, 4 * rows * d_in)?;
        gpu.check_binding(op, "w", &w.range(), w.bytes(d_out * d_in))?;
        let p = Params {
            m: s.rows,
            n: s.d_out,
            k: s.d_in,
            a_row: s.d_in,
            a_col: 1,
            b_row: 1,
            b_col: s.d_in,
            c_row: s.d_out,
            site: match out {
                Output::Accumulate(_) => SITE_NONE,
                Output::Store(_) | Output::AddTo { .. } => SITE_PROJECTION,
            },
            b_tile: FP8_WEIGHT_TILE,
            n_parts: s.parts,
            k_parts: [s.d_in; 2],
            _pad: [0; 2],
        };
        let v = self.variants(&w);
        let (x, w) = (x.binding(), w.range().binding());
        match out {
            Output::Store(y) => {
                gpu.check_binding(op, "y", &y, 4 * rows * d_out)?;
                launch(gpu, &v.store, p, &[x, w, y.binding()])
            }
            Output::AddTo { residual, y } => {
                gpu.check_binding(op, "residual", &residual, 4 * rows * d_out)?;
                gpu.check_binding(op, "y", &y, 4 * rows * d_out)?;
                launch(gpu, &v.add, p, &[x, w, residual.binding(), y.binding()])
            }
            Output::Accumulate(y) => {
                gpu.check_binding(op, "y", &y, 4 * rows * d_out)?;
                launch(gpu, &v.accumulate, p, &[x, w, y.binding()])
            }
        }
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
    ) -> Result<Dispatch> {
        let op = "linear_backward_input";
        s.check_parts(op)?;
        let (rows, d_in, d_out) = (s.rows as u64, s.d_in as u64, s.d_out as u64);
        gpu.check_binding(op, "dy", &dy, 4 * rows * d_out)?;
        gpu.check_binding(op, "w", &w.range(), w.bytes(d_out * d_in))?;
        let v = self.variants(&w);
        let (kernel, dx) = match dx {
            Output::Store(dx) => (&v.store, dx),
            Output::Accumulate(dx) => (&v.accumulate, dx),
            Output::AddTo { .. } => {
                return Err(Error::shape(op, "dx", "Store or Accumulate", "AddTo"));
            }
        };
        gpu.check_binding(op, "dx", &dx, 4 * rows * d_in)?;
        let p = Params {
            m: s.rows,
            n: s.d_in,
            k: s.d_out,
            a_row: s.d_out,
            a_col: 1,
            b_row: s.d_in,
            b_col: 1,
            c_row: s.d_in,
            site: SITE_NONE,
            b_tile: FP8_WEIGHT_TILE,
            n_parts: [s.d_in; 2],
            k_parts: s.parts,
            _pad: [0; 2],
        };
        launch(
            gpu,
            kernel,
            p,
            &[dy.binding(), w.range().binding(), dx.binding()],
        )
    }

    /// `dW += dYᵀ·X`
    pub fn backward_weight(
        &self,
        gpu: &Gpu,
        s: LinearShape,
        dy: BufferRange,
        x: BufferRange,
        dw: BufferRange,
    ) -> Result<Dispatch> {
        let op = "linear_backward_weight";
        let (rows, d_in, d_out) = (s.rows as u64, s.d_in as u64, s.d_out as u64);
        gpu.check_binding(op, "dy", &dy, 4 * rows * d_out)?;
        gpu.check_binding(op, "x", &x, 4 * rows * d_in)?;
        gpu.check_binding(op, "dw", &dw, 4 * d_out * d_in)?;
        let p = Params {
            m: s.d_out,
            n: s.d_in,
            k: s.rows,
            a_row: 1,
            a_col: s.d_out,
            b_row: s.d_in,
            b_col: 1,
            c_row: s.d_in,
            site: SITE_NONE,
            b_tile: FP8_ACTIVATION_TILE,
            n_parts: [s.d_in; 2],
            k_parts: [s.rows; 2],
            _pad: [0; 2],
        };
        launch(
            gpu,
            &self.b32.accumulate,
            p,
            &[dy.binding(), x.binding(), dw.binding()],
        )
    }
}

/// One dispatch of `kernel` over the tiles of C, params first.
fn launch(
    gpu: &Gpu,
    kernel: &Kernel,
    p: Params,
    buffers: &[wgpu::BindingResource],
) -> Result<Dispatch> {
    let grid = Grid {
        x: p.n.div_ceil(TILE).max(1),
        y: p.m.div_ceil(TILE).max(1),
    };
    let max = gpu.limits.max_compute_workgroups_per_dimension;
    if grid.x > max || grid.y > max {
        return Err(Error::Limit {
            op: kernel.entry,
            what: "tiles per dimension".into(),
            needed: grid.x.max(grid.y) as u64,
            limit: max as u64,
        });
    }
    let params = gpu.uniform(kernel.entry, &p);
    let bindings: Vec<wgpu::BindingResource> = std::iter::once(params.as_entire_binding())
        .chain(buffers.iter().cloned())
        .collect();
    kernel.dispatch(gpu, &bindings, grid)
}
