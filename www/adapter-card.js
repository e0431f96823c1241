// The adapter card: the adapter, its features and limits, and what they
// mean — and whether the recipe's products run on the browser's matrix
// units (the worker's device asks for Dawn's subgroup matrices where Chrome
// offers them: www/matrix-units-patch.js), or how to turn them on, and
// where the last step's products ran.

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
  showMatrixUnits(r.matrix_units);
  $('adapter-status').textContent = 'Ready: this browser can train on its GPU.';
  $('adapter-facts').hidden = false;
  card.dataset.state = 'ready';
}

/// Chrome's matrix units (Dawn's `chromium-experimental-subgroup-matrix`)
/// as the worker's device got them (`units`: the adapter report's), or how
/// to turn them on.
function showMatrixUnits(units) {
  const dd = $('adapter-matrix-units');
  const inUse = Boolean(units) && !units.startsWith('none');
  dd.dataset.offered = String(inUse);
  dd.textContent = inUse
    ? `in use: ${units}`
    : `not in use (${units ?? 'not asked for'}). Chrome offers them to pages behind --enable-unsafe-webgpu `
      + '(Dawn\'s chromium-experimental-subgroup-matrix); on NVIDIA under Linux also '
      + '--enable-dawn-features=vulkan_enable_f16_on_nvidia, since Dawn turns shader-f16 off there';
}

/// Where the last step's products ran (a step's `products_on_units`): on
/// the units, sent back to the scalar GEMMs by their gate because a value
/// was not exact in f16, or on the scalar GEMMs without reaching it, and why.
export function showProductsOnUnits(counts) {
  const dd = $('adapter-products-on-units');
  dd.hidden = dd.previousElementSibling.hidden = false;
  dd.dataset.onUnits = String(counts.on_units);
  const scalar = [
    [counts.not_exact, `sent back by the gate (${counts.values_not_exact} values f16 cannot hold)`],
    [counts.operand, 'with an operand that is not f16 values times a scale (f32, a layer kept wide)'],
    [counts.no_units, 'with no matrix units in use'],
    [counts.shape, 'in shapes off the tiles'],
    [counts.slower, 'timed faster on the scalar GEMMs'],
  ].filter(([n]) => n > 0).map(([n, why]) => `${n} ${why}`);
  const total = counts.on_units + counts.not_exact + counts.operand + counts.no_units
    + counts.shape + counts.slower;
  dd.textContent = `${counts.on_units} of the last step's ${total} products on the units`
    + (scalar.length ? `; on the scalar GEMMs: ${scalar.join(', ')}` : '');
}

export function renderAdapterError(error) {
  $('adapter-status').textContent = error.message;
  card.dataset.state = 'error';
}
