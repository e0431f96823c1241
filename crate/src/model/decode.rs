//! Text generation with the KV cache: one new token per sequence per step,
//! through the training forward's kernels on one row per sequence, each
//! layer keeping its rotated keys and values in caches instead of
//! recomputing them. Per step, in the forward's order: embed → L × [norm,
//! qkv, rope at position P, kv_append at row P, attention_decode over rows
//! 0..=P, o + residual, norm, gate|up, swiglu, down + residual] → final
//! norm → lm_head, then the `[B, V]` logits come back to the host, which
//! samples (`sample.rs`). Legend: B sequences, Lmax cache rows per
//! sequence, P the new token's position, K = Hkv·Dh; D, Q, A, F, V as in
//! activations.rs.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::gpu::{Dispatch, Gpu};
use crate::kernels::rope::RopeShape;
use crate::kernels::{DecodeShape, Heads, Kernels, LinearShape, Output, Qkv};
use crate::rng::SplitMix64;

use super::forward::LayerIo;
pub use super::sample::{Sampling, probability, sample, softmax};
use super::{Config, Model, Role};

/// One layer's cache: row b·Lmax + p holds position p of sequence b.
struct KvCache {
    k: wgpu::Buffer, // [B·Lmax, K] rotated keys
    v: wgpu::Buffer, // [B·Lmax, K]
}

/// Generation state for B sequences that step together: the caches and
/// one row of activations per sequence, allocated once. It reads the
/// weights of the `Model` each step is given (the master or its f16
/// mirror, as the training forward does; the mirror must be current), so
/// it follows a model that keeps training.
pub struct Decoder {
    config: Config,
    batch: u32,
    max_len: u32,
    /// Positions filled so far: the next token goes to position `len`.
    len: u32,
    tokens: wgpu::Buffer,     // [B] u32, the step's new tokens
    bad_tokens: wgpu::Buffer, // u32, embed_lookup's count (tokens are checked on the host first)
    x: wgpu::Buffer,          // [B, D] residual stream: each layer's input and output
    x_mid: wgpu::Buffer,      // [B, D] x + attn·Woᵀ
    xn: wgpu::Buffer,         // [B, D] a norm's output
    rrms: wgpu::Buffer,       // [B] its 1/rms (unused)
    qkv: wgpu::Buffer,        // [B, Q] q | k | v, q and k rotated
    attn: wgpu::Buffer,       // [B, A] attention output
    gu: wgpu::Buffer,         // [B, 2F] gate | up
    act: wgpu::Buffer,        // [B, F] silu(gate)·up
    logits: wgpu::Buffer,     // [B, V]
    caches: Vec<KvCache>,     // one per layer
}

/// What `Decoder::generate` does after the prompt.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// New tokens per sequence, at most.
    pub max_new: u32,
    pub sampling: Sampling,
    /// Seed of the `SplitMix64` every draw comes from.
    pub seed: u64,
}

impl Decoder {
    /// Caches for `batch` sequences of up to `max_len` ≤ `max_seq`
    /// positions. Refuses shapes the adapter cannot bind.
    pub fn new(gpu: &Gpu, k: &Kernels, model: &Model, batch: u32, max_len: u32) -> Result<Decoder> {
        let c = &model.config;
        if batch == 0 || max_len == 0 || max_len > c.max_seq {
            let need = format!("need batch ≥ 1 and 1 ≤ max_len ≤ max_seq {}", c.max_seq);
            return Err(Error::Unsupported(format!(
                "decoder: batch {batch} × max_len {max_len}: {need}"
            )));
        }
        let b = batch as u64;
        let (d, q, a, f, v) = (
            c.d_model as u64,
            c.qkv_width() as u64,
            (c.n_heads * c.head_dim()) as u64,
            c.ffn as u64,
            c.vocab as u64,
        );
        let kv = b * max_len as u64 * (c.n_kv_heads * c.head_dim()) as u64;
        let f32s = |label: &str, n: u64| gpu.storage_buffer(label, 4 * n);
        let caches = (0..c.n_layers)
            .map(|_| {
                Ok(KvCache {
                    k: f32s("k_cache", kv)?,
                    v: f32s("v_cache", kv)?,
                })
            })
            .collect::<Result<_>>()?;
        let decoder = Decoder {
            config: c.clone(),
            batch,
            max_len,
            len: 0,
            tokens: gpu.storage_buffer("decode_tokens", 4 * b)?,
            bad_tokens: gpu.storage_buffer("decode_bad_tokens", 4)?,
            x: f32s("decode_x", b * d)?,
            x_mid: f32s("decode_x_mid", b * d)?,
            xn: f32s("decode_xn", b * d)?,
            rrms: f32s("decode_rrms", b)?,
            qkv: f32s("decode_qkv", b * q)?,
            attn: f32s("decode_attn", b * a)?,
            gu: f32s("decode_gu", b * 2 * f)?,
            act: f32s("decode_act", b * f)?,
            logits: f32s("decode_logits", b * v)?,
            caches,
        };
        decoder.schedule(gpu, k, model, max_len - 1)?; // every binding checked now, not on a later step
        Ok(decoder)
    }

