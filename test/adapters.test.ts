import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable, Transform, Writable } from 'node:stream';
import { test } from 'node:test';
import { open } from '../src/index.js';
import { buildChain, type RecordBatch, runChain } from '../src/entry/chain.js';
import { LangGraphMapper } from '../src/entry/adapters.js';
import type { JsonObject } from '../src/entry/model.js';
import { detectProducer } from '../src/chain/stages/input-format.js';
import { recordOfObject } from '../src/chain/stages/object-source.js';
import {
  BIN,
  boundedSubtee,
  chunked,
  fixtureFiles,
  FIXTURES,
  splitEvery,
  tmpDir,
} from './helpers/helpers.js';
import { teeJsonl } from '../src/adapters/claude-sdk.js';
import { agentRunIdOf, CODEX_RUN_ID_WAIT, RunIdReader } from '../src/adapters/run-id.js';

const linesOf = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');

test('recordOfObject: an object is a line, raw its JSON; anything else goes by its JSON text', () => {
  const rec = recordOfObject({ type: 'assistant', n: 1 }, 7);
  assert.equal(rec.kind, 'line');
  assert.equal(rec.lineNo, 7);
  assert.equal(rec.raw.toString(), '{"type":"assistant","n":1}');
  for (const value of ['text', 5, null, [1, 2], true]) {
    const q = recordOfObject(value, 1);
    assert.equal(q.kind, 'quarantine', JSON.stringify(value));
    assert.equal(q.kind === 'quarantine' && q.reason, 'not-object');
    assert.equal(q.raw.toString(), JSON.stringify(value));
  }
  // Not plain objects: read as their JSON text is, so a replay of the .jsonl sees the same.
  const boxed = [new Date(0), new String('text'), { toJSON: () => 'text' }];
  for (const value of boxed) {
    const q = recordOfObject(value, 3);
    assert.equal(q.kind === 'quarantine' && q.reason, 'not-object', String(value));
  }
  class Message {
    type = 'assistant';
    hidden = undefined;
  }
  for (const value of [new Message(), { toJSON: () => ({ type: 'assistant' }) }]) {
    const rec = recordOfObject(value, 4);
    assert.equal(rec.kind, 'line');
    assert.deepEqual(rec.kind === 'line' && rec.value, JSON.parse(rec.raw.toString()));
    assert.equal(Object.getPrototypeOf(rec.kind === 'line' && rec.value), Object.prototype);
  }
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  for (const value of [circular, 10n, undefined, () => 1]) {
    const q = recordOfObject(value, 2);
    assert.equal(q.kind === 'quarantine' && q.reason, 'not-json', String(typeof value));
  }
});

for (const file of fixtureFiles()) {
  test(`objects and bytes give the same index.json: ${file.split('/').pop()}`, async () => {
    const lines = linesOf(file);
    const bytes = await open(chunked(splitEvery(Buffer.from(lines.join('\n') + '\n'), 4096))).done;
    const objects = await open(Readable.from(lines.map((l) => JSON.parse(l)))).done;
    assert.deepEqual(objects, bytes);
    assert.equal((objects as { producer: string }).producer, 'claude');
  });
}

test('objects that are not messages are quarantined at the line numbers a byte stream gives', async () => {
  const values: unknown[] = [{ type: 'system', subtype: 'init' }, 'noise', 42, null, [1], { type: 'result' }];
  const objects = (await open(
    (async function* () {
      yield* values;
    })(),
  ).done) as Record<string, any>;
  const bytes = (await open(chunked([Buffer.from(values.map((v) => JSON.stringify(v)).join('\n') + '\n')]))
    .done) as Record<string, any>;
  assert.deepEqual(objects.quarantine_lines, [2, 3, 4, 5]);
  assert.deepEqual(objects, bytes);
});

