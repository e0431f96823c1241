// What the training worker keeps in the origin-private file system, so a
// later page load finds it: the autosaved run (a checkpoint, and its step
// beside it so the page can offer it without reading the file) and the
// GEMM kernel config the tuner chose on this adapter.

const AUTOSAVE = 'autosave.safetensors';
const AUTOSAVE_STEP = 'autosave.json'; // {step}, so the offer can name it without reading the file
// The GEMM variants the tuner chose (a KernelConfig), and whether the user pinned them.
const KERNELS = 'kernels.json'; // {config, pinned}

/// The autosave being written in the background, if one is.
let writing = Promise.resolve();

async function fileHandle(name, create) {
  const root = await navigator.storage.getDirectory();
  return root.getFileHandle(name, { create });
}

async function writeFile(name, contents) {
  const writable = await (await fileHandle(name, true)).createWritable();
  await writable.write(contents);
  await writable.close();
}

async function readJson(name) {
  return JSON.parse(await (await (await fileHandle(name, false)).getFile()).text());
}

// --- the autosave -----------------------------------------------------

/// Writes the run's checkpoint `bytes`, at `step`, as the autosave.
async function writeAutosave(bytes, step) {
  await writeFile(AUTOSAVE, bytes);
  await writeFile(AUTOSAVE_STEP, JSON.stringify({ step }));
}

/// Waits for the last background write: its failure is thrown here, once.
export async function finishBackgroundWrite() {
  const previous = writing;
  writing = Promise.resolve();
  await previous;
}

/// Starts writing the autosave; the next finishBackgroundWrite tells how it went.
export function autosaveInBackground(bytes, step) {
  writing = writeAutosave(bytes, step);
}

/// Writes the autosave once the background write (if any) has settled,
/// for a reload to restore; resolves with whether storage took it.
export async function keepForReload(bytes, step) {
  await writing.catch(() => {});
  return writeAutosave(bytes, step).then(() => true, () => false);
}

/// {step, bytes, saved_at} of the autosave, or null where there is none.
export async function storedAutosave() {
  try {
    const file = await (await fileHandle(AUTOSAVE, false)).getFile();
    const { step } = await readJson(AUTOSAVE_STEP);
    return { step, bytes: file.size, saved_at: file.lastModified };
  } catch {
    return null; // nothing saved yet
  }
}

/// The autosave's File (throws where there is none).
export async function autosaveFile() {
  return (await fileHandle(AUTOSAVE, false)).getFile();
}

// --- the kernel config --------------------------------------------------

/// {config, pinned} as kept last, or null.
export async function storedKernels() {
  try {
    return await readJson(KERNELS);
  } catch {
    return null; // nothing stored yet
  }
}

export async function storeKernels(kept) {
  await writeFile(KERNELS, JSON.stringify(kept));
}