    pub fn batch(&self) -> u32 {
        self.batch
    }

    pub fn max_len(&self) -> u32 {
        self.max_len
    }

    /// Tokens fed per sequence so far: the position the next one takes.
    pub fn position(&self) -> u32 {
        self.len
    }

    /// Starts every sequence over (cache rows past the position are never read).
    pub fn reset(&mut self) {
        self.len = 0;
    }

    /// Feeds one token per sequence at the next position and returns the
    /// logits `[B, V]` that predict the token after it. Past `max_len`, a
    /// token ≥ V or a model of another config is an error.
    pub async fn step(
        &mut self,
        gpu: &Gpu,
        k: &Kernels,
        model: &Model,
        tokens: &[u32],
    ) -> Result<Vec<f32>> {
        self.feed(gpu, k, model, tokens).await?;
        gpu.read_back((&self.logits).into()).await
    }

    /// `step` without reading the logits back (a prompt's tokens but the last).
    async fn feed(&mut self, gpu: &Gpu, k: &Kernels, model: &Model, tokens: &[u32]) -> Result<()> {
        let op = "decoder";
        if model.config != self.config {
            return Err(Error::Unsupported(format!(
                "decoder: made for {:?}, given a model of {:?}",
                self.config, model.config
            )));
        }
        if tokens.len() != self.batch as usize {
            return Err(Error::shape(
                op,
                "tokens",
                format!("one per sequence ({})", self.batch),
                tokens.len(),
            ));
        }
        if let Some(t) = tokens.iter().find(|&&t| t >= self.config.vocab) {
            return Err(Error::shape(
                op,
                "token",
                format!("< vocab {}", self.config.vocab),
                t,
            ));
        }
        if self.len >= self.max_len {
            return Err(Error::shape(
                op,
                "position",
                format!("< max_len {} (reset() to start over)", self.max_len),
                self.len,
            ));
        }
        gpu.queue
            .write_buffer(&self.tokens, 0, bytemuck::cast_slice(tokens));
        // Launchers bake their params (RoPE's position, the cache length)
        // into each dispatch, so the step's list is built anew for its
        // position: tens of small uniforms and bind groups per token, cheap
        // next to the step, and never on the training path. Buffers are not.
        let s = self.schedule(gpu, k, model, self.len)?;
        gpu.run(&s.iter().collect::<Vec<_>>()).await?;
        self.len += 1;
        Ok(())
    }