test('a producer that outruns the chain: queued objects go on together, in order, none lost', async () => {
  const total = 5000;
  const sizes: number[] = [];
  const seen: number[] = [];
  const slow = new Transform({
    objectMode: true,
    highWaterMark: 1,
    transform(batch: RecordBatch, _enc, cb) {
      sizes.push(batch.length);
      for (const rec of batch) if (rec.kind === 'line') seen.push(rec.value.n as number);
      setImmediate(() => cb(null, batch));
    },
  });
  const { streams } = buildChain({ stages: [{ use: 'object-source' }], sinks: [] });
  const { pipeline } = await import('node:stream/promises');
  const source = Readable.from(Array.from({ length: total }, (_, n) => ({ type: 'user', n })));
  await pipeline(source, streams[0], slow, async function* (s) {
    for await (const _ of s);
  });
  assert.deepEqual(
    seen,
    Array.from({ length: total }, (_, n) => n),
  );
  assert.ok(Math.max(...sizes) > 1, 'queued objects were batched');
  assert.ok(sizes.length < total, `${sizes.length} batches for ${total} objects`);
});

test('one input edge, first: two edges, an edge after a stage, or a byte tee on objects are refused', () => {
  const refuse = (stages: Array<{ use: string }>, sinks: Array<{ use: string; mode?: string }> = []) =>
    assert.throws(
      () => buildChain({ stages, sinks }),
      (err: { code?: string }) => err.code === 'ERR_CONFIG',
      JSON.stringify(stages),
    );
  refuse([{ use: 'line-parser' }, { use: 'object-source' }]);
  refuse([{ use: 'channel-router' }, { use: 'object-source' }]);
  refuse([{ use: 'channel-router' }]);
  refuse([{ use: 'object-source' }], [{ use: 'stdout', mode: 'raw' }]);
  for (const edge of ['line-parser', 'object-source']) {
    const { streams } = buildChain({
      stages: [{ use: edge }, { use: 'input-format' }, { use: 'channel-router' }],
      sinks: [],
    });
    assert.equal(streams.length, 3);
    for (const s of streams) s.destroy();
  }
});

test('detection: Claude Code lines and LangGraph events; index.json names the producer', async () => {
  for (const file of fixtureFiles()) assert.equal(detectProducer(JSON.parse(linesOf(file)[0])), 'claude');
  assert.equal(
    detectProducer({ type: 'event', seq: 0, method: 'lifecycle', params: { namespace: [], data: {} } }),
    'langgraph',
  );
  assert.equal(detectProducer({ method: 'x', params: { namespace: 'not a list' } }), 'claude');
  // Without the input-format stage nothing is detected, and the index says so.
  const session = await runChain(chunked([Buffer.from(linesOf(fixtureFiles()[0]).join('\n'))]), {
    stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
    sinks: [],
  });
  assert.equal(session.producer, null);
});

test('--input-format: in --help, a bad value is one line and exit 2', () => {
  const help = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
  assert.match(help.stdout, /--input-format FORMAT/);
  const bad = spawnSync(process.execPath, [BIN, '--input-format', 'otel', '--out', join(tmpDir(), 'o')], {
    input: '',
    encoding: 'utf8',
  });
  assert.equal(bad.status, 2);
  assert.match(
    bad.stderr,
    new RegExp(
      '^subtee: --input-format must be one of auto, claude, langgraph, copilot, codex, gemini, opencode, ' +
        'not "otel" \\[ERR_BAD_OPTION\\]\n$',
    ),
  );
});

/** A protocol event as a recording holds it. */
const ev = (
  method: string,
  namespace: string[],
  data: JsonObject,
  timestamp = 1_800_000_000_000,
): JsonObject => ({
  type: 'event',
  method,
  params: { namespace, timestamp, data },
});

/** Events of a coordinator that calls `task` once; what happens inside is up to the test. */
function spawnEvents(inner: JsonObject[], end: JsonObject[]): JsonObject[] {
  return [
    ev('lifecycle', [], { event: 'running', graph_name: 'root' }),
    ev('tasks', [], {
      id: 'm1',
      name: 'model_request',
      result: {
        messages: [
          {
            lc: 1,
            type: 'constructor',
            id: ['AIMessage'],
            kwargs: {
              id: 'run-1',
              content: '',
              tool_calls: [
                { id: 'call_1', name: 'task', args: { description: 'go', subagent_type: 'worker' } },
              ],
            },
          },
        ],
      },
    }),
    ev('tools', ['tools:t1'], {
      event: 'tool-started',
      tool_call_id: 'call_1',
      tool_name: 'task',
      input: '{"description":"go","subagent_type":"worker"}',
    }),
    ...inner,
    ...end,
  ];
}

