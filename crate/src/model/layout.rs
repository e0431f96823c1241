//! Where every parameter lives: one mega-buffer per kind (master weights,
//! gradients, moments, f16 mirror, int8 state), the same element offsets in
//! each. The decay block (2-D weights) and the no-decay block (norm gains)
//! are each contiguous, so one optimizer dispatch covers a block; a block
//! larger than one binding is cut into chunks. Dispatches per step depend
//! on the model's size, never on its number of tensors.

use crate::error::{Error, Result};
use crate::rng::SplitMix64;

use super::Config;

/// Tensor offsets are multiples of this many elements: 1 KiB of f32 and
/// 512 B of f16 (WebGPU's offset alignment is at most 256 B), and whole
/// 256-value blocks of int8 optimizer state, so no block mixes tensors.
pub const TENSOR_ALIGN: u64 = 256;

/// Block and chunk starts are multiples of this: then the int8 state's
/// per-256-value scales (4 B each) start 256-B aligned too.
pub const CHUNK_ALIGN: u64 = 256 * 64;

/// Standard deviation of the initial weights (HF Llama's
/// `initializer_range`), residual projections included: webtrain
/// initialises exactly as `LlamaForCausalLM._init_weights` does.
pub const INIT_STD: f64 = 0.02;

/// What a tensor is, for the schedules and for HF export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `[V, D]`
    Embedding,
    /// `[(H + 2·Hkv)·Dh, D]`: q, k and v projections stacked by rows.
    Qkv(u32),
    /// `[D, H·Dh]`
    Out(u32),
    /// `[2F, D]`: gate above up.
    GateUp(u32),
    /// `[D, F]`
    Down(u32),
    /// `[V, D]`; absent with tied embeddings.
    LmHead,
    /// `[D]` gains
    AttnNorm(u32),
    MlpNorm(u32),
    FinalNorm,
}

impl Role {
    /// A layer's linear weight: what a recipe's products read quantized.
    pub fn is_layer_linear(self) -> bool {
        matches!(
            self,
            Role::Qkv(_) | Role::Out(_) | Role::GateUp(_) | Role::Down(_)
        )
    }

