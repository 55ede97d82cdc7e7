import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { runInNewContext } from 'node:vm';
import { builtinRegistry } from '../src/chain/builtins.js';
import { runChain } from '../src/chain/chain.js';
import { definePlugin } from '../src/chain/plugin.js';
import { createFilesSink } from '../src/chain/sinks/files.js';
import { stdoutText } from '../src/chain/sinks/stdout.js';
import type { LineRecord } from '../src/model/record.js';
import { Session } from '../src/model/session.js';
import { buildIndex } from '../src/views/index-file.js';
import { summaryText } from '../src/views/summary.js';
import { inputPreview, renderRecord } from '../src/views/text.js';
import { jsonText, jsonTextByLoop } from '../src/model/json-text.js';
import { open } from '../src/open.js';
import { stepSummary } from '../plugins/github-step-summary/index.js';
import { BIN, checkOutput, chunked, linesOf, readTree, tmpDir } from './helpers/helpers.js';

const spawnLine = (id: string, parent: string | null) =>
  JSON.stringify({
    type: 'assistant',
    parent_tool_use_id: parent,
    message: {
      id: `m_${id}`,
      content: [{ type: 'tool_use', id, name: 'Agent', input: { subagent_type: 'Explore' } }],
    },
  });
const textLine = (parent: string | null, text: string) =>
  JSON.stringify({
    type: 'assistant',
    parent_tool_use_id: parent,
    message: { id: `t_${text}`, content: [{ type: 'text', text }] },
  });

/**
 * `{"a":{"a":…1…}}`, `depth` levels, as text: JSON.parse reads it, JSON.stringify of it
 * overflows the stack.
 */
const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
const deepToolUse = (depth: number) =>
  '{"type":"assistant","parent_tool_use_id":null,"message":{"id":"m_deep","content":' +
  `[{"type":"tool_use","id":"toolu_deep","name":"Bash","input":${nested(depth)}}]}}`;

test('inputPreview: JSON.stringify for small inputs, cut at maxChars, no recursion', () => {
  for (const v of [
    {},
    { a: 1, b: [1, 'x', null, true, { c: 'é\u0000"' }], d: {} },
    [],
    [[]],
    'str',
    42,
    null,
    { big: 1e400 },
  ]) {
    assert.equal(inputPreview(v, 1000), JSON.stringify(v ?? {}));
  }
  assert.equal(inputPreview(undefined, 10), '{}');
  assert.equal(inputPreview({ a: 'xyz' }, 11), '{"a":"xyz"}');
  // Too short for the counted marker: the bare `…`, within the limit.
  assert.equal(inputPreview({ a: 'xyz' }, 10), '{"a":"xyz…');
  // Written out only in part: the marker has no count, and fits the limit.
  assert.equal(inputPreview({ s: 'x'.repeat(10_000_000) }, 12), '{"s" […cut…]');
  assert.equal(inputPreview({ s: 'x'.repeat(10_000_000) }, 40), `{"s":"${'x'.repeat(26)} […cut…]`);
  const deep = JSON.parse(nested(200_000));
  assert.throws(() => JSON.stringify(deep), RangeError, 'the input this guards against');
  assert.equal(inputPreview(deep, 20), '{"a":{"a":{" […cut…]');
});