async function indexOf(events: JsonObject[]) {
  const run = open(Readable.from(events));
  const calls: Array<[string, string, string]> = [];
  for await (const call of run.toolCalls) calls.push([call.id, call.name, await call.status]);
  return { ...((await run.done) as { channels: Array<Record<string, any>> }), calls };
}

test('LangGraph: a failed subagent keeps its status, an interrupted one (a pause) stays running; ' +
  'a failed tool is an error', async () => {
  const started = ev('tasks', ['tools:t1'], {
    id: 'x',
    name: 'model_request',
    metadata: { lc_agent_name: 'worker' },
    input: { messages: [{ lc: 1, type: 'constructor', id: ['HumanMessage'], kwargs: { content: 'go' } }] },
  });
  const failed = await indexOf(
    spawnEvents(
      [started],
      [
        ev('tools', ['tools:t1'], { event: 'tool-error', tool_call_id: 'call_1', message: 'model exploded' }),
        ev('lifecycle', ['tools:t1'], { event: 'failed' }),
        ev('lifecycle', [], { event: 'failed' }),
      ],
    ),
  );
  assert.deepEqual(
    failed.channels.map((c) => [c.id, c.agent, c.status, c.depth]),
    [
      [null, null, 'failed', 0],
      ['call_1', 'worker', 'failed', 1],
    ],
  );
  // One spawn call (held back, then shown as the Agent call), its result an error.
  assert.deepEqual(failed.channels[0].counts, { text: 0, thinking: 0, tool_use: 1, tool_result: 1 });
  assert.deepEqual(failed.calls, [['call_1', 'Agent', 'error']]);

  const interrupted = await indexOf(
    spawnEvents([started], [ev('lifecycle', ['tools:t1'], { event: 'interrupted' })]),
  );
  assert.equal(interrupted.channels[1].status, 'running');
  // The run itself was not ended: no result line came.
  assert.equal(interrupted.channels[0].status, 'running');
});

test('LangGraph: a task call that ends without starting a subagent stays an ordinary tool call', async () => {
  const index = await indexOf(
    spawnEvents(
      [],
      [
        ev('tools', ['tools:t1'], {
          event: 'tool-finished',
          tool_call_id: 'call_1',
          output: 'no such subagent type',
        }),
        ev('lifecycle', [], { event: 'completed' }),
      ],
    ),
  );
  assert.equal(index.channels.length, 1);
  assert.deepEqual(index.channels[0].counts, { text: 0, thinking: 0, tool_use: 1, tool_result: 1 });
  assert.deepEqual(index.calls, [['call_1', 'task', 'finished']]);
});

test('LangGraph mapper: text and reasoning from deltas without a finish block; usage renamed', () => {
  const mapper = new LangGraphMapper();
  const ns = ['model_request:1'];
  const out = [
    ev('messages', ns, { event: 'message-start', id: 'run-9', run_id: 'r9' }),
    ev('messages', ns, {
      event: 'content-block-start',
      index: 0,
      content: { type: 'reasoning', reasoning: '' },
      run_id: 'r9',
    }),
    ev('messages', ns, {
      event: 'content-block-delta',
      index: 0,
      delta: { type: 'reasoning-delta', reasoning: 'Think' },
      run_id: 'r9',
    }),
    ev('messages', ns, {
      event: 'content-block-start',
      index: 1,
      content: { type: 'text', text: '' },
      run_id: 'r9',
    }),
    ev('messages', ns, {
      event: 'content-block-delta',
      index: 1,
      delta: { type: 'text-delta', text: 'Hel' },
      run_id: 'r9',
    }),
    ev('messages', ns, {
      event: 'content-block-delta',
      index: 1,
      delta: { type: 'text-delta', text: 'lo' },
      run_id: 'r9',
    }),
    ev('messages', ns, {
      event: 'message-finish',
      usage: { input_tokens: 3, output_tokens: 4, input_token_details: { cache_read: 2 } },
      run_id: 'r9',
    }),
  ].flatMap((e) => mapper.map(e));
  assert.deepEqual(out, [
    {
      type: 'assistant',
      message: {
        id: 'run-9',
        type: 'message',
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'Think' },
          { type: 'text', text: 'Hello' },
        ],
        usage: { input_tokens: 3, output_tokens: 4, cache_read_input_tokens: 2 },
      },
      parent_tool_use_id: null,
      timestamp: new Date(1_800_000_000_000).toISOString(),
    },
  ]);
});

