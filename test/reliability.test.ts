import assert from 'node:assert/strict';
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { once } from 'node:events';
import { BIN, ROOT, checkOutput, fanoutInput, linesOf, readTree, tmpDir } from './helpers/helpers.js';

const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'binary-tree-depth-3.jsonl'));
const recLines = linesOf(recording);

/** Starts subtee on a pipe we write to; resolves when `file` in out has at least `min` bytes. */
function startOnPipe(out: string, extra: string[] = []) {
  const child = spawn(process.execPath, [BIN, '--out', out, '--stdout', 'none', ...extra], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.on('close', (code, signal) => r({ code, signal })),
  );
  return { child, closed, stderr: () => stderr };
}

/** Lines in every .jsonl file of `out` so far (what subtee has routed to disk). */
function routedLines(out: string): number {
  if (!existsSync(out)) return 0;
  let n = 0;
  for (const [name, buf] of readTree(out)) if (name.endsWith('.jsonl')) n += linesOf(buf).length;
  return n;
}

async function waitFor(pred: () => boolean, ms = 30_000) {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (const [sig, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const) {
  test(`${sig} mid-stream: everything received is on disk, index says interrupted, exit ` +
    `${code}`, async () => {
    const out = join(tmpDir(), 'o');
    const s = startOnPipe(out);
    const half = recLines.slice(0, 80);
    s.child.stdin.write(half.join('\n') + '\n{"type":"assist');
    // Ready when every complete line is on disk (the partial one arrived in the same write).
    await waitFor(() => routedLines(out) === half.length);
    s.child.kill(sig);
    const r = await s.closed;
    assert.equal(r.code, code, s.stderr());
    const received = Buffer.from(half.join('\n') + '\n{"type":"assist');
    const { index } = checkOutput(received, out, sig);
    assert.equal(index.interrupted, true);
    assert.ok(
      index.channels.some((c: any) => c.status === 'running'),
      'still-running channels are marked',
    );
    assert.equal(
      readFileSync(join(out, 'quarantine.log'), 'utf8'),
      '{"type":"assist\n',
      'the partial line is kept',
    );
    assert.doesNotMatch(s.stderr(), /\n\s+at /);
  });
}

for (const [what, pending] of [
  ['slow (a minute a record)', 'new Promise((resolve) => setTimeout(() => resolve(rec), 60_000))'],
  ['stuck (never settles, a timer left running)', 'new Promise(() => setInterval(() => {}, 1000))'],
] as const) {
  test(`a second SIGINT stops at once while a stage plugin is ${what}: exit 130, index.json ` +
    'written, the plugin called no more', async () => {
    const dir = tmpDir();
    const out = join(dir, 'o');
    const calls = join(dir, 'calls');
    const signalled = join(dir, 'signalled');
    const plugin = join(dir, 'held.mjs');
    // The plugin notes each call it is held on, and the first SIGINT once subtee has had it.
    writeFileSync(
      plugin,
      `import { appendFileSync, writeFileSync } from 'node:fs';
process.once('SIGINT', () => writeFileSync(${JSON.stringify(signalled)}, ''));
export default { name: 'held', kind: 'stage', kit: '>=0.0.0', options: {}, create: () => (rec) => {
  if (rec.lineNo < 5) return rec;
  appendFileSync(${JSON.stringify(calls)}, rec.lineNo + '\\n');
  return ${pending};
} };\n`,
    );
    const config = join(dir, 'held.json');
    const stages = [{ use: 'line-parser' }, { use: 'held' }, { use: 'channel-router' }];
    writeFileSync(config, JSON.stringify({ plugins: [plugin], stages, sinks: [{ use: 'files' }] }));
    const s = startOnPipe(out, ['--config', config]);
    s.child.stdin.write(recLines.join('\n') + '\n');
    await waitFor(() => existsSync(calls));
    s.child.kill('SIGINT');
    await waitFor(() => existsSync(signalled));
    s.child.kill('SIGINT');
    const t0 = Date.now();
    const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
    const r = await Promise.race([s.closed, timeout]);
    const tookMs = Date.now() - t0;
    s.child.stdin.destroy();
    if (r === 'timeout') {
      s.child.kill('SIGKILL');
      assert.fail(`still running 20 s after the second SIGINT: ${s.stderr()}`);
    }
    assert.equal(r.code, 130, s.stderr());
    assert.ok(tookMs < 5000, `exited ${tookMs} ms after the second SIGINT`);
    assert.equal(readFileSync(calls, 'utf8'), '5\n', 'the plugin is called for line 5 only');
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.interrupted, true);
    assert.equal(routedLines(out) + index.input.unwritten, index.input.lines);
    assert.match(s.stderr(), /^subtee: interrupted by SIGINT; .*\[ERR_INTERRUPTED\]$/m);
  });
}

test('one SIGINT while a stage plugin never settles (a timer left running, stdin open) ends the run ' +
  'once --plugin-end-timeout-ms has passed: the plugin named, exit 130', async () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  const calls = join(dir, 'calls');
  const plugin = join(dir, 'stuck.mjs');
  writeFileSync(
    plugin,
    `import { writeFileSync } from 'node:fs';
export default { name: 'stuck', kind: 'stage', kit: '>=0.0.0', options: {}, create: () => (rec) => {
  if (rec.lineNo < 5) return rec;
  writeFileSync(${JSON.stringify(calls)}, String(rec.lineNo));
  return new Promise(() => setInterval(() => {}, 1000));
} };\n`,
  );
  const config = join(dir, 'stuck.json');
  const stages = [{ use: 'line-parser' }, { use: 'stuck' }, { use: 'channel-router' }];
  writeFileSync(config, JSON.stringify({ plugins: [plugin], stages, sinks: [{ use: 'files' }] }));
  const s = startOnPipe(out, ['--config', config, '--plugin-end-timeout-ms', '500']);
  s.child.stdin.write(recLines.join('\n') + '\n');
  await waitFor(() => existsSync(calls));
  s.child.kill('SIGINT');
  const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000).unref());
  const r = await Promise.race([s.closed, timeout]);
  s.child.stdin.destroy();
  if (r === 'timeout') {
    s.child.kill('SIGKILL');
    assert.fail(`still running 20 s after SIGINT: ${s.stderr()}`);
  }
  assert.equal(r.code, 130, s.stderr());
  const said = "subtee: plugin stuck: its function for line 5 did not settle within 0.5 s of the input's end";
  assert.ok(s.stderr().includes(`${said} [ERR_PLUGIN_FAILED]\n`), s.stderr());
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.interrupted, true);
  assert.equal(routedLines(out) + index.input.unwritten, index.input.lines);
});