test('a tool_use input nested 200,000 deep renders in the transcript and in pino', async () => {
  const lines = [deepToolUse(200_000), textLine(null, 'after')];
  const out = join(tmpDir(), 'out');
  const pinoFile = join(tmpDir(), 'events.log');
  await runChain(chunked([Buffer.from(lines.join('\n') + '\n')]), {
    stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
    sinks: [
      { use: 'files', out },
      { use: 'pino', destination: pinoFile },
    ],
  });
  const files = readTree(out);
  assert.deepEqual(linesOf(files.get('main.jsonl')), lines);
  assert.match(files.get('main.log')!.toString(), /\[tool\] Bash \{"a":\{"a":.* \[…cut…\]\nafter\n/);
  const events = readFileSync(pinoFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    events.map((e) => e.kind),
    ['tool_use', 'text'],
  );
  assert.ok(events[0].content.startsWith('{"a":{"a":') && events[0].content.length <= 20_000);
});

test('summaries, index and step summary of a chain 20,000 deep: no recursion, bounded output', () => {
  const run = new Session();
  const n = 20_000;
  for (let i = 0; i < n; i++)
    run.tree.route(JSON.parse(spawnLine(`toolu_d${i}`, i === 0 ? null : `toolu_d${i - 1}`)));
  run.tree.route(JSON.parse(textLine(`toolu_d${n - 1}`, 'from the bottom')));
  const summary = summaryText(run, 'out', { maxTreeRows: Infinity });
  const rows = summary.split('\n');
  assert.equal(rows.length, n + 4, 'a headline, the cost line, a row per channel, the final newline');
  assert.ok(
    rows.every((r) => r.length < 200),
    'guides stop growing past a fixed depth',
  );
  assert.match(rows[rows.length - 2], /Explore·d19999  running  depth 20000/);
  const bounded = summaryText(run, 'out').split('\n');
  assert.equal(bounded.length, 6, 'by default: the headline, cost, main, its one child, how many more');
  assert.match(bounded[3], /^└─ Explore·d0  running  depth 1 .*\(\+19999 below\)$/);
  assert.equal(
    bounded[4],
    '… and 19999 more subagents: index.json lists every one, subtee report out draws the whole tree',
  );
  const md = stepSummary(run, new Map(), { maxBytes: 100_000, reportChars: 100 });
  assert.ok(Buffer.byteLength(md) <= 100_000);
  assert.match(md, /more entries not shown/);
  const index = buildIndex(run, () => undefined, null) as { channels: Array<{ depth: number }> };
  assert.equal(index.channels[n].depth, n);
  const bottom: LineRecord = {
    kind: 'line',
    lineNo: 1,
    raw: Buffer.alloc(0),
    value: JSON.parse(textLine(`toolu_d${n - 1}`, 'x')),
    channel: run.tree.get(`toolu_d${n - 1}`),
  };
  assert.ok(stdoutText(bottom, 'text', '  ')!.length < 100, 'stdout indentation is capped too');
});

test('the CLI on a stream with a deep chain, a children-first ' +
  'chain, a spawn cycle and a deep input: exit 0, nothing lost', () => {
  const n = 1000;
  const lines: string[] = [];
  for (let i = 0; i < n; i++) lines.push(spawnLine(`toolu_d${i}`, i === 0 ? null : `toolu_d${i - 1}`));
  for (let i = n - 1; i >= 0; i--) lines.push(spawnLine(`toolu_r${i}`, i === 0 ? null : `toolu_r${i - 1}`));
  for (let i = 0; i < 300; i++) lines.push(spawnLine(`toolu_c${i}`, `toolu_c${(i + 1) % 300}`));
  lines.push(deepToolUse(100_000));
  lines.push(
    textLine(`toolu_d${n - 1}`, 'deepest'),
    textLine('toolu_c7', 'in the cycle'),
    textLine(null, 'done'),
  );
  const input = Buffer.from(lines.join('\n') + '\n');
  const out = join(tmpDir(), 'o');
  const pino = join(tmpDir(), 'p.log');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--pino', pino], {
    input,
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 1 << 26,
  });
  assert.equal(r.status, 0, r.stderr.slice(-2000));
  assert.doesNotMatch(r.stderr, /call stack|internal error/);
  assert.match(
    r.stderr,
    /warning SPAWN_CYCLE: input line \d+ spawns toolu_c299 on the channel of toolu_c0, which descends from it/,
  );
  assert.match(r.stdout, /\[Explore·d999\] deepest\n/);
  const { index } = checkOutput(input, out, 'hostile');
  const byId = new Map<string, any>(index.channels.map((c: any) => [c.id, c]));
  assert.equal(byId.get(`toolu_d${n - 1}`).depth, n);
  assert.equal(byId.get(`toolu_r${n - 1}`).depth, n);
  assert.deepEqual(
    [byId.get('toolu_c299').orphan, byId.get('toolu_c299').depth, byId.get('toolu_c0').parent],
    [true, null, 'toolu_c1'],
  );
  assert.deepEqual(
    index.warnings.map((w: any) => w.code).filter((c: string) => c === 'SPAWN_CYCLE'),
    ['SPAWN_CYCLE'],
  );
  assert.ok(readFileSync(pino, 'utf8').includes('"tool":"Bash"'));
});

