//! The forward schedule, in the seed's order: embed → L × [norm, qkv,
//! rope, attention, o + residual, norm, gate|up, swiglu, down + residual] →
//! final norm. `layer` is written once: the training forward runs it over
//! the batch's rows with causal attention, the decoder (decode.rs) over one
//! row per sequence with attention over its KV cache. Legend as in
//! activations.rs.

use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch};
use crate::kernels::Output;
use crate::kernels::attention::{AttentionShape, Heads, Qkv};
use crate::kernels::embedding::EmbeddingShape;
use crate::kernels::norm::NormShape;
use crate::kernels::rope::RopeShape;

use super::{Config, Net, Role};

/// Where one layer's forward reads and writes, over `rows` rows.
pub(super) struct LayerIo<'b> {
    pub rows: u32,
    pub x: BufferRange<'b>, // [rows, D] the layer's input: the residual stream
    pub xn1: BufferRange<'b>, // [rows, D] input_layernorm(x)
    pub rrms1: BufferRange<'b>, // [rows]
    pub qkv: BufferRange<'b>, // [rows, Q] q | k | v, q and k rotated
    pub attn: BufferRange<'b>, // [rows, A] attention output
    pub x_mid: BufferRange<'b>, // [rows, D] x + attn·Woᵀ
    pub xn2: BufferRange<'b>, // [rows, D] post_attention_layernorm(x_mid)
    pub rrms2: BufferRange<'b>, // [rows]
    pub gu: BufferRange<'b>, // [rows, 2F] gate | up
    pub act: BufferRange<'b>, // [rows, F] silu(gate)·up
    pub out: BufferRange<'b>, // [rows, D] x_mid + act·Wdownᵀ
    /// The rows' positions, for RoPE.
    pub rope: RopeShape,
}

impl<'a> Net<'a> {
    pub(super) fn forward(&self) -> Result<Vec<Dispatch>> {
        let (m, a) = (self.m, &self.m.acts);
        let r = a.dims.rows as u32;
        let (tokens, bad_tokens) = ((&m.inputs.tokens).into(), (&m.inputs.bad_tokens).into());
        let mut s = self.embed(r, tokens, (&a.layers[0].x).into(), bad_tokens)?;
        for (l, x) in (0..m.config.n_layers).zip(&a.layers) {
            let out = a
                .layers
                .get(l as usize + 1)
                .map_or(&a.x_out, |next| &next.x);
            let io = LayerIo {
                rows: r,
                x: (&x.x).into(),
                xn1: (&x.xn1).into(),
                rrms1: (&x.rrms1).into(),
                qkv: (&x.qkv).into(),
                attn: (&x.attn).into(),
                x_mid: (&x.x_mid).into(),
                xn2: (&x.xn2).into(),
                rrms2: (&x.rrms2).into(),
                gu: (&x.gu).into(),
                act: (&x.act).into(),
                out: out.into(),
                rope: self.rope_shape(),
            };
            let q = self.qkv_views(&x.qkv);
            let attention = self.k.attn.forward(
                self.gpu,
                self.attention_shape(),
                q,
                io.attn,
                (&x.lse).into(),
            )?;
            s.extend(self.layer(l, &io, vec![attention])?);
        }
        s.extend(self.rmsnorm(
            r,
            (&a.x_out).into(),
            Role::FinalNorm,
            (&a.xnf).into(),
            (&a.rrmsf).into(),
        )?);
        Ok(s)
    }

    /// Layer l's forward; `attention` is what runs between RoPE and o (the
    /// training forward's causal attention, or decoding's cache append and
    /// attention over the cache), writing `io.attn`.
    pub(super) fn layer(
        &self,
        l: u32,
        io: &LayerIo,
        attention: Vec<Dispatch>,
    ) -> Result<Vec<Dispatch>> {
        let (gpu, k, r, f) = (self.gpu, self.k, io.rows, self.m.config.ffn);
        let inv_freq = (&self.m.inputs.inv_freq).into();
        let mut s = self.rmsnorm(r, io.x, Role::AttnNorm(l), io.xn1, io.rrms1)?;
        s.extend(self.project(Role::Qkv(l), r, io.xn1, Output::Store(io.qkv))?);
        s.push(k.rope.forward(gpu, io.rope, inv_freq, io.qkv)?);
        s.extend(attention);
        s.extend(self.project(Role::Out(l), r, io.attn, residual(io.x, io.x_mid))?);
        s.extend(self.rmsnorm(r, io.x_mid, Role::MlpNorm(l), io.xn2, io.rrms2)?);
        s.extend(self.project(Role::GateUp(l), r, io.xn2, Output::Store(io.gu))?);
        s.push(k.act.swiglu_forward_gu(gpu, io.gu, io.act, r, f)?);
        s.extend(self.project(Role::Down(l), r, io.act, residual(io.x_mid, io.out))?);
        Ok(s)
    }