    /// The dispatches of one step at position `pos`, reading `model`'s weights.
    fn schedule(&self, gpu: &Gpu, k: &Kernels, model: &Model, pos: u32) -> Result<Vec<Dispatch>> {
        let (net, c) = (model.net(gpu, k), &model.config);
        let (b, dh) = (self.batch, c.head_dim());
        let attn = DecodeShape {
            batch: b,
            len: pos + 1,
            max_len: self.max_len,
            heads: c.n_heads,
            kv_heads: c.n_kv_heads,
            head_dim: dh,
        };
        let new = net.qkv_views(&self.qkv); // heads of the step's [B, Q] rows
        let (x, x_mid, xn, rrms) = (
            (&self.x).into(),
            (&self.x_mid).into(),
            (&self.xn).into(),
            (&self.rrms).into(),
        );
        let io = LayerIo {
            rows: b,
            x,
            xn1: xn,
            rrms1: rrms,
            qkv: (&self.qkv).into(),
            attn: (&self.attn).into(),
            x_mid,
            xn2: xn,
            rrms2: rrms,
            gu: (&self.gu).into(),
            act: (&self.act).into(),
            out: x, // each layer's output is the next one's input
            rope: RopeShape {
                rows: b,
                seq_len: 1,
                pos_offset: pos,
                ..net.rope_shape()
            },
        };
        let mut s = net.embed(b, (&self.tokens).into(), x, (&self.bad_tokens).into())?;
        for (l, cache) in (0..c.n_layers).zip(&self.caches) {
            let (k_cache, v_cache) = ((&cache.k).into(), (&cache.v).into());
            let cached = |data| Heads {
                data,
                row_stride: c.n_kv_heads * dh,
                col: 0,
            };
            let over_cache = Qkv {
                q: new.q,
                k: cached(k_cache),
                v: cached(v_cache),
            };
            let attention = vec![
                k.attn
                    .kv_append(gpu, attn, new.k, new.v, k_cache, v_cache)?,
                k.attn.decode(gpu, attn, over_cache, io.attn)?,
            ];
            s.extend(net.layer(l, &io, attention)?);
        }
        s.extend(net.rmsnorm(b, x, Role::FinalNorm, xn, rrms)?);
        let head = LinearShape::new(b, c.d_model, c.vocab);
        let w = net.w(Role::LmHead, &mut s)?;
        let logits = Output::Store((&self.logits).into());
        s.extend(k.head().forward(gpu, head, xn, w, logits)?);
        Ok(s)
    }

    /// Starts over, feeds each sequence's prompt (one per sequence, all of
    /// one length ≥ 1: the sequences step together), then draws up to
    /// `g.max_new` tokens per sequence, feeding each back. `on_tokens` sees
    /// each step's B new tokens as soon as they are drawn, with the model's
    /// probability of each (`sample::probability`: the page streams both),
    /// and ends the generation early by returning `Break`. Returns the new
    /// tokens of each sequence.
    pub async fn generate<P: AsRef<[u32]>>(
        &mut self,
        gpu: &Gpu,
        k: &Kernels,
        model: &Model,
        prompts: &[P],
        g: &Generation,
        mut on_tokens: impl FnMut(&[u32], &[f64]) -> ControlFlow<()>,
    ) -> Result<Vec<Vec<u32>>> {
        let op = "generate";
        g.sampling.validate()?;
        if prompts.len() != self.batch as usize {
            return Err(Error::shape(
                op,
                "prompts",
                format!("one per sequence ({})", self.batch),
                prompts.len(),
            ));
        }
        let p = prompts[0].as_ref().len();
        if p == 0 || prompts.iter().any(|x| x.as_ref().len() != p) {
            let lengths: Vec<usize> = prompts.iter().map(|x| x.as_ref().len()).collect();
            return Err(Error::shape(
                op,
                "prompt lengths",
                "one length ≥ 1 for every sequence",
                format!("{lengths:?}"),
            ));
        }
        // the last token drawn is not fed
        let fed = p as u64 + (g.max_new as u64).saturating_sub(1);
        if fed > self.max_len as u64 {
            return Err(Error::shape(
                op,
                "prompt + new tokens − 1",
                format!("≤ max_len {}", self.max_len),
                fed,
            ));
        }
        self.reset();
        let column = |t: usize| -> Vec<u32> { prompts.iter().map(|x| x.as_ref()[t]).collect() };
        for t in 0..p - 1 {
            self.feed(gpu, k, model, &column(t)).await?;
        }
        let mut logits = self.step(gpu, k, model, &column(p - 1)).await?;
        let mut rng = SplitMix64(g.seed);
        let mut out = vec![Vec::new(); self.batch as usize];
        for i in 0..g.max_new {
            let next = logits
                .chunks(self.config.vocab as usize)
                .map(|row| sample(row, &g.sampling, &mut rng))
                .collect::<Result<Vec<u32>>>()?;
            out.iter_mut().zip(&next).for_each(|(o, &t)| o.push(t));
            let probs: Vec<f64> = logits
                .chunks(self.config.vocab as usize)
                .zip(&next)
                .map(|(row, &t)| probability(row, t))
                .collect();
            if on_tokens(&next, &probs).is_break() || i + 1 == g.max_new {
                break;
            }
            logits = self.step(gpu, k, model, &next).await?;
        }
        Ok(out)
    }
}
