import assert from 'node:assert/strict';
import { spawn as spawnProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { TraceBuilder, type SpanData } from '../src/chain/sinks/otlp-spans.js';
import { BIN, fixtureFiles, FIXTURES, tmpDir } from './helpers/helpers.js';
import { channelTokens } from '../src/views/walk.js';
import { COPILOT_TOTALS, copilotTokens } from './helpers/chat-reading.js';
import { startOtlpReceiver } from './servers/otlp-receiver.js';
import { assertSpanTree, routeThrough, type SpanLike } from './helpers/otlp-tree.js';

const like = (s: SpanData): SpanLike => ({
  id: s.key,
  parent: s.parentKey ?? '',
  name: s.name,
  startMs: s.startMs,
  endMs: s.endMs,
  attributes: s.attributes,
  error: s.error !== null,
});

async function spansOf(
  input: Buffer,
  options: ConstructorParameters<typeof TraceBuilder>[0] = {},
  chunkBytes?: number,
) {
  const builder = new TraceBuilder(options);
  const spans: SpanData[] = [];
  const { run, index } = await routeThrough(
    input,
    (batch) => {
      for (const rec of batch) spans.push(...builder.add(rec));
    },
    chunkBytes,
  );
  spans.push(...builder.finish(run.tree.channels(), run));
  return { spans, index, builder };
}

const line = (v: Record<string, unknown>) => JSON.stringify(v);
const ts = (s: number) => new Date(Date.UTC(2026, 10, 30, 9, 0, s)).toISOString();
const spawn = (id: string, at: number, parent: string | null = null, type = 'Explore') =>
  line({
    type: 'assistant',
    message: {
      id: `m-${id}`,
      model: 'claude-x',
      content: [
        {
          type: 'tool_use',
          id,
          name: 'Agent',
          input: { subagent_type: type, description: `do ${id}`, prompt: `go ${id}` },
        },
      ],
      usage: { input_tokens: 5, output_tokens: 2 },
    },
    parent_tool_use_id: parent,
    uuid: `u-spawn-${id}`,
    session_id: 's1',
    timestamp: ts(at),
  });
const toolUse = (
  ch: string | null,
  id: string,
  name: string,
  at: number,
  input: unknown = { command: 'ls' },
) =>
  line({
    type: 'assistant',
    message: { id: `m-${id}`, content: [{ type: 'tool_use', id, name, input }] },
    parent_tool_use_id: ch,
    uuid: `u-${id}`,
    session_id: 's1',
    timestamp: ts(at),
  });
const toolResult = (ch: string | null, id: string, at: number, content: string, isError = false) =>
  line({
    type: 'user',
    message: { content: [{ type: 'tool_result', tool_use_id: id, content, is_error: isError }] },
    parent_tool_use_id: ch,
    uuid: `u-r-${id}`,
    session_id: 's1',
    timestamp: ts(at),
  });
const prompt = (ch: string, at: number, text: string) =>
  line({
    type: 'user',
    message: { content: [{ type: 'text', text }] },
    parent_tool_use_id: ch,
    uuid: `u-p-${ch}`,
    session_id: 's1',
    timestamp: ts(at),
  });
const say = (ch: string | null, at: number, text: string) =>
  line({
    type: 'assistant',
    message: { id: `m-say-${at}`, content: [{ type: 'text', text }] },
    parent_tool_use_id: ch,
    uuid: `u-say-${at}`,
    session_id: 's1',
    timestamp: ts(at),
  });
const init = line({
  type: 'system',
  subtype: 'init',
  session_id: 's1',
  model: 'claude-x',
  claude_code_version: '2.1.328',
  uuid: 'u-init',
});
const bytes = (...lines: string[]) => Buffer.from(lines.join('\n') + '\n');

for (const file of fixtureFiles()) {
  test(`span tree equals index.json's tree: ${basename(file)}`, async () => {
    const { spans, index } = await spansOf(readFileSync(file));
    assertSpanTree(spans.map(like), index, basename(file));
  });
}

test('times come from the stream: a replay, cut into other chunks, gives the same spans', async () => {
  const input = readFileSync(fixtureFiles().find((f) => f.endsWith('binary-tree-depth-3.jsonl'))!);
  const a = await spansOf(input, { fallbackMs: 1 }, 4096);
  const b = await spansOf(input, { fallbackMs: 2 }, 977);
  assert.deepEqual(b.spans, a.spans);
});

test('a tool span runs from its tool_use line to ' +
  'its tool_result line; a tool error is an ERROR', async () => {
  const { spans } = await spansOf(
    bytes(
      init,
      toolUse(null, 't1', 'Bash', 1),
      toolResult(null, 't1', 4, 'boom', true),
      toolUse(null, 't2', 'Read', 5),
      toolResult(null, 't2', 6, 'ok'),
    ),
  );
  const t1 = spans.find((s) => s.key === 'tool:t1')!;
  assert.equal(t1.startMs, Date.parse(ts(1)));
  assert.equal(t1.endMs, Date.parse(ts(4)));
  assert.equal(t1.error, 'tool error');
  assert.equal(t1.attributes['error.type'], 'tool_error');
  assert.equal(t1.parentKey, 'agent:');
  const t2 = spans.find((s) => s.key === 'tool:t2')!;
  assert.equal(t2.error, null);
  assert.equal(t2.attributes['gen_ai.tool.name'], 'Read');
  assert.equal(t2.attributes['gen_ai.conversation.id'], 's1');
});

test('a subagent span is handed out at its task_notification, and a failed one is an ERROR', async () => {
  const builder = new TraceBuilder();
  const handed: string[][] = [];
  const notification = line({
    type: 'system',
    subtype: 'task_notification',
    tool_use_id: 'a1',
    status: 'failed',
    summary: 'it broke',
    uuid: 'u-n',
    session_id: 's1',
  });
  const { run } = await routeThrough(
    bytes(
      init,
      spawn('a1', 1),
      prompt('a1', 2, 'go a1'),
      say('a1', 3, 'working'),
      notification,
      say(null, 9, 'done'),
    ),
    (batch) => {
      for (const rec of batch) handed.push(builder.add(rec).map((s) => s.key));
    },
    1,
  );
  const lineOf = (key: string) => handed.findIndex((keys) => keys.includes(key));
  assert.equal(lineOf('agent:a1'), 4, 'handed out with the notification line (the fifth)');
  const rest = builder.finish(run.tree.channels(), run);
  assert.deepEqual(
    rest.map((s) => s.key).sort(),
    ['agent:', 'tool:a1'],
    'the spawn call (no result yet) and main at the end',
  );
  assert.equal(rest.find((s) => s.key === 'tool:a1')!.attributes['subtee.tool.unfinished'], true);
});

test('failed subagent: ERROR status with error.type; the report only with content on', async () => {
  const notification = line({
    type: 'system',
    subtype: 'task_notification',
    tool_use_id: 'a1',
    status: 'failed',
    summary: 'it broke',
    uuid: 'u-n',
    session_id: 's1',
  });
  const input = bytes(init, spawn('a1', 1), prompt('a1', 2, 'go a1'), say('a1', 3, 'working'), notification);
  const off = (await spansOf(input)).spans.find((s) => s.key === 'agent:a1')!;
  assert.equal(off.error, 'subagent failed');
  assert.equal(off.attributes['error.type'], 'subagent_failed');
  assert.equal(off.attributes['subtee.status'], 'failed');
  const on = (await spansOf(input, { captureContent: true })).spans.find((s) => s.key === 'agent:a1')!;
  assert.equal(on.error, 'subagent failed: it broke');
});

test('a stopped subagent: its span ends at its notification, status stopped, no ERROR', async () => {
  const notification = line({
    type: 'system',
    subtype: 'task_notification',
    tool_use_id: 'a1',
    status: 'stopped',
    summary: 'Task stopped by user',
    uuid: 'u-n',
    session_id: 's1',
    timestamp: ts(5),
  });
  const input = bytes(
    init,
    spawn('a1', 1),
    prompt('a1', 2, 'go a1'),
    say('a1', 3, 'working'),
    notification,
    say(null, 9, 'done'),
  );
  const span = (await spansOf(input, { captureContent: true })).spans.find((s) => s.key === 'agent:a1')!;
  assert.deepEqual(
    [span.error, span.attributes['error.type'], span.attributes['subtee.status'], span.endMs],
    [null, undefined, 'stopped', Date.parse(ts(5))],
  );
});

test('message content only when asked for, bounded', async () => {
  const long = 'x'.repeat(500);
  const input = bytes(
    init,
    spawn('a1', 1),
    prompt('a1', 2, `prompt ${long}`),
    toolUse('a1', 't1', 'Bash', 3, { command: long }),
    toolResult('a1', 't1', 4, `out ${long}`),
    say('a1', 5, 'final report'),
    toolResult(null, 'a1', 6, 'final report'),
  );
  const contentKeys = [
    'gen_ai.input.messages',
    'gen_ai.output.messages',
    'gen_ai.tool.call.arguments',
    'gen_ai.tool.call.result',
  ];
  const off = (await spansOf(input)).spans;
  for (const s of off) for (const k of contentKeys) assert.equal(s.attributes[k], undefined, `${s.key} ${k}`);
  const on = (await spansOf(input, { captureContent: true, maxContentChars: 100 })).spans;
  const agent = on.find((s) => s.key === 'agent:a1')!;
  const input0 = JSON.parse(String(agent.attributes['gen_ai.input.messages']));
  assert.equal(input0[0].role, 'user');
  // Cut as a `block`: 70 head and 30 tail characters around the marker.
  const block = (s: string) => `${s.slice(0, 70)} […${s.length - 100} chars cut…] ${s.slice(-30)}`;
  assert.equal(input0[0].parts[0].content, block(`prompt ${long}`));
  assert.equal(
    JSON.parse(String(agent.attributes['gen_ai.output.messages']))[0].parts[0].content,
    'final report',
  );
  const tool = on.find((s) => s.key === 'tool:t1')!;
  assert.equal(tool.attributes['gen_ai.tool.call.arguments'], block(JSON.stringify({ command: long })));
  assert.equal(tool.attributes['gen_ai.tool.call.result'], block(`out ${long}`));
});

test('an orphan is placed once its spawn call shows up; one never spawned hangs under main', async () => {
  // a2's lines arrive before the call that spawns it; a3's spawn call never arrives; t9 is
  // a Bash call, not a spawn, whose id some lines name as their parent (main's, as a heartbeat is).
  const input = bytes(
    init,
    say('a2', 1, 'early'),
    spawn('a1', 2),
    spawn('a2', 3, 'a1'),
    say('a3', 4, 'lost'),
    toolUse(null, 't9', 'Bash', 4),
    say('t9', 4, 'progress'),
    toolResult(null, 'a1', 5, 'done'),
  );
  const { spans, index } = await spansOf(input);
  assertSpanTree(spans.map(like), index, 'orphans');
  const a2 = spans.find((s) => s.key === 'agent:a2')!;
  assert.equal(a2.parentKey, 'tool:a2');
  assert.equal(spans.find((s) => s.key === 'tool:a2')!.parentKey, 'agent:a1');
  const a3 = spans.find((s) => s.key === 'agent:a3')!;
  assert.equal(a3.parentKey, 'agent:');
  assert.equal(a3.attributes['subtee.orphan'], true);
  assert.equal(spans.find((s) => s.key === 'agent:t9'), undefined, "a Bash call's lines are its caller's");
});

test('a stream without any timestamp uses the fallback time', async () => {
  const { spans } = await spansOf(
    bytes(init, line({ type: 'result', subtype: 'success', is_error: false, uuid: 'u-r', session_id: 's1' })),
    { fallbackMs: 1234 },
  );
  assert.equal(spans.length, 1);
  assert.deepEqual([spans[0].startMs, spans[0].endMs], [1234, 1234]);
  assert.equal(spans[0].attributes['subtee.status'], 'completed');
});

test("spans carry session.id, openinference.span.kind and each agent's dollars as index.json has " +
  "them", async () => {
  for (const file of fixtureFiles()) {
    const input = readFileSync(file);
    const session = JSON.parse(input.toString('utf8').split('\n')[0]).session_id;
    let builder: TraceBuilder | null = null;
    const spans: SpanData[] = [];
    const { run, index } = await routeThrough(input, (batch, session) => {
      builder ??= new TraceBuilder({ costs: session.cost });
      for (const rec of batch) spans.push(...builder.add(rec));
    });
    spans.push(...builder!.finish(run.tree.channels(), run));
    const name = basename(file);
    const finalSpans = spans.filter((s) => s.key.startsWith('agent:'));
    for (const span of spans) {
      assert.equal(span.attributes['session.id'], session, `${name}: session.id of ${span.name}`);
      const kind = span.key.startsWith('agent:') ? 'AGENT' : 'TOOL';
      assert.equal(span.attributes['openinference.span.kind'], kind, `${name}: kind of ${span.name}`);
    }
    const main = finalSpans.find((s) => s.key === 'agent:')!;
    assert.equal(main.attributes['subtee.run.cost.usd'], index.cost.usd, name);
    assert.equal(main.attributes['subtee.cost.basis'], 'result', name);
    const mainChannel = index.channels.find((c: any) => c.id === null);
    assert.equal(main.attributes['subtee.cost.usd'], mainChannel.cost.usd, name);
    assert.equal(main.attributes['gen_ai.usage.output_tokens'], mainChannel.usage.output_tokens, name);
  }
});

test('every agent span carries its depth, the main conversation 0 included', async () => {
  const input = readFileSync(fixtureFiles().find((f) => f.endsWith('nested-depth-3.jsonl'))!);
  const { spans, index } = await spansOf(input);
  const agents = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'invoke_agent');
  const main = agents.filter((s) => s.attributes['gen_ai.agent.id'] === undefined);
  assert.equal(main.length, 1);
  assert.equal(main[0].attributes['subtee.depth'], 0);
  const depthById = new Map(index.channels.map((c: any) => [c.id ?? undefined, c.depth]));
  assert.deepEqual(
    agents.map((s) => s.attributes['subtee.depth']),
    agents.map((s) => depthById.get(s.attributes['gen_ai.agent.id'] as string | undefined)),
  );
  assert.ok(
    agents.some((s) => s.attributes['subtee.depth'] === 3),
    'the fixture nests three deep',
  );
});

