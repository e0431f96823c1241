// Which files of a picked, dropped or zipped folder make a Hugging Face
// model: those of the folder holding config.json (the shallowest one),
// safetensors and JSON only, so nothing else in the folder is ever read.

/// Whether a path can be part of a Llama model folder.
export function isModelFile(path) {
  return /(^|\/)[^/]+\.(safetensors|json)$/.test(path);
}

/// [path, value] pairs → {file name: value} of the model folder's files.
export function modelFolder(pairs) {
  const dirOf = (path) => path.slice(0, path.lastIndexOf('/') + 1);
  const configs = pairs.map(([path]) => path).filter((p) => p.split('/').pop() === 'config.json');
  if (configs.length === 0) throw new Error('config.json: is missing: this is not a Hugging Face model folder');
  const dir = dirOf(configs.sort((a, b) => a.split('/').length - b.split('/').length)[0]);
  return Object.fromEntries(pairs
    .filter(([path]) => path.startsWith(dir) && !path.slice(dir.length).includes('/') && isModelFile(path))
    .map(([path, value]) => [path.slice(dir.length), value]));
}
