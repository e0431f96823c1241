// The training worker's zips: a Hugging Face model folder unpacked from a
// .zip for hf.import, within www/limits.js's caps, and the export's folder
// packed into one for hf.export.

import { unzipSync, zipSync } from 'fflate';
import { isModelFile, modelFolder } from './hf-folder.js';
import { checkModelFiles, checkZip } from './limits.js';

/// The model folder's files in `zip` ([path, Uint8Array]), unpacked only
/// once what their entries declare they unpack to is within the caps
/// (www/limits.js): fflate allocates each entry's declared size, and
/// never writes past it, so a zip that lies about a size gives a truncated
/// file, refused when read, never more memory. Only the first entry of a
/// path is taken.
export function unzipModel(zip) {
  const data = new Uint8Array(zip);
  checkZip('the zip', data.byteLength);
  const declared = declaredModelFiles(data);
  const chosen = Object.values(modelFolder([...declared.keys()].map((path) => [path, path])));
  checkModelFiles(chosen.map((path) => [path, declared.get(path)]), { unpacked: true });
  const wanted = new Set(chosen);
  return Object.entries(unzipSync(data, { filter: (f) => wanted.delete(f.name) }));
}

/// {path → the size its entry declares} of the zip's model files, listed, not unpacked.
function declaredModelFiles(data) {
  const declared = new Map();
  unzipSync(data, {
    filter: (f) => {
      if (isModelFile(f.name) && !declared.has(f.name)) declared.set(f.name, Math.max(f.size, f.originalSize));
      return false; // listed, not unpacked
    },
  });
  return declared;
}

/// `files` ({name: Uint8Array}) as a .zip of `folder`/, an ArrayBuffer.
export function zipFolder(folder, files) {
  // stored, not deflated: f32 weights barely compress and would cost seconds
  const entries = Object.fromEntries(Object.entries(files).map(([name, bytes]) => [`${folder}/${name}`, [bytes, { level: 0 }]]));
  const zip = zipSync(entries);
  return zip.byteLength === zip.buffer.byteLength ? zip.buffer : zip.slice().buffer;
}
