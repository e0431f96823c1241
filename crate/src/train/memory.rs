//! GPU memory a training run takes, by kind, computed from the layout
//! before anything is allocated: what the page shows next to a model, and
//! how a model too big for the adapter is refused with a reason.

use serde::Serialize;

use crate::error::Result;
use crate::model::{BatchShape, Config, Dims, MasterStorage, Mirror, ParamLayout, Recipe};
use crate::optim::{OptimState, OptimizerKind, muon};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Memory {
    pub parameters: u64,
    /// master weights: f32, or bf16 (bf16-sr) and one tensor of them
    /// widened to f32 for the kernels that read f32
    pub master: u64,
    /// f32 gradients
    pub grads: u64,
    /// AdamW's m and v (Muon's momentum in m's place): f32, bf16, or 8-bit
    /// codes with their block scales
    pub moments: u64,
    /// Muon's Newton–Schulz buffers (0 with AdamW)
    pub optimizer_scratch: u64,
    /// the products' copy of the weights: f16 (f16 precision) or the
    /// layers' quantized once per step (`Recipe::quantized_weight_copy`)
    pub mirror: u64,
    /// saved activations, the loss head and the gradient scratch
    pub activations: u64,
    pub total: u64,
}

impl Memory {
    pub fn of(
        c: &Config,
        shape: BatchShape,
        precision: &Recipe,
        (optimizer, state, storage): (OptimizerKind, OptimState, MasterStorage),
        max_binding: u64,
    ) -> Result<Memory> {
        let layout = ParamLayout::new(c);
        let n = layout.total;
        let dims = Dims::new(c, shape, max_binding)?;
        let master = match storage {
            MasterStorage::F32 => storage.bytes(n),
            MasterStorage::Bf16 => storage.bytes(n) + 4 * layout.largest_tensor(),
        };
        let grads = 4 * n;
        let moments = state.bytes(n);
        let optimizer_scratch = match optimizer {
            OptimizerKind::Adamw => 0,
            OptimizerKind::Muon => muon::scratch_bytes(c, &layout)?,
        };
        let mirror = Mirror::bytes(&layout, precision);
        let activations = dims.bytes(c.n_layers as u64);
        let total = master + grads + moments + optimizer_scratch + mirror + activations;
        Ok(Memory {
            parameters: layout.parameters(),
            master,
            grads,
            moments,
            optimizer_scratch,
            mirror,
            activations,
            total,
        })
    }
}

/// Refuses, with the reason, a model this adapter cannot hold: a tensor or
/// a logits row chunk beyond one binding, a buffer beyond the largest
/// buffer. (WebGPU does not tell how much memory the device has: running out
/// of it is reported when the model is made.)
pub fn check_limits(c: &Config, shape: BatchShape, limits: &wgpu::Limits) -> Result<()> {
    c.validate()?;
    shape.validate(c)?;
    let layout = ParamLayout::new(c);
    layout.chunks(limits.max_storage_buffer_binding_size)?;
    let dims = Dims::new(c, shape, limits.max_storage_buffer_binding_size)?;
    let largest = (4 * layout.total).max(4 * dims.rows * (2 * dims.ffn).max(dims.qkv));
    if largest > limits.max_buffer_size {
        return Err(crate::Error::Limit {
            op: "model",
            what: "its largest buffer".into(),
            needed: largest,
            limit: limits.max_buffer_size,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_refuse_what_an_adapter_cannot_hold() {
        let base = Config::preset("base").unwrap();
        let shape = BatchShape { batch: 8, seq: 512 };
        let lavapipe = wgpu::Limits {
            max_storage_buffer_binding_size: 128 << 20,
            max_buffer_size: 2 << 30,
            ..wgpu::Limits::default()
        };
        check_limits(&base, shape, &lavapipe).unwrap();
        let small_buffers = wgpu::Limits {
            max_buffer_size: 256 << 20,
            ..lavapipe.clone()
        };
        let e = check_limits(&base, shape, &small_buffers)
            .unwrap_err()
            .to_string();
        assert!(e.contains("largest buffer"), "{e}");
        let small_bindings = wgpu::Limits {
            max_storage_buffer_binding_size: 32 << 20,
            ..lavapipe
        };
        let e = check_limits(&base, shape, &small_bindings)
            .unwrap_err()
            .to_string();
        assert!(e.contains("embed_tokens"), "{e}");
    }

    #[test]
    fn int8_state_is_at_most_27_percent_of_fp32_moments() {
        let c = Config::preset("small").unwrap();
        let s = BatchShape { batch: 8, seq: 256 };
        let adamw = |state| (OptimizerKind::Adamw, state, MasterStorage::F32);
        let fp32 = Memory::of(&c, s, &Recipe::fp32(), adamw(OptimState::Fp32), 1 << 30).unwrap();
        let int8 = Memory::of(&c, s, &Recipe::f16(), adamw(OptimState::Int8), 1 << 30).unwrap();
        let ratio = int8.moments as f64 / fp32.moments as f64;
        assert!(ratio <= 0.27, "{ratio}");
        assert_eq!(int8.mirror * 2, fp32.master);
        assert_eq!(fp32.mirror, 0);
    }

    #[test]
    fn bf16_sr_master_is_two_bytes_a_weight_and_one_tensor_widened() {
        let c = Config::preset("small").unwrap();
        let s = BatchShape { batch: 8, seq: 256 };
        let of = |storage| {
            let kind = (OptimizerKind::Adamw, OptimState::Fp32, storage);
            Memory::of(&c, s, &Recipe::fp32(), kind, 1 << 30).unwrap()
        };
        let (f32, bf16) = (of(MasterStorage::F32), of(MasterStorage::Bf16));
        let total = ParamLayout::new(&c).total;
        let embedding = 4 * (c.vocab * c.d_model) as u64; // the largest tensor, widened
        assert_eq!(f32.master, 4 * total);
        assert_eq!(bf16.master, 2 * total + embedding);
        assert_eq!(f32.total - bf16.total, f32.master - bf16.master);
    }
}
