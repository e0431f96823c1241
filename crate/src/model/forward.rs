//! The forward schedule, in the seed's order: embed → L × [norm, qkv,
//! rope, attention, o + residual, norm, gate|up, swiglu, down + residual] →
//! final norm. Legend as in activations.rs.

use crate::error::Result;
use crate::gpu::Dispatch;
use crate::kernels::Output;
use crate::kernels::attention::{AttentionShape, Heads, Qkv};
use crate::kernels::embedding::EmbeddingShape;
use crate::kernels::norm::NormShape;
use crate::kernels::rope::RopeShape;

use super::{Net, Role};

impl<'a> Net<'a> {
    pub(super) fn forward(&self) -> Result<Vec<Dispatch>> {
        let (gpu, k, m) = (self.gpu, self.k, self.m);
        let (c, a) = (&m.config, &m.acts);
        let dm = a.dims;
        let (r, d, f) = (dm.rows as u32, c.d_model, c.ffn);
        let norm = self.norm_shape();
        let mut s = Vec::new();

        let first = &a.layers[0].x;
        let embed = EmbeddingShape {
            tokens: r,
            d,
            vocab: c.vocab,
        };
        s.push(k.embed.lookup(
            gpu,
            embed,
            (&m.inputs.tokens).into(),
            self.w(Role::Embedding),
            first.into(),
            (&m.inputs.bad_tokens).into(),
        )?);
        for l in 0..c.n_layers {
            let x = &a.layers[l as usize];
            let out = a
                .layers
                .get(l as usize + 1)
                .map_or(&a.x_out, |next| &next.x);
            s.push(k.norm.forward(
                gpu,
                norm,
                (&x.x).into(),
                self.w(Role::AttnNorm(l)),
                (&x.xn1).into(),
                (&x.rrms1).into(),
            )?);
            s.extend(k.linear.forward(
                gpu,
                self.linear(Role::Qkv(l), r)?,
                (&x.xn1).into(),
                self.w(Role::Qkv(l)),
                Output::Store((&x.qkv).into()),
            )?);
            s.push(k.rope.forward(
                gpu,
                self.rope_shape(),
                (&m.inputs.inv_freq).into(),
                (&x.qkv).into(),
            )?);
            s.push(k.attn.forward(
                gpu,
                self.attention_shape(),
                self.qkv_views(&x.qkv),
                (&x.attn).into(),
                (&x.lse).into(),
            )?);
            let o = Output::AddTo {
                residual: (&x.x).into(),
                y: (&x.x_mid).into(),
            };
            s.extend(k.linear.forward(
                gpu,
                self.linear(Role::Out(l), r)?,
                (&x.attn).into(),
                self.w(Role::Out(l)),
                o,
            )?);
            s.push(k.norm.forward(
                gpu,
                norm,
                (&x.x_mid).into(),
                self.w(Role::MlpNorm(l)),
                (&x.xn2).into(),
                (&x.rrms2).into(),
            )?);
            s.extend(k.linear.forward(
                gpu,
                self.linear(Role::GateUp(l), r)?,
                (&x.xn2).into(),
                self.w(Role::GateUp(l)),
                Output::Store((&x.gu).into()),
            )?);
            s.push(
                k.act
                    .swiglu_forward_gu(gpu, (&x.gu).into(), (&x.act).into(), r, f)?,
            );
            let down = Output::AddTo {
                residual: (&x.x_mid).into(),
                y: out.into(),
            };
            s.extend(k.linear.forward(
                gpu,
                self.linear(Role::Down(l), r)?,
                (&x.act).into(),
                self.w(Role::Down(l)),
                down,
            )?);
        }
        s.push(k.norm.forward(
            gpu,
            norm,
            (&a.x_out).into(),
            self.w(Role::FinalNorm),
            (&a.xnf).into(),
            (&a.rrmsf).into(),
        )?);
        Ok(s)
    }

    pub(super) fn norm_shape(&self) -> NormShape {
        NormShape {
            rows: self.m.shape.rows(),
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

    /// q, k and v as heads of one fused `[R, Q]` buffer.
    pub(super) fn qkv_views<'b>(&self, qkv: &'b wgpu::Buffer) -> Qkv<'b> {
        let c = &self.m.config;
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
}