test('a spawn id used again by another spawn, and a second session in the stream, are each told ' +
  'once; a replayed spawn line is not', () => {
  const spawnAs = (id: string, description: string) =>
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: `m_${description}`,
        content: [{ type: 'tool_use', id, name: 'Agent', input: { description } }],
      },
    });
  const init = (session: string) => JSON.stringify({ type: 'system', subtype: 'init', session_id: session });
  const lines = [
    init('s-one'),
    spawnAs('toolu_dup', 'first'),
    spawnAs('toolu_dup', 'first'),
    textLine('toolu_dup', 'one'),
    init('s-one'),
    spawnAs('toolu_dup', 'second'),
    spawnAs('toolu_dup', 'third'),
    textLine('toolu_dup', 'two'),
    init('s-two'),
    init('s-three'),
  ];
  const input = Buffer.from(lines.join('\n') + '\n');
  const out = join(tmpDir(), 'o');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none'], { input, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const { index } = checkOutput(input, out, 'hostile');
  const told = index.warnings.filter((w: any) => /^SPAWN_REPEATED|^SESSION_CHANGED/.test(w.code));
  assert.deepEqual(told, [
    {
      code: 'SPAWN_REPEATED',
      message:
        'input line 6 spawns toolu_dup again ("second"; first "first"): the id keeps its first ' +
        "spawn's place, and its lines and its end are that channel's",
    },
    {
      code: 'SESSION_CHANGED',
      message:
        "input line 9 starts session s-two after s-one: the stream holds more than one run; index.json's " +
        "session_id and the run's cost are the last session's",
    },
  ]);
  assert.equal(index.session_id, 's-three');
  assert.deepEqual(
    index.channels.map((c: any) => [c.id, c.description, c.lines]),
    [
      [null, null, 8],
      ['toolu_dup', 'first', 2],
    ],
  );
  assert.match(r.stderr, /warning SPAWN_REPEATED: input line 6/);
});

/** A plugin stage that makes one line's value throw when read, as a buggy plugin could. */
function poisonLine(lineNo: number) {
  return definePlugin<Record<string, never>>({
    name: 'poison',
    kind: 'stage',
    kit: '^0.1.0',
    options: {},
    create: () => (rec) => {
      if (rec.kind !== 'line' || rec.lineNo !== lineNo) return rec;
      const value = new Proxy(rec.value, {
        get: () => {
          throw new TypeError('poisoned');
        },
      });
      return { ...rec, value };
    },
  });
}

test('a record a stage cannot handle is kept and counted; the records around it are not lost', async () => {
  const lines = [
    spawnLine('toolu_a', null),
    textLine('toolu_a', 'one'),
    textLine('toolu_a', 'two'),
    textLine(null, 'three'),
  ];
  const out = join(tmpDir(), 'out');
  const registry = builtinRegistry().add(poisonLine(2));
  const session = await runChain(
    chunked([Buffer.from(lines.join('\n') + '\n')]),
    {
      stages: [
        { use: 'line-parser' },
        { use: 'poison' },
        { use: 'channel-router' },
        { use: 'thinking-truncator' },
      ],
      sinks: [
        { use: 'files', out },
        { use: 'stdout', mode: 'none' },
      ],
    },
    { registry },
  );
  const files = readTree(out);
  const index = JSON.parse(files.get('index.json')!.toString());
  assert.deepEqual(
    linesOf(files.get('quarantine.log')),
    [lines[1]],
    'the line the router could not place is in the quarantine',
  );
  assert.deepEqual(linesOf(files.get(index.channels[1].jsonl)), [lines[2]]);
  assert.deepEqual(linesOf(files.get('main.jsonl')), [lines[0], lines[3]]);
  assert.deepEqual([index.input.failed, index.input.quarantined, index.quarantine_lines], [1, 1, [2]]);
  assert.match(
    index.warnings.find((w: any) => w.code === 'RECORD_FAILED').message,
    /channel-router could not handle input line 2 \(TypeError: poisoned\)/,
  );
  assert.equal(session.input.failed, 1);
});