    /// The embedding rows of `tokens` ([rows] u32) into `x`, counting
    /// tokens ≥ V into `bad_tokens`.
    pub(super) fn embed(
        &self,
        rows: u32,
        tokens: BufferRange,
        x: BufferRange,
        bad_tokens: BufferRange,
    ) -> Result<Vec<Dispatch>> {
        let c = &self.m.config;
        let shape = EmbeddingShape {
            tokens: rows,
            d: c.d_model,
            vocab: c.vocab,
        };
        let mut s = Vec::new();
        let table = self.w(Role::Embedding, &mut s)?;
        let k = &self.k.embed;
        s.push(k.lookup(self.gpu, shape, tokens, table, x, bad_tokens)?);
        Ok(s)
    }

    /// RMSNorm of `rows` rows of `x` with gain `role` into `y`, 1/rms into `rrms`.
    pub(super) fn rmsnorm(
        &self,
        rows: u32,
        x: BufferRange,
        role: Role,
        y: BufferRange,
        rrms: BufferRange,
    ) -> Result<Vec<Dispatch>> {
        let mut s = Vec::new();
        let gain = self.w(role, &mut s)?;
        let shape = self.norm_shape(rows);
        s.push(self.k.norm.forward(self.gpu, shape, x, gain, y, rrms)?);
        Ok(s)
    }

    /// `x · Wᵀ` of the layer weight `role` over `rows` rows, into `out`.
    pub(super) fn project(
        &self,
        role: Role,
        rows: u32,
        x: BufferRange,
        out: Output,
    ) -> Result<Vec<Dispatch>> {
        let shape = self.linear(role, rows)?;
        let mut s = Vec::new();
        let w = self.w(role, &mut s)?;
        s.extend(self.products(role).forward(self.gpu, shape, x, w, out)?);
        Ok(s)
    }

    pub(super) fn norm_shape(&self, rows: u32) -> NormShape {
        NormShape {
            rows,
            d: self.m.config.d_model,
            eps: self.m.config.norm_eps as f32,
        }
    }

    /// q and k of a fused qkv row, rotated in one dispatch (they are adjacent).
    pub(super) fn rope_shape(&self) -> RopeShape {
        let c = &self.m.config;
        RopeShape {
            rows: self.m.shape.rows(),
            seq_len: self.m.shape.seq,
            pos_offset: 0,
            heads: c.n_heads + c.n_kv_heads,
            head_dim: c.head_dim(),
            row_stride: c.qkv_width(),
            col0: 0,
        }
    }

    pub(super) fn attention_shape(&self) -> AttentionShape {
        let c = &self.m.config;
        AttentionShape {
            batch: self.m.shape.batch,
            seq_len: self.m.shape.seq,
            heads: c.n_heads,
            kv_heads: c.n_kv_heads,
            head_dim: c.head_dim(),
        }
    }

    pub(super) fn qkv_views<'b>(&self, qkv: &'b wgpu::Buffer) -> Qkv<'b> {
        qkv_views(&self.m.config, qkv)
    }
}

/// q, k and v as heads of one fused `[R, Q]` buffer of model `c`.
pub fn qkv_views<'b>(c: &Config, qkv: &'b wgpu::Buffer) -> Qkv<'b> {
    let (stride, dh) = (c.qkv_width(), c.head_dim());
    let heads = |col| Heads {
        data: qkv.into(),
        row_stride: stride,
        col,
    };
    Qkv {
        q: heads(0),
        k: heads(c.n_heads * dh),
        v: heads((c.n_heads + c.n_kv_heads) * dh),
    }
}

/// `y = x + product`: a projection joining the residual stream `x`.
fn residual<'b>(x: BufferRange<'b>, y: BufferRange<'b>) -> Output<'b> {
    Output::AddTo { residual: x, y }
}