test("an agent span's subtee.usage.tokens is its tokens as the summary counts them, a total where " +
  'that is all the stream states', async () => {
  const total = line({
    type: 'assistant',
    message: { id: 'm-total', content: [], usage: { total_tokens: 240 } },
    parent_tool_use_id: 't1',
    session_id: 's1',
    timestamp: ts(3),
  });
  const { spans, index } = await spansOf(bytes(init, spawn('t1', 1), say('t1', 2, 'working'), total));
  const agent = spans.find((s) => s.key === 'agent:t1')!;
  const channel = index.channels.find((c: { id: string | null }) => c.id === 't1');
  assert.deepEqual(channel.usage, { total_tokens: 240 });
  assert.equal(agent.attributes['subtee.usage.tokens'], 240);
  const main = spans.find((s) => s.key === 'agent:')!;
  assert.equal(main.attributes['subtee.usage.tokens'], 7, 'input and output tokens of the spawn line');
});

/** A subagent t1 whose lines state usage after its result ended it, up to its notification. */
function lateUsageRun(status: 'completed' | 'failed', summary: string | null) {
  const usage = (at: number, message: string, input: number, output: number) =>
    line({
      type: 'assistant',
      message: {
        id: message,
        model: 'claude-sonnet-4-5',
        content: [],
        usage: { input_tokens: input, output_tokens: output },
      },
      parent_tool_use_id: 't1',
      uuid: `u-usage-${at}`,
      session_id: 's1',
      timestamp: ts(at),
    });
  const notification = line({
    type: 'system',
    subtype: 'task_notification',
    tool_use_id: 't1',
    status,
    summary,
    session_id: 's1',
    uuid: 'u-n',
    timestamp: ts(9),
  });
  // The result ends t1 at 10 + 4; a later line of its message (+2) and a new message (3 + 1) follow.
  const lines = [init, spawn('t1', 1), prompt('t1', 2, 'go'), usage(3, 'm-a', 10, 4)];
  lines.push(toolResult(null, 't1', 4, 'done'), usage(5, 'm-a', 10, 6), usage(6, 'm-b', 3, 1));
  return bytes(...lines, notification);
}

