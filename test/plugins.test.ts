import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { builtinRegistry } from '../src/chain/builtins.js';
import { buildChain, runChain, type ComponentSpec } from '../src/chain/chain.js';
import {
  definePlugin,
  optionProblem,
  Registry,
  type PluginContext,
  type PluginDefinition,
} from '../src/chain/plugin.js';
import { registerPlugins } from '../src/chain/config.js';
import { recordOfObject } from '../src/chain/stages/object-source.js';
import { Session } from '../src/model/session.js';
import { redact, redactRecord, MASK, SECRET_PATTERNS } from '../plugins/redact-secrets/index.js';
import { rewriteText } from '../src/chain/record-text.js';
import { stepSummary } from '../plugins/github-step-summary/index.js';
import {
  BIN,
  FIXTURES,
  ROOT,
  chunked,
  fanoutInput,
  linesOf,
  readTree,
  splitEvery,
  tmpDir,
} from './helpers/helpers.js';
import type { RecordResult } from '../src/chain/plugin-stream.js';
import type { LineRecord, SubteeRecord } from '../src/model/record.js';
import { importsUnder } from './helpers/imports.js';
import { readDoc } from './helpers/docs.js';

/** One example per kind of secret the plugin knows; each pattern must be covered by one. */
const secrets: Record<string, string> = {
  anthropic: 'sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789',
  openai: 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345',
  'openai-legacy': 'sk-AbCdEfGhIjKlMnOpQrStUvWxYz012345',
  github: 'ghp_abcdefghijklmnopqrstuvwxyz0123456789',
  'github-oauth': 'gho_abcdefghijklmnopqrstuvwxyz0123456789',
  'github-server': 'ghs_abcdefghijklmnopqrstuvwxyz0123456789',
  'github-fine-grained': 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz',
  gitlab: 'glpat-AbCdEfGhIjKlMnOpQrSt',
  aws: 'AKIAIOSFODNN7EXAMPLE',
  'aws-temporary': 'ASIAIOSFODNN7EXAMPLE',
  slack: 'xoxb-123456789012-abcdefghij',
  google: 'AIzaSyAbCdEfGhIjKlMnOpQrStUvWxYz0123456',
  npm: 'npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789',
  jwt: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
  bearer: 'Authorization: Bearer abcdef0123456789abcdef',
  basic: 'Authorization: Basic dXNlcjpwYXNzd29yZDEyMzQ1',
  'token-scheme': 'Authorization: Token abcdef0123456789abcdef',
  assignment: 'password=hunter2hunter2',
  'api-key-json': '"api_key": "k3y-v4lue-0123456789"',
  'escaped-json': '{\\"client_secret\\":\\"s3cr3t-v4lue-0123\\"}',
  'access-token': 'ACCESS_TOKEN=abcdefgh12345678',
};

/** The part of each example that must not survive. */
const secretValue = (s: string) =>
  s.replace(/^.*(?:Bearer|Basic|Token) |^.*[=:]\s*\\?"?|\\?"\}?$/g, '').slice(-10);

test('redact masks each kind of secret on its own and leaves ordinary text alone', () => {
  for (const [kind, s] of Object.entries(secrets)) {
    // Alone in otherwise plain words: no other hint can trigger the full pass for it.
    const out = redact(`before ${s} after`);
    assert.ok(out.includes(MASK), `${kind}: ${out}`);
    assert.ok(!out.includes(secretValue(s)), `${kind}: ${out}`);
    assert.ok(
      out.startsWith('before ') && out.endsWith(' after'),
      `${kind}: only the secret is masked: ${out}`,
    );
  }
  assert.equal(redact('Bearer '), 'Bearer ');
  const plain = '{"usage":{"input_tokens":10,"output_tokens":5},"text":"the token bucket"}';
  assert.equal(redact(plain), plain);
  for (const near of [
    'sk-short',
    'ghp_tooShort',
    'npm_install',
    'AKIA-lowercase',
    'glpat-short',
    'the api key is in the vault',
  ])
    assert.equal(redact(near), near, near);
});

test('every secret pattern is exercised by an example (a new pattern needs one)', () => {
  for (const re of [...SECRET_PATTERNS]) {
    const hits = Object.entries(secrets).filter(([, s]) =>
      new RegExp(re.source, re.flags.replace('g', '')).test(s),
    );
    assert.ok(hits.length > 0, `no example for ${re}`);
  }
});

/**
 * The escapes a JSON text may hold right before a secret, as they stand in the line, each
 * with the character it decodes to: a line start and a tab among them (`n` and `t` are word
 * characters to a pattern that reads the text undecoded).
 */
const ESCAPES: Record<string, string> = {
  '\\n': '\n',
  '\\t': '\t',
  '\\r': '\r',
  '\\b': '\b',
  '\\f': '\f',
  '\\"': '"',
  '\\\\': '\\',
  '\\/': '/',
  '\\u000a': '\n',
  '\\u00a0': '\u00a0',
  '\\u2028': '\u2028',
};

/**
 * A line whose text block holds each secret after each escape: the JSON text (the escape as it
 * stands, the secret escaped as JSON.stringify would) and, per block, the decoded text.
 */
function escapedSecretLines(): Array<{ json: string; text: string; kind: string; escape: string }> {
  const lines = [];
  for (const [kind, secret] of Object.entries(secrets)) {
    for (const [escape, char] of Object.entries(ESCAPES)) {
      const raw = `"before${escape}${JSON.stringify(`${secret} after`).slice(1)}`;
      const text = `before${char}${secret} after`;
      assert.equal(JSON.parse(raw), text);
      const json =
        '{"type":"assistant","parent_tool_use_id":null,"message":{"id":"m","role":"assistant",' +
        `"content":[{"type":"text","text":${raw}}]}}`;
      lines.push({ json, text, kind, escape });
    }
  }
  return lines;
}

const textOf = (json: string): string => JSON.parse(json).message.content[0].text;

test('redactRecord masks each kind of secret after each JSON escape as redact masks the decoded text', () => {
  for (const { json, text, kind, escape } of escapedSecretLines()) {
    const rec = { kind: 'line' as const, lineNo: 1, raw: Buffer.from(json), value: JSON.parse(json) };
    const out = redactRecord(rec) as typeof rec;
    const at = `${kind} after ${escape}`;
    assert.notEqual(redact(text), text, `${at}: the decoded text holds a secret`);
    assert.equal(textOf(out.raw.toString()), redact(text), `${at}: the line's bytes`);
    assert.equal(out.value.message.content[0].text, redact(text), `${at}: the value`);
    assert.ok(!out.raw.toString().includes(secretValue(secrets[kind])), at);
    // A quarantined piece of the same line (cut short, not JSON) is searched the same way.
    const cut = json.slice(0, json.indexOf(' after'));
    const piece = {
      ...{ kind: 'quarantine' as const, lineNo: 1, raw: Buffer.from(cut) },
      ...{ reason: 'truncated' as const, final: true },
    };
    const masked = (redactRecord(piece) as typeof piece).raw.toString();
    assert.ok(!masked.includes(secretValue(secrets[kind])), `${at}, quarantined: ${masked.slice(-60)}`);
  }
});

test('redactRecord leaves a line with nothing secret byte for byte, escapes and all', () => {
  const json = '{"type":"user","text":"a\\nb\\t\\u00e9\\/c \\"sk-short\\" \\\\ghp_tooShort"}';
  const rec = { kind: 'line' as const, lineNo: 1, raw: Buffer.from(json), value: JSON.parse(json) };
  assert.equal(redactRecord(rec), rec);
});

async function chainWith(pluginNames: string[], stages: string[], sinks: ComponentSpec[], input: Buffer) {
  const registry = builtinRegistry();
  await registerPlugins(registry, pluginNames, ROOT);
  const run = new Session();
  await runChain(
    chunked([input]),
    { stages: stages.map((use) => ({ use })), sinks },
    { registry, session: run },
  );
  return run;
}

test('redact-secrets runs before every sink: jsonl, log, quarantine and pino are masked', async () => {
  const out = join(tmpDir(), 'out');
  const pinoFile = join(tmpDir(), 'p.log');
  const lines = [
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: 'm',
        content: [
          { type: 'text', text: `key ${secrets.anthropic}` },
          {
            type: 'tool_use',
            id: 't',
            name: 'Bash',
            input: { command: `curl -H "Authorization: Bearer ${'x'.repeat(30)}"` },
          },
        ],
      },
    }),
    `npm WARN token ${secrets.github}`,
  ];
  await chainWith(
    ['redact-secrets'],
    ['line-parser', 'redact-secrets', 'channel-router'],
    [
      { use: 'files', out },
      { use: 'pino', destination: pinoFile },
    ],
    Buffer.from(lines.join('\n') + '\n'),
  );
  const files = readTree(out);
  const everything = [...files.values()].map((b) => b.toString()).join('\n') + readFileSync(pinoFile, 'utf8');
  assert.ok(!everything.includes(secrets.anthropic.slice(-12)));
  assert.ok(!everything.includes(secrets.github.slice(-12)));
  assert.ok(!everything.includes('x'.repeat(30)));
  const jsonl = linesOf(files.get('main.jsonl'));
  assert.equal(jsonl.length, 1);
  assert.doesNotThrow(() => JSON.parse(jsonl[0]), 'masked line is still JSON');
  assert.match(files.get('main.log')!.toString(), /key \[REDACTED\]/);
});

test('redact-secrets: no secret after any escape reaches a .jsonl, a .log or a spooled line', async () => {
  const out = join(tmpDir(), 'out');
  const lines = escapedSecretLines();
  // The same blocks again as one line past maxLineBytes: spooled, copied through the plugin.
  const blocks = lines.map(({ json }) => JSON.stringify(JSON.parse(json).message.content[0]));
  const long =
    '{"type":"assistant","parent_tool_use_id":null,"message":{"id":"m2","role":"assistant",' +
    `"content":[${lines.map(({ json }) => json.slice(json.indexOf('{"type":"text"'), -3)).join(',')}]}}`;
  assert.equal(JSON.parse(long).message.content.length, blocks.length);
  const input = [...lines.map(({ json }) => json), long].join('\n') + '\n';
  const registry = builtinRegistry();
  await registerPlugins(registry, ['redact-secrets'], ROOT);
  const run = await runChain(
    chunked([Buffer.from(input)]),
    {
      stages: [
        { use: 'line-parser', maxLineBytes: 4096 },
        { use: 'redact-secrets' },
        { use: 'channel-router' },
      ],
      sinks: [{ use: 'files', out }],
    },
    { registry },
  );
  assert.ok(Buffer.byteLength(long) > 4096 && run.input.lines === lines.length + 1);
  const files = readTree(out);
  const everything = [...files.values()].map((b) => b.toString()).join('\n');
  for (const [kind, secret] of Object.entries(secrets))
    assert.ok(!everything.includes(secretValue(secret)), `${kind} left in the output folder`);
  const jsonl = linesOf(files.get('main.jsonl'));
  assert.deepEqual(
    jsonl.slice(0, -1).map(textOf),
    lines.map(({ text }) => redact(text)),
    'each line as redact masks its decoded text',
  );
  assert.deepEqual(
    JSON.parse(jsonl.at(-1)!).message.content.map((b: { text: string }) => b.text),
    lines.map(({ text }) => redact(text)),
    'the spooled line, block by block',
  );
  // The .log shows each short line's text; the spooled line is one `[long line]` preview.
  const shown = files.get('main.log')!.toString().split('\n');
  const log = shown.filter((l) => !l.startsWith('[long line]')).join('\n');
  assert.equal(shown.length - log.split('\n').length, 1);
  const masks = (text: string) => text.split(MASK).length - 1;
  const expected = lines.reduce((sum, { text }) => sum + masks(redact(text)), 0);
  assert.ok(expected >= lines.length);
  assert.equal(masks(log), expected, 'main.log shows every mask redact makes in the decoded texts');
});

