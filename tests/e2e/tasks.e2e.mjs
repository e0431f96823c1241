// A task run in the page: pick `copy` in Setup's text step (no
// tokenizer), train it a few steps with Muon, see its exact-match,
// per-character and training accuracy and weight norm charted at each
// validation, read the held-out examples (each predicted character marked
// right or wrong), and load its checkpoint in a fresh page without any
// text, where it scores as saved. That a task is learned is a whole run,
// native alone: crate/tests/cli.rs's a_task_is_learned (reverse, 120
// steps); Muon's steps are crate/tests/kernels.rs's muon_steps_match_reference.

import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { sharedApp, openPage, noErrors, trainUntil, stepCount, waitOrError, errorText } from './browser.mjs';

// copy LEN digits in rows of 4 examples (8 tokens each), 4 rows a step,
// validated at step 0 and every VAL_EVERY steps up to STEPS (SwiftShader
// steps slowly: about 1 s a step with validations, 3 s on a loaded
// machine). Trained with Muon (the page's optimizer setting) at 0.02,
// Keller Jordan's rate (docs/TASKS.md, "Muon").
const TASK = 'copy';
const LEN = 3;
const BATCH = 4;
const SEQ = 31;
const LR = 0.02;
const STEPS = 10;
const WARMUP = 2;
const VAL_EVERY = 5;

