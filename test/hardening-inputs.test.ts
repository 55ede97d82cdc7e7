import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { TraceBuilder, type SpanData } from '../src/chain/sinks/otlp-spans.js';
import { gunzipMembers } from '../src/decompress.js';
import { BIN, FIXTURES, checkOutput, readTree, tmpDir } from './helpers/helpers.js';
import { routeThrough } from './helpers/otlp-tree.js';
import { gzipSync } from 'node:zlib';

const FIXTURE = join(FIXTURES, 'foreground-fanout-3.jsonl');
const NODE = process.execPath;

/** Runs a bash line with SUBTEE set to the real CLI; exit code, stdout, stderr. */
function shell(line: string, timeout = 30_000) {
  return spawnSync('bash', ['-c', line], {
    encoding: 'utf8',
    timeout,
    killSignal: 'SIGKILL',
    env: { ...process.env, SUBTEE: `"${NODE}" "${BIN}"` },
  });
}

/** Resolves once `check` holds, polling; fails after `ms`. */
async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('an input that is a pipe by name (<(…), /dev/stdin) is read whole, gzip or plain', () => {
  const input = readFileSync(FIXTURE);
  const dir = tmpDir();
  const cases = {
    substitution: `eval "$SUBTEE" --out "${dir}/a" -q --stdout none '<(cat "${FIXTURE}")'`,
    gzipped: `eval "$SUBTEE" --out "${dir}/b" -q --stdout none '<(gzip -c "${FIXTURE}")'`,
    devStdin: `cat "${FIXTURE}" | eval "$SUBTEE" --out "${dir}/c" -q --stdout none /dev/stdin`,
  };
  for (const [name, line] of Object.entries(cases)) {
    const r = shell(line);
    assert.equal(r.status, 0, `${name}: ${r.stderr}`);
  }
  for (const out of ['a', 'b', 'c']) checkOutput(input, join(dir, out), out);
});

test('a FIFO with no writer is timed by the watchdog: STALL, exit 124, index.json written', () => {
  const dir = tmpDir();
  const fifo = join(dir, 'fifo');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
  const out = join(dir, 'out');
  const r = spawnSync(NODE, [BIN, '--out', out, '--idle-timeout-ms', '300', '--stdout', 'none', fifo], {
    encoding: 'utf8',
    timeout: 20_000,
    // A run stuck in open(2) ignores SIGTERM.
    killSignal: 'SIGKILL',
  });
  assert.equal(r.status, 124, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.ok(index.warnings.some((w: { code: string }) => w.code === 'STALL'));
});

test('a FIFO with no writer hears SIGTERM: exit 143 with index.json', async () => {
  const dir = tmpDir();
  const fifo = join(dir, 'fifo');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
  const out = join(dir, 'out');
  const child = spawn(NODE, [BIN, '--out', out, '-q', '--stdout', 'none', fifo], { stdio: 'ignore' });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    // The output folder appears once the chain runs, which is when a signal can be heard.
    await until(() => existsSync(join(out, 'agents')), 15_000, 'the output folder');
    child.kill('SIGTERM');
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('hung'), 10_000))]);
    assert.equal(code, 143);
    assert.ok(existsSync(join(out, 'index.json')));
  } finally {
    child.kill('SIGKILL');
  }
});