test('LangGraph: a block at index 4294967294 is one block, not an array of 4 billion holes to walk', () => {
  const message = (data: JsonObject) => ev('messages', [], { id: 'm1', ...data }, 1_700_000_000_000);
  const input = [
    message({ event: 'message-start', role: 'ai' }),
    message({ event: 'content-block-start', index: 4294967294, content: { type: 'text', text: 'hi' } }),
    message({ event: 'message-finish' }),
  ];
  const out = join(tmpDir(), 'out');
  // Bounded: walking the holes took minutes, so a regression is killed and fails here.
  const r = boundedSubtee(
    ['--out', out, '-q', '--stdout', 'none'],
    input.map((e) => JSON.stringify(e)).join('\n'),
  );
  assert.equal(r.error, undefined);
  assert.equal(r.status, 0, r.stderr);
  assert.match(readFileSync(join(out, 'main.log'), 'utf8'), /^hi$/m);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual([index.producer, index.input.lines, index.channels[0].counts.text], ['langgraph', 3, 1]);
});

test('LangGraph mapper: blocks in index order however sparse; an odd index drops its block', () => {
  const mapper = new LangGraphMapper();
  const message = (data: JsonObject) => ev('messages', [], { run_id: 'r1', ...data });
  const start = (index: unknown, text: string) =>
    message({ event: 'content-block-start', index, content: { type: 'text', text } } as JsonObject);
  const delta = (index: unknown, text: string) =>
    message({ event: 'content-block-delta', index, delta: { type: 'text-delta', text } } as JsonObject);
  const events = [
    message({ event: 'message-start', id: 'm1' }),
    start(Number.MAX_SAFE_INTEGER, 'largest'),
    start(4294967294, 'last array index'),
    start(7, 'seven'),
    start(-0, 'zero'),
    // A repeated index replaces the block held there; later deltas extend the new one.
    start(3, 'replaced'),
    start(3, 'three'),
    delta(3, '!'),
    message({ event: 'content-block-finish', index: 7, content: { type: 'text', text: 'SEVEN' } }),
    // No position: negative, fractional, beyond 2^53 - 1, not finite, not a number.
    start(-1, 'negative'),
    start(1.5, 'fraction'),
    start(2 ** 53, 'too large'),
    start(Infinity, 'infinite'),
    start(NaN, 'not a number'),
    start('2', 'a string'),
    delta(-1, 'lost'),
    delta(1.5, 'lost'),
    message({ event: 'message-finish' }),
  ];
  const lines = events.flatMap((e) => mapper.map(e));
  assert.equal(lines.length, 1);
  assert.deepEqual(
    (lines[0].message as JsonObject).content,
    ['zero', 'three!', 'SEVEN', 'last array index', 'largest'].map((text) => ({ type: 'text', text })),
  );
});

test("LangGraph: a subagent the run's failure stopped carries the run's error", async () => {
  const started = ev('tasks', ['tools:t1'], {
    id: 'x',
    name: 'model_request',
    metadata: { lc_agent_name: 'worker' },
    input: { messages: [{ lc: 1, type: 'constructor', id: ['HumanMessage'], kwargs: { content: 'go' } }] },
  });
  const said = ev('tasks', ['tools:t1'], {
    id: 'm2',
    name: 'model_request',
    result: {
      messages: [
        { lc: 1, type: 'constructor', id: ['AIMessage'], kwargs: { id: 'run-2', content: 'Working on it.' } },
      ],
    },
  });
  const events = spawnEvents(
    [started, said],
    [
      ev('lifecycle', ['tools:t1'], { event: 'failed' }),
      ev('lifecycle', [], { event: 'failed', error: 'rate limited' }),
    ],
  );
  const run = open(Readable.from(events));
  const outputs = [];
  for await (const sub of run.allSubagents) outputs.push(await sub.outcome);
  const index = await run.done;
  assert.deepEqual(
    outputs.map((o) => [o.status, o.error, o.summary]),
    [['failed', 'rate limited', 'rate limited']],
  );
  assert.equal(index.channels[1].summary, 'rate limited');
  const output = await run.output;
  assert.deepEqual([output.status, output.error], ['failed', 'rate limited']);
});