test('the files sink keeps the raw line of a record it cannot render and goes on', async () => {
  const session = new Session();
  const out = join(tmpDir(), 'out');
  const sink = createFilesSink({ out, session });
  const good = (lineNo: number, text: string): LineRecord => ({
    kind: 'line',
    lineNo,
    raw: Buffer.from(textLine(null, text)),
    value: JSON.parse(textLine(null, text)),
    channel: session.tree.main,
  });
  const plain = good(2, 'bad');
  const bad: LineRecord = {
    ...plain,
    value: new Proxy(plain.value, {
      get: () => {
        throw new RangeError('unreadable');
      },
    }),
  };
  await new Promise<void>((resolve, reject) => {
    sink.on('error', reject).on('finish', resolve);
    sink.end([good(1, 'first'), bad, good(3, 'third')]);
    sink.resume();
  });
  const files = readTree(out);
  assert.deepEqual(linesOf(files.get('main.jsonl')), [
    textLine(null, 'first'),
    textLine(null, 'bad'),
    textLine(null, 'third'),
  ]);
  assert.match(
    files.get('main.log')!.toString(),
    /first\n\[line 2 could not be shown: RangeError: unreadable\]\nthird\n/,
  );
  assert.equal(session.input.failed, 1);
  assert.throws(() => renderRecord(bad), RangeError, 'the record really is unreadable');
});

/** An array whose first element's toJSON adds to it: JSON.stringify writes the elements it had. */
function grown(list: unknown[]): unknown[] {
  list.unshift({ toJSON: () => (list.push('extra'), 0) });
  return list;
}

test('jsonText: what JSON.stringify gives, and the same text past the depth it overflows at', () => {
  const samples: unknown[] = [
    null,
    'a"b',
    1.5,
    [1, undefined, () => 0, 'x'],
    { a: 1, b: undefined, c: { d: [true, null] }, e: () => 0, f: 2 },
    { b: undefined },
    { when: new Date(0), n: new Number(3) },
    [],
    {},
    // eslint-disable-next-line no-sparse-arrays
    [1, , 3],
    [Symbol('s'), undefined],
    { s: Symbol('s'), [Symbol('k')]: 1, z: -0, nan: NaN, inf: -Infinity },
    { n: runInNewContext('new Number(3)'), s: runInNewContext('new String("x")') },
    { a: { toJSON: (key: string) => `key ${key}` }, list: [{ toJSON: (key: string) => key }] },
  ];
  for (const value of samples) {
    assert.equal(jsonText(value), JSON.stringify(value));
    assert.equal(jsonTextByLoop(value), JSON.stringify(value));
  }
  assert.equal(jsonTextByLoop(grown([1, 2])), JSON.stringify(grown([1, 2])));
  // A RangeError other than the stack's (a text too long for a string) is not written again by the loop.
  let calls = 0;
  const tooLong = {
    toJSON: () => {
      calls++;
      throw new RangeError('Invalid string length');
    },
  };
  assert.throws(() => jsonText(tooLong), /Invalid string length/);
  assert.equal(calls, 1);
  for (const value of [10n, { b: Object(1n) }])
    assert.throws(() => jsonTextByLoop(value), TypeError, 'a BigInt, boxed or not, has no JSON text');
  assert.equal(jsonText(undefined), undefined);
  let deep: unknown = { z: 'end' };
  for (let i = 0; i < 20_000; i++) deep = i % 2 ? [deep, 1] : { k: deep, u: undefined };
  assert.throws(() => JSON.stringify(deep), RangeError);
  const text = jsonText(deep)!;
  assert.equal(text.length, 10_000 * ('[,1]'.length + '{"k":}'.length) + '{"z":"end"}'.length);
  assert.ok(text.startsWith('[{"k":[{"k":') && text.endsWith('},1]'));
  assert.ok(text.includes('[{"k":{"z":"end"}},1]'));
  const cycle: any = { a: [] };
  cycle.a.push({ cycle });
  assert.throws(() => jsonTextByLoop(cycle), TypeError);
});