test("redact-secrets: a spooled line's 4 MiB stretch with no , or } is cut outside an escape", async () => {
  const token = `ghp_${'b'.repeat(36)}`;
  const MAX_WINDOW_CHARS = 1 << 22;
  for (const escape of ['\\n', '\\u00a0']) {
    const unit = `${escape}${token}`;
    const prefix = '{"x":"';
    // Filler so that an escape straddles the first forced cut, one character past its backslash.
    const offset = (MAX_WINDOW_CHARS - 1 - prefix.length) % unit.length;
    const filler = 'a'.repeat((offset + unit.length) % unit.length);
    const count = Math.ceil((5 * 1024 * 1024) / unit.length);
    const line = `${prefix}${filler}${unit.repeat(count)}"}`;
    assert.equal(line[MAX_WINDOW_CHARS - 1], '\\', 'a backslash just before the cut');
    const out = join(tmpDir(), 'out');
    const registry = builtinRegistry();
    await registerPlugins(registry, ['redact-secrets'], ROOT);
    await runChain(
      chunked([Buffer.from(`${line}\n`)]),
      {
        stages: [{ use: 'line-parser', maxLineBytes: 4096 }, { use: 'redact-secrets' }],
        sinks: [{ use: 'files', out }],
      },
      { registry },
    );
    const written = readFileSync(join(out, 'main.jsonl'), 'utf8');
    assert.equal(written.split(token).length - 1, 0, `${escape}: no token left`);
    assert.equal(written.split(MASK).length - 1, count, `${escape}: one mask per token`);
  }
});

test('github-step-summary: tree, statuses, collapsed reports, escaped text', async () => {
  const path = join(tmpDir(), 'summary.md');
  const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'failing-beside-healthy.jsonl'));
  await chainWith(
    ['github-step-summary'],
    ['line-parser', 'channel-router'],
    [
      { use: 'files', out: join(tmpDir(), 'o') },
      { use: 'github-step-summary', path },
    ],
    recording,
  );
  const md = readFileSync(path, 'utf8');
  assert.match(md, /^## subtee: 2 subagents — 1 completed, 1 failed, 0 running/);
  assert.match(md, /❌ general-purpose/);
  assert.match(md, /✅ general-purpose/);
  assert.match(md, /<details><summary>general-purpose \S+ — failed<\/summary>/);
  const run = new Session();
  run.tree.route({
    type: 'assistant',
    parent_tool_use_id: null,
    message: {
      content: [
        {
          type: 'tool_use',
          id: 'toolu_x',
          name: 'Agent',
          input: { subagent_type: '<img src=x>', description: '\x1b]0;t\x07' },
        },
      ],
    },
  });
  const hostile = stepSummary(run, new Map([[run.tree.main, '</pre><script>alert(1)</script>\x1b[2J']]), {
    maxBytes: 100_000,
    reportChars: 1000,
  });
  assert.ok(!hostile.includes('<script>') && !hostile.includes('<img') && !/[\x1b\x07]/.test(hostile));
});

test('github-step-summary: one subagent and one line read in the singular', () => {
  const run = new Session();
  const spawn = { type: 'tool_use', id: 'toolu_x', name: 'Agent', input: { description: 'one' } };
  run.tree.route({ type: 'assistant', parent_tool_use_id: null, message: { content: [spawn] } });
  const md = stepSummary(run, new Map(), { maxBytes: 100_000, reportChars: 1000 });
  assert.match(md, /^## subtee: 1 subagent — 0 completed, 0 failed, 1 running\n/);
  assert.match(md, /^- \S+ \*\*main\*\* — running, 1 line, /m);
});

test('github-step-summary: a stopped subagent has its own icon and count', () => {
  const run = new Session();
  const spawn = { type: 'tool_use', id: 'toolu_x', name: 'Agent', input: { description: 'one' } };
  run.tree.route({ type: 'assistant', parent_tool_use_id: null, message: { content: [spawn] } });
  const stop = { type: 'system', subtype: 'task_notification', tool_use_id: 'toolu_x', status: 'stopped' };
  run.tree.route(stop);
  const md = stepSummary(run, new Map(), { maxBytes: 100_000, reportChars: 1000 });
  assert.match(md, /^## subtee: 1 subagent — 0 completed, 0 failed, 1 stopped, 0 running\n/);
  assert.match(md, /^  - ⏹️ agent `x` “one” — stopped, 0 lines, /m);
});

test("github-step-summary shows each agent's tokens as index.json states them", async () => {
  const path = join(tmpDir(), 'summary.md');
  const out = join(tmpDir(), 'o');
  const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));
  await chainWith(
    ['github-step-summary'],
    ['line-parser', 'channel-router'],
    [
      { use: 'files', out },
      { use: 'github-step-summary', path },
    ],
    recording,
  );
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const stated = index.channels.map(
    (c: { usage: { input_tokens: number; output_tokens: number } }) =>
      c.usage.input_tokens + c.usage.output_tokens,
  );
  const shown = [...readFileSync(path, 'utf8').matchAll(/ lines, (\d+) tokens$/gm)].map((m) => Number(m[1]));
  assert.deepEqual(shown, stated);
});

test('github-step-summary stays under its limit however large the run', () => {
  const run = new Session();
  const last = new Map();
  for (let i = 0; i < 5000; i++) {
    run.tree.route({
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        content: [
          {
            type: 'tool_use',
            id: `toolu_${i}`,
            name: 'Agent',
            input: { subagent_type: 'Explore', description: 'd'.repeat(100) },
          },
        ],
      },
    });
    last.set(run.tree.get(`toolu_${i}`), 'report '.repeat(1000));
  }
  const md = stepSummary(run, last, { maxBytes: 1_000_000, reportChars: 4000 });
  assert.ok(Buffer.byteLength(md) <= 1_000_000, `${Buffer.byteLength(md)} bytes`);
  assert.ok(Buffer.byteLength(md) > 900_000);
  assert.match(md, /more entries not shown/);
});

test('the bundled plugins import nothing of subtee but its public entry', () => {
  const imports = importsUnder(join(ROOT, 'plugins'));
  const entry = imports.filter((i) => i.to === join('..', 'src', 'index.ts'));
  assert.equal(new Set(entry.map((i) => i.from)).size, 2, 'each bundled plugin imports the entry');
  const internal = imports.filter((i) => i.to.includes('/') && i.to.endsWith('.ts'));
  const outside = internal.filter((i) => i.to !== join('..', 'src', 'index.ts'));
  assert.deepEqual(
    outside.map((i) => `${i.from} → ${i.to}`),
    [],
  );
});

test("every helper the Plugins page lists is exported by the package entry", async () => {
  const entry: Record<string, unknown> = await import('../src/index.js');
  const entryText = readFileSync(join(ROOT, 'src', 'index.ts'), 'utf8');
  const readme = readDoc('docs/plugins.md');
  const table = readme.slice(
    readme.indexOf('| Helper |'),
    readme.indexOf('\n\n', readme.indexOf('| Helper |')),
  );
  const names = table
    .split('\n')
    .slice(2)
    .flatMap((row) => [...row.split('|')[1].matchAll(/`(\w+)`/g)].map((m) => m[1]));
  assert.ok(names.length >= 20, names.join());
  for (const name of names) {
    const isType = new RegExp(`\\btype ${name}\\b`).test(entryText);
    assert.ok(name in entry || isType, `${name} is not exported by src/index.ts`);
  }
});

test('redact-secrets: a value too deep for recursion is ' +
  'still redacted when its masked text is not JSON', () => {
  const secret = `sk-ant-${'a'.repeat(24)}`;
  let value: unknown = { token: secret };
  for (let depth = 0; depth < 200_000; depth++) value = depth % 2 ? { nested: value } : [value];
  // Raw bytes that no longer parse once masked send the record down the value path.
  const rec = {
    kind: 'line' as const,
    lineNo: 1,
    raw: Buffer.from(`not json ${secret}`),
    value: { type: 'assistant', deep: value },
  };
  const redacted = redactRecord(rec as never) as { raw: Buffer; value: Record<string, unknown> };
  let inner: unknown = redacted.value.deep;
  while (typeof inner === 'object' && inner !== null && !('token' in inner))
    inner = Array.isArray(inner) ? inner[0] : (inner as { nested: unknown }).nested;
  assert.deepEqual(inner, { token: MASK });
  assert.ok(!redacted.raw.includes(secret));
});

/** What each write did: `written`, or the name of the error it threw. */
function attempts(writes: Array<() => void>): string[] {
  return writes.map((write) => {
    try {
      write();
      return 'written';
    } catch (err) {
      return (err as Error).name;
    }
  });
}

/** Runs `text` through a chain of these stages, one of them the plugin `stage`; its session. */
async function runWithStage(stage: PluginDefinition, stages: string[], text: string): Promise<Session> {
  const { PassThrough } = await import('node:stream');
  const registry = builtinRegistry();
  registry.add(stage);
  const input = new PassThrough();
  const run = new Session();
  const spec = { stages: stages.map((use) => ({ use })), sinks: [] };
  const done = runChain(input, spec, { session: run, registry });
  input.end(text);
  await done;
  return run;
}

test('a plugin reads the run as frozen copies: no count set, no warning added but by warn', async () => {
  const tried: string[] = [];
  const meddler = definePlugin({
    name: 'meddler',
    kind: 'stage',
    kit: '^0.1.0',
    options: {},
    create: (_o, ctx) => (rec) => {
      const run = ctx.session as unknown as {
        input: { lines: number };
        warnings: unknown[];
        quarantineLines: { listed: number[] };
      };
      tried.push(
        ...attempts([
          () => void (run.input.lines = -5),
          () => void run.warnings.push({ code: 'FORGED', message: 'not recorded' }),
          () => void run.quarantineLines.listed.push(99),
        ]),
      );
      ctx.session.warn('MEDDLER', `saw line ${rec.lineNo}`);
      return rec;
    },
  });
  const stages = ['line-parser', 'meddler', 'channel-router'];
  const run = await runWithStage(meddler, stages, '{"type":"system","subtype":"init"}\n');
  assert.deepEqual(tried, ['TypeError', 'TypeError', 'TypeError']);
  assert.equal(run.input.lines, 1);
  assert.deepEqual(run.warnings, [{ code: 'MEDDLER', message: 'saw line 1' }]);
  assert.deepEqual(run.quarantineLines.listed, []);
});