/** The recording of each producer, and where its own final line starts (null: none to cut). */
const FINAL_LINES: ReadonlyArray<[string, string, RegExp | null]> = [
  ['claude', 'foreground-fanout-3.jsonl', /"type":"result"/],
  ['codex', 'other-agents/codex/shell.jsonl', /"type":"turn\.completed"/],
  ['gemini', 'other-agents/gemini/shell.jsonl', /"type":"result"/],
  ['copilot', 'other-agents/copilot/shell.jsonl', /^\{"type":"result"/],
  ['opencode', 'other-agents/opencode/shell.jsonl', /"reason":"stop"/],
  // opencode SIGKILLed while its command ran: no step_finish at all.
  ['opencode', 'other-agents/opencode/killed-mid-step.jsonl', null],
];

test('a run cut short is never completed: without its own final line main is running, no [run] line', () => {
  for (const [producer, name, final] of FINAL_LINES) {
    const lines = linesOf(join(FIXTURES, name));
    const cut = final === null ? lines.length : lines.findIndex((line) => final.test(line));
    assert.ok(cut > 0, `${name}: has its final line`);
    const runOf = (input: string[]) => {
      const out = join(tmpDir(), 'out');
      const r = spawnSync(process.execPath, [BIN, '--out', out, '-q'], {
        input: input.join('\n') + '\n',
        encoding: 'utf8',
      });
      assert.equal(r.status, 0, r.stderr);
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.equal(index.producer, producer, name);
      return { main: index.channels[0].status, stdout: r.stdout };
    };
    const short = runOf(lines.slice(0, cut));
    assert.equal(short.main, 'running', `${name} cut short`);
    assert.doesNotMatch(short.stdout, /\[run\]/, `${name} cut short`);
    if (final !== null) assert.equal(runOf(lines).main, 'completed', `${name} whole`);
  }
});

test('LangGraph: a run whose root never ends is running, not completed', async () => {
  const index = await indexOf([
    ev('lifecycle', [], { event: 'running', graph_name: 'root' }),
    ev('messages', [], { event: 'message-start', message_id: 'm1' }),
  ]);
  assert.equal(index.channels[0].status, 'running');
  const whole = await indexOf([
    ev('lifecycle', [], { event: 'running', graph_name: 'root' }),
    ev('lifecycle', [], { event: 'completed' }),
  ]);
  assert.equal(whole.channels[0].status, 'completed');
});

// teeJsonl (the Agent SDK adapter): each message written as one JSON line, then passed on.

// ---- Claude Agent SDK ----

test('teeJsonl: passes each message on after writing ' +
  'it as one JSON line; a full writer holds the run', async () => {
  const messages = [
    { type: 'system', subtype: 'init' },
    { type: 'assistant', text: 'é\n"' },
    { type: 'result' },
  ];
  async function* source() {
    yield* messages;
  }
  const log: string[] = [];
  const written: string[] = [];
  const out = new Writable({
    highWaterMark: 1,
    write(chunk: Buffer, _encoding, done) {
      written.push(chunk.toString('utf8'));
      log.push(`write ${written.length}`);
      // Released on a later turn: a writer that cannot keep up.
      setImmediate(() => {
        log.push(`release ${written.length}`);
        done();
      });
    },
  });
  const got: unknown[] = [];
  for await (const message of teeJsonl(source(), out)) {
    log.push(`yield ${got.length + 1}`);
    got.push(message);
  }
  assert.deepEqual(got, messages);
  assert.deepEqual(
    written,
    messages.map((m) => JSON.stringify(m) + '\n'),
  );
  assert.deepEqual(log, [
    'write 1',
    'release 1',
    'yield 1',
    'write 2',
    'release 2',
    'yield 2',
    'write 3',
    'release 3',
    'yield 3',
  ]);
});

test('teeJsonl: a writer with room takes every line without waiting for a drain', async () => {
  const out = new Writable({ highWaterMark: 1 << 20, write: (_chunk, _encoding, done) => done() });
  const lines: string[] = [];
  const original = out.write.bind(out);
  out.write = ((chunk: string) => {
    lines.push(chunk);
    return original(chunk);
  }) as typeof out.write;
  async function* source() {
    yield { n: 1 };
    yield { n: 2 };
  }
  const got: unknown[] = [];
  for await (const message of teeJsonl(source(), out)) got.push(message);
  assert.deepEqual(got, [{ n: 1 }, { n: 2 }]);
  assert.deepEqual(lines, ['{"n":1}\n', '{"n":2}\n']);
});

test("a coding agent's run id: the same events give the same id, a resumed session " +
  '(same session, later start) another, a stream without an id none', () => {
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const copilot = { type: 'session.start', id: 'f635bf85-d6ab-4cb7-8b0b-6ad71c1f247e', data: {} };
  assert.equal(agentRunIdOf('copilot', copilot), copilot.id);
  assert.equal(agentRunIdOf('copilot', { type: 'session.start', data: {} }), null);

  const init = { type: 'init', session_id: 'f3da82d5', timestamp: '2026-12-01T14:22:33.868Z' };
  const gemini = agentRunIdOf('gemini', init);
  assert.match(gemini ?? '', uuid);
  assert.equal(agentRunIdOf('gemini', { ...init }), gemini, 'a replay: the same id');
  assert.notEqual(agentRunIdOf('gemini', { ...init, timestamp: '2026-12-01T15:00:00.000Z' }), gemini);
  assert.notEqual(agentRunIdOf('opencode', { sessionID: 'f3da82d5', timestamp: init.timestamp }), gemini);
  assert.equal(agentRunIdOf('gemini', { type: 'message', session_id: 'f3da82d5' }), null);

  const step = { type: 'step_start', sessionID: 'ses_dce0', timestamp: 1796135113882 };
  const opencode = agentRunIdOf('opencode', step);
  assert.match(opencode ?? '', uuid);
  assert.equal(agentRunIdOf('opencode', { ...step }), opencode);
  assert.notEqual(agentRunIdOf('opencode', { ...step, timestamp: 1796135999999 }), opencode);
  // An id too long for a line's `uuid` is named by its hash, never cut.
  assert.match(agentRunIdOf('copilot', { ...copilot, id: 'x'.repeat(300) }) ?? '', uuid);
});

test("a Codex run's id: named by its thread and its lines up to its first turn's first event, " +
  'pending until then; a resumed thread another id, a replay the same; bounded wait', () => {
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const thread = { type: 'thread.started', thread_id: '01a232fc-b2a2-7b00-bbd1-93c4a49a2e6d' };
  const item = (text: string) => ({
    type: 'item.completed',
    item: { id: 'item_0', type: 'agent_message', text },
  });
  const idOf = (events: Array<JsonObject | null>, settle = false) => {
    const reader = new RunIdReader('codex');
    const pending: boolean[] = [];
    for (const e of events) {
      reader.see(e, e === null ? null : Buffer.from(JSON.stringify(e)));
      pending.push(reader.pending);
    }
    if (settle) reader.settle();
    return { id: reader.id, pending };
  };
  const turn = { type: 'turn.started' };
  const first = idOf([turn, thread, turn, item('Plan: one command.')]);
  assert.deepEqual(first.pending, [false, true, true, false], 'pending from thread.started to the item');
  assert.match(first.id ?? '', uuid);
  assert.notEqual(first.id, thread.thread_id);
  const again = idOf([thread, { type: 'turn.started' }, item('Plan: one command.')]);
  assert.equal(again.id, first.id, 'a replay (a line before the thread is no part of it)');
  const resumed = idOf([thread, { type: 'turn.started' }, item('Command finished.')]);
  assert.notEqual(resumed.id, first.id, 'the same thread resumed');
  const cut = idOf([thread, { type: 'turn.started' }], true);
  assert.deepEqual(cut.pending, [true, true]);
  assert.match(cut.id ?? '', uuid, 'named at the end by what came');
  assert.notEqual(cut.id, first.id);
  const notHeld = idOf([thread, null]);
  assert.deepEqual(notHeld.pending, [true, false], 'a line not held as bytes ends the wait');
  const long = idOf([thread, ...Array.from({ length: CODEX_RUN_ID_WAIT.lines - 1 }, () => ({ type: 'x' }))]);
  assert.equal(long.pending.at(-2), true);
  assert.equal(long.pending.at(-1), false, `the wait ends at ${CODEX_RUN_ID_WAIT.lines} lines`);
  const big = idOf([thread, { type: 'item.started', text: 'x'.repeat(CODEX_RUN_ID_WAIT.bytes) }]);
  assert.deepEqual(big.pending, [true, false], 'and at its bytes');
  assert.equal(idOf([{ type: 'turn.started' }, item('no thread')], true).id, null, 'no thread, no id');
});

/** A Codex recording's lines before its first turn's first event (`thread.started` on). */
function beforeFirstItem(lines: string[]): string[] {
  const turn = lines.findIndex((l) => JSON.parse(l).type === 'turn.started');
  return lines.slice(0, turn + 1);
}

test('a Codex recording cut before its first turn\'s first event: its run is named by the bytes ' +
  'read, a replay the same id, another cut another; every input line lands once', () => {
  const files = ['plain', 'shell', 'two-subagents'].map((n) =>
    join(FIXTURES, 'other-agents', 'codex', `${n}.jsonl`),
  );
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const ids = new Map<string, string>();
  for (const file of files) {
    const lines = linesOf(file);
    const cuts = beforeFirstItem(lines);
    assert.ok(cuts.length >= 2, `${file}: a thread and its turn`);
    for (let n = 1; n <= cuts.length; n++) {
      const input = Buffer.from(cuts.slice(0, n).join('\n') + '\n');
      const what = `${file}: ${n} lines`;
      const runOnce = () => {
        const out = join(tmpDir(), 'out');
        const r = boundedSubtee(['--out', out, '--stdout', 'none', '-q'], input);
        assert.equal(r.status, 0, r.stderr);
        assert.deepEqual(readFileSync(join(out, 'main.jsonl')), input, `${what}: each line once, as read`);
        return JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      };
      const index = runOnce();
      assert.equal(index.producer, 'codex', what);
      assert.match(index.run_id ?? '', uuid, `${what}: named`);
      assert.equal(runOnce().run_id, index.run_id, `${what}: a replay`);
      const seen = ids.get(index.run_id);
      assert.equal(seen, undefined, `${what}: the id of ${seen}`);
      ids.set(index.run_id, what);
    }
    const out = join(tmpDir(), 'out');
    const whole = boundedSubtee(['--out', out, '--stdout', 'none', '-q'], readFileSync(file));
    assert.equal(whole.status, 0, whole.stderr);
    const runId = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).run_id;
    assert.equal(ids.get(runId), undefined, `${file} whole: named by its first item too`);
  }
});

