// Export for transformers: train the tiny model a few steps, click Export,
// unzip the download and check the Hugging Face folder in it — the files,
// config.json's sizes, model.safetensors' header (names, shapes, F32,
// offsets tiling the file). Where Python has transformers, it loads the
// folder with LlamaForCausalLM.from_pretrained and scores the page's own
// validation windows (the held-out tail of the built-in corpus, cut as
// data::Dataset cuts it): the loss must be the one the page showed at the
// exported step, so the zip holds the run's current weights. Then the page
// imports the export back (its zip picked and dropped, and the folder
// itself through the folder picker) to evaluate and fine-tune it, and
// refuses broken folders with the CLI's reasons.

import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { unzipSync, strFromU8, strToU8 } from 'fflate';
import { sharedApp, openPage, noErrors, createModel, trainUntil, singleSteps, stepCount, waitOrError, errorText } from './browser.mjs';

// the tiny preset (crate/src/model/config.rs)
const TINY = { vocab_size: 301, hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, intermediate_size: 176, max_position_embeddings: 64 };
const FILES = ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json'];
const OUT = 'test-results/export-hf';

// The mean loss of the exported model over the page's validation batches:
// the last 5% of the corpus' tokens (webtrain's default val_fraction), cut
// into consecutive windows of seq + 1, in batches of `batch`, the first
// eight full ones (run::VALIDATION_BATCHES); each batch's mean, averaged.
const PYTHON = `
import json, math, sys, torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import LlamaForCausalLM
folder, corpus, batch, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
model, info = LlamaForCausalLM.from_pretrained(folder, output_loading_info=True)
tok = Tokenizer.from_file(f"{folder}/tokenizer.json")
ids = tok.encode(open(corpus, encoding="utf-8").read(), add_special_tokens=False).ids
train_end = len(ids) - math.floor(len(ids) * 0.05 + 0.5)
starts = list(range(train_end, len(ids) - seq, seq))
batches = [starts[i:i + batch] for i in range(0, len(starts), batch)]
batches = [b for b in batches if len(b) == batch][:8]
losses = []
with torch.no_grad():
    for b in batches:
        x = torch.tensor([ids[s:s + seq] for s in b])
        y = torch.tensor([ids[s + 1:s + 1 + seq] for s in b])
        logits = model(x).logits
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item())
print(json.dumps({"loss": sum(losses) / len(losses), "batches": len(losses), "dtype": str(model.dtype),
                  "missing": sorted(info["missing_keys"]), "unexpected": sorted(info["unexpected_keys"])}))
`;