test('a LangGraph event whose timestamp no date can hold is kept, with TIMESTAMP_OUT_OF_RANGE', () => {
  const event = (timestamp: number, data: object) =>
    JSON.stringify({ type: 'event', method: 'lifecycle', params: { namespace: [], timestamp, data } });
  const input = [event(1e20, { event: 'started' }), event(1_700_000_000_000, { event: 'completed' })].join(
    '\n',
  );
  const out = join(tmpDir(), 'out');
  const r = spawnSync(NODE, [BIN, '--out', out, '-q', '--stdout', 'none'], {
    input: input + '\n',
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.producer, 'langgraph');
  assert.deepEqual(
    index.warnings.map((w: { code: string }) => w.code),
    ['TIMESTAMP_OUT_OF_RANGE'],
  );
  assert.equal(index.input.lines, 2);
  assert.equal(index.input.failed ?? 0, 0);
});

/** A stage plugin whose function never settles, throws, or throws from a later callback. */
function stagePlugin(dir: string, name: string, body: string): string {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(
    file,
    `export default { name: '${name}', kind: 'stage', kit: '>=0.0.0', options: {},
  create: () => (rec) => { ${body} } };
`,
  );
  const config = join(dir, `${name}.json`);
  const stages = [{ use: 'line-parser' }, { use: name }, { use: 'channel-router' }];
  const watchdog = { use: 'idle-watchdog', idleTimeoutMs: 300, checkIntervalMs: 50, stallDrainMs: 300 };
  const spec = {
    plugins: [file],
    stages: [...stages, watchdog],
    sinks: [{ use: 'files', out: join(dir, name) }],
  };
  writeFileSync(config, JSON.stringify(spec));
  return config;
}

test('a stage plugin that fails is reported by code with index.json written, never a hang or a stack', () => {
  const dir = tmpDir();
  const cases = [
    // Above the watchdog: its silence is the plugin's, so the stall names it.
    { name: 'silent', body: 'return new Promise(() => {});', status: 1, code: 'ERR_PLUGIN_FAILED' },
    { name: 'thrower', body: "throw new Error('boom');", status: 1, code: 'ERR_PLUGIN_FAILED' },
    {
      name: 'late-thrower',
      body: "setImmediate(() => { throw new Error('late'); }); return rec;",
      status: 1,
      code: 'ERR_PLUGIN_FAILED',
    },
  ];
  for (const c of cases) {
    const config = stagePlugin(dir, c.name, c.body);
    const r = spawnSync(NODE, [BIN, '-c', config, '-q', '--stdout', 'none', FIXTURE], {
      encoding: 'utf8',
      timeout: 30_000,
      killSignal: 'SIGKILL',
    });
    assert.equal(r.status, c.status, `${c.name}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /^\s+at /m, `${c.name}: no stack`);
    assert.match(r.stderr, new RegExp(`\\[${c.code}\\]`), c.name);
    assert.ok(r.stderr.includes(c.name), `${c.name}: the failure names the plugin`);
    const index = JSON.parse(readFileSync(join(dir, c.name, 'index.json'), 'utf8'));
    assert.equal(index.stalled, c.name === 'silent', `${c.name}: index.json's stalled`);
  }
});

test("gzip damaged inside its deflate data fails with the inflater's own error, " +
  'not a later check', async () => {
  const damaged = gzipSync(readFileSync(FIXTURE));
  for (let i = 20; i < 60; i++) damaged[i] ^= 0x55;
  async function* pieces() {
    yield damaged.subarray(0, 40);
    yield damaged.subarray(40);
  }
  await assert.rejects(
    async () => {
      for await (const piece of gunzipMembers(pieces())) assert.ok(piece);
    },
    { code: 'Z_DATA_ERROR', message: 'invalid literal/lengths set' },
  );
});

test('a cut-short gzip input keeps every decompressed byte and says so: INPUT_CUT_SHORT, exit 3', () => {
  const dir = tmpDir();
  const whole = gzipSync(readFileSync(FIXTURE));
  const file = join(dir, 'cut.jsonl.gz');
  writeFileSync(file, whole.subarray(0, whole.length - 20));
  // What a decompressor gets out of the cut file before it notices the cut.
  const readable = spawnSync('bash', ['-c', `zcat "${file}" 2>/dev/null`], { maxBuffer: 1 << 26 }).stdout;
  const expected = readable
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '');
  const out = join(dir, 'out');
  const r = spawnSync(NODE, [BIN, '--out', out, '-q', '--stdout', 'none', file], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stderr, /\[ERR_INPUT\]/);
  const files = readTree(out);
  const index = JSON.parse(files.get('index.json')!.toString('utf8'));
  assert.ok(index.warnings.some((w: { code: string }) => w.code === 'INPUT_CUT_SHORT'));
  const kept = [...files]
    .filter(([name]) => name.endsWith('.jsonl') || name === 'quarantine.log')
    .flatMap(([, bytes]) =>
      bytes
        .toString('utf8')
        .split('\n')
        .filter((l) => l !== ''),
    );
  assert.deepEqual(kept.sort(), expected.sort());
});

test('bytes after the last gzip member: every member kept; zero padding read, anything else refused', () => {
  const dir = tmpDir();
  const lines = readFileSync(FIXTURE);
  const member = gzipSync(lines);
  const keptLines = (out: string) =>
    [...readTree(out)]
      .filter(([name]) => name.endsWith('.jsonl'))
      .reduce(
        (count, [, bytes]) =>
          count +
          bytes
            .toString('utf8')
            .split('\n')
            .filter((l) => l !== '').length,
        0,
      );
  const expected = lines
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '').length;
  const cases = [
    { name: 'garbage', bytes: Buffer.concat([member, Buffer.from('garbage\n')]), status: 3 },
    { name: 'padded', bytes: Buffer.concat([member, Buffer.alloc(700)]), status: 0 },
    {
      name: 'two-then-garbage',
      bytes: Buffer.concat([member, member, Buffer.from([0x1f, 0x8b, 0])]),
      status: 3,
    },
  ];
  for (const c of cases) {
    const file = join(dir, `${c.name}.jsonl.gz`);
    writeFileSync(file, c.bytes);
    const out = join(dir, c.name);
    const r = spawnSync(NODE, [BIN, '--out', out, '-q', '--stdout', 'none', file], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(r.status, c.status, `${c.name}: ${r.stderr}`);
    const members = c.name.startsWith('two') ? 2 : 1;
    assert.equal(keptLines(out), expected * members, `${c.name}: every line of every whole member`);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const cutShort = index.warnings.some((w: { code: string }) => w.code === 'INPUT_CUT_SHORT');
    assert.equal(cutShort, c.status === 3, `${c.name}: INPUT_CUT_SHORT only when refused`);
    if (c.status === 3) assert.match(r.stderr, /\[ERR_INPUT\]\n$/);
  }
});

/** A run whose one subagent has a huge `subagent_type` and speaks on many lines. */
function hugeAgentStream(agentChars: number, sessionChars = 1): string {
  const huge = 'X'.repeat(agentChars);
  const spawn = {
    type: 'tool_use',
    id: 'toolu_s1',
    name: 'Agent',
    input: { subagent_type: huge, description: 'd' },
  };
  const lines: object[] = [
    { type: 'system', subtype: 'init', session_id: 's'.repeat(sessionChars), claude_code_version: '2.1.328' },
    { type: 'assistant', parent_tool_use_id: null, message: { id: 'm1', content: [spawn] } },
  ];
  for (let i = 0; i < 20; i++) {
    const content = [{ type: 'text', text: `line ${i}` }];
    lines.push({ type: 'assistant', parent_tool_use_id: 'toolu_s1', message: { id: `m${i + 2}`, content } });
  }
  const result = { type: 'tool_result', tool_use_id: 'toolu_s1', content: 'ok' };
  lines.push({ type: 'user', parent_tool_use_id: null, message: { content: [result] } });
  lines.push({ type: 'result', subtype: 'success', is_error: false, result: 'done' });
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

test('a huge subagent_type is bounded once: stdout labels, pino and index.json stay small', () => {
  const out = join(tmpDir(), 'out');
  const pino = join(out, 'events.pino.log');
  const r = spawnSync(NODE, [BIN, '--out', out, '-q', `--pino=${pino}`], {
    input: hugeAgentStream(200_000),
    encoding: 'utf8',
    timeout: 30_000,
    maxBuffer: 1 << 28,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(r.stdout.includes('line 19'));
  assert.ok(r.stdout.length < 20_000, `stdout holds ${r.stdout.length} chars`);
  const records = readFileSync(pino, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const agents = records.map((rec) => rec.agent).filter((a): a is string => typeof a === 'string');
  assert.ok(agents.length >= 20);
  for (const agent of agents) assert.ok(agent.length <= 101, `pino agent of ${agent.length} chars`);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.ok(index.channels[1].agent.length <= 101);
});

test('OTLP spans stay small with a huge session id, agent name and tool name', async () => {
  const tool = { type: 'tool_use', id: 'toolu_t1', name: 'T'.repeat(100_000), input: {} };
  const message = { id: 'mt', content: [tool] };
  const toolLine = { type: 'assistant', parent_tool_use_id: 'toolu_s1', message };
  const extra = JSON.stringify(toolLine);
  const input = Buffer.from(hugeAgentStream(100_000, 100_000) + extra + '\n');
  const builder = new TraceBuilder({ captureContent: true });
  const spans: SpanData[] = [];
  const { run } = await routeThrough(input, (batch) => {
    for (const rec of batch) spans.push(...builder.add(rec));
  });
  spans.push(...builder.finish(run.tree.channels(), run));
  assert.ok(spans.length >= 3);
  for (const span of spans) {
    const size = span.name.length + JSON.stringify(span.attributes).length;
    assert.ok(size < 20_000, `span ${span.key} holds ${size} chars`);
  }
});