test('kill -9: every file is valid line by line but ' +
  'for one torn last line; a rerun is unaffected', async () => {
  const out = join(tmpDir(), 'o');
  const s = startOnPipe(out, ['--max-open-files', '8']);
  // Writes still queued when subtee dies fail with EPIPE: expected here, not a test failure.
  s.child.stdin.on('error', () => {});
  let i = 0;
  // Keep writing until killed, so the kill lands mid-stream.
  const writer = setInterval(() => {
    for (let k = 0; k < 20; k++) s.child.stdin.write(recLines[i++ % recLines.length] + '\n');
  }, 5);
  // Mid-stream: several subagent files exist and more than one recording's worth is on disk.
  await waitFor(
    () =>
      existsSync(join(out, 'agents')) &&
      readdirSync(join(out, 'agents')).length > 4 &&
      routedLines(out) > recLines.length,
  );
  s.child.kill('SIGKILL');
  clearInterval(writer);
  await s.closed;
  s.child.stdin.destroy();
  for (const [name, buf] of readTree(out)) {
    if (!name.endsWith('.jsonl')) continue;
    // Every complete line parses; whatever follows the last newline is the one torn line allowed.
    const lines = buf.toString('utf8').split('\n').slice(0, -1);
    for (const l of lines) assert.doesNotThrow(() => JSON.parse(l), `${name}: ${l.slice(0, 80)}`);
  }
  const again = join(tmpDir(), 'again');
  const r = spawnSync(process.execPath, [BIN, '--out', again, '--stdout', 'none', '-q'], {
    input: recording,
  });
  assert.equal(r.status, 0);
  checkOutput(recording, again, 'rerun');
});