test("a plugin reads the run's cost report as it is: nothing in it can be set or deleted", async () => {
  const tried: string[] = [];
  const meddler = definePlugin({
    name: 'cost-meddler',
    kind: 'stage',
    kit: '^0.1.0',
    options: {},
    create: (_o, ctx) => (rec) => {
      if (rec.lineNo !== 2) return rec;
      const cost = ctx.session.cost as unknown as {
        report(): { usd: number; channels: Map<string | null, unknown> };
        channelCost(c: string | null): { usd: number; tokens: { output_tokens: number } };
        observe?: unknown;
      };
      tried.push(
        ...attempts([
          () => void (cost.report().usd = 999),
          () => void (cost.channelCost(null).usd = 998),
          () => void (cost.channelCost(null).tokens.output_tokens = 1),
          () => void cost.report().channels.delete(null),
        ]),
        typeof cost.observe,
      );
      return rec;
    },
  });
  const assistant = {
    type: 'assistant',
    parent_tool_use_id: null,
    message: {
      id: 'm1',
      model: 'claude-sonnet-4-5',
      content: [{ type: 'text', text: 'hi' }],
      usage: { input_tokens: 10, output_tokens: 5 },
    },
  };
  const result = { type: 'result', subtype: 'success', total_cost_usd: 0.5 };
  const text = `${JSON.stringify(assistant)}\n${JSON.stringify(result)}\n`;
  const run = await runWithStage(meddler, ['line-parser', 'channel-router', 'cost-meddler'], text);
  // The deletion touched a copy of the channels' map: the run's own still has main.
  assert.deepEqual(tried, ['TypeError', 'TypeError', 'TypeError', 'written', 'undefined']);
  const report = run.cost.report();
  assert.equal(report.usd, 0.5);
  assert.equal(report.channels.get(null)?.tokens.output_tokens, 5);
});

test('a plugin cannot route a line, count thinking or set a channel\'s field ' +
  'through ctx.session', async () => {
  const tried: string[] = [];
  const seen: unknown[] = [];
  const meddler = definePlugin({
    name: 'tree-meddler',
    kind: 'stage',
    kit: '^0.1.0',
    options: {},
    create: (_o, ctx) => (rec) => {
      if (rec.lineNo !== 2) return rec;
      const { tree, thinking } = ctx.session;
      const live = tree as unknown as {
        route(v: object, n: number): unknown;
        main: { status: string; lines: number; counts: { tool_use: number }; children: string[] };
      };
      tried.push(
        ...attempts([
          // @ts-expect-error: the tree a plugin reads has no route
          () => void tree.route({ type: 'assistant', parent_tool_use_id: 'FAKE' }, 1e6),
          () => void live.route({ type: 'assistant', parent_tool_use_id: 'FAKE' }, 1e6),
          // @ts-expect-error: the thinking counts a plugin reads have no add
          () => void thinking.add(null, 'x'.repeat(12345)),
          () => void (live.main.status = 'failed'),
          () => void (live.main.lines = 99),
          () => void (live.main.counts.tool_use = 7),
          () => void live.main.children.push('FAKE'),
        ]),
      );
      // Read-only, yet read through: the tree's own channel, the record's, as the tree stands now.
      const same = tree.main === tree.main && tree.channels()[0] === tree.main;
      seen.push(same && rec.kind === 'line' && rec.channel === tree.main, tree.main.lines);
      seen.push(tree.size, thinking.of(null).kept_chars, thinking.policy?.thinking);
      return rec;
    },
  });
  const thinkingLine = {
    type: 'assistant',
    message: { id: 'm1', role: 'assistant', content: [{ type: 'thinking', thinking: 'abcdef' }] },
  };
  const text = `{"type":"system","subtype":"init"}\n${JSON.stringify(thinkingLine)}\n`;
  const stages = ['line-parser', 'channel-router', 'thinking-truncator', 'tree-meddler'];
  const run = await runWithStage(meddler, stages, text);
  assert.deepEqual(tried, Array(7).fill('TypeError'));
  assert.deepEqual(seen, [true, 2, 1, 6, 'truncate']);
  assert.equal(run.tree.size, 1);
  assert.equal(run.tree.get('FAKE'), undefined);
  assert.deepEqual(run.thinking.of(null), { kept_chars: 6, cut_chars: 0 });
  assert.equal(run.tree.main.status, 'running');
  assert.equal(run.tree.main.lines, 2);
  assert.equal(run.tree.main.counts.tool_use, 0);
});

// What a stage plugin may return, and what the folder and index.json hold when it fails.

/** A stage plugin whose function is `fn`, with the context it was made with. */
function stagePlugin(name: string, fn: (rec: SubteeRecord, ctx: PluginContext) => unknown): PluginDefinition {
  return definePlugin<Record<string, never>>({
    name,
    kind: 'stage',
    kit: '^0.1.0',
    options: {},
    create: (_o, ctx) => (rec) => fn(rec, ctx) as RecordResult,
  });
}

/** Input lines in the folder, counted from its `.jsonl` files and quarantine.log. */
function linesInFolder(out: string): number {
  let lines = 0;
  for (const [path, bytes] of readTree(out))
    if (path.endsWith('.jsonl') || path === 'quarantine.log')
      lines += bytes.toString().split('\n').length - 1;
  return lines;
}

/**
 * Runs `input` in chunks of 4 KiB (many batches in flight) through the parser, `stages` with
 * the plugin among them, and the files sink: the run's error, index.json, the lines on disk.
 */
async function runPlugin(plugin: PluginDefinition, stages: string[], input: Buffer, maxLineBytes = 16 << 20) {
  const out = join(tmpDir(), 'out');
  const registry = builtinRegistry();
  registry.add(plugin);
  let error: (Error & { code?: string }) | null = null;
  const spec = {
    stages: [{ use: 'line-parser', maxLineBytes }, ...stages.map((use) => ({ use }))],
    sinks: [{ use: 'files', out }],
  };
  try {
    await runChain(chunked(splitEvery(input, 4096)), spec, { registry });
  } catch (err) {
    error = err as Error;
  }
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  return { error, index, onDisk: linesInFolder(out), out };
}

/** What a plugin that wrote on a record or its value is told, after V8's words. */
const WRITE_HINT =
  'a record and its value are never written on: return a new one, as rewriteText(rec, fn) makes';

const nonBlankLines = (input: Buffer) => input.toString().split('\n').filter((l) => l.trim() !== '').length;

test('every record a stage plugin is handed is frozen, whatever made it: a write on one throws', async () => {
  const seen = new Map<string, string[]>();
  const probe = (name: string) =>
    stagePlugin(name, (rec) => {
      const writable = rec as unknown as Record<string, unknown>;
      const tried = attempts([
        () => void (writable.raw = Buffer.from('{"type":"x"}')),
        () => void (writable.value = { type: 'x' }),
        () => void (writable.lineNo = 0),
        () => void (writable.kind = 'line'),
        () => void (writable.channel = null),
      ]);
      const what = `${name} ${rec.kind}${rec.kind === 'line' && rec.raw.length > 65536 ? ' long' : ''}` +
        `${rec.kind === 'spooled' && rec.value === null ? ' junk' : ''}` +
        `${(rec as LineRecord).mapped ? ' mapped' : ''}${(rec as LineRecord).derived ? ' derived' : ''}`;
      seen.set(what, [String(Object.isFrozen(rec)), ...new Set(tried)]);
      return rec;
    });
  const thinking = (chars: number) =>
    JSON.stringify({ type: 'assistant', message: { id: `m${chars}`, role: 'assistant',
      content: [{ type: 'thinking', thinking: 'x'.repeat(chars) }] } });
  const input = Buffer.from(
    [thinking(10), thinking(70_000), '{"not json', 'a', 'b', 'c', thinking(120_000),
      `[${'1,'.repeat(60_000)}1]`].join('\n') + '\n',
  );
  for (const stages of [['before', 'channel-router', 'after']]) {
    const plugins = [probe('before'), probe('after')];
    const out = join(tmpDir(), 'out');
    const registry = builtinRegistry();
    for (const p of plugins) registry.add(p);
    const spec = {
      stages: [{ use: 'line-parser', maxLineBytes: 100_000 }, ...stages.map((use) => ({ use }))],
      sinks: [{ use: 'files', out }],
    };
    await runChain(chunked(splitEvery(input, 4096)), spec, { registry });
  }
  const codex = readFileSync(join(FIXTURES, 'other-agents', 'codex-spawn.jsonl'));
  const registry = builtinRegistry();
  registry.add(probe('mapped'));
  const spec = {
    stages: ['line-parser', 'input-format', 'mapped', 'channel-router'].map((use) => ({ use })),
    sinks: [{ use: 'files', out: join(tmpDir(), 'out') }],
  };
  await runChain(chunked([codex]), spec, { registry });
  const frozen = ['true', 'TypeError'];
  const expected = [
    'before line', 'before line long', 'before quarantine', 'before spooled', 'before spooled junk',
    'after line', 'after line long', 'after quarantine', 'after spooled', 'after spooled junk',
    'mapped line mapped', 'mapped line derived',
  ];
  assert.deepEqual(Object.fromEntries([...seen].filter(([k]) => expected.includes(k))),
    Object.fromEntries(expected.map((k) => [k, frozen])));
  assert.deepEqual([...seen.values()].filter((v) => v.join() !== frozen.join()), [], [...seen.keys()].join());
  for (const input of [{ type: 'user' }, 'not an object', [1], new Date(0)])
    assert.ok(Object.isFrozen(recordOfObject(input, 1)), `object-source: ${String(input)}`);
});

test('a stage plugin that writes on a record fails the run naming the plugin; ' +
  "the folder holds the input's bytes, never the ones it wrote", async () => {
  const input = fanoutInput(2, 200);
  for (const [field, stages] of [
    ['raw', ['assign', 'channel-router']],
    ['value', ['channel-router', 'assign']],
  ] as const) {
    const assign = stagePlugin('assign', (rec) => {
      if (rec.kind !== 'line' || rec.lineNo !== 3) return rec;
      const writable = rec as { raw: Buffer; value: object };
      if (field === 'raw') writable.raw = Buffer.from('{"type":"x"}');
      else writable.value = { ...rec.value, injected: true };
      return rec;
    });
    const { error, index, onDisk, out } = await runPlugin(assign, [...stages], input);
    assert.equal(error?.code, 'ERR_PLUGIN_FAILED', field);
    // V8's words: a frozen field is read only, a routed line's value a getter.
    const refused = `Cannot (assign to read only property '${field}'|set property ${field} of)`;
    assert.match(error!.message, new RegExp(`^plugin assign failed: ${refused}`));
    assert.ok(error!.message.endsWith(`(${WRITE_HINT})`));
    for (const [path, bytes] of readTree(out))
      assert.doesNotMatch(bytes.toString(), /"type":"x"|injected/, `${field}: ${path}`);
    assert.equal(onDisk + index.input.unwritten, index.input.lines, field);
  }
});