/**
 * Each channel's input and output tokens as the recording states them, counted apart from
 * subtee: per API message, its last line's usage.
 */
function statedTokens(input: Buffer): Map<string | null, number> {
  const byMessage = new Map<string, { channel: string | null; tokens: number }>();
  for (const text of input.toString('utf8').split('\n')) {
    if (text === '') continue;
    const v = JSON.parse(text);
    const u = v.type === 'assistant' ? v.message?.usage : undefined;
    if (u === undefined) continue;
    const tokens = (u.input_tokens ?? 0) + (u.output_tokens ?? 0);
    byMessage.set(v.message.id, { channel: v.parent_tool_use_id ?? null, tokens });
  }
  const out = new Map<string | null, number>();
  for (const { channel, tokens } of byMessage.values()) out.set(channel, (out.get(channel) ?? 0) + tokens);
  return out;
}

test("usage a subagent's lines state after its result ended it, up to its notification, is on the " +
  'span handed out there, from the run model\'s usage events; a status event that froze it again ' +
  'counts it once', async () => {
  for (const [status, summary] of [['completed', null], ['failed', 'broke']] as const) {
    let builder: TraceBuilder | null = null;
    const handedOut: SpanData[] = [];
    const { index } = await routeThrough(lateUsageRun(status, summary), (batch, run) => {
      // With the run's cost ledger, as the OTLP sink has it.
      builder ??= new TraceBuilder({ costs: run.cost });
      for (const rec of batch) handedOut.push(...builder.add(rec));
    });
    const agent = handedOut.find((sp) => sp.key === 'agent:t1')!;
    assert.equal(agent.attributes['subtee.status'], status, 'handed out at the notification');
    assert.equal(agent.attributes['gen_ai.usage.input_tokens'], 13, status);
    assert.equal(agent.attributes['gen_ai.usage.output_tokens'], 7, status);
    assert.equal(agent.attributes['subtee.usage.tokens'], 13 + 7, status);
    const channel = index.channels.find((c: { id: string | null }) => c.id === 't1');
    assert.equal(channelTokens(channel), 13 + 7, `${status}: index.json`);
    assert.equal(agent.attributes['subtee.cost.usd'], channel.cost.usd, `${status}: dollars`);
  }
});

