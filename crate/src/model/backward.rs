//! The backward schedule: the forward read backwards, after the head has
//! left d(xnf) in `dnorm`. Parameter gradients ADD into `params.grads`
//! (AdamW zeroes them); `dx` carries the residual stream's gradient down
//! the layers, each norm's backward adding its path into it.

use crate::error::Result;
use crate::gpu::Dispatch;
use crate::kernels::Output;
use crate::kernels::attention::{AttentionBackward, Heads, KvGrads};
use crate::kernels::embedding::EmbeddingShape;
use crate::kernels::norm::NormBackward;

use super::{Net, Role};

impl<'a> Net<'a> {
    pub(super) fn backward(&self) -> Result<Vec<Dispatch>> {
        let (gpu, k, m) = (self.gpu, self.k, self.m);
        let (c, a) = (&m.config, &m.acts);
        let dm = a.dims;
        let (r, d, q, f) = (dm.rows as u32, c.d_model, c.qkv_width(), c.ffn);
        let norm = self.norm_shape();
        let norm_backward =
            |x: &'a wgpu::Buffer, role: Role, rrms: &'a wgpu::Buffer| NormBackward {
                x: x.into(),
                gain: self.w(role),
                rrms: rrms.into(),
                dy: (&a.dnorm).into(),
                dx: (&a.dx).into(),
                dgain: self.grad(role),
                scratch: (&a.norm_scratch).into(),
            };
        let mut s = Vec::new();

        s.push(k.infra.fill(gpu, (&a.dx).into(), r * d, 0.0)?);
        s.extend(k.norm.backward(
            gpu,
            norm,
            &norm_backward(&a.x_out, Role::FinalNorm, &a.rrmsf),
        )?);
        for l in (0..c.n_layers).rev() {
            let x = &a.layers[l as usize];
            // down + residual: dx is d(x_out of this layer) = d(x_mid) through the residual
            let down = self.linear(Role::Down(l), r)?;
            s.extend(k.linear.backward_input(
                gpu,
                down,
                (&a.dx).into(),
                self.w(Role::Down(l)),
                Output::Store((&a.dact).into()),
            )?);
            s.extend(k.linear.backward_weight(
                gpu,
                down,
                (&a.dx).into(),
                (&x.act).into(),
                self.grad(Role::Down(l)),
            )?);
            s.push(k.act.swiglu_backward_gu(
                gpu,
                (&a.dact).into(),
                (&x.gu).into(),
                (&a.dgu).into(),
                r,
                f,
            )?);
            let gate_up = self.linear(Role::GateUp(l), r)?;
            s.extend(k.linear.backward_input(
                gpu,
                gate_up,
                (&a.dgu).into(),
                self.w(Role::GateUp(l)),
                Output::Store((&a.dnorm).into()),
            )?);
            s.extend(k.linear.backward_weight(
                gpu,
                gate_up,
                (&a.dgu).into(),
                (&x.xn2).into(),
                self.grad(Role::GateUp(l)),
            )?);
            s.extend(k.norm.backward(
                gpu,
                norm,
                &norm_backward(&x.x_mid, Role::MlpNorm(l), &x.rrms2),
            )?);
            // o + residual: dx is now d(x_mid) = d(x) through the residual
            let o = self.linear(Role::Out(l), r)?;
            s.extend(k.linear.backward_input(
                gpu,
                o,
                (&a.dx).into(),
                self.w(Role::Out(l)),
                Output::Store((&a.dattn).into()),
            )?);
            s.extend(k.linear.backward_weight(
                gpu,
                o,
                (&a.dx).into(),
                (&x.attn).into(),
                self.grad(Role::Out(l)),
            )?);
            let dh = c.head_dim();
            let g = AttentionBackward {
                qkv: self.qkv_views(&x.qkv),
                o: (&x.attn).into(),
                d_o: (&a.dattn).into(),
                lse: (&x.lse).into(),
                dq: Heads {
                    data: (&a.dqkv).into(),
                    row_stride: q,
                    col: 0,
                },
                dkv: KvGrads {
                    data: (&a.dqkv).into(),
                    row_stride: q,
                    k_col: c.n_heads * dh,
                    v_col: (c.n_heads + c.n_kv_heads) * dh,
                },
                delta: (&a.delta).into(),
            };
            s.extend(k.attn.backward(gpu, self.attention_shape(), &g)?);
            s.push(k.rope.backward(
                gpu,
                self.rope_shape(),
                (&m.inputs.inv_freq).into(),
                (&a.dqkv).into(),
            )?);
            let qkv = self.linear(Role::Qkv(l), r)?;
            s.extend(k.linear.backward_input(
                gpu,
                qkv,
                (&a.dqkv).into(),
                self.w(Role::Qkv(l)),
                Output::Store((&a.dnorm).into()),
            )?);
            s.extend(k.linear.backward_weight(
                gpu,
                qkv,
                (&a.dqkv).into(),
                (&x.xn1).into(),
                self.grad(Role::Qkv(l)),
            )?);
            s.extend(k.norm.backward(
                gpu,
                norm,
                &norm_backward(&x.x, Role::AttnNorm(l), &x.rrms1),
            )?);
        }
        let embed = EmbeddingShape {
            tokens: r,
            d,
            vocab: c.vocab,
        };
        s.push(k.embed.backward_sorted(
            gpu,
            embed,
            (&m.inputs.token_runs).into(),
            (&a.dx).into(),
            self.grad(Role::Embedding),
        )?);
        Ok(s)
    }
}
