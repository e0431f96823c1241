//! The optimizer kernels' entry points and bindings (12_optimizer.wgsl).

use crate::gpu::{KernelDesc, Slot};

pub(super) const REDUCE: KernelDesc = KernelDesc {
    entry: "reduce_norm_sq",
    slots: &[
        Slot::Uniform(0),               // reduce_params
        Slot::Read(1, "grads"),         // grads_in: [n] f32
        Slot::ReadWrite(2, "partials"), // [G total] (Σg², non-finite)
    ],
};
pub(super) const FINALIZE: KernelDesc = KernelDesc {
    entry: "finalize_grad_stats",
    slots: &[
        Slot::Uniform(0),                 // finalize_params
        Slot::Read(1, "partials"),        // partials_in: [G total]
        Slot::Read(2, "loss"),            // loss_in: LossTotals, the step's loss
        Slot::ReadWrite(3, "stats"),      // stats_out: GradStats
        Slot::ReadWrite(4, "loss_scale"), // scale_state: LossScale, updated when scaling
    ],
};
pub(super) const UPDATE_SLOTS: [Slot; 7] = [
    Slot::Uniform(0),              // adam: AdamBlock
    Slot::Uniform(1),              // adam_step: AdamStep
    Slot::Read(2, "stats"),        // GradStats
    Slot::ReadWrite(3, "weights"), // [n] f32
    Slot::ReadWrite(4, "grads"),   // [n] f32, zeroed
    Slot::ReadWrite(5, "moment1"), // [n] f32
    Slot::ReadWrite(6, "moment2"), // [n] f32
];
pub(super) const UPDATE: KernelDesc = KernelDesc {
    entry: "adamw_update",
    slots: &UPDATE_SLOTS,
};
pub(super) const UPDATE_F16: KernelDesc = KernelDesc {
    entry: "adamw_update_f16",
    slots: &[
        UPDATE_SLOTS[0],
        UPDATE_SLOTS[1],
        UPDATE_SLOTS[2],
        UPDATE_SLOTS[3],
        UPDATE_SLOTS[4],
        UPDATE_SLOTS[5],
        UPDATE_SLOTS[6],
        Slot::ReadWrite(7, "mirror"), // [n] f16
    ],
};

pub(super) const UPDATE_8BIT_SLOTS: [Slot; 10] = [
    UPDATE_SLOTS[0],
    UPDATE_SLOTS[1],
    UPDATE_SLOTS[2],
    Slot::Read(10, "code_tables"), // [1024] f32, values of m and v, then their steps
    UPDATE_SLOTS[3],
    UPDATE_SLOTS[4],
    Slot::ReadWrite(5, "m_codes"),  // [⌈n/4⌉] u32, 4 bytes of m
    Slot::ReadWrite(6, "v_codes"),  // [⌈n/4⌉] u32, 4 bytes of v
    Slot::ReadWrite(7, "m_scales"), // [⌈n/256⌉] f32
    Slot::ReadWrite(8, "v_scales"), // [⌈n/256⌉] f32
];
pub(super) const UPDATE_8BIT: KernelDesc = KernelDesc {
    entry: "adamw_8bit_update",
    slots: &UPDATE_8BIT_SLOTS,
};
pub(super) const UPDATE_8BIT_F16: KernelDesc = KernelDesc {
    entry: "adamw_8bit_update_f16",
    slots: &[
        UPDATE_8BIT_SLOTS[0],
        UPDATE_8BIT_SLOTS[1],
        UPDATE_8BIT_SLOTS[2],
        UPDATE_8BIT_SLOTS[3],
        UPDATE_8BIT_SLOTS[4],
        UPDATE_8BIT_SLOTS[5],
        UPDATE_8BIT_SLOTS[6],
        UPDATE_8BIT_SLOTS[7],
        UPDATE_8BIT_SLOTS[8],
        UPDATE_8BIT_SLOTS[9],
        Slot::ReadWrite(9, "mirror"), // q_mirror: [n] f16
    ],
};