test("a subagent's span handed out at its notification, usage stated after its end included, " +
  "carries the tokens and dollars of index.json and of the recording, as the collector receives " +
  'it', async () => {
  const receiver = await startOtlpReceiver();
  try {
    const file = join(tmpDir(), 'late-usage.jsonl');
    const input = lateUsageRun('completed', null);
    writeFileSync(file, input);
    const stated = statedTokens(input);
    const { index, stderr } = await subteeWithOtlp(file, receiver.url);
    assert.doesNotMatch(stderr, /OTLP_/, 'every span delivered');
    const agents = receiver.spans.filter((s) => s.attributes['openinference.span.kind'] === 'AGENT');
    assert.equal(agents.length, index.channels.length);
    for (const ch of index.channels) {
      const span = agents.find((s) => (s.attributes['gen_ai.agent.id'] ?? null) === ch.id)!;
      const what = `channel ${ch.id ?? 'main'}`;
      assert.equal(channelTokens(ch), stated.get(ch.id), `${what}: index.json against the recording`);
      assert.equal(span.attributes['subtee.usage.tokens'], channelTokens(ch), what);
      assert.equal(span.attributes['gen_ai.usage.input_tokens'], ch.usage.input_tokens, `${what}: input`);
      assert.equal(span.attributes['gen_ai.usage.output_tokens'], ch.usage.output_tokens, `${what}: output`);
      // Left out where index.json has none (main's model is not in the price table).
      assert.equal(span.attributes['subtee.cost.usd'], ch.cost.usd ?? undefined, `${what}: dollars`);
    }
    assert.equal(stated.get('t1'), 13 + 7, 'the recording states usage after the end');
    const t1 = index.channels.find((c: { id: string | null }) => c.id === 't1');
    assert.equal(typeof t1.cost.usd, 'number', "t1's model is priced");
  } finally {
    await receiver.close();
  }
});