function tryMountTmpfs(dir: string, size: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

test('a full disk ends with one line naming the path, exit 3, no hang', async (t) => {
  const dir = join(tmpDir(), 'small');
  mkdirSync(dir);
  if (!tryMountTmpfs(dir, '256k')) {
    t.skip('cannot mount a small tmpfs here (needs root and mount(8)); the /dev/full check below still runs');
  } else {
    try {
      const big = Buffer.from(
        Array.from({ length: 3000 }, (_, k) =>
          JSON.stringify({
            type: 'assistant',
            parent_tool_use_id: null,
            message: { id: `m${k}`, content: [{ type: 'text', text: 'x'.repeat(300) }] },
          }),
        ).join('\n') + '\n',
      );
      const r = spawnSync(process.execPath, [BIN, '--out', join(dir, 'o'), '--stdout', 'none', '-q'], {
        input: big,
        encoding: 'utf8',
        timeout: 30_000,
      });
      assert.equal(r.status, 3, r.stderr);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /cannot write .*small\/o\/.*: no space left on device; \d+ of \d+ input lines not written \[ERR_WRITE\]/);
    } finally {
      execFileSync('umount', [dir]);
    }
  }
  const pino = spawnSync(
    process.execPath,
    [BIN, '--out', join(tmpDir(), 'o'), '--stdout', 'none', '-q', '--pino=/dev/full'],
    { input: recording, encoding: 'utf8', timeout: 30_000 },
  );
  assert.equal(pino.status, 3, pino.stderr);
  assert.equal(pino.stderr.trim().split('\n').length, 1, pino.stderr);
  assert.match(pino.stderr, /\/dev\/full: no space left on device \[ERR_WRITE\]/);
});