test('a record a stage plugin returns is frozen as it is handed on: a later plugin that writes on it ' +
  'fails naming itself', async () => {
  const rewrite = stagePlugin('rewrite', (rec) =>
    rec.kind === 'line' ? { ...rec, value: { ...rec.value, rewritten: true } } : rec,
  );
  const assign = stagePlugin('assign', (rec) => {
    if (rec.kind === 'line' && rec.lineNo === 3) (rec as { value: object }).value = { type: 'x' };
    return rec;
  });
  const out = join(tmpDir(), 'out');
  const registry = builtinRegistry();
  for (const p of [rewrite, assign]) registry.add(p);
  const spec = {
    stages: ['line-parser', 'rewrite', 'assign', 'channel-router'].map((use) => ({ use })),
    sinks: [{ use: 'files', out }],
  };
  const error = await runChain(chunked([fanoutInput(2, 200)]), spec, { registry }).then(
    () => null,
    (err: { code?: string; message: string }) => err,
  );
  assert.equal(error?.code, 'ERR_PLUGIN_FAILED');
  assert.match(error!.message, /^plugin assign failed: Cannot assign to read only property 'value'/);
});

/** Writes inside a value: on its first content block, its content list, its message. */
const VALUE_WRITES: Record<string, (value: Record<string, any>) => void> = {
  assign: (v) => void (v.message.content[0].text = 'HACKED'),
  push: (v) => void v.message.content.push({ type: 'text', text: 'HACKED' }),
  delete: (v) => void delete v.message.content[0].type,
  define: (v) => void Object.defineProperty(v.message, 'HACKED', { value: 'HACKED', enumerable: true }),
};

/** Lines of each make: parsed at once, read through a view (past 64 KiB), spooled (past 100 KB). */
const MADE_LINES = Buffer.from(
  [
    [{ type: 'text', text: 'hi' }],
    [{ type: 'text', text: 'y'.repeat(70_000) }],
    [{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'z'.repeat(120_000) } }],
  ]
    .map((content, i) => ({ type: 'assistant', message: { id: `m${i}`, role: 'assistant', content } }))
    .map((line) => JSON.stringify(line))
    .join('\n') + '\n',
);

test('a plugin that writes anywhere inside the value it is handed fails the run naming it, whatever ' +
  'made the line; no file shows what it wrote', async () => {
  const codex = readFileSync(join(FIXTURES, 'other-agents', 'codex-spawn.jsonl'));
  const runs = [
    { what: 'before the router', input: MADE_LINES, stages: ['meddle', 'channel-router'], lines: [1, 2, 3] },
    { what: 'after the router', input: MADE_LINES, stages: ['channel-router', 'meddle'], lines: [1, 2, 3] },
    { what: 'reads', input: MADE_LINES, stages: ['channel-router', 'meddle'], lines: [2], reads: true },
    // 0: the first line whose value has content blocks.
    { what: 'mapped', input: codex, stages: ['input-format', 'meddle', 'channel-router'], lines: [0] },
  ];
  let failed = 0;
  for (const { what, input, stages, lines, reads } of runs)
    for (const lineNo of lines)
      for (const [how, write] of Object.entries(VALUE_WRITES)) {
        const meddle = definePlugin<Record<string, never>>({
          name: 'meddle',
          kind: 'stage',
          kit: '^0.1.0',
          ...(reads ? { reads: ['assistant'] } : {}),
          options: {},
          create: () => {
            let written = false;
            return (rec) => {
              const value = rec.kind === 'quarantine' ? null : (rec.value as Record<string, any> | null);
              if (written || !Array.isArray(value?.message?.content)) return;
              if (rec.lineNo !== lineNo && lineNo !== 0) return;
              written = true;
              write(value!);
            };
          },
        });
        const at = `${what}, line ${lineNo}, ${how}`;
        const { error, index, onDisk, out } = await runPlugin(meddle, stages, input, 100_000);
        assert.equal(error?.code, 'ERR_PLUGIN_FAILED', at);
        assert.match(error!.message, /^plugin meddle failed: (Cannot|#<Object>) /, at);
        assert.ok(error!.message.endsWith(`(${WRITE_HINT})`), `${at}: ${error!.message}`);
        for (const [path, bytes] of readTree(out))
          assert.doesNotMatch(bytes.toString(), /HACKED/, `${at}: ${path}`);
        assert.equal(onDisk + index.input.unwritten, index.input.lines, at);
        failed++;
      }
  assert.equal(failed, 4 * 8);
});

test('a value a plugin made is frozen through as the kit hands it to the next plugin: a write in it ' +
  'fails naming that one', async () => {
  const remake = stagePlugin('remake', (rec) =>
    rec.kind === 'line' ? { ...rec, value: { ...rec.value, made: { message: { content: [] } } } } : rec,
  );
  const later = stagePlugin('later', (rec) => {
    const made = rec.kind === 'line' ? (rec.value.made as { message: { content: string[] } }) : null;
    made?.message.content.push('HACKED');
  });
  const out = join(tmpDir(), 'out');
  const registry = builtinRegistry();
  for (const p of [remake, later]) registry.add(p);
  const spec = {
    stages: ['line-parser', 'remake', 'later', 'channel-router'].map((use) => ({ use })),
    sinks: [{ use: 'files', out }],
  };
  const error = await runChain(chunked([MADE_LINES]), spec, { registry }).then(
    () => null,
    (err: { code?: string; message: string }) => err,
  );
  assert.equal(error?.code, 'ERR_PLUGIN_FAILED');
  assert.match(error!.message, /^plugin later failed: Cannot add property 0, object is not extensible/);
  for (const [path, bytes] of readTree(out)) assert.doesNotMatch(bytes.toString(), /HACKED/, path);
});

test('built-in stages and sinks never write in a value: with plugins that read (and so freeze) every ' +
  'value first, each fixture makes the same folder', async () => {
  const reader = (name: string) => stagePlugin(name, (rec) => void (rec.kind === 'quarantine' || rec.value));
  const fixtures = [
    ...readdirSync(FIXTURES).filter((f) => f.endsWith('.jsonl')),
    ...readdirSync(join(FIXTURES, 'other-agents'))
      .filter((f) => f.endsWith('.jsonl'))
      .map((f) => `other-agents/${f}`),
  ];
  for (const fixture of fixtures) {
    const input = readFileSync(join(FIXTURES, fixture));
    const folders = [];
    for (const readers of [false, true]) {
      const out = join(tmpDir(), 'out');
      const registry = builtinRegistry();
      for (const name of ['first', 'mapped', 'routed']) registry.add(reader(name));
      const plugin = (use: string) => (readers ? [{ use }] : []);
      const spec = {
        stages: [
          { use: 'line-parser', maxLineBytes: 4096 },
          ...plugin('first'),
          { use: 'input-format' },
          ...plugin('mapped'),
          { use: 'channel-router' },
          ...plugin('routed'),
          { use: 'thinking-truncator', mode: 'file' },
        ],
        sinks: [{ use: 'files', out }, { use: 'pino', destination: join(out, 'pino.log') }],
      };
      await runChain(chunked(splitEvery(input, 4096)), spec, { registry });
      const tree = readTree(out);
      const index = JSON.parse(tree.get('index.json')!.toString());
      tree.delete('index.json');
      tree.delete('pino.log');
      folders.push({ tree, channels: index.channels, input: index.input });
    }
    assert.ok(folders[0].tree.size > 1, fixture);
    assert.deepEqual(folders[1], folders[0], fixture);
  }
});

test("an option a config leaves out reaches the plugin's create and checkEnvironment as its " +
  'default; one given is as given; a list default is a copy for each run', async () => {
  const seen: Array<{ at: string; options: Record<string, unknown> }> = [];
  const probe = definePlugin<{ word: string; mask: string; times: number; tags: string[]; note?: string }>({
    name: 'probe',
    kind: 'sink',
    kit: '^0.1.0',
    options: {
      word: { type: 'string', required: true },
      mask: { type: 'string', default: '[REDACTED]' },
      times: { type: 'integer', min: 1, default: 5 },
      tags: { type: 'array', default: ['a'] },
      note: { type: 'string' },
    },
    checkEnvironment: (options) =>
      void seen.push({ at: 'checkEnvironment', options: structuredClone(options) }),
    create: (options) => {
      seen.push({ at: 'create', options: structuredClone(options) });
      options.tags.push('added by the plugin');
      return () => {};
    },
  });
  const configs = [{ word: 'x' }, { word: 'x', mask: '#', times: 2, tags: [], note: 'n' }, { word: 'y' }];
  for (const given of configs) {
    const spec = {
      stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
      sinks: [{ use: 'probe', ...given }],
    };
    const registry = builtinRegistry().add(probe);
    await runChain(chunked([Buffer.from('{"type":"system"}\n')]), spec, { registry });
  }
  const defaults = { mask: '[REDACTED]', times: 5, tags: ['a'] };
  const expected = [
    { word: 'x', ...defaults },
    { word: 'x', mask: '#', times: 2, tags: [], note: 'n' },
    { word: 'y', ...defaults },
  ];
  assert.deepEqual(seen, expected.flatMap((options) => [
    { at: 'checkEnvironment', options },
    { at: 'create', options },
  ]));
  assert.deepEqual(probe.options.tags.default, ['a']);
});

test('a default its own option refuses is refused as the plugin is defined: ERR_PLUGIN_INVALID ' +
  'naming the option', () => {
  const define = (options: object) => () =>
    definePlugin({
      name: 'bad-default',
      kind: 'sink',
      kit: '^0.1.0',
      options,
      create: () => () => {},
    } as never);
  assert.throws(define({ n: { type: 'integer', min: 1, default: 0 }, m: { type: 'string', default: 3 } }), {
    code: 'ERR_PLUGIN_INVALID',
    message: 'plugin bad-default: option n: its default must be at least 1; ' +
      'option m: its default must be a string, not number',
  });
  const check = (v: string) => (v === '' ? 'must not be empty' : null);
  const checked = { type: 'string', default: '', check };
  assert.throws(define({ s: checked }), {
    code: 'ERR_PLUGIN_INVALID',
    message: 'plugin bad-default: option s: its default must not be empty',
  });
});

test("runChain and buildChain run a plugin of a registry of the program's own among the built-in " +
  "stages and sinks, as open() does; one of a built-in's name is ERR_PLUGIN_DUPLICATE", async () => {
  const types: string[] = [];
  const registry = new Registry().add(stagePlugin('mine', (rec) => void types.push(rec.kind)));
  const out = join(tmpDir(), 'out');
  const spec = {
    stages: ['line-parser', 'mine', 'channel-router'].map((use) => ({ use })),
    sinks: [{ use: 'files', out }],
  };
  const session = await runChain(chunked([MADE_LINES]), spec, { registry });
  assert.deepEqual([types, session.input.lines], [['line', 'line', 'line'], 3]);
  assert.ok(existsSync(join(out, 'main.jsonl')));
  assert.deepEqual(registry.names(), ['mine'], "the program's registry is left as it was");
  const { streams } = buildChain({ ...spec, sinks: [] }, { registry });
  assert.equal(streams.length, 3);
  for (const stream of streams) stream.destroy();
  const typo = { ...spec, stages: [{ use: 'line-parsr' }, { use: 'channel-router' }] };
  await assert.rejects(runChain(chunked([MADE_LINES]), typo, { registry }), {
    code: 'ERR_CONFIG',
    message: /^invalid chain: stages\[0\]: unknown stage "line-parsr" \(known: line-parser, .*, mine\)$/,
  });
  const files = definePlugin<Record<string, never>>({
    name: 'files', kind: 'sink', kit: '^0.1.0', options: {}, create: () => () => {},
  });
  await assert.rejects(runChain(chunked([MADE_LINES]), spec, { registry: new Registry().add(files) }), {
    code: 'ERR_PLUGIN_DUPLICATE',
    message: 'plugin files: a stage or sink of that name is already registered',
  });
});

/** A subagent spawned, its line with usage, its report, and the run's result: one input chunk. */
const CHANNEL_INPUT = Buffer.from(
  [
    { type: 'system', subtype: 'init', session_id: 's1' },
    {
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: 'm1',
        model: 'claude-sonnet-4-5',
        content: [{ type: 'tool_use', id: 'toolu_a', name: 'Agent', input: { subagent_type: 'Explore' } }],
        usage: { input_tokens: 7, output_tokens: 3 },
      },
    },
    {
      type: 'assistant',
      parent_tool_use_id: 'toolu_a',
      message: {
        id: 'm2',
        model: 'claude-sonnet-4-5',
        content: [{ type: 'text', text: 'found it' }],
        usage: { input_tokens: 10, output_tokens: 5 },
      },
    },
    {
      type: 'user',
      parent_tool_use_id: null,
      message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: 'done' }] },
    },
    { type: 'result', subtype: 'success', is_error: false },
  ].map((line) => JSON.stringify(line)).join('\n') + '\n',
);