pub(super) const UPDATE_FP8: KernelDesc = KernelDesc {
    entry: "adamw_fp8_update",
    ..UPDATE_8BIT
};
pub(super) const UPDATE_FP8_F16: KernelDesc = KernelDesc {
    entry: "adamw_fp8_update_f16",
    ..UPDATE_8BIT_F16
};
pub(super) const UPDATE_LINEAR: KernelDesc = KernelDesc {
    entry: "adamw_linear_update",
    ..UPDATE_8BIT
};
pub(super) const UPDATE_LINEAR_F16: KernelDesc = KernelDesc {
    entry: "adamw_linear_update_f16",
    ..UPDATE_8BIT_F16
};
pub(super) const UPDATE_INT4: KernelDesc = KernelDesc {
    entry: "adamw_int4_update",
    ..UPDATE_8BIT
};
pub(super) const UPDATE_INT4_F16: KernelDesc = KernelDesc {
    entry: "adamw_int4_update_f16",
    ..UPDATE_8BIT_F16
};
pub(super) const UPDATE_BF16_SLOTS: [Slot; 7] = [
    UPDATE_SLOTS[0],
    UPDATE_SLOTS[1],
    UPDATE_SLOTS[2],
    UPDATE_SLOTS[3],
    UPDATE_SLOTS[4],
    Slot::ReadWrite(5, "m_bf16"), // [⌈n/2⌉] u32, 2 bf16 of m
    Slot::ReadWrite(6, "v_bf16"), // [⌈n/2⌉] u32, 2 bf16 of v
];
pub(super) const UPDATE_BF16: KernelDesc = KernelDesc {
    entry: "adamw_bf16_update",
    slots: &UPDATE_BF16_SLOTS,
};
pub(super) const UPDATE_BF16_F16: KernelDesc = KernelDesc {
    entry: "adamw_bf16_update_f16",
    slots: &[
        UPDATE_BF16_SLOTS[0],
        UPDATE_BF16_SLOTS[1],
        UPDATE_BF16_SLOTS[2],
        UPDATE_BF16_SLOTS[3],
        UPDATE_BF16_SLOTS[4],
        UPDATE_BF16_SLOTS[5],
        UPDATE_BF16_SLOTS[6],
        Slot::ReadWrite(7, "mirror"), // [n] f16
    ],
};

pub(super) const MUON_MOMENTUM: KernelDesc = KernelDesc {
    entry: "muon_momentum",
    slots: &[
        UPDATE_SLOTS[0],
        UPDATE_SLOTS[2],
        UPDATE_SLOTS[4],
        UPDATE_SLOTS[5],
        Slot::ReadWrite(11, "nesterov"), // [n] f32
    ],
};
pub(super) const MUON_MOMENTUM_8BIT: KernelDesc = KernelDesc {
    entry: "muon_momentum_8bit",
    slots: &[
        UPDATE_8BIT_SLOTS[0],
        UPDATE_8BIT_SLOTS[1],
        UPDATE_8BIT_SLOTS[2],
        UPDATE_8BIT_SLOTS[3],
        UPDATE_8BIT_SLOTS[5],
        UPDATE_8BIT_SLOTS[6],
        UPDATE_8BIT_SLOTS[8],
        Slot::ReadWrite(11, "nesterov"), // [n − first] f32
    ],
};
pub(super) const MUON_MOMENTUM_FP8: KernelDesc = KernelDesc {
    entry: "muon_momentum_fp8",
    ..MUON_MOMENTUM_8BIT
};
pub(super) const MUON_MOMENTUM_LINEAR: KernelDesc = KernelDesc {
    entry: "muon_momentum_linear",
    ..MUON_MOMENTUM_8BIT
};
pub(super) const MUON_MOMENTUM_INT4: KernelDesc = KernelDesc {
    entry: "muon_momentum_int4",
    ..MUON_MOMENTUM_8BIT
};
pub(super) const MUON_MOMENTUM_BF16: KernelDesc = KernelDesc {
    entry: "muon_momentum_bf16",
    slots: &[
        UPDATE_SLOTS[0],
        UPDATE_SLOTS[2],
        UPDATE_SLOTS[4],
        UPDATE_BF16_SLOTS[5],
        Slot::ReadWrite(11, "nesterov"), // [n] f32
    ],
};