test('10,000 subagents under ulimit -n 256: nothing lost', () => {
  const input = fanoutInput(10_000, 20_000);
  const out = join(tmpDir(), 'o');
  const r = spawnSync(
    'bash',
    ['-c', `ulimit -n 256 && exec "${process.execPath}" "${BIN}" --out "${out}" --stdout none -q`],
    { input, encoding: 'utf8', timeout: 120_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  const { index } = checkOutput(input, out, '10k');
  assert.equal(index.channels.length, 10_001);
});

test(
  'a slow reader on stdout: memory stays bounded and nothing is dropped',
  { skip: !existsSync('/usr/bin/time') && 'GNU time is not installed' },
  async () => {
    const lines = Array.from({ length: 60_000 }, (_, k) =>
      JSON.stringify({
        type: 'assistant',
        parent_tool_use_id: null,
        message: { id: `m${k}`, content: [{ type: 'text', text: `${k} ${'y'.repeat(1000)}` }] },
      }),
    );
    const input = Buffer.from(lines.join('\n') + '\n');
    const out = join(tmpDir(), 'o');
    const child = spawn(
      '/usr/bin/time',
      ['-f', '%M', process.execPath, BIN, '--out', out, '--stdout', 'raw', '-q'],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdin.end(input);
    // Read stdout slowly: a pause after every chunk.
    let got = 0;
    const closed = once(child, 'close');
    for await (const c of child.stdout) {
      got += (c as Buffer).length;
      await new Promise((r) => setTimeout(r, 2));
    }
    const [code] = await closed;
    assert.equal(code, 0, stderr);
    assert.equal(got, input.length, 'stdout got every byte');
    const rssKb = Number(stderr.trim().split('\n').pop());
    assert.ok(
      rssKb < 120 * 1024,
      `peak RSS ${Math.round(rssKb / 1024)} MB with a 60 MB input behind a slow reader`,
    );
    checkOutput(input, out, 'slow reader');
  },
);

test('--force writes into a used folder but leaves files subtee does not write alone', () => {
  const out = tmpDir();
  writeFileSync(join(out, 'notes.txt'), 'mine');
  const refused = spawnSync(process.execPath, [BIN, '--out', out, '-q'], {
    input: recording,
    encoding: 'utf8',
  });
  assert.equal(refused.status, 3);
  assert.match(refused.stderr, /already holds files.*--force \[ERR_OUT_NOT_EMPTY\]/);
  const r = spawnSync(process.execPath, [BIN, '--out', out, '-q', '--force', '--stdout', 'none'], {
    input: recording,
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(readFileSync(join(out, 'notes.txt'), 'utf8'), 'mine');
  checkOutput(recording, out, 'forced');
});

test('invalid UTF-8 in a noise line reaches the quarantine file byte for byte', () => {
  const bad = Buffer.from([0x6e, 0x6f, 0xff, 0xfe, 0xc3, 0x28, 0x1b, 0x5b, 0x32, 0x4a]);
  const input = Buffer.concat([recording.subarray(0, recording.indexOf(10) + 1), bad, Buffer.from('\n')]);
  const out = join(tmpDir(), 'o');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '-q'], { input });
  assert.equal(r.status, 0);
  assert.ok(readFileSync(join(out, 'quarantine.log')).equals(Buffer.concat([bad, Buffer.from('\n')])));
});

test('a stall keeps the partial last line: it goes to the quarantine, as on SIGINT; exit 124', async () => {
  const out = join(tmpDir(), 'o');
  const s = startOnPipe(out, [
    '--idle-timeout-ms',
    '1000',
    '--model-timeout-ms',
    '1000',
    '--stall-grace-ms',
    '0',
  ]);
  const half = recLines.slice(0, 40);
  // stdin stays open and silent after this write: only the watchdog ends the run.
  s.child.stdin.write(half.join('\n') + '\n{"type":"assist');
  const r = await s.closed;
  s.child.stdin.destroy();
  assert.equal(r.code, 124, s.stderr());
  assert.match(s.stderr(), /warning STALL/);
  const { index } = checkOutput(Buffer.from(half.join('\n') + '\n{"type":"assist'), out, 'stall');
  assert.equal(index.stalled, true);
  assert.equal(
    readFileSync(join(out, 'quarantine.log'), 'utf8'),
    '{"type":"assist\n',
    'the partial line is kept',
  );
  assert.deepEqual(index.quarantine_lines, [41]);
});

test('one long line trickling in (bytes every 200 ms, ' +
  'longer than the idle timeout) is not a stall', async () => {
  const out = join(tmpDir(), 'o');
  const s = startOnPipe(out, ['--idle-timeout-ms', '2000']);
  s.child.stdin.on('error', () => {}); // if subtee wrongly stops early, the failure is the exit code below
  const line = JSON.stringify({
    type: 'assistant',
    parent_tool_use_id: null,
    message: { id: 'm', content: [{ type: 'text', text: 'x'.repeat(300) }] },
  });
  // 30 pieces, 200 ms apart: 6 s for one line, three times the idle timeout.
  const pieces = line.match(/.{1,11}/g)!;
  for (const p of pieces) {
    s.child.stdin.write(p);
    await new Promise((r) => setTimeout(r, 200));
  }
  s.child.stdin.end('\n');
  const r = await s.closed;
  assert.equal(r.code, 0, s.stderr());
  assert.doesNotMatch(s.stderr(), /STALL/);
  assert.deepEqual(linesOf(readFileSync(join(out, 'main.jsonl'))), [line]);
});