/** Writes a plugin might try on a routed line's channel: its fields, what they hold, its class. */
const CHANNEL_WRITES: Record<string, (ch: object) => void> = {
  status: (ch) => void ((ch as { status: string }).status = 'failed'),
  lines: (ch) => void ((ch as { lines: number }).lines = 0),
  id: (ch) => void ((ch as { id: string }).id = 'toolu_forged'),
  'counts.text': (ch) => void ((ch as { counts: { text: number } }).counts.text = 99),
  'usage.output_tokens': (ch) => void ((ch as { usage: Record<string, number> }).usage.output_tokens = 1e6),
  'place.depth': (ch) => void ((ch as { place: { depth: number } }).place.depth = 7),
  children: (ch) => void (ch as { children: string[] }).children.push('toolu_forged'),
  'a field added': (ch) => void ((ch as { forged?: boolean }).forged = true),
  'status defined': (ch) => void Object.defineProperty(ch, 'status', { value: 'failed' }),
  'status on its prototype': (ch) =>
    void Object.defineProperty(Object.getPrototypeOf(ch), 'status', { get: () => 'failed' }),
};

/** What index.json says of each channel that the tree holds (not the files sink's paths). */
const treeFigures = (index: { channels: Array<Record<string, unknown>> }) =>
  index.channels.map(({ id, parent, depth, agent, status, summary, lines, counts, usage }) =>
    ({ id, parent, depth, agent, status, summary, lines, counts, usage }));

test('a write on a routed line\'s channel from a stage plugin throws, and index.json says ' +
  'what the tree counted', async () => {
  const tried = new Map<string, Set<string>>();
  const meddle = stagePlugin('meddle', (rec) => {
    if (rec.kind !== 'line' || !rec.channel) return rec;
    for (const [what, write] of Object.entries(CHANNEL_WRITES)) {
      const [result] = attempts([() => write(rec.channel!)]);
      tried.set(what, (tried.get(what) ?? new Set()).add(result));
    }
    return rec;
  });
  const pass = stagePlugin('meddle', (rec) => rec);
  const stages = ['channel-router', 'meddle'];
  const meddled = await runPlugin(meddle, stages, CHANNEL_INPUT);
  const clean = await runPlugin(pass, stages, CHANNEL_INPUT);
  assert.equal(meddled.error, null);
  const sub = meddled.index.channels.find((c: { id: string | null }) => c.id === 'toolu_a');
  const usage = { input_tokens: 10, output_tokens: 5 };
  assert.deepEqual([sub.status, sub.lines, sub.usage], ['completed', 1, usage]);
  assert.deepEqual(sub.counts, { text: 1, thinking: 0, tool_use: 0, tool_result: 0 });
  assert.deepEqual(meddled.index, clean.index);
  for (const [path, bytes] of readTree(meddled.out))
    if (path.endsWith('.jsonl')) assert.deepEqual(bytes, readTree(clean.out).get(path), path);
  // Refused, each of them, not ignored: the plugin that had not caught it would have failed.
  assert.deepEqual(Object.fromEntries([...tried].map(([k, v]) => [k, [...v]])),
    Object.fromEntries(Object.keys(CHANNEL_WRITES).map((k) => [k, ['TypeError']])));
});

test('a stage plugin that writes on a channel fails the run naming the plugin, as a write on a ' +
  'record does; index.json holds the tree\'s figures', async () => {
  const stages = ['channel-router', 'meddle'];
  const clean = await runPlugin(stagePlugin('meddle', (rec) => rec), stages, CHANNEL_INPUT);
  for (const [what, refused, hint] of [
    ['status', "Cannot set property status of #<Channel> which has only a getter", 'channel'],
    ['id', "Cannot assign to read only property 'id' of object '#<Channel>'", 'channel'],
    ['counts.text', "Cannot assign to read only property 'text' of object '#<Object>'", 'record'],
  ] as const) {
    const meddle = stagePlugin('meddle', (rec) => {
      if (rec.kind === 'line' && rec.lineNo === 3) CHANNEL_WRITES[what](rec.channel!);
      return rec;
    });
    const { error, index } = await runPlugin(meddle, stages, CHANNEL_INPUT);
    assert.equal(error?.code, 'ERR_PLUGIN_FAILED', what);
    const hints = {
      channel: '(a channel is read only: the tree alone changes it, as lines arrive)',
      record: `(${WRITE_HINT})`,
    };
    assert.equal(error!.message, `plugin meddle failed: ${refused} ${hints[hint]}`, what);
    // The router had routed the whole chunk before the plugin saw its third line.
    assert.deepEqual(treeFigures(index), treeFigures(clean.index), what);
  }
});

test('a stage plugin that throws mid-run: every line read is in the folder ' +
  'or counted unwritten', async () => {
  const input = fanoutInput(5, 3000);
  for (const stages of [
    ['channel-router', 'thrower', 'thinking-truncator', 'idle-watchdog'],
    ['thrower', 'channel-router'],
  ]) {
    let n = 0;
    const thrower = stagePlugin('thrower', (rec) => {
      if (++n === 2000) throw new Error('boom');
      return rec;
    });
    const { error, index, onDisk } = await runPlugin(thrower, stages, input);
    const at = stages.join(' → ');
    assert.equal(error?.code, 'ERR_PLUGIN_FAILED', at);
    assert.equal(error?.message, 'plugin thrower failed: boom', at);
    assert.ok(index.input.lines >= 2000 && index.input.lines <= nonBlankLines(input), at);
    assert.ok(index.input.unwritten > 0, `${at}: the batch in flight is not on disk`);
    assert.equal(onDisk + index.input.unwritten + index.input.dropped, index.input.lines, at);
  }
});

test('a stage plugin that returns what is not a record for its line fails ' +
  'naming it, the line and the value', async () => {
  const input = fanoutInput(3, 400);
  const cases: Array<[string, (rec: SubteeRecord) => unknown, RegExp]> = [
    ['a number', () => 42, /returned number 42 for line 5: not a record/],
    ['a string', () => 'str', /returned "str" for line 5: not a record/],
    ['two copies', (rec) => [rec, rec], /returned 2 records for line 5/],
    ['a copy and null', (rec) => [rec, null], /returned 2 records for line 5/],
    ['a record without its line number', () => ({ kind: 'line', value: {} }), /record of line undefined/],
    ['the next line', (rec) => ({ ...rec, lineNo: rec.lineNo + 1 }), /a record of line 6 for line 5/],
    ['a line without bytes', (rec) => ({ ...rec, raw: 'x' }), /line record without its bytes for line 5/],
    ['a line without a value', (rec) => ({ ...rec, value: null }), /value is not an object for line 5/],
    ['another kind', (rec) => ({ ...rec, kind: 'quarantine' }), /for line 5: not a line record/],
  ];
  for (const [what, give, message] of cases) {
    const plugin = stagePlugin('shaper', (rec) => (rec.lineNo === 5 ? give(rec) : rec));
    const { error, index, onDisk } = await runPlugin(plugin, ['channel-router', 'shaper'], input);
    assert.equal(error?.code, 'ERR_PLUGIN_FAILED', what);
    assert.match(error!.message, /^plugin shaper returned /, what);
    assert.match(error!.message, message, what);
    assert.equal(onDisk + index.input.unwritten, index.input.lines, what);
    assert.equal(index.input.dropped, 0, what);
  }
});

test('a stage plugin hands on its record, a new one for the same line ' +
  'or a list of one: each line once', async () => {
  const input = fanoutInput(3, 400);
  const returns: Array<(rec: SubteeRecord) => unknown> = [
    () => undefined,
    (rec) => rec,
    (rec) => [rec],
    (rec) => ({ ...rec }),
    (rec) => Promise.resolve([{ ...rec }]),
  ];
  for (const give of returns) {
    const keeper = stagePlugin('keeper', give);
    const { error, index, onDisk, out } = await runPlugin(keeper, ['channel-router', 'keeper'], input);
    assert.equal(error, null, String(give));
    assert.equal(onDisk, nonBlankLines(input), String(give));
    assert.equal(index.input.lines, onDisk);
    assert.deepEqual([index.input.unwritten, index.input.dropped], [0, 0]);
    const written = [...readTree(out)].filter(([p]) => p.endsWith('.jsonl')).map(([, b]) => b.toString());
    const writtenLines = written.join('').split('\n').filter(Boolean);
    assert.deepEqual(writtenLines.sort(), linesOf(input).sort(), String(give));
  }
});

test('a stage plugin that drops lines: index.json counts them as dropped, ' +
  'a junk run as its lines', async () => {
  const spawn = JSON.stringify({
    type: 'assistant',
    parent_tool_use_id: null,
    message: { id: 'm', content: [{ type: 'tool_use', id: 'toolu_d', name: 'Agent', input: {} }] },
  });
  const text = (k: number, n = 1) =>
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: 'toolu_d',
      message: { id: `t${k}`, content: [{ type: 'text', text: `${k} ${'y'.repeat(n)}` }] },
    });
  // Short text lines (every third dropped), a run of 3 junk lines (dropped: 3 lines), and a
  // spooled line (dropped: its spool file goes too).
  const lines = [spawn, ...Array.from({ length: 30 }, (_, k) => text(k)), 'junk a', 'junk b', 'junk c'];
  lines.push(text(99, 10_000), text(100));
  const input = Buffer.from(lines.join('\n') + '\n');
  const dropper = stagePlugin('dropper', (rec) => {
    if (rec.kind !== 'line') return null;
    const id = (rec.value.message as { id?: string } | undefined)?.id ?? '';
    return /^t\d+$/.test(id) && Number(id.slice(1)) % 3 === 0 ? [] : rec;
  });
  const { error, index, onDisk, out } = await runPlugin(dropper, ['dropper', 'channel-router'], input, 4096);
  assert.equal(error, null);
  const droppedText = Array.from({ length: 30 }, (_, k) => k).filter((k) => k % 3 === 0).length;
  assert.equal(index.input.dropped, droppedText + 3 + 1);
  assert.equal(onDisk + index.input.dropped, nonBlankLines(input));
  assert.equal(index.input.lines, nonBlankLines(input));
  assert.equal(index.input.unwritten, 0);
  assert.deepEqual(readdirSync(out).filter((f) => f.startsWith('.subtee-spool')), []);
});