test("values nested 20,000 deep in other producers' events are mapped and shown, no record fails", () => {
  const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
  const D = 20_000;
  const streams: Record<string, string[]> = {
    codex: [
      '{"type":"thread.started","thread_id":"th1"}',
      '{"type":"turn.started"}',
      `{"type":"item.started","item":{"id":"c1","type":"command_execution","command":${deep(D)}}}`,
      `{"type":"item.completed","item":{"id":"c1","type":"command_execution","command":${deep(D)},` +
        `"aggregated_output":${deep(D)},"exit_code":0,"status":"completed"}}`,
      `{"type":"item.completed","item":{"id":"m1","type":"agent_message","text":${deep(D)}}}`,
      '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}',
    ],
    opencode: [
      '{"type":"step_start","timestamp":1700000000000,"sessionID":"ses1","part":{"messageID":"m1"}}',
      '{"type":"tool_use","timestamp":1700000000001,"sessionID":"ses1","part":{"messageID":"m1",' +
        `"callID":"oc1","tool":"bash","state":{"status":"completed","input":{},"output":${deep(D)}}}}`,
      '{"type":"step_finish","timestamp":1700000000002,"sessionID":"ses1","part":{"messageID":"m1",' +
        '"reason":"stop"}}',
    ],
    langgraph: [
      '{"type":"event","method":"lifecycle","params":{"namespace":[],"timestamp":1700000000000,' +
        '"data":{"event":"running"}}}',
      '{"type":"event","method":"tools","params":{"namespace":[],"timestamp":1700000000001,"data":' +
        `{"event":"tool-started","tool_call_id":"lg1","tool_name":"ls","input":{"x":${deep(D)}}}}}`,
      '{"type":"event","method":"tools","params":{"namespace":[],"timestamp":1700000000002,"data":' +
        `{"event":"tool-finished","tool_call_id":"lg1","output":${deep(D)}}}}`,
      '{"type":"event","method":"lifecycle","params":{"namespace":[],"timestamp":1700000000003,' +
        '"data":{"event":"completed"}}}',
    ],
  };
  for (const [format, lines] of Object.entries(streams)) {
    const input = Buffer.from(lines.join('\n') + '\n');
    const out = join(tmpDir(), 'o');
    const r = spawnSync(process.execPath, [BIN, '-q', '--input-format', format, '--out', out], {
      input,
      encoding: 'utf8',
      timeout: 60_000,
      maxBuffer: 1 << 26,
    });
    assert.equal(r.status, 0, `${format}: ${r.stderr.slice(-2000)}`);
    assert.doesNotMatch(r.stderr, /RECORD_FAILED|call stack/, format);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.input.failed, 0, format);
    const log = readFileSync(join(out, 'main.log'), 'utf8');
    assert.match(log, /\[tool\] (Bash \{"command":"\[\[\[|bash \{\}|ls \{"x":\[\[\[)/, format);
    assert.match(log, /\[result\] \[\[\[\[/, format);
  }
});

test('a message object given to open() with a tool input nested 20,000 deep is routed as its line ' +
  'would be, not quarantined', async () => {
  const out = join(tmpDir(), 'o');
  const deep = JSON.parse(deepToolUse(20_000));
  const after = JSON.parse(textLine(null, 'after'));
  const run = open(Readable.from([deep, after]), { out });
  await run.done;
  const files = readTree(out);
  const index = JSON.parse(files.get('index.json')!.toString());
  assert.equal(index.input.quarantined, 0);
  assert.deepEqual(linesOf(files.get('main.jsonl')), [deepToolUse(20_000), textLine(null, 'after')]);
  assert.match(files.get('main.log')!.toString(), /\[tool\] Bash \{"a":\{"a":/);
});
