// The adapter card: the adapter, its features and limits, and what they mean.

import { $, bytes } from './dom.js';

const card = $('adapter');

export function renderAdapter(r) {
  $('adapter-name').textContent = `${r.name} (${r.backend}${r.device_type === 'Cpu' ? ', software' : ''})`;
  $('adapter-f16').textContent = r.mixed_precision;
  $('adapter-f16').dataset.storage = r.f16_storage;
  $('adapter-timing').textContent = r.timing;
  $('adapter-subgroups').textContent = r.features.subgroups
    ? 'available'
    : 'not used in the browser (wgpu 30 cannot request them yet); kernels use the portable path';
  $('adapter-buffer').textContent = bytes(r.limits.max_buffer_size);
  $('adapter-binding').textContent = `${bytes(r.limits.max_storage_buffer_binding_size)} — bounds the largest tensor block one kernel can see`;
  $('adapter-workgroup').textContent = bytes(r.limits.max_compute_workgroup_storage_size);
  $('adapter-storage-buffers').textContent = `${r.limits.max_storage_buffers_per_shader_stage} per kernel`;
  $('adapter-status').textContent = 'Ready: this browser can train on its GPU.';
  $('adapter-facts').hidden = false;
  card.dataset.state = 'ready';
}

export function renderAdapterError(error) {
  $('adapter-status').textContent = error.message;
  card.dataset.state = 'error';
}