/** Writes a plugin module and a config naming it into `dir`; returns the config's path. */
function pluginConfig(dir: string, name: string, kind: 'stage' | 'sink', create: string, chain: object) {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, `export default { name: '${name}', kind: '${kind}', kit: '>=0.0.0', options: {},
  create: () => ${create} };\n`);
  const config = join(dir, `${name}.json`);
  writeFileSync(config, JSON.stringify({ plugins: [file], ...chain }));
  return config;
}

test('a plugin promise that never settles (a sink\'s end(), a stage\'s function) fails the run ' +
  'naming it, exit 1 with index.json written, never Node\'s silent exit 13', () => {
  const dir = tmpDir();
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const lines = nonBlankLines(readFileSync(input));
  const never = 'new Promise(() => {})';
  const cases = [
    {
      name: 'hangend',
      create: `({ record: () => {}, end: () => ${never} })`,
      kind: 'sink' as const,
      chain: { sinks: [{ use: 'hangend' }] },
      run: false,
      said: 'plugin hangend: its end() never settled',
    },
    {
      name: 'hangrec',
      create: `(rec) => (rec.lineNo >= 5 ? ${never} : rec)`,
      kind: 'stage' as const,
      // The idle watchdog would keep the loop busy and name the plugin only past its allowance.
      chain: {
        stages: [{ use: 'line-parser' }, { use: 'hangrec' }, { use: 'channel-router' }],
        leaveOut: ['idle-watchdog'],
        sinks: [{ use: 'files' }],
      },
      run: false,
      said: 'plugin hangrec: its function for line 5 never settled',
    },
    {
      name: 'hangrun',
      create: `({ record: () => {}, end: () => ${never} })`,
      kind: 'sink' as const,
      chain: { sinks: [{ use: 'hangrun' }] },
      run: true,
      said: 'plugin hangrun: its end() never settled',
    },
  ];
  for (const c of cases) {
    const config = pluginConfig(dir, c.name, c.kind, c.create, c.chain);
    const out = join(dir, `out-${c.name}`);
    const flags = ['--config', config, '--out', out, '--stdout', 'none', '-q'];
    const args = c.run
      ? [BIN, 'run', ...flags, '--', 'sh', '-c', `cat "${input}"; exit 7`]
      : [BIN, ...flags, input];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
    assert.equal(r.status, 1, `${c.name}: ${r.status} ${r.signal} ${r.stderr}`);
    const errors = r.stderr.split('\n').filter((l) => l.endsWith('[ERR_PLUGIN_FAILED]'));
    assert.equal(errors.length, 1, r.stderr);
    assert.ok(errors[0].startsWith(`subtee: ${c.said} (`), errors[0]);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.input.lines, lines, c.name);
    assert.equal(linesInFolder(out) + index.input.unwritten, lines, c.name);
    const ended = { name: 'sh', exit_code: 7, signal: null };
    if (c.run) assert.deepEqual(index.command, ended, "index.json keeps the command's end");
  }
});

test('once the input has ended, a plugin promise pending past --plugin-end-timeout-ms fails the run ' +
  'naming it, and the timer the plugin left running does not hold subtee', () => {
  const dir = tmpDir();
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const create = '({ record: () => {}, end: () => new Promise(() => { setInterval(() => {}, 1000); }) })';
  const config = pluginConfig(dir, 'slowend', 'sink', create, { sinks: [{ use: 'slowend' }] });
  const out = join(dir, 'out');
  const args = [BIN, '--config', config, '--out', out, '--stdout', 'none', '-q'];
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [...args, '--plugin-end-timeout-ms', '300', input], {
    encoding: 'utf8',
    timeout: 20_000,
    killSignal: 'SIGKILL',
  });
  const tookMs = Date.now() - t0;
  assert.equal(r.status, 1, `${r.status} ${r.signal} ${r.stderr}`);
  assert.equal(
    r.stderr,
    "subtee: plugin slowend: its end() did not settle within 0.3 s of the input's end [ERR_PLUGIN_FAILED]\n",
  );
  assert.ok(tookMs < 10_000, `took ${tookMs} ms`);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(linesInFolder(out), index.input.lines);
});