/**
 * `subtee --otlp URL FILE`, spawned, not spawnSync: the receiver answers from this process's
 * event loop. Asserts exit 0; gives index.json and stderr.
 */
async function subteeWithOtlp(file: string, url: string) {
  const out = join(tmpDir(), 'out');
  const args = [BIN, '--out', out, '--stdout', 'none', '-q', '--otlp', url, file];
  const child = spawnProcess(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d));
  const [code] = await once(child, 'close');
  assert.equal(code, 0, stderr);
  return { index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')), stderr };
}

test("a GitHub Copilot CLI subagent's span, handed out at its end notification (its total stated " +
  "after its task call's result ended its channel), carries the tokens index.json and the " +
  'recording state for it', async () => {
  const receiver = await startOtlpReceiver();
  try {
    for (const name of COPILOT_TOTALS) {
      const file = join(FIXTURES, `${name}.jsonl`);
      const stated = copilotTokens(readFileSync(file, 'utf8'));
      receiver.spans.length = 0;
      const { index } = await subteeWithOtlp(file, receiver.url);
      for (const ch of index.channels as Array<{ id: string | null; usage: Record<string, unknown> }>) {
        if (ch.id === null) continue;
        const span = receiver.spans.find((sp) => sp.attributes['gen_ai.agent.id'] === ch.id)!;
        const tokens = channelTokens(ch);
        assert.equal(tokens, stated.get(ch.id) ?? 0, `${name} ${ch.id}: index.json against the recording`);
        assert.equal(span.attributes['subtee.usage.tokens'], tokens || undefined, `${name} ${ch.id}`);
      }
    }
  } finally {
    await receiver.close();
  }
});