describe('tasks: a task run', () => {
  let page;
  const errors = [];
  const shot = (name) => page.locator(`#${name}`).screenshot({ path: `test-results/panel-${name}-task.png` });
  /// [[step, exact, per character]] at each validation of the current run.
  const accuracies = async () => JSON.parse(await page.locator('#chart-accuracy').getAttribute('data-accuracies'));

  /// The examples shown, each character checked against its answer's:
  /// {right, wrong} characters counted.
  async function checkExamples() {
    const rows = await page.locator('#task-examples-table tbody tr').evaluateAll((trs) => trs.map((tr) => ({
      right: tr.dataset.right,
      prompt: tr.querySelector('.prompt').textContent,
      answer: tr.querySelector('.answer').textContent,
      chars: [...tr.querySelectorAll('.predicted .char')].map((c) => ({ c: c.textContent, right: c.dataset.right, cls: c.className })),
    })));
    assert.ok(rows.length >= 1 && rows.length <= 8, `${rows.length} examples shown`);
    const counts = { right: 0, wrong: 0 };
    for (const { right, prompt, answer, chars } of rows) {
      assert.equal(chars.length, answer.length, `one predicted character per answer character (${prompt} → ${answer})`);
      chars.forEach(({ c, right: r, cls }, i) => {
        const ok = c === answer[i];
        assert.equal(r, String(ok), `${prompt}: character ${i} "${c}" against "${answer[i]}"`);
        assert.equal(cls, `char ${ok ? 'right' : 'wrong'}`);
        counts[ok ? 'right' : 'wrong']++;
      });
      assert.equal(right, String(chars.every((c) => c.right === 'true')), `${prompt}: whole answer right iff every character is`);
    }
    return counts;
  }

  before(async () => {
    mkdirSync('test-results', { recursive: true });
    ({ page } = await openPage(await sharedApp(), '/', { errors }));
  });
  afterEach(() => noErrors(errors));
  after(async () => { await page?.close(); });

  test('a task is chosen in the text step: its options, its preset, no tokenizer', async () => {
    await page.waitForSelector('#adapter[data-state="ready"]', { timeout: 120_000 });
    await page.waitForSelector(`#task option[value="${TASK}"]`, { state: 'attached', timeout: 120_000 });
    await page.selectOption('#task', TASK);
    assert.ok(await page.locator('#corpus-task').isChecked(), 'choosing a task picks the task source');
    assert.ok(await page.locator('#corpus-text').isHidden(), 'the text\'s files are hidden');
    await page.fill('#task-options input[data-option="len"]', String(LEN));
    await page.waitForSelector('#tokenizer-info[data-state="task"]', { timeout: 60_000 });
    assert.equal(await page.locator('#preset').inputValue(), 'custom', 'the task\'s model is a custom one');
    assert.ok(await page.locator('#preset').isDisabled());
    assert.ok(await page.locator('#tokenizer-train').isDisabled(), 'no tokenizer to train');
    assert.ok(Number(await page.locator('#weight-decay').inputValue()) >= 0, 'weight decay filled from the preset');

    // back to text: the form as it was, the tokenizer step again
    await page.check('#corpus-builtin');
    await page.waitForSelector('#tokenizer-info[data-state="none"]', { timeout: 60_000 });
    assert.equal(await page.locator('#preset').inputValue(), 'tiny');
    assert.ok(await page.locator('#task-fields').isHidden());
    await page.waitForSelector('#corpus-files[data-count="1"]', { timeout: 120_000 });

    await page.check('#corpus-task');
    await page.fill('#task-options input[data-option="len"]', String(LEN));
    await page.waitForSelector('#tokenizer-info[data-state="task"]', { timeout: 60_000 });
    await page.fill('#batch', String(BATCH));
    await page.fill('#seq', String(SEQ));
    await page.fill('#lr', String(LR));
    await page.fill('#steps', String(STEPS));
    await page.fill('#warmup', String(WARMUP));
    await page.fill('#val-every', String(VAL_EVERY));
    await page.fill('#autosave-every', '0');
    await page.selectOption('#optimizer', 'muon');
    await page.waitForSelector('#plan-status[data-fits="true"]', { timeout: 120_000 });
    await page.waitForSelector('#create:not([disabled])', { timeout: 60_000 });
    await page.click('#create');
    const created = await waitOrError(page, () => document.querySelector('#train').dataset.phase === 'idle', 'setup-error');
    assert.equal(created, null);
    assert.match(await page.locator('#stat-task').textContent(), new RegExp(`${TASK} \\(len ${LEN}\\)`));
    assert.match(await page.locator('#stat-mode').textContent(), /Muon, fp32 state/);
    assert.ok(await page.locator('#chart-accuracy').isVisible(), 'a task run shows the accuracy chart');
    assert.match(await page.locator('#prompt').inputValue(), new RegExp(`^\\d{${LEN}}>$`), 'Generate offers a held-out prompt in the task\'s characters');
    await shot('setup');
  });

  test('the accuracies are charted at each validation and the examples show each character right or wrong', async () => {
    // the untrained model first: its exact-match accuracy is about 10^-LEN
    await page.click('#validate');
    await page.waitForFunction(() => document.querySelector('#chart-accuracy').dataset.points === '1', undefined, { timeout: 120_000 });
    assert.equal(await page.locator('#task-examples').getAttribute('data-step'), '0');
    const untrained = await checkExamples();
    assert.ok(untrained.wrong > 0, `the untrained model's examples have wrong characters: ${JSON.stringify(untrained)}`);
    await trainUntil(page, STEPS);
    assert.equal(await errorText(page, 'train-error'), null);
    assert.equal(await stepCount(page), STEPS, 'trains to the schedule\'s end');

    // a point at each validation: step 0's, every VAL_EVERY, none more at the pause
    const scored = await accuracies();
    assert.deepEqual(scored.map(([step]) => step), Array.from({ length: STEPS / VAL_EVERY + 1 }, (_, i) => i * VAL_EVERY), JSON.stringify(scored));
    const [, firstExact] = scored[0];
    assert.ok(firstExact < 0.1, `the untrained model answers almost nothing whole: ${firstExact}`);
    // exact match, per character and on training examples beside the held-out ones
    for (const [step, exact, chars, training] of scored) {
      assert.ok([exact, chars, training].every((a) => a >= 0 && a <= 1), `step ${step}: accuracies ${exact}, ${chars}, ${training} in [0, 1]`);
      assert.ok(chars >= exact, `step ${step}: a whole answer right has every character right (${exact} whole, ${chars} per character)`);
    }
    const norms = JSON.parse(await page.locator('#chart-weight-norm').getAttribute('data-norms'));
    assert.equal(norms.length, scored.length, `a weight norm at each validation: ${norms}`);
    assert.ok(norms.every((n) => n > 0 && Number.isFinite(n)), `${norms}`);
    assert.match(await page.locator('#stat-accuracy').textContent(), /%.*%/);

    // the held-out examples at the last validation
    const box = page.locator('#task-examples');
    assert.ok(await box.isVisible());
    assert.equal(Number(await box.getAttribute('data-step')), STEPS);
    await checkExamples();
    await page.locator('#task-examples').screenshot({ path: 'test-results/panel-task-examples.png' });
    await shot('train');
  });

  test('a task run\'s checkpoint loads in a fresh page, without text', async () => {
    const savedStep = await stepCount(page);
    const [, savedExact, savedChars] = (await accuracies()).at(-1);
    const savedLoss = Number(await page.locator('#stat-val').getAttribute('data-loss'));
    assert.equal(Number(await page.locator('#stat-val').getAttribute('data-step')), savedStep, 'validated at the saved step');
    const download = page.waitForEvent('download', { timeout: 120_000 });
    await page.click('#save');
    const file = await download;
    assert.match(file.suggestedFilename(), new RegExp(`^webtrain-${TASK}-step${savedStep}\\.safetensors$`));
    const path = `test-results/${file.suggestedFilename()}`;
    await file.saveAs(path);

    await page.reload();
    // no text: My files, none added
    await page.waitForSelector('#corpus-files[data-count="1"]', { state: 'attached', timeout: 120_000 });
    await page.check('#corpus-user');
    await page.waitForSelector('#corpus-files[data-count="0"]', { timeout: 60_000 });
    await page.setInputFiles('#load-input', path);
    const loaded = await waitOrError(page, () => document.querySelector('#train').dataset.phase === 'idle', 'checkpoint-error');
    assert.equal(loaded, null);
    assert.equal(await stepCount(page), savedStep);
    assert.match(await page.locator('#stat-task').textContent(), new RegExp(`${TASK} \\(len ${LEN}\\)`));
    assert.match(await page.locator('#stat-mode').textContent(), /Muon, fp32 state/);
    assert.match(await page.locator('#checkpoint-status').textContent(), new RegExp(`the task ${TASK}`));
    await page.click('#validate');
    await page.waitForFunction(() => document.querySelector('#chart-accuracy').dataset.points === '1', undefined, { timeout: 120_000 });
    const [[step, exact, chars]] = await accuracies();
    assert.equal(step, savedStep);
    // the same weights, examples and adapter: the same numbers
    assert.ok(Math.abs(exact - savedExact) < 1e-6 && Math.abs(chars - savedChars) < 1e-6,
      `the loaded weights score as saved: ${savedExact} → ${exact} whole, ${savedChars} → ${chars} per character`);
    const loss = Number(await page.locator('#stat-val').getAttribute('data-loss'));
    assert.ok(Math.abs(loss - savedLoss) < 1e-6, `the held-out loss as saved: ${savedLoss} → ${loss}`);
    assert.ok(await page.locator('#task-examples-table tbody tr').count() >= 1);
  });
});