test('a --plugin-end-timeout-ms past the longest Node timer waits as long as said: an end() ' +
  'that takes 300 ms is not failed', () => {
  const dir = tmpDir();
  const create = '({ record: () => {}, end: () => new Promise((resolve) => setTimeout(resolve, 300)) })';
  const config = pluginConfig(dir, 'slowend', 'sink', create, { sinks: [{ use: 'slowend' }] });
  const args = [BIN, '--config', config, '--out', join(dir, 'out'), '--stdout', 'none', '-q'];
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const r = spawnSync(process.execPath, [...args, '--plugin-end-timeout-ms', '3000000000', input], {
    encoding: 'utf8',
    timeout: 20_000,
    killSignal: 'SIGKILL',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr, '');
});

test('a plugin sink that never settles mid-run, below the idle watchdog, fails the run naming it: ' +
  'a backed-up chain is no silence, and the watchdog holds nothing open for it', () => {
  const dir = tmpDir();
  const input = join(dir, 'in.jsonl');
  // Far more than the chain's buffers hold, so the input is still unread when the sink stops.
  writeFileSync(input, fanoutInput(3, 30_000));
  const create = '(rec) => (rec.lineNo >= 5 ? new Promise(() => {}) : undefined)';
  const config = pluginConfig(dir, 'stuck', 'sink', create, { sinks: [{ use: 'stuck' }] });
  const out = join(dir, 'out');
  const args = [BIN, '--config', config, '--out', out, '--stdout', 'none', '-q', input];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
  assert.equal(r.status, 1, `${r.status} ${r.signal} ${r.stderr}`);
  const said = /^subtee: plugin stuck: its function for line 5 never settled \(.*\[ERR_PLUGIN_FAILED\]$/m;
  assert.match(r.stderr, said);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.ok(index.input.lines < nonBlankLines(readFileSync(input)), 'the input was not read to its end');
  assert.equal(linesInFolder(out) + index.input.unwritten, index.input.lines);
});

/** An idle watchdog that fires 300 ms into any silence, whatever is in flight. */
const QUICK_WATCHDOG = {
  use: 'idle-watchdog',
  ...{ idleTimeoutMs: 300, modelTimeoutMs: 300, toolTimeoutMs: 300, graceMs: 0 },
  ...{ checkIntervalMs: 20, stallDrainMs: 100 },
};

/**
 * Runs `lines` through a plugin and a quick watchdog, the input left open (silent): a stage
 * above the watchdog, a sink below it.
 */
async function silentRunWith(plugin: PluginDefinition, lines: number) {
  const out = join(tmpDir(), 'out');
  const registry = builtinRegistry().add(plugin);
  const stage = plugin.kind === 'stage' ? [{ use: plugin.name }] : [];
  const sink = plugin.kind === 'sink' ? [{ use: plugin.name }] : [];
  const stages = [{ use: 'line-parser' }, ...stage, { use: 'channel-router' }, QUICK_WATCHDOG];
  const spec = { stages, sinks: [{ use: 'files', out }, ...sink] };
  const input = new PassThrough();
  input.write(fanoutInput(1, lines - 1));
  const t0 = performance.now();
  // A promise still pending once the stall has ended the input fails a second later, after
  // the watchdog's drain deadline (0.1 s) has ended the run.
  const err = await runChain(input, spec, { registry, pluginEndTimeoutMs: 1000 }).then(
    () => assert.fail('the run went on through a silent input'),
    (e: Error & { code?: string }) => e,
  );
  const tookMs = performance.now() - t0;
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.input.lines, lines);
  assert.equal(linesInFolder(out) + index.input.unwritten, index.input.lines);
  return { err, index, tookMs };
}

test('a stage plugin stuck above the idle watchdog fails the run naming it and how long it held ' +
  "records (ERR_PLUGIN_FAILED, not ERR_STALL); index.json's stall says so", async () => {
  const stuck = stagePlugin('stuck', (rec) => (rec.lineNo === 5 ? new Promise(() => {}) : rec));
  const { err, index, tookMs } = await silentRunWith(stuck, 8);
  assert.equal(err.code, 'ERR_PLUGIN_FAILED', err.message);
  const said = new RegExp(
    '^plugin stuck: its function for line 5 held records for (\\d+\\.\\d) s, ' +
      "past the idle watchdog's allowance \\(0\\.3 s without input\\)$",
  );
  assert.match(err.message, said);
  assert.equal(index.stalled, true);
  assert.deepEqual(
    index.stall.heldBy.map((h: { plugin: string; what: string }) => [h.plugin, h.what]),
    [['stuck', 'its function for line 5']],
  );
  // Held from the line's arrival to the stall: at least the silence, at most the whole run.
  const { heldMs } = index.stall.heldBy[0];
  const { silenceMs } = index.stall;
  assert.ok(heldMs >= silenceMs && heldMs <= tookMs, `${heldMs} ${silenceMs} ${tookMs}`);
  assert.equal(Number(said.exec(err.message)![1]), Number((heldMs / 1000).toFixed(1)));
  const warning = index.warnings.find((w: { code: string }) => w.code === 'STALL');
  const named = /^plugin stuck held records for .* \(its function for line 5 had not settled\): /;
  assert.match(warning.message, named);
});

test("a silent input's stall names no plugin: not a stage plugin above the idle watchdog that " +
  'settles, nor a sink plugin below it that holds records', async () => {
  const settles = stagePlugin('settles', (rec) => new Promise((resolve) => setImmediate(resolve, rec)));
  // Below the watchdog, a sink that holds records does not keep them from it: the input is silent.
  // (Its timer keeps the process busy, as a plugin waiting on something would.)
  let timer: NodeJS.Timeout | undefined;
  const sinkStuck = definePlugin<Record<string, never>>({
    name: 'sink-stuck',
    kind: 'sink',
    kit: '^0.1.0',
    options: {},
    create: () => (rec) =>
      rec.lineNo === 5 ? new Promise(() => void (timer = setInterval(() => {}, 1000))) : undefined,
  });
  try {
    for (const plugin of [settles, sinkStuck]) {
      const { err, index } = await silentRunWith(plugin, 8);
      assert.deepEqual(index.stall.heldBy, [], plugin.name);
      const warning = index.warnings.find((w: { code: string }) => w.code === 'STALL');
      assert.match(warning.message, /^no input for /);
      if (plugin === settles) assert.equal(err.code, 'ERR_STALL', err.message);
      // The sink still holds line 5 once the input has ended: the end bound names it.
      else assert.match(err.message, /^plugin sink-stuck: its function for line 5 did not settle within/);
    }
  } finally {
    clearInterval(timer);
  }
});

test('twelve chains running at once watch for a plugin promise nothing can settle ' +
  'with one process listener', async () => {
  const before = process.listenerCount('beforeExit');
  const releases: Array<() => void> = [];
  let onAllHeld = () => {};
  const allHeld = new Promise<void>((resolve) => (onAllHeld = resolve));
  const plugin = stagePlugin('gate', (rec) => {
    if (rec.lineNo !== 1) return rec;
    return new Promise<SubteeRecord>((resolve) => {
      releases.push(() => resolve(rec));
      if (releases.length === 12) onAllHeld();
    });
  });
  const registry = builtinRegistry();
  registry.add(plugin);
  const runs = Array.from({ length: 12 }, () => {
    const spec = {
      stages: [{ use: 'line-parser' }, { use: 'gate' }, { use: 'channel-router' }],
      sinks: [{ use: 'files', out: join(tmpDir(), 'out') }],
    };
    return runChain(chunked([fanoutInput(1, 5)]), spec, { registry });
  });
  await allHeld;
  assert.equal(process.listenerCount('beforeExit'), before + 1);
  for (const release of releases) release();
  await Promise.all(runs);
  assert.equal(process.listenerCount('beforeExit'), before);
});

test('two open() runs in one process, one with a plugin promise nothing can settle: that one fails ' +
  'naming it once the loop runs empty, the other runs to its end unaffected', () => {
  const input = join(FIXTURES, 'nested-depth-3.jsonl');
  const lines = nonBlankLines(readFileSync(input));
  const [outStuck, outOther] = [join(tmpDir(), 'stuck'), join(tmpDir(), 'other')];
  // In a process of its own: the test runner takes an empty event loop for a test that hangs.
  const script = `
    const { open, definePlugin } = await import(${JSON.stringify(join(ROOT, 'dist', 'src', 'index.js'))});
    const { Registry } = await import(${JSON.stringify(join(ROOT, 'dist', 'src', 'entry', 'chain.js'))});
    const [input, outStuck, outOther] = process.argv.slice(1);
    const stage = (name, fn) =>
      definePlugin({ name, kind: 'stage', kit: '^0.1.0', options: {}, create: () => fn });
    let laterCalls = 0;
    const never = stage('never', (rec) => (rec.lineNo === 3 ? new Promise(() => {}) : rec));
    const later = stage('later', (rec) =>
      new Promise((resolve) => setImmediate(resolve, (laterCalls++, rec))));
    const options = (plugin, out) => ({
      out,
      registry: new Registry().add(plugin),
      spec: { stages: [{ use: 'line-parser' }, { use: plugin.name }, { use: 'channel-router' }], sinks: [] },
    });
    let otherEnded = false;
    const stuck = open(input, options(never, outStuck)).done.then(
      () => ({ ended: true }),
      (err) => ({ code: err.code, message: err.message, otherEnded }),
    );
    const other = await open(input, options(later, outOther)).done;
    otherEnded = true;
    const watching = process.listenerCount('beforeExit');
    const failed = await stuck;
    const after = process.listenerCount('beforeExit');
    const { input: read, warnings } = other;
    console.log(JSON.stringify({ other: read, warnings, laterCalls, watching, failed, after }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script, input, outStuck, outOther], {
    encoding: 'utf8',
    timeout: 20_000,
    killSignal: 'SIGKILL',
  });
  assert.equal(r.status, 0, `${r.status} ${r.signal} ${r.stderr}`);
  const got = JSON.parse(r.stdout);
  assert.equal(got.other.lines, lines);
  assert.deepEqual(got.warnings, []);
  assert.equal(got.laterCalls, lines);
  assert.equal(linesInFolder(outOther), lines);
  assert.equal(got.watching, 1, 'the stuck run is still watched once the other has ended');
  assert.equal(got.failed.code, 'ERR_PLUGIN_FAILED');
  assert.match(got.failed.message, /^plugin never: its function for line 3 never settled /);
  assert.equal(got.failed.otherEnded, true, 'failed only once nothing else was left running');
  assert.equal(got.after, 0);
  const index = JSON.parse(readFileSync(join(outStuck, 'index.json'), 'utf8'));
  assert.equal(linesInFolder(outStuck) + index.input.unwritten, index.input.lines);
});

test("after the chain's abort (a second signal) a stage plugin is called no more, " +
  'whatever its pending promise does later', async () => {
  const called: number[] = [];
  let release = () => {};
  let onHeld = () => {};
  const held = new Promise<void>((resolve) => (onHeld = resolve));
  const plugin = definePlugin<Record<string, never>>({
    name: 'held',
    kind: 'stage',
    kit: '^0.1.0',
    options: {},
    create: () => (rec) => {
      called.push(rec.lineNo);
      if (rec.lineNo !== 5) return rec;
      onHeld();
      return new Promise<SubteeRecord>((resolve) => (release = () => resolve(rec)));
    },
  });
  const registry = builtinRegistry();
  registry.add(plugin);
  const out = join(tmpDir(), 'out');
  const spec = {
    stages: [{ use: 'line-parser' }, { use: 'held' }, { use: 'channel-router' }],
    sinks: [{ use: 'files', out }],
  };
  const ac = new AbortController();
  const running = runChain(chunked([fanoutInput(2, 50)]), spec, { registry, signal: ac.signal });
  await held;
  ac.abort();
  await assert.rejects(running, { name: 'AbortError' });
  // The promise the plugin held settles after the abort: the rest of its batch is not handed to it.
  release();
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(called, [1, 2, 3, 4, 5]);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(linesInFolder(out) + index.input.unwritten, index.input.lines);
});

test("ctx.stopInput(new Error(…)) fails the run as the plugin's stop, " +
  'what was read in the folder', async () => {
  const input = fanoutInput(3, 3000);
  let n = 0;
  const stopper = stagePlugin('stopper', (rec, ctx) => {
    if (++n === 500) ctx.stopInput!(new Error('enough'));
    return rec;
  });
  const { error, index, onDisk } = await runPlugin(stopper, ['channel-router', 'stopper'], input);
  assert.equal(error?.code, 'ERR_PLUGIN_FAILED');
  assert.equal(error?.message, 'plugin stopper stopped the run: enough');
  assert.ok(index.input.lines >= 500 && index.input.lines < nonBlankLines(input));
  assert.deepEqual([onDisk, index.input.unwritten], [index.input.lines, 0]);
});

test('ctx.session.warn refuses a code that is not capitals, digits and _; ' +
  'the failure shows it escaped', async () => {
  const input = fanoutInput(1, 10);
  const codes: Array<[string, boolean]> = [
    ['MY_PLUGIN_SKIPPED', true],
    ['X\x1b[31mCODE', false],
    ['lower', false],
    ['', false],
    ['SPACE CODE', false],
  ];
  for (const [code, ok] of codes) {
    const warner = stagePlugin('warner', (rec, ctx) => {
      ctx.session.warn(code, 'a message');
      return rec;
    });
    const { error, index } = await runPlugin(warner, ['warner', 'channel-router'], input);
    if (ok) {
      assert.equal(error, null);
      assert.deepEqual(index.warnings, [{ code, message: 'a message' }]);
      continue;
    }
    assert.equal(error?.code, 'ERR_PLUGIN_FAILED', JSON.stringify(code));
    assert.ok(error!.message.startsWith('plugin warner failed: warn: a warning code is'), error!.message);
    assert.ok(error!.message.includes(JSON.stringify(code)) && !/[\x00-\x1f]/.test(error!.message));
    assert.deepEqual(index.warnings, []);
  }
});

test('a line an input adapter derived is no input line: dropping it counts nothing, ' +
  'unmarking it is refused', async () => {
  const input = readFileSync(join(FIXTURES, 'other-agents', 'opencode-spawn.jsonl'));
  const isDerived = (rec: SubteeRecord) => rec.kind === 'line' && rec.derived === true;
  let derived = 0;
  const dropAll = stagePlugin('drop-all', (rec) => {
    if (isDerived(rec)) derived++;
    return null;
  });
  const stages = ['input-format', 'drop-all', 'channel-router'];
  const dropped = await runPlugin(dropAll, stages, input);
  assert.equal(dropped.error, null);
  assert.ok(derived > 0, 'the adapter derives lines from this stream');
  assert.equal(dropped.onDisk, 0);
  assert.equal(dropped.index.input.dropped, nonBlankLines(input), 'each input line once, derived ones not');
  const unmark = stagePlugin('unmark', (rec) => {
    if (!isDerived(rec)) return rec;
    const { derived: _derived, ...rest } = rec as LineRecord;
    return rest;
  });
  const refused = await runPlugin(unmark, ['input-format', 'unmark', 'channel-router'], input);
  assert.equal(refused.error?.code, 'ERR_PLUGIN_FAILED');
  const unmarked = /^plugin unmark returned a line record not marked derived for line \d+/;
  assert.match(refused.error!.message, unmarked);
  assert.equal(refused.onDisk + refused.index.input.unwritten, refused.index.input.lines);
});

test('a run of quarantined lines is replaced by a run of as many lines, or refused', async () => {
  const input = Buffer.from(`${linesOf(fanoutInput(1, 3)).join('\n')}\njunk a\njunk b\njunk c\n`);
  const isRun = (rec: SubteeRecord) => rec.kind === 'quarantine' && (rec.lines ?? 1) > 1;
  const upper = stagePlugin('upper', (rec) =>
    rec.kind === 'quarantine' && isRun(rec) ? rewriteText(rec, (text) => text.toUpperCase()) : rec,
  );
  const kept = await runPlugin(upper, ['upper', 'channel-router'], input);
  assert.equal(kept.error, null);
  assert.equal(readFileSync(join(kept.out, 'quarantine.log'), 'utf8'), 'JUNK A\nJUNK B\nJUNK C\n');
  assert.equal(kept.onDisk, nonBlankLines(input));
  const shorter = stagePlugin('shorter', (rec) => (isRun(rec) ? { ...rec, lines: 1 } : rec));
  const refused = await runPlugin(shorter, ['shorter', 'channel-router'], input);
  assert.equal(refused.error?.code, 'ERR_PLUGIN_FAILED');
  const message = /^plugin shorter returned a run of 1 quarantined lines for line 5, a run of 3/;
  assert.match(refused.error!.message, message);
  assert.equal(refused.onDisk + refused.index.input.unwritten, refused.index.input.lines);
});

test('the summary of a run a plugin cut short or thinned says how many lines read the folder ' +
  'lacks, as index.json counts them', () => {
  const dir = tmpDir();
  const input = join(dir, 'in.jsonl');
  writeFileSync(input, fanoutInput(3, 3000));
  for (const [name, body, code] of [
    ['thrower', `if (rec.lineNo === 2000) throw new Error('boom'); return rec;`, 1],
    ['thinner', 'return rec.lineNo % 10 === 0 ? null : rec;', 0],
  ] as const) {
    const file = join(dir, `${name}.mjs`);
    writeFileSync(file, `export default { name: '${name}', kind: 'stage', kit: '>=0.0.0', options: {},
  create: () => (rec) => { ${body} } };\n`);
    const config = join(dir, `${name}.json`);
    const stages = [{ use: 'line-parser' }, { use: 'channel-router' }, { use: name }];
    writeFileSync(config, JSON.stringify({ plugins: [file], stages, sinks: [{ use: 'files' }] }));
    const out = join(dir, `out-${name}`);
    const args = [BIN, '--config', config, '--out', out, '--stdout', 'none', input];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
    assert.equal(r.status, code, r.stderr);
    const { input: counts } = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const missing = name === 'thrower' ? counts.unwritten : counts.dropped;
    assert.ok(missing > 0, `${name}: ${JSON.stringify(counts)}`);
    const what = name === 'thrower' ? 'not written' : 'dropped by a plugin';
    const summary = `, ${counts.lines} lines, 0 quarantined, ${missing} ${what} → `;
    assert.ok(r.stderr.split('\n').some((l) => l.startsWith('subtee: ') && l.includes(summary)), r.stderr);
    assert.equal(linesInFolder(out) + missing, counts.lines, name);
  }
});

/**
 * A folder of plugin modules that import `subtee` as a plugin's package does (its
 * `node_modules/subtee` is this package), each written as the Plugins page shows one.
 */
function pluginProject(files: Record<string, string>): string {
  const dir = tmpDir();
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'subtee'));
  writeFileSync(join(dir, 'package.json'), '{ "type": "module", "private": true }');
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

/** Runs a recording through the CLI with `plugin`'s sink (or stage) given `options`. */
function runWithPlugin(dir: string, file: string, use: string, options: object, kind = 'sink') {
  const out = join(dir, `out-${use}`);
  const stages = [{ use: 'line-parser' }, ...(kind === 'stage' ? [{ use, ...options }] : [])];
  const sinks = [{ use: 'files', out }, ...(kind === 'sink' ? [{ use, ...options }] : [])];
  const config = join(dir, `${use}.json`);
  const spec = { plugins: [`./${file}`], stages: [...stages, { use: 'channel-router' }], sinks };
  writeFileSync(config, JSON.stringify(spec));
  const args = [BIN, '--config', config, '--stdout', 'none', join(FIXTURES, 'nested-depth-3.jsonl')];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', env: { ...process.env, MY_TOKEN: '' } });
  return { status: r.status, stderr: r.stderr, wrote: existsSync(out) };
}

test("a plugin's checkEnvironment or option check that throws fails as ERR_PLUGIN_FAILED " +
  'naming the plugin and what threw, before anything is written', () => {
  const sink = (name: string, rest: string) =>
    `import { definePlugin, UsageError } from 'subtee';\n` +
    `export default definePlugin({ name: '${name}', kind: 'sink', kit: '^0.1.0', ${rest}, ` +
    'create: () => () => {} });\n';
  const dir = pluginProject({
    'env-error.mjs': sink(
      'env-error',
      "options: {}, checkEnvironment: () => { throw new Error('no token'); }",
    ),
    'env-null.mjs': sink('env-null', 'options: {}, checkEnvironment: () => { throw null; }'),
    'check-error.mjs': sink(
      'check-error',
      "options: { n: { type: 'integer', check: (v) => { throw new Error('blew up on ' + v); } } }",
    ),
    // A value the plugin refuses is a UsageError of its own: its code and exit 2, as it is.
    'env-usage.mjs': sink(
      'env-usage',
      'options: {}, checkEnvironment: (o, env) => { ' +
        "if (!env.MY_TOKEN) throw new UsageError('ERR_BAD_OPTION', 'env-usage needs $MY_TOKEN'); }",
    ),
  });
  const cases: Array<[string, object, number, string]> = [
    ['env-error', {}, 1, 'plugin env-error failed: checkEnvironment threw: no token [ERR_PLUGIN_FAILED]'],
    ['env-null', {}, 1, 'plugin env-null failed: checkEnvironment threw: null [ERR_PLUGIN_FAILED]'],
    [
      'check-error',
      { n: 3 },
      1,
      'plugin check-error failed: the check of option n threw: blew up on 3 [ERR_PLUGIN_FAILED]',
    ],
    ['env-usage', {}, 2, 'env-usage needs $MY_TOKEN [ERR_BAD_OPTION]'],
  ];
  for (const [name, options, status, line] of cases) {
    const r = runWithPlugin(dir, `${name}.mjs`, name, options);
    assert.deepEqual([r.status, r.stderr], [status, `subtee: ${line}\n`], name);
    assert.equal(r.wrote, false, `${name}: no output folder`);
  }
});

test("runChain calls a plugin's checkEnvironment once per run, before the plugin is made", async () => {
  const calls: string[] = [];
  const counted = definePlugin({
    name: 'counted',
    kind: 'sink',
    kit: '^0.1.0',
    options: {},
    checkEnvironment: () => void calls.push('checkEnvironment'),
    create: () => (calls.push('create'), () => {}),
  });
  const spec = { stages: [{ use: 'line-parser' }, { use: 'channel-router' }], sinks: [{ use: 'counted' }] };
  const registry = builtinRegistry().add(counted);
  for (let run = 0; run < 2; run++)
    await runChain(chunked([Buffer.from('{"type":"system"}\n')]), spec, { registry });
  assert.deepEqual(calls, ['checkEnvironment', 'create', 'checkEnvironment', 'create']);
});

test("the command line calls a plugin's checkEnvironment once per run: reading a file, reading " +
  'stdin, and under subtee run, before the command starts', () => {
  // Each call appends a line to a file the test reads: a second check would add a second line.
  const dir = pluginProject({
    'counted.mjs':
      "import { appendFileSync } from 'node:fs';\n" +
      "import { definePlugin } from 'subtee';\n" +
      "export default definePlugin({ name: 'counted', kind: 'sink', kit: '^0.1.0', " +
      "options: { calls: { type: 'string', required: true } }, " +
      "checkEnvironment: (o) => appendFileSync(o.calls, 'checkEnvironment\\n'), " +
      'create: () => () => {} });\n',
  });
  const recording = join(FIXTURES, 'nested-depth-3.jsonl');
  const agentLines = [
    { type: 'system', subtype: 'init', session_id: 's' },
    { type: 'result', subtype: 'success', session_id: 's' },
  ];
  // The command notes its start in the same file, after the check it must come after.
  const agent =
    "require('node:fs').appendFileSync(process.env.CALLS, 'command started\\n');\n" +
    `for (const l of ${JSON.stringify(agentLines)}) console.log(JSON.stringify(l));`;
  // How each run is asked for: what goes before the options, what after, and what stdin holds.
  const checkedOnce = ['checkEnvironment'];
  const ways = [
    { way: 'a file', before: [], after: [recording], stdin: '', lines: checkedOnce },
    { way: 'stdin', before: [], after: [], stdin: readFileSync(recording, 'utf8'), lines: checkedOnce },
    {
      way: 'subtee run',
      before: ['run'],
      after: ['--', process.execPath, '-e', agent],
      stdin: '',
      lines: ['checkEnvironment', 'command started'],
    },
  ];
  for (const [i, { way, before, after, stdin, lines }] of ways.entries()) {
    const calls = join(dir, `calls-${i}`);
    const out = join(dir, `out-${i}`);
    const config = join(dir, `config-${i}.json`);
    const sinks = [{ use: 'files' }, { use: 'counted', calls }];
    writeFileSync(config, JSON.stringify({ plugins: ['./counted.mjs'], sinks }));
    const options = ['--config', config, '--out', out, '--stdout', 'none', '-q'];
    const r = spawnSync(process.execPath, [BIN, ...before, ...options, ...after], {
      encoding: 'utf8',
      input: stdin,
      env: { ...process.env, CALLS: calls },
    });
    assert.equal(r.status, 0, `${way}: ${r.stderr}`);
    assert.ok(existsSync(join(out, 'index.json')), way);
    assert.deepEqual(linesOf(readFileSync(calls)), lines, way);
  }
});

test('a plugin that definePlugin refuses as its module is imported fails with its code: ' +
  'ERR_PLUGIN_VERSION for a kit range this is not, ERR_PLUGIN_INVALID for a bad shape', () => {
  const stage = (name: string, kind: string, kit: string) =>
    `import { definePlugin } from 'subtee';\n` +
    `export default definePlugin({ name: '${name}', kind: '${kind}', kit: '${kit}', options: {}, ` +
    'create: () => (rec) => rec });\n';
  const dir = pluginProject({
    'old-kit.mjs': stage('old-kit', 'stage', '^9.0.0'),
    'bad-kind.mjs': stage('bad-kind', 'filter', '^0.1.0'),
  });
  const cases: Array<[string, string]> = [
    ['old-kit', 'plugin old-kit supports subtee ^9.0.0, this is 0.1.0 [ERR_PLUGIN_VERSION]'],
    ['bad-kind', 'plugin bad-kind: kind must be "stage" or "sink" [ERR_PLUGIN_INVALID]'],
  ];
  for (const [name, line] of cases) {
    const r = runWithPlugin(dir, `${name}.mjs`, name, {}, 'stage');
    assert.deepEqual([r.status, r.stderr], [2, `subtee: ${line}\n`], name);
    assert.equal(r.wrote, false, name);
  }
});

test('a create that returns a promise or an object without record or end is ' +
  'refused with ERR_PLUGIN_INVALID, never run as a plugin that passes every record', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown) => unhandled.push(err);
  process.on('unhandledRejection', onUnhandled);
  try {
    const promised = ', not a promise: create is not awaited';
    const made: Array<[string, () => unknown, string]> = [
      ['a promise', () => Promise.resolve(() => null), promised],
      ['a promise that rejects', () => Promise.reject(new Error('not made')), promised],
      ['a thenable whose then throws', () => ({ then: () => { throw new Error('no'); } }), promised],
      ['a typo', () => ({ recrod: () => null }), ', not an object with neither record nor end'],
    ];
    for (const [what, create, why] of made) {
      const def = { name: 'late', kind: 'stage', kit: '^0.1.0', options: {}, create };
      const plugin = definePlugin(def as never);
      await assert.rejects(
        runWithStage(plugin, ['line-parser', 'channel-router', 'late'], '{"type":"system"}\n'),
        {
          code: 'ERR_PLUGIN_INVALID',
          message: `plugin late: create must return a function over records (or { record, end })${why}`,
        },
        what,
      );
    }
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(unhandled, []);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});

test('an async create is refused as the plugin is defined, before anything is made: ' +
  'ERR_PLUGIN_INVALID', () => {
  const def = { name: 'eager', kind: 'sink', kit: '^0.1.0', options: {}, create: async () => () => null };
  assert.throws(() => definePlugin(def as never), {
    code: 'ERR_PLUGIN_INVALID',
    message: 'plugin eager: create must not be async: the kit does not await it',
  });
});

test('an option of the wrong type is named with its article: an array, an object, a string', () => {
  assert.equal(optionProblem({ type: 'array' }, 'x'), 'must be an array, not string');
  assert.equal(optionProblem({ type: 'object' }, []), 'must be an object, not array');
  assert.equal(optionProblem({ type: 'string' }, null), 'must be a string, not null');
  assert.equal(optionProblem({ type: 'boolean' }, 1), 'must be a boolean, not number');
});

test('an option spec no value could pass is refused as the plugin is defined: ERR_PLUGIN_INVALID ' +
  'naming the option', () => {
  const define = (options: object) => () =>
    definePlugin({
      name: 'bad-spec',
      kind: 'stage',
      kit: '^0.1.0',
      options,
      create: () => () => {},
    } as never);
  assert.throws(define({ n: { type: 'int' }, flag: null, word: { type: 'string', check: 'no' } }), {
    code: 'ERR_PLUGIN_INVALID',
    message: 'plugin bad-spec: option n: its type must be one of string, integer, number, boolean, ' +
      'object, array, not "int"; option flag: its spec must be an object with a type, not null; ' +
      'option word: its check must be a function of a value',
  });
});