    /// The layer a tensor belongs to (None: embedding, head, final norm).
    pub fn layer(self) -> Option<u32> {
        match self {
            Role::Qkv(l) | Role::Out(l) | Role::GateUp(l) | Role::Down(l) => Some(l),
            Role::AttnNorm(l) | Role::MlpNorm(l) => Some(l),
            Role::Embedding | Role::LmHead | Role::FinalNorm => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub role: Role,
    pub name: String,
    /// Row-major `[rows, cols]`; a gain is `[1, D]`.
    pub rows: u32,
    pub cols: u32,
    /// First element in every mega-buffer.
    pub offset: u64,
    pub decays: bool,
}

impl Tensor {
    pub fn len(&self) -> u64 {
        self.rows as u64 * self.cols as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A contiguous element range of the mega-buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: u64,
    pub len: u64,
}

/// One optimizer dispatch's range: a block, or a chunk of one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub span: Span,
    pub decays: bool,
}

#[derive(Clone, Debug)]
pub struct ParamLayout {
    pub tensors: Vec<Tensor>,
    pub decay: Span,
    pub no_decay: Span,
    /// Elements of each mega-buffer, padding included.
    pub total: u64,
}

impl ParamLayout {
    pub fn new(c: &Config) -> ParamLayout {
        let (v, d, f, qkv, hdh) = (
            c.vocab,
            c.d_model,
            c.ffn,
            c.qkv_width(),
            c.n_heads * c.head_dim(),
        );
        let mut decaying = vec![(Role::Embedding, "embed_tokens".to_string(), v, d)];
        for l in 0..c.n_layers {
            decaying.push((Role::Qkv(l), format!("layers.{l}.qkv_proj"), qkv, d));
            decaying.push((Role::Out(l), format!("layers.{l}.o_proj"), d, hdh));
            decaying.push((
                Role::GateUp(l),
                format!("layers.{l}.gate_up_proj"),
                2 * f,
                d,
            ));
            decaying.push((Role::Down(l), format!("layers.{l}.down_proj"), d, f));
        }
        if !c.tie_word_embeddings {
            decaying.push((Role::LmHead, "lm_head".to_string(), v, d));
        }
        let mut gains = Vec::new();
        for l in 0..c.n_layers {
            gains.push((
                Role::AttnNorm(l),
                format!("layers.{l}.input_layernorm"),
                1,
                d,
            ));
            gains.push((
                Role::MlpNorm(l),
                format!("layers.{l}.post_attention_layernorm"),
                1,
                d,
            ));
        }
        gains.push((Role::FinalNorm, "norm".to_string(), 1, d));

        let mut tensors = Vec::new();
        let mut place = |list: Vec<(Role, String, u32, u32)>, decays: bool, start: u64| {
            let mut at = start;
            for (role, name, rows, cols) in list {
                let t = Tensor {
                    role,
                    name,
                    rows,
                    cols,
                    offset: at,
                    decays,
                };
                at = (at + t.len()).next_multiple_of(TENSOR_ALIGN);
                tensors.push(t);
            }
            Span {
                start,
                len: at - start,
            }
        };
        let decay = place(decaying, true, 0);
        let no_decay = place(
            gains,
            false,
            (decay.start + decay.len).next_multiple_of(CHUNK_ALIGN),
        );
        let total = no_decay.start + no_decay.len;
        ParamLayout {
            tensors,
            decay,
            no_decay,
            total,
        }
    }

    pub fn get(&self, role: Role) -> &Tensor {
        // Every role of the config is placed by `new`; a tied lm_head is the embedding.
        let role = if role == Role::LmHead && !self.tensors.iter().any(|t| t.role == Role::LmHead) {
            Role::Embedding
        } else {
            role
        };
        self.tensors
            .iter()
            .find(|t| t.role == role)
            .expect("ParamLayout::new places every role")
    }

    /// The most elements one tensor holds.
    pub fn largest_tensor(&self) -> u64 {
        self.tensors.iter().map(Tensor::len).max().unwrap_or(0)
    }

    /// The layers' linear weights, contiguous between the embedding and
    /// lm_head: what the quantized copy of the weights holds.
    pub fn layer_linears(&self) -> Span {
        let linear: Vec<&Tensor> = self
            .tensors
            .iter()
            .filter(|t| t.role.is_layer_linear())
            .collect();
        match (linear.first(), linear.last()) {
            (Some(first), Some(last)) => Span {
                start: first.offset,
                len: last.offset + last.len() - first.offset,
            },
            _ => Span { start: 0, len: 0 },
        }
    }

    /// Parameters (padding excluded).
    pub fn parameters(&self) -> u64 {
        self.tensors.iter().map(Tensor::len).sum()
    }

    /// As `chunks`, without `skip` (Muon's matrices) and the padding after
    /// it: what AdamW updates beside Muon.
    pub fn chunks_without(&self, max_binding: u64, skip: Span) -> Result<Vec<Chunk>> {
        let skip_end = (skip.start + skip.len).next_multiple_of(TENSOR_ALIGN);
        let mut out = Vec::new();
        for c in self.chunks(max_binding)? {
            let (start, end) = (c.span.start, c.span.start + c.span.len);
            for (a, b) in [(start, end.min(skip.start)), (start.max(skip_end), end)] {
                if a < b {
                    out.push(Chunk {
                        span: Span {
                            start: a,
                            len: b - a,
                        },
                        decays: c.decays,
                    });
                }
            }
        }
        Ok(out)
    }

    /// The optimizer's dispatch ranges: each block cut into chunks whose f32
    /// binding fits `max_binding` bytes. Refuses a tensor that alone exceeds it.
    pub fn chunks(&self, max_binding: u64) -> Result<Vec<Chunk>> {
        if let Some(t) = self.tensors.iter().find(|t| 4 * t.len() > max_binding) {
            return Err(Error::Limit {
                op: "model",
                what: format!("tensor {} ({}×{} f32)", t.name, t.rows, t.cols),
                needed: 4 * t.len(),
                limit: max_binding,
            });
        }
        let step = (max_binding / 4 / CHUNK_ALIGN * CHUNK_ALIGN)
            .min(u32::MAX as u64 / CHUNK_ALIGN * CHUNK_ALIGN);
        let mut chunks = Vec::new();
        for (span, decays) in [(self.decay, true), (self.no_decay, false)] {
            let mut start = span.start;
            while start < span.start + span.len {
                let len = step.min(span.start + span.len - start);
                chunks.push(Chunk {
                    span: Span { start, len },
                    decays,
                });
                start += len;
            }
        }
        Ok(chunks)
    }

    /// HF Llama's initialisation from `seed`: every matrix N(0, 0.02²),
    /// gains 1, padding 0. The same seed gives the same weights everywhere.
    pub fn initial_weights(&self, seed: u64) -> Vec<f32> {
        let mut w = vec![0.0f32; self.total as usize];
        let mut rng = SplitMix64(seed);
        for t in &self.tensors {
            let range = t.offset as usize..(t.offset + t.len()) as usize;
            if t.decays {
                w[range]
                    .iter_mut()
                    .for_each(|x| *x = (INIT_STD * standard_normal(&mut rng)) as f32);
            } else {
                w[range].fill(1.0);
            }
        }
        w
    }
}

/// One N(0, 1) draw by Box–Muller (one of the pair; simple and portable).
fn standard_normal(rng: &mut SplitMix64) -> f64 {
    let unit = |r: &mut SplitMix64| (r.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let u1 = 1.0 - unit(rng); // (0, 1]: ln is finite
    let u2 = unit(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_linears_span_exactly_the_layers_products() {
        for name in super::super::config::PRESETS {
            let l = ParamLayout::new(&Config::preset(name).unwrap());
            let span = l.layer_linears();
            for t in &l.tensors {
                let inside = t.offset >= span.start && t.offset + t.len() <= span.start + span.len;
                assert_eq!(inside, t.role.is_layer_linear(), "{name} {}", t.name);
            }
            let last = l
                .tensors
                .iter()
                .rfind(|t| t.role.is_layer_linear())
                .unwrap();
            assert_eq!(span.start + span.len, last.offset + last.len(), "{name}");
        }
    }

    #[test]
    fn tensors_are_aligned_disjoint_and_grouped_by_decay() {
        for name in super::super::config::PRESETS {
            let c = Config::preset(name).unwrap();
            let l = ParamLayout::new(&c);
            let mut end = 0;
            for t in &l.tensors {
                assert!(
                    t.offset.is_multiple_of(TENSOR_ALIGN) && t.offset >= end,
                    "{}",
                    t.name
                );
                let block = if t.decays { l.decay } else { l.no_decay };
                assert!(
                    t.offset >= block.start && t.offset + t.len() <= block.start + block.len,
                    "{}",
                    t.name
                );
                end = t.offset + t.len();
            }
            assert!(l.no_decay.start.is_multiple_of(CHUNK_ALIGN));
            assert_eq!(l.tensors.len() as u32, 1 + 6 * c.n_layers + 1 + 1);
        }
        let base = ParamLayout::new(&Config::preset("base").unwrap());
        assert!(
            (105_000_000..115_000_000).contains(&base.parameters()),
            "{}",
            base.parameters()
        );
    }

    #[test]
    fn chunks_cover_each_block_within_the_binding_limit() {
        let l = ParamLayout::new(&Config::preset("base").unwrap());
        let limit = 128 << 20; // lavapipe
        let chunks = l.chunks(limit).unwrap();
        assert!(
            chunks.len() > 2,
            "base's decay block exceeds 128 MiB of f32"
        );
        let covered: u64 = chunks.iter().map(|c| c.span.len).sum();
        assert_eq!(covered, l.decay.len + l.no_decay.len);
        for c in &chunks {
            assert!(4 * c.span.len <= limit && c.span.start.is_multiple_of(CHUNK_ALIGN));
        }
        assert_eq!(
            l.chunks(1 << 40).unwrap().len(),
            2,
            "one dispatch per block when it fits"
        );
        assert!(
            l.chunks(16 << 20).is_err(),
            "the 48 MiB embedding cannot be bound in 16 MiB"
        );
    }

    #[test]
    fn initial_weights_are_seeded_normal_with_unit_gains() {
        let l = ParamLayout::new(&Config::preset("tiny").unwrap());
        let (a, b) = (l.initial_weights(7), l.initial_weights(7));
        assert_eq!(a, b);
        assert_ne!(a, l.initial_weights(8));
        let e = l.get(Role::Embedding);
        let xs = &a[e.offset as usize..(e.offset + e.len()) as usize];
        let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / xs.len() as f64;
        let std =
            (xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        assert!(
            mean.abs() < 1e-3 && (std - INIT_STD).abs() < 1e-3,
            "mean {mean} std {std}"
        );
        let g = l.get(Role::FinalNorm);
        assert!(
            a[g.offset as usize..(g.offset + g.len()) as usize]
                .iter()
                .all(|&x| x == 1.0)
        );
    }
}