describe('export-hf: export for transformers', () => {
  let page;
  const errors = [];
  let folder = null; // the unzipped folder on disk, once the export test passed
  let zipPath = null; // the downloaded zip
  let validation = null; // the page's validation loss at the exported step
  const BATCH = 4;
  const SEQ = 32;

  before(async () => {
    rmSync(OUT, { recursive: true, force: true });
    mkdirSync(OUT, { recursive: true });
    ({ page } = await openPage(await sharedApp(), '/', { errors }));
  });
  afterEach(() => noErrors(errors));
  after(async () => { await page?.close(); });

  /// model.safetensors' header: a u64 little-endian length, then that much JSON.
  function safetensorsHeader(bytes) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const n = Number(view.getBigUint64(0, true));
    assert.ok(n > 2 && 8 + n <= bytes.byteLength, `header length ${n} in a file of ${bytes.byteLength} bytes`);
    return { n, header: JSON.parse(strFromU8(bytes.subarray(8, 8 + n))) };
  }

  test('Export downloads a zipped Hugging Face folder of the model', async () => {
    await createModel(page, { batch: BATCH, seq: SEQ, steps: 40, warmup: 5, lr: 0.003 });
    await trainUntil(page, 10);
    assert.equal(await errorText(page, 'train-error'), null);
    const step = await stepCount(page);

    const download = page.waitForEvent('download', { timeout: 120_000 }).catch(() => null);
    await page.click('#export-hf');
    const failed = await Promise.race([download.then(() => null), waitOrError(page, () => false, 'checkpoint-error', { timeout: 120_000 })]);
    assert.equal(failed, null);
    const file = await download;
    const name = `webtrain-tiny-step${step}-hf`;
    assert.equal(file.suggestedFilename(), `${name}.zip`);
    const path = `${OUT}/${file.suggestedFilename()}`;
    await file.saveAs(path);
    zipPath = path;
    assert.match(await page.locator('#checkpoint-status').textContent(), /from_pretrained/);
    await page.locator('#checkpoints').screenshot({ path: 'test-results/panel-checkpoints-export.png' });

    // one folder named like the zip, holding the four files
    const zip = unzipSync(new Uint8Array(readFileSync(path)));
    assert.deepEqual(Object.keys(zip).sort(), FILES.map((f) => `${name}/${f}`));
    const files = Object.fromEntries(Object.entries(zip).map(([k, v]) => [k.slice(name.length + 1), v]));

    const config = JSON.parse(strFromU8(files['config.json']));
    assert.deepEqual(config.architectures, ['LlamaForCausalLM']);
    assert.equal(config.model_type, 'llama');
    for (const [key, value] of Object.entries(TINY)) assert.equal(config[key], value, `config.json ${key}`);
    assert.equal(config.tie_word_embeddings, false);
    JSON.parse(strFromU8(files['generation_config.json']));
    const tokenizer = JSON.parse(strFromU8(files['tokenizer.json']));
    assert.equal(tokenizer.model.type, 'BPE');
    assert.ok(Object.keys(tokenizer.model.vocab).length <= TINY.vocab_size);

    const weights = files['model.safetensors'];
    const { n, header } = safetensorsHeader(weights);
    const tensors = Object.entries(header).filter(([k]) => k !== '__metadata__');
    const { hidden_size: d, intermediate_size: f, vocab_size: v, num_hidden_layers: layers } = TINY;
    const kv = (TINY.num_key_value_heads * d) / TINY.num_attention_heads;
    const want = {
      'model.embed_tokens.weight': [v, d],
      'model.layers.0.self_attn.q_proj.weight': [d, d],
      'model.layers.0.self_attn.k_proj.weight': [kv, d],
      'model.layers.0.mlp.gate_proj.weight': [f, d],
      'model.layers.1.mlp.down_proj.weight': [d, f],
      'model.norm.weight': [d],
      'lm_head.weight': [v, d],
    };
    for (const [tensor, shape] of Object.entries(want)) {
      assert.ok(header[tensor], `model.safetensors has ${tensor}`);
      assert.equal(header[tensor].dtype, 'F32', tensor);
      assert.deepEqual(header[tensor].shape, shape, tensor);
    }
    assert.equal(tensors.length, 3 + 9 * layers, 'embed, norm, lm_head and 9 tensors per layer');
    // the offsets tile the data section exactly
    const spans = tensors.map(([, t]) => t.data_offsets).sort((a, b) => a[0] - b[0]);
    let end = 0;
    for (const [k, { shape, data_offsets: [a, b] }] of tensors) assert.equal(b - a, 4 * shape.reduce((x, y) => x * y, 1), k);
    for (const [a, b] of spans) { assert.equal(a, end); end = b; }
    assert.equal(8 + n + end, weights.byteLength);
    const norm = new Float32Array(weights.slice(8 + n + header['model.norm.weight'].data_offsets[0], 8 + n + header['model.norm.weight'].data_offsets[1]).buffer);
    assert.ok(norm.every(Number.isFinite) && norm.some((g) => g !== 1), 'trained norm gains');

    mkdirSync(`${OUT}/${name}`, { recursive: true });
    for (const [k, bytes] of Object.entries(files)) writeFileSync(`${OUT}/${name}/${k}`, bytes);
    folder = `${OUT}/${name}`;

    // the pause validated the weights the export holds
    assert.equal(Number(await page.locator('#stat-val').getAttribute('data-step')), step);
    validation = Number(await page.locator('#stat-val').getAttribute('data-loss'));

    // the run goes on after an export
    await trainUntil(page, step + 2);
    assert.equal(await errorText(page, 'train-error'), null);
  });

  test('transformers loads the export and scores the validation text as the page did', async (t) => {
    if (!folder) return t.skip('no export');
    const probe = spawnSync('python3', ['-c', 'import transformers, torch, tokenizers'], { encoding: 'utf8' });
    if (probe.status !== 0) return t.skip('Python with transformers, torch and tokenizers is not installed');
    const run = spawnSync('python3', ['-c', PYTHON, folder, 'public/corpus/brown.txt', String(BATCH), String(SEQ)], { encoding: 'utf8', timeout: 300_000 });
    assert.equal(run.status, 0, `python: ${run.stderr}`);
    const got = JSON.parse(run.stdout.trim().split('\n').at(-1));
    assert.deepEqual(got.missing, [], 'no tensor missing');
    assert.deepEqual(got.unexpected, [], 'no tensor left over');
    assert.equal(got.dtype, 'torch.float32');
    assert.equal(got.batches, 8);
    t.diagnostic(`validation loss: page ${validation}, transformers ${got.loss}`);
    // fp32 on SwiftShader against fp32 on the CPU: sums in other orders
    assert.ok(Math.abs(got.loss - validation) < 1e-4, `transformers ${got.loss}, the page ${validation}`);
  });

  /// Imports `path` through `input` (the zip or the folder picker); the
  /// page's checkpoint error if refused, else null once the run of `name`
  /// (the folder's or the zip's) is idle.
  async function importHf(input, path) {
    const name = path.split('/').pop().replace(/\.zip$/, '');
    if (input === 'drop') {
      // a zip dropped on the Checkpoints panel
      const dataTransfer = await page.evaluateHandle(({ base64, file }) => {
        const dt = new DataTransfer();
        dt.items.add(new File([Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))], file, { type: 'application/zip' }));
        return dt;
      }, { base64: readFileSync(path).toString('base64'), file: path.split('/').pop() });
      await page.dispatchEvent('#checkpoints', 'drop', { dataTransfer });
    } else {
      await page.setInputFiles(input, path);
    }
    return waitOrError(page, (n) => document.querySelector('#checkpoint-status').textContent.startsWith(`Imported ${n}:`)
      && document.querySelector('#train').dataset.phase === 'idle', 'checkpoint-error', { arg: name });
  }

  test('the export imports back in the page, scores the validation text as the run did, and fine-tunes', async () => {
    assert.ok(zipPath && folder, 'an export to import');
    for (const [input, path] of [['#hf-zip-input', zipPath], ['#hf-folder-input', folder], ['drop', zipPath]]) {
      assert.equal(await importHf(input, path), null, `import through ${input}`);
      assert.equal(await stepCount(page), 0, 'a new run from the folder\'s weights');
      assert.match(await page.locator('#stat-mode').textContent(), /fp32/);
      await page.click('#validate');
      await page.waitForFunction(() => document.querySelector('#stat-val').dataset.step === '0', undefined, { timeout: 120_000 });
      // the same weights, batches and adapter: the same bits
      const loss = Number(await page.locator('#stat-val').getAttribute('data-loss'));
      assert.equal(loss, validation, `validation loss after importing through ${input}`);
    }
    await singleSteps(page, 2);
    assert.equal(await errorText(page, 'train-error'), null);
  });

  /// A tokenizer.json of `n` tokens: `tokenizer`'s, with tokens added to its
  /// vocabulary (another tokenizer than the model's).
  function withMoreTokens(tokenizer, n) {
    const vocab = tokenizer.model.vocab;
    for (let id = Object.keys(vocab).length; id < n; id++) vocab[`extra${id}`] = id;
    return tokenizer;
  }

  test('a broken folder is refused in the page with the reason the CLI gives', async () => {
    const files = Object.fromEntries(['config.json', 'model.safetensors', 'tokenizer.json'].map((f) => [f, readFileSync(`${folder}/${f}`)]));
    const { n, header } = safetensorsHeader(new Uint8Array(files['model.safetensors']));
    const data = files['model.safetensors'].subarray(8 + n);
    /// model.safetensors with its tensors changed by `edit` ({name: {dtype,
    /// shape, data_offsets}}), rewritten with offsets that tile the data.
    const withHeader = (edit) => {
      const h = structuredClone(header);
      edit(h);
      const tensors = Object.entries(h).filter(([k]) => k !== '__metadata__');
      const out = { __metadata__: h.__metadata__ };
      const parts = [];
      let at = 0;
      for (const [name, t] of tensors) {
        const bytes = data.subarray(t.data_offsets[0], t.data_offsets[1]);
        out[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [at, at + bytes.length] };
        parts.push(bytes);
        at += bytes.length;
      }
      const text = JSON.stringify(out);
      const json = strToU8(text.padEnd(Math.ceil(text.length / 8) * 8, ' '));
      const len = Buffer.alloc(8);
      len.writeBigUInt64LE(BigInt(json.length));
      return Buffer.concat([len, json, ...parts]);
    };
    const down = 'model.layers.1.mlp.down_proj.weight';
    const config = JSON.parse(files['config.json'].toString());
    const broken = {
      'missing-tensor': [{ 'model.safetensors': withHeader((h) => { delete h[down]; }) }, /missing tensors: .*down_proj/],
      'wrong-shape': [{ 'model.safetensors': withHeader((h) => { h[down].shape.reverse(); }) }, /tensor model\.layers\.1\.mlp\.down_proj\.weight has shape/],
      'unsupported-config': [{ 'config.json': JSON.stringify({ ...config, hidden_act: 'gelu' }) }, /config\.json: .*hidden_act "gelu"/],
      'another-tokenizer': [{ 'tokenizer.json': JSON.stringify(withMoreTokens(JSON.parse(files['tokenizer.json'].toString()), config.vocab_size + 40)) },
        /more than the model's vocab_size .*not this model's tokenizer/],
    };
    for (const [name, [changed, reason]] of Object.entries(broken)) {
      const dir = `${OUT}/broken/${name}`;
      mkdirSync(dir, { recursive: true });
      for (const [f, bytes] of Object.entries({ ...files, ...changed })) writeFileSync(`${dir}/${f}`, bytes);
      const refused = await importHf('#hf-folder-input', dir);
      assert.match(refused ?? '', reason, `${name}: ${refused}`);
    }
    await singleSteps(page, 1); // the run from before goes on
  });
});
