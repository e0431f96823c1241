// Chrome's matrix units for the training worker. wgpu cannot request
// Dawn's `chromium-experimental-subgroup-matrix`, so GPUAdapter's
// requestDevice is wrapped: where the adapter offers a square f16 × f16 →
// f32 configuration, the device is asked for the feature too (with
// `subgroups`, which it needs, and `shader-f16`), and the choice is left
// in globalThis.webtrainSubgroupMatrices for the wasm build
// (crate/src/gpu/browser.rs): {edge, subgroup}, or {unavailable: why}.
// Chrome offers the feature only behind --enable-unsafe-webgpu.

export const SUBGROUP_MATRIX = 'chromium-experimental-subgroup-matrix';

/// What `adapter` allows: the fragment edge (16 where offered, else 8) and
/// the subgroup size the kernels are laid out for, or why nothing.
export function chooseSubgroupMatrices(adapter) {
  if (!adapter.features.has(SUBGROUP_MATRIX)) {
    return {
      unavailable: 'the browser offers no subgroup matrices to pages (Chrome: --enable-unsafe-webgpu)',
    };
  }
  if (!adapter.features.has('shader-f16') || !adapter.features.has('subgroups')) {
    return {
      unavailable: 'subgroup matrices without shader-f16 or subgroups (Dawn turns f16 off on NVIDIA '
        + 'under Linux: --enable-dawn-features=vulkan_enable_f16_on_nvidia)',
    };
  }
  const configs = adapter.info?.subgroupMatrixConfigs ?? [];
  const square = (c, e) => c.componentType === 'f16' && c.resultComponentType === 'f32'
    && Number(c.M) === e && Number(c.N) === e && Number(c.K) === e;
  const edge = [16, 8].find((e) => configs.some((c) => square(c, e)));
  if (!edge) {
    return { unavailable: `no square f16 x f16 -> f32 configuration of 16 or 8 among ${configs.length}` };
  }
  // a kernel's workgroup is sized to hold so many subgroups of this size
  const { subgroupMinSize: min, subgroupMaxSize: max } = adapter.info ?? {};
  if (!max || min !== max) {
    return { unavailable: `the subgroup size varies (${min}..${max}): the kernels are laid out in whole subgroups` };
  }
  return { edge, subgroup: max };
}

/// Wraps requestDevice on this thread (where there is WebGPU) so every
/// device asks for subgroup matrices where `chooseSubgroupMatrices` allows.
export function requestSubgroupMatrices(scope = globalThis) {
  if (typeof scope.GPUAdapter === 'undefined') return;
  const requestDevice = scope.GPUAdapter.prototype.requestDevice;
  scope.GPUAdapter.prototype.requestDevice = function (descriptor = {}) {
    const choice = chooseSubgroupMatrices(this);
    scope.webtrainSubgroupMatrices = choice;
    if (!choice.edge) return requestDevice.call(this, descriptor);
    const requiredFeatures = [...new Set([
      ...(descriptor.requiredFeatures ?? []), SUBGROUP_MATRIX, 'subgroups', 'shader-f16',
    ])];
    return requestDevice.call(this, { ...descriptor, requiredFeatures });
  };
}