test('subtee run: a Codex run that stalls on its first turn\'s model request is named by what it ' +
  'printed, and its turn.started went on at once: the stall names the model request', () => {
  const thread = { type: 'thread.started', thread_id: '01a232fc-b2a2-7b00-bbd1-93c4a49a2e6d' };
  const printed = [thread, { type: 'turn.started' }].map((e) => JSON.stringify(e) + '\n').join('');
  // Prints its thread and its turn, then never answers.
  const codex = `process.stdout.write(${JSON.stringify(printed)}); setInterval(() => {}, 60_000);`;
  const out = join(tmpDir(), 'out');
  const flags = ['--stall-grace-ms', '0', '--idle-timeout-ms', '300', '--model-timeout-ms', '600'];
  const argv = [BIN, 'run', '--out', out, '--stdout', 'none', '-q', ...flags, '--'];
  const r = spawnSync(process.execPath, [...argv, process.execPath, '-e', codex], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 124, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.stalled, true);
  assert.equal(index.stall.allowedMs, 600, 'the turn is a model request in flight');
  assert.equal(index.stall.waitingOn[0]?.kind, 'model', JSON.stringify(index.stall));
  assert.match(index.run_id ?? '', /^[0-9a-f-]{36}$/);
  assert.equal(readFileSync(join(out, 'main.jsonl'), 'utf8'), printed);
  const again = join(tmpDir(), 'out');
  const replay = boundedSubtee(['--out', again, '--stdout', 'none', '-q'], printed);
  assert.equal(replay.status, 0, replay.stderr);
  const replayed = JSON.parse(readFileSync(join(again, 'index.json'), 'utf8'));
  assert.equal(replayed.run_id, index.run_id, 'a replay of what it printed');
});
