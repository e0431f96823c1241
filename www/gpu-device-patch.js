// A patch of GPUDevice.prototype.createBuffer in the training worker, so
// Inspect's Page memory (the worker's `memory` request) can say how many
// GPU buffers the worker holds and how big they are. WebGPU has no query
// for that, and wgpu's web backend never destroys a buffer itself: it
// leaves freeing them to the garbage collector, so a buffer is counted
// when made and uncounted when a FinalizationRegistry hears it was
// collected. The patch must be in place before the device makes its first
// buffer; it changes nothing else about a buffer.

/// Counts the GPU buffers every device of this thread makes from now on:
/// {live, bytes}, kept current as buffers are made and collected. Where
/// there is no WebGPU, nothing is patched and the count stays at zero.
export function countGpuBuffers() {
  const count = { live: 0, bytes: 0 };
  if (typeof GPUDevice === 'undefined') return count;
  const freed = new FinalizationRegistry((size) => { count.live--; count.bytes -= size; });
  const createBuffer = GPUDevice.prototype.createBuffer;
  GPUDevice.prototype.createBuffer = function (descriptor) {
    const buffer = createBuffer.call(this, descriptor);
    count.live++;
    count.bytes += descriptor.size;
    freed.register(buffer, descriptor.size);
    return buffer;
  };
  return count;
}
