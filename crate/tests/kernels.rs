//! Every kernel against its CPU reference, natively in both f16 storage
//! modes and in the browser (`wasm-pack test --headless --chrome`).

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

mod common;

gpu_tests! {
    pipelines::broken_kernel_is_a_located_error,
    pipelines::every_shader_file_compiles,
    pipelines::lost_device_is_reported,
    pipelines::timestamps_time_dispatches,
    infrastructure::fill_matches_reference,
    infrastructure::scale_matches_reference,
    infrastructure::axpy_matches_reference,
    infrastructure::copy_matches_reference,
    infrastructure::kernels_bind_sub_ranges,
    infrastructure::axpy_covers_a_two_dimensional_dispatch,
    embedding::embed_lookup_matches_reference,
    embedding::embed_backward_matches_reference,
    embedding::embed_backward_sums_repeated_tokens_exactly,
    norm::rmsnorm_forward_matches_reference,
    norm::rmsnorm_backward_matches_reference,
    linear::linear_forward_matches_reference,
    linear::linear_forward_epilogues,
    linear::linear_backward_matches_reference,
    rope::rope_matches_reference,
    rope::rope_rotates_q_and_k_of_a_fused_row,
    rope::rope_is_accurate_at_far_positions_and_invertible,
    attention::attention_forward_matches_reference,
    attention::attention_reads_a_fused_qkv_row,
    attention::attention_is_causal,
    attention::attention_survives_scores_of_80,
    attention::attention_decode_matches_forward,
    attention::attention_checks_its_shapes,
    attention::attention_backward_matches_reference,
    attention::attention_backward_is_deterministic_and_fuses,
    activation::swiglu_matches_reference,
    activation::gelu_matches_reference,
    activation::activations_stay_finite_at_large_inputs,
    loss::cross_entropy_matches_reference,
    loss::cross_entropy_edge_cases,
    loss::cross_entropy_with_nothing_counted_is_zero,
    loss::loss_sum_is_deterministic,
    loss::cross_entropy_checks_its_settings,
    optimizer::grad_stats_match_reference,
    optimizer::adamw_matches_reference,
    cast::cast_saturates_and_keeps_nan,
    cast::cast_rounds_like_the_half_crate,
    cast::cast_round_trips_every_f16,
    cast::cast_covers_a_two_dimensional_dispatch,
}
