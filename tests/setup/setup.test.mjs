// scripts/setup.sh on machines made of fake tools: a temporary PATH that
// holds only the few real tools the script needs (bash, dirname, grep, awk)
// beside shell-script stand-ins for id, node, npm, rustup, cargo, cc,
// apt-get... that log each call. Nothing real is installed: the PATH has no
// real apt-get, cargo or npm, and the fakes only write their log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const wasmPack = readFileSync(join(repo, 'scripts/env.sh'), 'utf8').match(/^WASM_PACK_VERSION=(\S+)/m)[1];
const wasmBindgen = readFileSync(join(repo, 'Cargo.lock'), 'utf8').match(/name = "wasm-bindgen"\nversion = "([^"]+)"/)[1];

function real(name) {
  const found = [`/usr/bin/${name}`, `/bin/${name}`].find((p) => existsSync(p));
  assert.ok(found, `no ${name} in /usr/bin or /bin`);
  return found;
}
const chmod = real('chmod');

// A machine: `tools` names the fakes on PATH (node's version as `node`),
// `root` makes `id -u` print 0, `browser` puts Chromium, ChromeDriver and
// lavapipe where setup looks, `env` adds to the environment.
function machine({ root = false, node = 'v20.19.0', tools = [], browser = false, env = {} }) {
  const dir = mkdtempSync(join(tmpdir(), 'webtrain-setup-'));
  const bin = join(dir, 'bin');
  const log = join(dir, 'calls.log');
  mkdirSync(bin);
  mkdirSync(join(dir, 'home'));
  mkdirSync(join(dir, 'icd.d'));
  writeFileSync(log, '');
  for (const name of ['bash', 'dirname', 'grep', 'awk']) symlinkSync(real(name), join(bin, name));
  const fake = (path, body = '') => {
    writeFileSync(path, `#!/bin/sh\necho "${path.split('/').pop()} $*" >> '${log}'\n${body}\n`);
    spawnSync(chmod, ['+x', path]);
  };
  const bodies = {
    id: `echo ${root ? 0 : 1000}`,
    node: `[ "$1" = --version ] && echo ${node}`,
    rustup: '[ "$*" = "target list --installed" ] && echo wasm32-unknown-unknown',
    'wasm-pack': `echo "wasm-pack ${wasmPack}"`,
    'wasm-bindgen': `echo "wasm-bindgen ${wasmBindgen}"`,
    'dpkg-query': 'exit 1',
    // "installs" gcc by putting a fake one on PATH
    'apt-get': `case "$*" in *install*gcc*) printf '#!/bin/sh\\n' > '${bin}/gcc'; ${chmod} +x '${bin}/gcc';; esac`,
  };
  for (const name of ['id', ...tools]) fake(join(bin, name), bodies[name] ?? '');
  if (browser) {
    fake(join(dir, 'chromium'));
    fake(join(dir, 'chromedriver'));
    writeFileSync(join(dir, 'icd.d', 'lvp_icd.x86_64.json'), '{}');
  }
  const run = () => {
    const started = Date.now();
    const r = spawnSync(join(bin, 'bash'), [join(repo, 'scripts/setup.sh')], {
      cwd: dir,
      encoding: 'utf8',
      timeout: 20_000,
      env: {
        PATH: bin,
        HOME: join(dir, 'home'),
        CHROMIUM: join(dir, 'chromium'),
        CHROMEDRIVER: join(dir, 'chromedriver'),
        WEBTRAIN_VULKAN_ICD_DIRS: join(dir, 'icd.d'),
        ...env,
      },
    });
    const calls = readFileSync(log, 'utf8').split('\n').filter(Boolean);
    return { status: r.status, stderr: r.stderr, calls, seconds: (Date.now() - started) / 1000 };
  };
  return { run, done: () => rmSync(dir, { recursive: true, force: true }) };
}

const show = (t, text) => text.split('\n').filter(Boolean).forEach((line) => t.diagnostic(line));
const everything = ['rustup', 'cargo', 'cc', 'pkg-config', 'npm', 'node', 'wasm-pack', 'wasm-bindgen'];
const installs = (calls) => calls.filter((c) => /^(apt-get|cargo|npm ci|rustup target add)/.test(c));

