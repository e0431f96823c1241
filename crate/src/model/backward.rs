//! The backward schedule: the forward read backwards, after the head has
//! left d(xnf) in `dnorm`. Parameter gradients ADD into `params.grads`
//! (AdamW zeroes them); `dx` carries the residual stream's gradient down
//! the layers, each norm's backward adding its path into it.

use crate::error::Result;
use crate::gpu::{BufferRange, Dispatch};
use crate::kernels::attention::{AttentionBackward, Heads, KvGrads};
use crate::kernels::embedding::EmbeddingShape;
use crate::kernels::norm::NormBackward;
use crate::kernels::{Output, Weights};

use super::activations::LayerActivations;
use super::{Net, Role};

impl<'a> Net<'a> {
    pub(super) fn backward(&self) -> Result<Vec<Dispatch>> {
        let (gpu, k, m) = (self.gpu, self.k, self.m);
        let (c, a) = (&m.config, &m.acts);
        let (r, d) = (a.dims.rows as u32, c.d_model);
        let b = |buffer: &'a wgpu::Buffer| -> BufferRange<'a> { buffer.into() };
        let (dx, dnorm, dqkv) = (b(&a.dx), b(&a.dnorm), b(&a.dqkv));
        let (dattn, dgu, dact) = (b(&a.dattn), b(&a.dgu), b(&a.dact));
        let (rope, inv_freq, f) = (self.rope_shape(), b(&m.inputs.inv_freq), c.ffn);
        let mut s = vec![k.infra.fill(gpu, dx, r * d, 0.0)?];
        s.extend(self.rmsnorm_backward(r, b(&a.x_out), Role::FinalNorm, b(&a.rrmsf))?);
        for (l, x) in (0..c.n_layers).zip(&a.layers).rev() {
            // dx is d(this layer's output) = d(x_mid) through the down residual
            s.extend(self.project_backward(Role::Down(l), r, dx, b(&x.act), dact)?);
            s.push(k.act.swiglu_backward_gu(gpu, dact, b(&x.gu), dgu, r, f)?);
            s.extend(self.project_backward(Role::GateUp(l), r, dgu, b(&x.xn2), dnorm)?);
            s.extend(self.rmsnorm_backward(r, b(&x.x_mid), Role::MlpNorm(l), b(&x.rrms2))?);
            // dx is now d(x_mid) = d(x) through the o residual
            s.extend(self.project_backward(Role::Out(l), r, dx, b(&x.attn), dattn)?);
            s.extend(self.attention_backward(x)?);
            s.push(k.rope.backward(gpu, rope, inv_freq, dqkv)?);
            s.extend(self.project_backward(Role::Qkv(l), r, dqkv, b(&x.xn1), dnorm)?);
            s.extend(self.rmsnorm_backward(r, b(&x.x), Role::AttnNorm(l), b(&x.rrms1))?);
        }
        let embed = EmbeddingShape {
            tokens: r,
            d,
            vocab: c.vocab,
        };
        let runs = b(&m.inputs.token_runs);
        s.push(
            k.embed
                .backward_sorted(gpu, embed, runs, dx, self.grad(Role::Embedding))?,
        );
        Ok(s)
    }

    /// The layer weight `role`'s products backward over `rows` rows: `dx =
    /// dy·W` stored, `dW += dyᵀ·x` with `x` the forward's saved input, and
    /// QuEST's masks on both where the recipe clips.
    fn project_backward(
        &self,
        role: Role,
        rows: u32,
        dy: BufferRange,
        x: BufferRange,
        dx: BufferRange,
    ) -> Result<Vec<Dispatch>> {
        let (gpu, linear, shape) = (self.gpu, self.products(role), self.linear(role, rows)?);
        let mut s = Vec::new();
        let w = self.w(role, &mut s)?;
        s.extend(linear.backward_input(gpu, shape, dy, w, Output::Store(dx))?);
        s.extend(linear.backward_weight(gpu, shape, dy, x, self.grad(role))?);
        // the masks read the master, which the products may have read already
        let master = match w {
            Weights::F32(master) => master,
            _ if linear.clips_weights() => self.master(role, &mut s)?,
            _ => w.range(), // not read
        };
        s.extend(linear.clip_masks(gpu, shape, (x, dx), (master, self.grad(role)))?);
        Ok(s)
    }

    /// RMSNorm backward with gain `role` from `dnorm` (d of its output), its
    /// input `x` and 1/rms: adds its path into `dx`, d(gain) into the grads.
    fn rmsnorm_backward(
        &self,
        rows: u32,
        x: BufferRange<'a>,
        role: Role,
        rrms: BufferRange<'a>,
    ) -> Result<Vec<Dispatch>> {
        let a = &self.m.acts;
        let mut s = Vec::new();
        let g = NormBackward {
            x,
            gain: self.w(role, &mut s)?,
            rrms,
            dy: (&a.dnorm).into(),
            dx: (&a.dx).into(),
            dgain: self.grad(role),
            scratch: (&a.norm_scratch).into(),
        };
        s.extend(self.k.norm.backward(self.gpu, self.norm_shape(rows), &g)?);
        Ok(s)
    }

    /// Causal attention backward of a layer from d(o) in `dattn`: d(q|k|v)
    /// into `dqkv`, in q|k|v's layout.
    fn attention_backward(&self, x: &'a LayerActivations) -> Result<[Dispatch; 2]> {
        let (c, a) = (&self.m.config, &self.m.acts);
        let (q, dh) = (c.qkv_width(), c.head_dim());
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
        self.k.attn.backward(self.gpu, self.attention_shape(), &g)
    }
}
