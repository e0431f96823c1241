//! Which HF Llama tensor is which rows of which webtrain tensor. webtrain
//! stacks q, k and v into one `qkv_proj` and gate and up into one
//! `gate_up_proj` (one GEMM each); HF keeps them apart. Both use the
//! `rotate_half` RoPE layout, so no row permutation is needed.

use crate::model::{Config, ParamLayout, Role};

/// One HF tensor: rows `row0 .. row0 + rows` of the layout tensor `role`.
#[derive(Clone, Debug, PartialEq)]
pub struct Part {
    pub name: String,
    pub role: Role,
    pub row0: u32,
    pub rows: u32,
    pub cols: u32,
    /// A norm gain: 1-D `[cols]` in HF, one row here.
    pub gain: bool,
}

impl Part {
    pub fn shape(&self) -> Vec<usize> {
        if self.gain {
            vec![self.cols as usize]
        } else {
            vec![self.rows as usize, self.cols as usize]
        }
    }

    /// Its elements' range in the layout's mega-buffer.
    pub fn range(&self, layout: &ParamLayout) -> std::ops::Range<usize> {
        let start = (layout.get(self.role).offset + self.row0 as u64 * self.cols as u64) as usize;
        start..start + (self.rows as u64 * self.cols as u64) as usize
    }
}

/// Every HF tensor of a model of config `c`, in layout order (no
/// `lm_head.weight` when the embeddings are tied).
pub fn parts(c: &Config, layout: &ParamLayout) -> Vec<Part> {
    let (dh, f) = (c.head_dim(), c.ffn);
    let mut out = Vec::new();
    for t in &layout.tensors {
        let whole = |name: String| Part {
            name,
            role: t.role,
            row0: 0,
            rows: t.rows,
            cols: t.cols,
            gain: t.rows == 1,
        };
        let split = |names: [String; 3], rows: [u32; 3]| {
            let mut row0 = 0;
            names
                .into_iter()
                .zip(rows)
                .filter(|(_, n)| *n > 0)
                .map(|(name, rows)| {
                    let p = Part {
                        name,
                        role: t.role,
                        row0,
                        rows,
                        cols: t.cols,
                        gain: false,
                    };
                    row0 += rows;
                    p
                })
                .collect::<Vec<_>>()
        };
        let layer = |l: u32, rest: &str| format!("model.layers.{l}.{rest}.weight");
        match t.role {
            Role::Embedding => out.push(whole("model.embed_tokens.weight".into())),
            Role::Qkv(l) => out.extend(split(
                ["q_proj", "k_proj", "v_proj"].map(|p| layer(l, &format!("self_attn.{p}"))),
                [c.n_heads * dh, c.n_kv_heads * dh, c.n_kv_heads * dh],
            )),
            Role::Out(l) => out.push(whole(layer(l, "self_attn.o_proj"))),
            Role::GateUp(l) => out.extend(split(
                ["gate_proj", "up_proj", ""].map(|p| layer(l, &format!("mlp.{p}"))),
                [f, f, 0],
            )),
            Role::Down(l) => out.push(whole(layer(l, "mlp.down_proj"))),
            Role::LmHead => out.push(whole("lm_head.weight".into())),
            Role::AttnNorm(l) => out.push(whole(layer(l, "input_layernorm"))),
            Role::MlpNorm(l) => out.push(whole(layer(l, "post_attention_layernorm"))),
            Role::FinalNorm => out.push(whole("model.norm.weight".into())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_every_parameter_once_with_hf_names() {
        for tied in [false, true] {
            let c = Config {
                tie_word_embeddings: tied,
                ..Config::preset("tiny").unwrap()
            };
            let layout = ParamLayout::new(&c);
            let parts = parts(&c, &layout);
            let mut covered = vec![0u8; layout.total as usize];
            for p in &parts {
                covered[p.range(&layout)].iter_mut().for_each(|x| *x += 1);
            }
            for t in &layout.tensors {
                assert!(
                    covered[t.offset as usize..(t.offset + t.len()) as usize]
                        .iter()
                        .all(|&x| x == 1),
                    "{} covered once",
                    t.name
                );
            }
            assert_eq!(
                covered.iter().map(|&x| x as u64).sum::<u64>(),
                layout.parameters()
            );
            let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
            assert!(
                names.contains(&"model.layers.1.self_attn.k_proj.weight")
                    && names.contains(&"model.layers.0.mlp.up_proj.weight")
            );
            assert_eq!(names.contains(&"lm_head.weight"), !tied);
            // GQA: k and v are Hkv·Dh rows
            let k = parts
                .iter()
                .find(|p| p.name == "model.layers.0.self_attn.k_proj.weight")
                .unwrap();
            assert_eq!((k.row0, k.rows, k.cols), (64, 32, 64));
            let gain = parts
                .iter()
                .find(|p| p.name == "model.norm.weight")
                .unwrap();
            assert_eq!(gain.shape(), vec![64]);
        }
    }
}