test('a bare machine: Rust absent, Node 18: names each missing piece and installs nothing', (t) => {
  const m = machine({ node: 'v18.19.0', tools: ['node', 'npm', 'cc'] });
  t.after(m.done);
  const { status, stderr, calls } = m.run();
  show(t, stderr);
  assert.notEqual(status, 0);
  assert.match(stderr, /missing prerequisites; nothing was installed/);
  assert.match(stderr, /Rust via rustup .*install Rust with rustup/);
  assert.match(stderr, /Node ≥ 20\.19 \(found v18\.19\.0/);
  assert.match(stderr, /NodeSource or with nvm/);
  assert.match(stderr, /no apt-get: not installing the Debian packages .*chromium/);
  assert.match(stderr, /Chromium .*apt-get install chromium/);
  assert.doesNotMatch(stderr, /C compiler/);
  assert.doesNotMatch(stderr, /https?:|\.(org|com|sh|io|rs)\b/, 'names no download host');
  assert.deepEqual(calls.filter((c) => !/^(id -u|node --version)$/.test(c)), []);
});

test('no C compiler, not root: says to apt-get install gcc', (t) => {
  const m = machine({ tools: ['rustup', 'cargo', 'node', 'npm', 'pkg-config'], browser: true });
  t.after(m.done);
  const { status, stderr, calls } = m.run();
  show(t, stderr);
  assert.notEqual(status, 0);
  assert.match(stderr, /a C compiler .*apt-get install gcc/);
  assert.doesNotMatch(stderr, /Rust|Node|Chromium|lavapipe/);
  assert.deepEqual(installs(calls), []);
});

test('everything but the browser pieces, not root: names only Chromium, ChromeDriver, lavapipe', (t) => {
  const m = machine({ tools: [...everything, 'apt-get', 'dpkg-query'] });
  t.after(m.done);
  const { status, stderr, calls } = m.run();
  show(t, stderr);
  assert.notEqual(status, 0);
  assert.match(stderr, /not root: not installing the Debian packages chromium chromium-driver mesa-vulkan-drivers; the browser tiers/);
  assert.match(stderr, /Chromium \(no .*apt-get install chromium /);
  assert.match(stderr, /ChromeDriver \(no .*apt-get install chromium-driver /);
  assert.match(stderr, /lavapipe.*apt-get install mesa-vulkan-drivers /);
  assert.match(stderr, /apt-get install chromium chromium-driver mesa-vulkan-drivers;/);
  assert.doesNotMatch(stderr, /Rust|Node|C compiler|rustup/);
  assert.deepEqual(installs(calls), []);
});

test('the same under npm start: warns that npm test will need them, and goes on', (t) => {
  const m = machine({ tools: everything, env: { npm_lifecycle_event: 'start' } });
  t.after(m.done);
  const { status, stderr, calls } = m.run();
  show(t, stderr);
  assert.equal(status, 0);
  assert.match(stderr, /npm test will need:\n {2}- Chromium/);
  assert.deepEqual(installs(calls).filter((c) => !c.startsWith('npm ci')), []);
});

test('everything present, not root: passes and installs nothing', (t) => {
  const m = machine({ tools: everything, browser: true });
  t.after(m.done);
  const { status, stderr, calls, seconds } = m.run();
  show(t, stderr);
  assert.equal(status, 0, stderr);
  assert.doesNotMatch(stderr, /missing|not installing/);
  // npm ci runs where this checkout's node_modules is older than the lock
  assert.deepEqual(installs(calls).filter((c) => !c.startsWith('npm ci')), []);
  assert.ok(seconds < 10, `${seconds} s`);
});

test('root with apt-get, Rust absent: reports it before installing any Debian package', (t) => {
  const m = machine({ root: true, tools: ['node', 'npm', 'apt-get', 'dpkg-query'] });
  t.after(m.done);
  const { status, stderr, calls } = m.run();
  show(t, stderr);
  assert.notEqual(status, 0);
  assert.match(stderr, /Rust via rustup/);
  assert.doesNotMatch(stderr, /C compiler|Chromium|not installing/, 'root installs those itself');
  assert.deepEqual(installs(calls), []);
});

test('root with apt-get, no C compiler: installs gcc and the Debian packages rather than refusing', (t) => {
  const m = machine({ root: true, tools: ['rustup', 'cargo', 'node', 'npm', 'wasm-pack', 'wasm-bindgen', 'apt-get', 'dpkg-query'] });
  t.after(m.done);
  const { status, stderr, calls } = m.run();
  show(t, stderr);
  assert.equal(status, 0, stderr);
  assert.ok(calls.includes('apt-get update -qq'), calls.join('\n'));
  assert.ok(calls.includes('apt-get install -y -qq gcc pkg-config chromium chromium-driver mesa-vulkan-drivers'), calls.join('\n'));
  assert.deepEqual(installs(calls).filter((c) => !/^(apt-get|npm ci)/.test(c)), []);
});