test('no agent span of a GitHub Copilot CLI run claims output tokens: its usage is unknown, ' +
  'never 0', async () => {
  const receiver = await startOtlpReceiver();
  try {
    for (const name of COPILOT_TOTALS) {
      const file = join(FIXTURES, `${name}.jsonl`);
      receiver.spans.length = 0;
      const { index, stderr } = await subteeWithOtlp(file, receiver.url);
      assert.equal(stderr, '', 'every span delivered');
      const agents = receiver.spans.filter((s) => s.attributes['openinference.span.kind'] === 'AGENT');
      assert.equal(agents.length, index.channels.length, name);
      for (const span of agents) {
        const id = span.attributes['gen_ai.agent.id'] ?? 'main';
        assert.equal(span.attributes['subtee.cost.output_tokens.basis'], 'unknown', `${name}: ${id}`);
        assert.ok(!('gen_ai.usage.output_tokens' in span.attributes), `${name}: ${id} output tokens`);
      }
    }
  } finally {
    await receiver.close();
  }
});

test('a tool input nested 20,000 deep gives its tool span, its arguments cut as any', async () => {
  // Written as text: JSON.stringify itself overflows at this depth.
  const deep = '['.repeat(20_000) + '"end"' + ']'.repeat(20_000);
  const call = toolUse(null, 't1', 'Read', 1, { x: 'DEEP' }).replace('"DEEP"', deep);
  const input = bytes(init, call, toolResult(null, 't1', 2, 'ok'));
  const { spans } = await spansOf(input, { captureContent: true, maxContentChars: 100 });
  const tool = spans.find((s) => s.key === 'tool:t1')!;
  const args = String(tool.attributes['gen_ai.tool.call.arguments']);
  assert.ok(args.startsWith('{"x":[[[[') && args.endsWith(']]]]}'), args);
  assert.equal(tool.endMs, Date.parse(ts(2)));
});
