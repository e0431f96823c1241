// The adapter card: the adapter, its features and limits, and what they
// mean — and whether the browser lets pages use its matrix units (asked of
// the page's own navigator.gpu: wgpu cannot request Dawn's feature yet).

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
  showMatrixUnits();
  $('adapter-status').textContent = 'Ready: this browser can train on its GPU.';
  $('adapter-facts').hidden = false;
  card.dataset.state = 'ready';
}

/// Chrome's matrix units (Dawn's `chromium-experimental-subgroup-matrix`):
/// offered to this page, or how to turn them on.
async function showMatrixUnits() {
  const dd = $('adapter-matrix-units');
  const adapter = await navigator.gpu?.requestAdapter().catch(() => null);
  const configs = adapter?.info?.subgroupMatrixConfigs ?? [];
  const offered = adapter?.features.has('chromium-experimental-subgroup-matrix');
  dd.dataset.offered = String(Boolean(offered));
  dd.textContent = offered
    ? `offered (${configs.length} configuration${configs.length === 1 ? '' : 's'}), not used yet: `
      + 'webtrain runs f16 products on matrix units natively (webtrain --matrix-units auto); in the browser they come next'
    : 'not offered to pages. Chrome exposes them behind --enable-unsafe-webgpu (Dawn\'s chromium-experimental-subgroup-matrix); '
      + 'on NVIDIA under Linux also --enable-dawn-features=vulkan_enable_f16_on_nvidia, since Dawn turns shader-f16 off there';
}

export function renderAdapterError(error) {
  $('adapter-status').textContent = error.message;
  card.dataset.state = 'error';
}
