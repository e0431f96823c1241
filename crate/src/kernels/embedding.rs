//! Launchers for 01_embedding.wgsl: lookup from an f32 or f16 table, and
//! the scatter-add backward.

use bytemuck::{Pod, Zeroable};

use super::Weights;
use crate::error::Result;
use crate::gpu::{build_kernels, BufferRange, Dispatch, Gpu, Kernel, KernelDesc, Slot};
use crate::shaders::EMBEDDING;

#[derive(Clone, Copy, Debug)]
pub struct EmbeddingShape {
    pub tokens: u32, // S
    pub d: u32,      // D
    pub vocab: u32,  // V
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    tokens: u32,
    d: u32,
    vocab: u32,
    _pad: u32,
}

const LOOKUP_SLOTS: &[Slot] = &[
    Slot::Uniform(0),   // params
    Slot::Read(1),      // tokens: [S] u32
    Slot::Read(2),      // table: [V, D] f32, or table_h: [V, D] f16
    Slot::ReadWrite(3), // out: [S, D] f32
    Slot::ReadWrite(4), // bad_tokens: atomic u32, += tokens >= V
];
const LOOKUP: KernelDesc = KernelDesc { entry: "embed_lookup", slots: LOOKUP_SLOTS };
const LOOKUP_W16: KernelDesc = KernelDesc { entry: "embed_lookup_w16", slots: LOOKUP_SLOTS };
const BACKWARD: KernelDesc = KernelDesc {
    entry: "embed_backward",
    slots: &[
        Slot::Uniform(0),   // params
        Slot::Read(1),      // tokens: [S] u32
        Slot::Read(2),      // dout: [S, D] f32
        Slot::ReadWrite(3), // dtable: [V, D] f32, accumulated
    ],
};

pub struct Embedding {
    lookup: Kernel,
    lookup_w16: Kernel,
    backward: Kernel,
}

impl Embedding {
    pub async fn new(gpu: &Gpu) -> Result<Self> {
        let [lookup, lookup_w16, backward] = build_kernels(gpu, EMBEDDING, [LOOKUP, LOOKUP_W16, BACKWARD]).await?;
        Ok(Embedding { lookup, lookup_w16, backward })
    }

    /// `out[s] = table[tokens[s]]`; tokens >= V give zero rows and add to
    /// `bad_tokens` (one u32, not reset here).
    pub fn lookup(
        &self,
        gpu: &Gpu,
        shape: EmbeddingShape,
        tokens: BufferRange,
        table: Weights,
        out: BufferRange,
        bad_tokens: BufferRange,
    ) -> Result<Dispatch> {
        let op = "embed_lookup";
        let (s, d, v) = (shape.tokens as u64, shape.d as u64, shape.vocab as u64);
        gpu.check_binding(op, "tokens", &tokens, 4 * s)?;
        gpu.check_binding(op, "table", &table.range(), table.bytes(v * d))?;
        gpu.check_binding(op, "out", &out, 4 * s * d)?;
        gpu.check_binding(op, "bad_tokens", &bad_tokens, 4)?;
        let kernel = match table {
            Weights::F32(_) => &self.lookup,
            Weights::F16(_) => &self.lookup_w16,
        };
        let params = gpu.uniform(op, &params(shape));
        let bindings =
            [params.as_entire_binding(), tokens.binding(), table.range().binding(), out.binding(), bad_tokens.binding()];
        kernel.dispatch(gpu, &bindings, gpu.grid_1d(op, s * d)?)
    }

    /// `dtable[tokens[s]] += dout[s]`, skipping non-finite values and tokens >= V.
    pub fn backward(
        &self,
        gpu: &Gpu,
        shape: EmbeddingShape,
        tokens: BufferRange,
        dout: BufferRange,
        dtable: BufferRange,
    ) -> Result<Dispatch> {
        let op = "embed_backward";
        let (s, d, v) = (shape.tokens as u64, shape.d as u64, shape.vocab as u64);
        gpu.check_binding(op, "tokens", &tokens, 4 * s)?;
        gpu.check_binding(op, "dout", &dout, 4 * s * d)?;
        gpu.check_binding(op, "dtable", &dtable, 4 * v * d)?;
        let params = gpu.uniform(op, &params(shape));
        let bindings = [params.as_entire_binding(), tokens.binding(), dout.binding(), dtable.binding()];
        self.backward.dispatch(gpu, &bindings, gpu.grid_1d(op, s * d)?)
    }
}

fn params(shape: EmbeddingShape) -> Params {
    Params { tokens: shape.tokens, d: shape.d, vocab: shape.vocab, _pad: 0 }
}
