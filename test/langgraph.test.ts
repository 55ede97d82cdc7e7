import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { test } from 'node:test';
import { type Message, open, type SubagentHandle } from '../src/index.js';
import { teeJsonl } from '../src/entry/adapters.js';
import { NESTED_SCRIPT, startRun } from './e2e/deep-agents.js';
import { BIN, readTree, tmpDir } from './helpers/helpers.js';
import { channelReaderFor, runReaderFor } from '../src/chain/stages/input-format.js';
import { readReportData } from '../src/views/report/build.js';
import {
  claudeUsage,
  contentText,
  isProtocolEvent,
  LANGGRAPH_DEFAULTS,
  LangGraphMapper,
  messageFields,
  toolOutputText,
} from '../src/adapters/langgraph.js';

interface Seen {
  id: string;
  name: string | null;
  parent: string | null;
  depth: number;
  status: string;
  texts: string[];
  toolCalls: Array<{ id: string; name: string }>;
}

/** Deep Agents' own view: `run.subagents`, nested handles, each handle's messages and tool calls. */
async function deepAgentsView(run: Awaited<ReturnType<typeof startRun>>) {
  const seen: Seen[] = [];
  const walk = async (handle: any, parent: string | null, depth: number): Promise<void> => {
    const id = handle.cause?.tool_call_id as string;
    const texts: string[] = [];
    const toolCalls: Seen['toolCalls'] = [];
    const children: Promise<void>[] = [];
    await Promise.all([
      (async () => {
        for await (const m of handle.messages) texts.push(await m.text);
      })(),
      (async () => {
        for await (const call of handle.toolCalls) toolCalls.push({ id: call.callId, name: call.name });
      })(),
      (async () => {
        for await (const child of handle.subagents) children.push(walk(child, id, depth + 1));
      })(),
    ]);
    await Promise.all(children);
    const status = await handle.output.then(
      () => 'completed',
      () => 'failed',
    );
    seen.push({ id, name: handle.name, parent, depth, status, texts, toolCalls });
  };
  const top: Promise<void>[] = [];
  const mainTexts: string[] = [];
  await Promise.all([
    (async () => {
      for await (const handle of run.subagents) top.push(walk(handle, null, 1));
    })(),
    (async () => {
      for await (const m of run.messages) mainTexts.push(await m.text);
    })(),
  ]);
  await Promise.all(top);
  return { subagents: seen.sort((a, b) => a.id.localeCompare(b.id)), mainTexts };
}

/** subtee's projection of the same run: handles, their model messages and tool calls. */
async function subteeView(projection: ReturnType<typeof open>) {
  const seen: Seen[] = [];
  const modelTexts = async (messages: AsyncIterable<Message>) => {
    const texts: string[] = [];
    // One message per model call, as Deep Agents yields them.
    for await (const m of messages) if (m.role === 'assistant') texts.push(await m.text);
    return texts;
  };
  const handles: SubagentHandle[] = [];
  const mainTexts = modelTexts(projection.messages);
  for await (const handle of projection.allSubagents) handles.push(handle);
  for (const handle of handles) {
    const toolCalls: Seen['toolCalls'] = [];
    for await (const call of handle.toolCalls)
      toolCalls.push({ id: call.id, name: call.name === 'Agent' ? 'task' : call.name });
    seen.push({
      id: handle.id,
      name: handle.name,
      parent: handle.path.length > 1 ? handle.path[handle.path.length - 2] : null,
      depth: handle.depth ?? -1,
      status: handle.status,
      texts: await modelTexts(handle.messages),
      toolCalls,
    });
  }
  return {
    subagents: seen.sort((a, b) => a.id.localeCompare(b.id)),
    mainTexts: await mainTexts,
    index: await projection.done,
  };
}

test('Deep Agents side by side: subtee projects the same subagents, ' +
  'nesting, statuses, texts and tool calls as run.subagents', async () => {
  const run = await startRun();
  const dir = tmpDir();
  const recording = createWriteStream(join(dir, 'events.jsonl'));
  const [theirs, ours] = await Promise.all([
    deepAgentsView(run),
    subteeView(open(teeJsonl(run, recording), { out: join(dir, 'live') })),
  ]);
  recording.end();
  await finished(recording);

  assert.deepEqual(ours.subagents, theirs.subagents);
  assert.deepEqual(ours.mainTexts, theirs.mainTexts);
  // The script's tree, so the comparison above cannot pass on two empty views.
  assert.deepEqual(theirs.subagents.map((s) => [s.name, s.depth]).sort(), [
    ['analyst', 1],
    ['researcher', 2],
    ['writer', 1],
    ['writer', 3],
    ['writer', 3],
  ]);
  assert.ok(
    theirs.subagents.every((s) => s.status === 'completed' && s.texts.length >= 1),
    JSON.stringify(theirs.subagents),
  );
  assert.ok(theirs.subagents.some((s) => s.toolCalls.some((c) => c.name === 'ls')));

  const index = ours.index as { producer: string; channels: Array<Record<string, any>> };
  assert.equal(index.producer, 'langgraph');
  const main = index.channels[0];
  assert.equal(main.status, 'completed');
  assert.deepEqual(main.usage, NESTED_SCRIPT.root.usage);
  assert.equal(main.counts.thinking, 1);
  const analyst = index.channels.find((c) => c.agent === 'analyst')!;
  assert.deepEqual(analyst.usage, NESTED_SCRIPT.a1.usage);
  assert.equal(analyst.summary, 'a1 report: done.');
});

test('recorded LangGraph protocol events through the CLI: ' +
  'detected, and the same index.json as the live run', async () => {
  const run = await startRun();
  const dir = tmpDir();
  const recording = join(dir, 'events.jsonl');
  const file = createWriteStream(recording);
  const live = await open(teeJsonl(run, file), { out: join(dir, 'live') }).done;
  file.end();
  await finished(file);

  for (const flags of [[], ['--input-format', 'langgraph']]) {
    const out = join(dir, `replay${flags.length}`);
    const r = spawnSync(
      process.execPath,
      [BIN, '--out', out, '--stdout', 'none', '-q', ...flags, recording],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(
      JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')),
      live,
      flags.join(' ') || 'auto',
    );
  }
  // Read by auto (its first lines waiting until the choice is final), the files are the same.
  const files = (out: string) => [...readTree(join(dir, out))].filter(([f]) => f !== 'index.json');
  assert.deepEqual(files('replay0'), files('replay2'), 'auto writes what --input-format langgraph does');
  // Forced the other way, the events are not read as subagents: nothing is guessed.
  const forced = join(dir, 'forced');
  const r = spawnSync(
    process.execPath,
    [BIN, '--out', forced, '--stdout', 'none', '-q', '--input-format', 'claude', recording],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(forced, 'index.json'), 'utf8'));
  assert.equal(index.producer, 'claude');
  assert.equal(index.channels.length, 1);
});

test("a LangGraph run's folder: main.jsonl is the recording, byte for byte, and the report read " +
  'from the folder shows every channel as the run did', async () => {
  const run = await startRun();
  const dir = tmpDir();
  const recording = join(dir, 'events.jsonl');
  const file = createWriteStream(recording);
  await open(teeJsonl(run, file), { out: join(dir, 'live') }).done;
  file.end();
  await finished(file);
  const out = join(dir, 'replay');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', recording], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(readFileSync(join(out, 'main.jsonl')).equals(readFileSync(recording)));
  for (const [path, bytes] of readTree(out))
    if (path.startsWith('agents/') && path.endsWith('.jsonl')) assert.equal(bytes.length, 0, path);

  const options = { channelReader: channelReaderFor, runReader: runReaderFor };
  const { channels } = readReportData(out, options).data;
  const texts = (id: string | null) =>
    channels.find((c) => c.id === id)!.entries.filter((e) => e.k === 'text').map((e) => e.s);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(channels.length, index.channels.length);
  for (const c of index.channels) {
    // What the run's own transcript shows of the channel, the report shows.
    const log = readFileSync(join(out, c.log), 'utf8');
    assert.ok(texts(c.id).length >= 1, `${c.id}: its texts`);
    for (const text of texts(c.id)) assert.ok(log.includes(text), `${c.id}: ${text}`);
  }
  const analyst = channels.find((c) => c.agent === 'analyst')!;
  assert.equal(analyst.prompt !== null, true);
});

// The LangGraph mapper event by event: protocol events written out here in the shape a v3 run
// stream yields them, each checked against the whole lines it should make.

type Json = Record<string, any>;

const T0 = 1_796_000_000_000;

const iso = (ms: number) => new Date(ms).toISOString();

const ev = (method: string, namespace: unknown[], data: unknown, timestamp: unknown = T0): Json => ({
  type: 'event',
  method,
  params: { namespace, timestamp, data },
});

const at = (ts: string | undefined, fields: Json): Json =>
  ts === undefined ? fields : { ...fields, timestamp: ts };

const untimed = ({ timestamp: _, ...fields }: Json): Json => fields;

const toolUse = (
  channel: string | null,
  messageId: string | null,
  id: string,
  name: string,
  input: Json,
  ts: string | undefined = iso(T0),
): Json =>
  at(ts, {
    type: 'assistant',
    message: {
      id: messageId,
      type: 'message',
      role: 'assistant',
      content: [{ type: 'tool_use', id, name, input }],
    },
    parent_tool_use_id: channel,
  });

const toolResult = (
  channel: string | null,
  id: string,
  content: string,
  isError = false,
  ts: string | undefined = iso(T0),
): Json =>
  at(ts, {
    type: 'user',
    message: {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: id, content, ...(isError ? { is_error: true } : {}) }],
    },
    parent_tool_use_id: channel,
  });

const started = (ns: string[], id: string, name: string, description: string | null, depth: number): Json =>
  at(iso(T0), {
    type: 'system',
    subtype: 'task_started',
    task_id: ns.join('/'),
    tool_use_id: id,
    subagent_type: name,
    description,
    is_backgrounded: false,
    spawn_depth: depth,
  });

const promptLine = (id: string, text: string): Json =>
  at(iso(T0), {
    type: 'user',
    message: { role: 'user', content: [{ type: 'text', text }] },
    parent_tool_use_id: id,
  });

const notification = (ns: string[], id: string, status: string, summary: string | null): Json =>
  at(iso(T0), {
    type: 'system',
    subtype: 'task_notification',
    tool_use_id: id,
    task_id: ns.join('/'),
    status,
    summary,
  });

const human = (content: unknown) => ({
  lc: 1,
  type: 'constructor',
  id: ['langchain_core', 'messages', 'HumanMessage'],
  kwargs: { content },
});

const task = (ns: string[], data: Json) => ev('tasks', ns, data);

const spawnTask = (ns: string[], name: string | undefined, input: unknown = {}, id = 'task-id') =>
  task(ns, {
    id,
    name: 'agent',
    input,
    ...(name === undefined ? {} : { metadata: { lc_agent_name: name } }),
  });

test('LangGraph: a run starts, spawns through a held task call, nests, ends; every line whole', () => {
  const warnings: string[] = [];
  const mapper = new LangGraphMapper({ onWarning: (code) => warnings.push(code) });
  const a = ['tools:a'];
  const ab = ['tools:a', 'tools:b'];
  const steps: [Json, Json[]][] = [
    [
      ev('lifecycle', [], { event: 'running', graph_name: 'agent' }),
      [at(iso(T0), { type: 'system', subtype: 'init', producer: 'langgraph', graph_name: 'agent' })],
    ],
    [
      ev('lifecycle', [], { event: 'started' }, 'none'),
      [{ type: 'system', subtype: 'init', producer: 'langgraph', graph_name: null }],
    ],
    // The model asks for a task call (held) and an ordinary tool (shown at once).
    [
      task([], {
        id: 'n1',
        result: {
          messages: [
            {
              id: 'm1',
              tool_calls: [
                {
                  id: 'call-1',
                  name: 'task',
                  args: { description: 'research it', subagent_type: 'researcher' },
                },
                { id: 'call-2', name: 'ls', args: '{"path":"/"}' },
                { id: 'call-3', name: 'ls', args: 'raw' },
                { id: '', name: 'ls' },
                { id: 'x', name: '' },
                'junk',
                { id: 'call-4', name: 'ls', args: 7 },
                { id: 'call-5', name: 'ls' },
              ],
            },
            { id: 'm0' },
          ],
        },
      }),
      [
        toolUse(null, 'm1', 'call-2', 'ls', { path: '/' }),
        toolUse(null, 'm1', 'call-3', 'ls', { input: 'raw' }),
        toolUse(null, 'm1', 'call-4', 'ls', { input: 7 }),
        toolUse(null, 'm1', 'call-5', 'ls', {}),
      ],
    ],
    [
      task([], {
        id: 'n1b',
        result: { messages: [{ id: 'm9', tool_calls: [{ id: 'call-2', name: 'ls' }] }] },
      }),
      [],
    ],
    [ev('tools', [], { event: 'tool-started', tool_call_id: 'call-1', tool_name: 'task' }), []],
    [ev('tools', a, { event: 'tool-started', tool_call_id: 'call-1', tool_name: 'task' }), []],
    [
      spawnTask(a, 'researcher', {
        messages: [
          human('first'),
          { type: 'ai', content: 'no' },
          human([{ type: 'text', text: 'do' }, 'it']),
        ],
      }),
      [
        toolUse(null, 'm1', 'call-1', 'Agent', { description: 'research it', subagent_type: 'researcher' }),
        started(a, 'call-1', 'researcher', 'research it', 1),
        promptLine('call-1', 'do\nit'),
      ],
    ],
    // A second tasks event at the same namespace starts nothing more.
    [spawnTask(a, 'other'), []],
    // A nested subagent with no tool call of its own: its id is its namespace.
    [
      spawnTask(ab, 'writer', { messages: [{ type: 'human', content: 'write' }] }),
      [
        toolUse('call-1', null, 'langgraph:tools:a/tools:b', 'Agent', { subagent_type: 'writer' }),
        started(ab, 'langgraph:tools:a/tools:b', 'writer', null, 2),
        promptLine('langgraph:tools:a/tools:b', 'write'),
      ],
    ],
    // Inside the nested one, a tool runs on its channel.
    [
      ev('tools', [...ab, 'tools:c'], {
        event: 'tool-started',
        tool_call_id: 'call-6',
        tool_name: 'grep',
        input: { q: 1 },
      }),
      [toolUse('langgraph:tools:a/tools:b', null, 'call-6', 'grep', { q: 1 })],
    ],
    [
      ev('tools', [...ab, 'tools:c'], { event: 'tool-finished', tool_call_id: 'call-6', output: 'found' }),
      [toolResult('langgraph:tools:a/tools:b', 'call-6', 'found')],
    ],
    [
      ev('tools', [...ab, 'tools:c'], { event: 'tool-error', tool_call_id: 'call-7', message: 'bad' }),
      [toolResult('langgraph:tools:a/tools:b', 'call-7', 'bad', true)],
    ],
    [
      ev('tools', [], { event: 'tool-error', tool_call_id: 'call-8', error: { e: 1 } }),
      [toolResult(null, 'call-8', '{"e":1}', true)],
    ],
    [
      ev('tools', [], { event: 'tool-error', tool_call_id: 'call-9', output: 'partial' }),
      [toolResult(null, 'call-9', 'partial', true)],
    ],
    [ev('tools', [], { event: 'tool-finished', output: 'no id' }), []],
    [ev('tools', [], { event: 'tool-other', tool_call_id: 'call-10' }), []],
    [
      ev('lifecycle', ab, { event: 'completed' }),
      [notification(ab, 'langgraph:tools:a/tools:b', 'completed', null)],
    ],
    [
      ev('tools', a, { event: 'tool-finished', tool_call_id: 'call-1', output: 'report one' }),
      [toolResult(null, 'call-1', 'report one')],
    ],
    [ev('lifecycle', a, { event: 'completed' }), [notification(a, 'call-1', 'completed', 'report one')]],
    [ev('lifecycle', ['tools:zz'], { event: 'completed' }), []],
    [ev('lifecycle', a, { event: 'running' }), []],
    [
      ev('lifecycle', [], { event: 'completed' }),
      [at(iso(T0), { type: 'result', subtype: 'success', is_error: false, result: null })],
    ],
  ];
  steps.forEach(([event, expected], n) => assert.deepEqual(mapper.map(event), expected, `step ${n + 1}`));
  assert.deepEqual(mapper.end(), []);
  assert.deepEqual(warnings, []);
});

test('LangGraph: failures and interruptions carry their ' +
  'reasons; held calls show when nothing spawned', () => {
  const mapper = new LangGraphMapper({ spawnTools: ['delegate'] });
  const a = ['tools:a'];
  const b = ['tools:b'];
  const c = ['tools:c'];
  const steps: [Json, Json[]][] = [
    [
      ev('tools', [], {
        event: 'tool-started',
        tool_call_id: 'd1',
        tool_name: 'delegate',
        input: '{"description":"x"}',
      }),
      [],
    ],
    [ev('tools', a, { event: 'tool-started', tool_call_id: 'd1', tool_name: 'delegate' }), []],
    [
      spawnTask(a, 'alpha'),
      [
        toolUse(null, null, 'd1', 'Agent', { description: 'x', subagent_type: 'alpha' }),
        started(a, 'd1', 'alpha', 'x', 1),
        promptLine('d1', 'x'),
      ],
    ],
    // A failed spawning call fails its subagent at once; its own end is then told no more.
    [
      ev('tools', a, { event: 'tool-error', tool_call_id: 'd1', message: 'alpha broke' }),
      [notification(a, 'd1', 'failed', 'alpha broke'), toolResult(null, 'd1', 'alpha broke', true)],
    ],
    [ev('lifecycle', a, { event: 'failed', error: 'ignored' }), []],
    [ev('lifecycle', a, { event: 'completed' }), []],
    // A subagent found by the task id its task input names.
    [task([], { id: 'sent-task', input: { tool_call: { id: 'd2' } } }), []],
    [ev('tools', [], { event: 'tool-started', tool_call_id: 'd2', tool_name: 'delegate', input: 5 }), []],
    [
      spawnTask(['tools:sent-task'], 'beta', { messages: [] }),
      [
        toolUse(null, null, 'd2', 'Agent', { input: 5, subagent_type: 'beta' }),
        started(['tools:sent-task'], 'd2', 'beta', null, 1),
      ],
    ],
    // A pause, not an end.
    [ev('lifecycle', ['tools:sent-task'], { event: 'interrupted' }), []],
    [
      spawnTask(b, 'gamma'),
      [
        toolUse(null, null, 'langgraph:tools:b', 'Agent', { subagent_type: 'gamma' }),
        started(b, 'langgraph:tools:b', 'gamma', null, 1),
      ],
    ],
    [
      ev('lifecycle', b, { event: 'failed', error: { message: 'gamma says' } }),
      [notification(b, 'langgraph:tools:b', 'failed', 'gamma says')],
    ],
    [
      spawnTask(c, 'delta'),
      [
        toolUse(null, null, 'langgraph:tools:c', 'Agent', { subagent_type: 'delta' }),
        started(c, 'langgraph:tools:c', 'delta', null, 1),
      ],
    ],
    [ev('lifecycle', c, { event: 'failed' }), [notification(c, 'langgraph:tools:c', 'failed', null)]],
    // A task below a namespace that is no subagent, and a namespace with no agent name, start nothing.
    [spawnTask(['tools:q', 'tools:r'], 'orphan'), []],
    [spawnTask(['tools:n'], undefined), []],
    [spawnTask(['tools:n'], 'late'), []],
    [task(['tools:e'], { metadata: { lc_agent_name: '' } }), []],
    [
      ev('tools', [], { event: 'tool-started', tool_call_id: 'd3', tool_name: 'delegate', input: { p: 1 } }),
      [],
    ],
    [ev('tools', [], { event: 'tool-started', tool_call_id: 'd4', tool_name: 'delegate' }), []],
    [
      ev('tools', [], { event: 'tool-finished', tool_call_id: 'd3', output: { content: 'refused' } }),
      [toolUse(null, null, 'd3', 'delegate', { p: 1 }), toolResult(null, 'd3', 'refused')],
    ],
    [
      ev('tools', [], { event: 'tool-finished', tool_call_id: 'd3', output: 'again' }),
      [toolResult(null, 'd3', 'again')],
    ],
    [
      ev('lifecycle', [], { event: 'failed', error: { message: 'the run died' } }, T0 + 1),
      [
        toolUse(null, null, 'd4', 'delegate', {}, iso(T0 + 1)),
        at(iso(T0 + 1), {
          type: 'system',
          subtype: 'task_notification',
          tool_use_id: 'langgraph:tools:c',
          status: 'failed',
          summary: 'the run died',
        }),
        // Calls the failure cut short end with its error, as Deep Agents reports them.
        toolResult(null, 'd2', 'the run died', true, iso(T0 + 1)),
        toolResult(null, 'd4', 'the run died', true, iso(T0 + 1)),
        at(iso(T0 + 1), {
          type: 'result',
          subtype: 'error',
          is_error: true,
          result: null,
          errors: ['the run died'],
        }),
      ],
    ],
    [
      ev('lifecycle', [], { event: 'failed' }),
      [at(iso(T0), { type: 'result', subtype: 'error', is_error: true, result: null })],
    ],
    [ev('lifecycle', [], { event: 'other' }), []],
  ];
  steps.forEach(([event, expected], n) => assert.deepEqual(mapper.map(event), expected, `step ${n + 1}`));
  assert.deepEqual(LANGGRAPH_DEFAULTS.spawnTools, ['task']);
  assert.ok(Object.isFrozen(LANGGRAPH_DEFAULTS) && Object.isFrozen(LANGGRAPH_DEFAULTS.spawnTools));
});

test('LangGraph: messages join their blocks; tool messages and unknown streams are left out', () => {
  const mapper = new LangGraphMapper();
  const a = ['tools:a'];
  const msg = (ns: string[], data: Json, ts: unknown = T0) => ev('messages', ns, data, ts);
  const assistant = (
    channel: string | null,
    id: string | null,
    content: Json[],
    usage?: Json,
    ts: string | undefined = iso(T0),
  ) =>
    at(ts, {
      type: 'assistant',
      message: { id, type: 'message', role: 'assistant', content, ...(usage ? { usage } : {}) },
      parent_tool_use_id: channel,
    });
  const steps: [Json, Json[]][] = [
    [
      spawnTask(a, 'sub'),
      [
        toolUse(null, null, 'langgraph:tools:a', 'Agent', { subagent_type: 'sub' }),
        started(a, 'langgraph:tools:a', 'sub', null, 1),
      ],
    ],
    [msg([], { event: 'message-start', run_id: 'r1', id: 'm1', usage: { input_tokens: 1 } }), []],
    [msg([], { event: 'content-block-start', run_id: 'r1', index: 0, content: { type: 'reasoning' } }), []],
    [
      msg([], {
        event: 'content-block-delta',
        run_id: 'r1',
        index: 0,
        delta: { type: 'reasoning-delta', reasoning: 'a' },
      }),
      [],
    ],
    [
      msg([], {
        event: 'content-block-delta',
        run_id: 'r1',
        index: 0,
        delta: { type: 'reasoning-delta', reasoning: 'b' },
      }),
      [],
    ],
    [msg([], { event: 'content-block-start', run_id: 'r1', index: 1, content: { type: 'text' } }), []],
    [
      msg([], {
        event: 'content-block-delta',
        run_id: 'r1',
        index: 1,
        delta: { type: 'text-delta', text: 'hel' },
      }),
      [],
    ],
    [
      msg([], {
        event: 'content-block-delta',
        run_id: 'r1',
        index: 1,
        delta: { type: 'text-delta', text: 'lo' },
      }),
      [],
    ],
    [
      msg([], {
        event: 'content-block-delta',
        run_id: 'r1',
        index: 1,
        delta: { type: 'reasoning-delta', text: 'x' },
      }),
      [],
    ],
    [
      msg([], {
        event: 'content-block-delta',
        run_id: 'r1',
        index: 1,
        delta: { type: 'text-delta', text: 5 },
      }),
      [],
    ],
    [
      msg([], {
        event: 'content-block-delta',
        run_id: 'r1',
        index: 0,
        delta: { type: 'reasoning-delta', reasoning: 5 },
      }),
      [],
    ],
    [
      msg([], {
        event: 'content-block-delta',
        run_id: 'r1',
        index: 5,
        delta: { type: 'text-delta', text: 'x' },
      }),
      [],
    ],
    [msg([], { event: 'content-block-delta', run_id: 'r1', delta: { type: 'text-delta', text: 'x' } }), []],
    [
      msg([], {
        event: 'content-block-start',
        run_id: 'r1',
        index: 2,
        content: { type: 'text', text: 'second' },
      }),
      [],
    ],
    [msg([], { event: 'content-block-start', run_id: 'r1', index: 3, content: 'x' }), []],
    [msg([], { event: 'content-block-start', run_id: 'r1', index: 4, content: { type: 'image' } }), []],
    [
      msg([], {
        event: 'message-finish',
        run_id: 'r1',
        usage: {
          input_tokens: 3,
          output_tokens: 4,
          input_token_details: { cache_read: 1, cache_creation: 2 },
        },
      }),
      [
        assistant(
          null,
          'm1',
          [
            { type: 'thinking', thinking: 'ab' },
            { type: 'text', text: 'hello' },
            { type: 'text', text: 'second' },
          ],
          { input_tokens: 3, output_tokens: 4, cache_read_input_tokens: 1, cache_creation_input_tokens: 2 },
        ),
      ],
    ],
    [msg([], { event: 'message-finish', run_id: 'r1' }), []],
    // A tool's message is its result, already shown: its events are skipped until it finishes.
    [msg([], { event: 'message-start', run_id: 'r2', role: 'tool' }), []],
    [
      msg([], { event: 'content-block-start', run_id: 'r2', index: 0, content: { type: 'text', text: 't' } }),
      [],
    ],
    [msg([], { event: 'message-finish', run_id: 'r2' }), []],
    [msg([], { event: 'message-start', run_id: 'r2', id: 'm2b' }), []],
    [
      msg([], {
        event: 'content-block-finish',
        run_id: 'r2',
        index: 0,
        content: { type: 'text', text: 'whole' },
      }),
      [],
    ],
    [msg([], { event: 'content-block-finish', run_id: 'r2', index: 1, content: 'x' }), []],
    [
      msg([], { event: 'content-block-finish', run_id: 'r2', content: { type: 'text', text: 'no index' } }),
      [],
    ],
    [
      msg([], { event: 'message-finish', run_id: 'r2' }, 'none'),
      [untimed(assistant(null, 'm2b', [{ type: 'text', text: 'whole' }]))],
    ],
    // Keyed by id when there is no run id, by namespace when neither; in a subagent, on its channel.
    [msg(['tools:a', 'model'], { event: 'message-start', id: 'm3' }), []],
    [
      msg(['tools:a', 'model'], {
        event: 'content-block-finish',
        id: 'm3',
        index: 0,
        content: { type: 'reasoning' },
      }),
      [],
    ],
    [
      msg(['tools:a', 'model'], { event: 'message-finish', id: 'm3', usage: 'none' }),
      [assistant('langgraph:tools:a', 'm3', [{ type: 'thinking', thinking: '' }])],
    ],
    [msg(['tools:a', 'model'], { event: 'message-start' }), []],
    [
      msg(['tools:a', 'model'], {
        event: 'content-block-finish',
        index: 0,
        content: { type: 'text', text: 'sub words' },
      }),
      [],
    ],
    [
      msg(['tools:a', 'model'], { event: 'message-finish' }),
      [assistant('langgraph:tools:a', null, [{ type: 'text', text: 'sub words' }])],
    ],
    [msg([], { event: 'content-block-start', run_id: 'nope', index: 0, content: { type: 'text' } }), []],
    [msg([], { event: 'message-finish', run_id: 'nope' }), []],
    [msg([], { event: 'message-start', run_id: 'r4', id: 'm4' }), []],
    [
      msg([], {
        event: 'content-block-finish',
        run_id: 'r4',
        index: 0,
        content: { type: 'text', text: 'last' },
      }),
      [],
    ],
    [
      msg([], {
        event: 'content-block-finish',
        run_id: 'r4',
        index: 1,
        content: { type: 'text', text: 'words' },
      }),
      [],
    ],
    [
      msg([], { event: 'message-finish', run_id: 'r4' }),
      [
        assistant(null, 'm4', [
          { type: 'text', text: 'last' },
          { type: 'text', text: 'words' },
        ]),
      ],
    ],
    [
      ev('lifecycle', a, { event: 'completed' }),
      [notification(a, 'langgraph:tools:a', 'completed', 'sub words')],
    ],
    [msg([], { event: 'message-start', run_id: 'r5', id: 'm5', usage: { output_tokens: 9 } }, T0 + 5), []],
    [
      ev('lifecycle', [], { event: 'completed' }),
      [at(iso(T0), { type: 'result', subtype: 'success', is_error: false, result: 'last\nwords' })],
    ],
  ];
  steps.forEach(([event, expected], n) => assert.deepEqual(mapper.map(event), expected, `step ${n + 1}`));
  // A message never finished is shown at the end, at the last time the stream gave.
  assert.deepEqual(mapper.end(), [assistant(null, 'm5', [], { output_tokens: 9 }, iso(T0))]);
  assert.deepEqual(mapper.end(), []);
});

test('LangGraph: times a Date cannot hold are dropped with a warning; odd events map to nothing', () => {
  const warnings: [string, string][] = [];
  const mapper = new LangGraphMapper({ onWarning: (code, message) => warnings.push([code, message]) });
  const init = (ts: number | string | undefined) => mapper.map(ev('lifecycle', [], { event: 'running' }, ts));
  assert.deepEqual(init(8.64e15), [
    at(iso(8.64e15), { type: 'system', subtype: 'init', producer: 'langgraph', graph_name: null }),
  ]);
  assert.equal(init(-8.64e15)[0].timestamp, iso(-8.64e15));
  assert.equal(warnings.length, 0);
  assert.equal('timestamp' in init(8.64e15 + 1)[0], false);
  assert.equal('timestamp' in init(-1e20)[0], false);
  assert.deepEqual(
    warnings.map(([code]) => code),
    ['TIMESTAMP_OUT_OF_RANGE', 'TIMESTAMP_OUT_OF_RANGE'],
  );
  assert.equal(
    warnings[1][1],
    "an event's timestamp -100000000000000000000 is not a date; it was kept without one",
  );
  assert.equal(warnings[0][1].includes(String(8.64e15 + 1)), true);
  const long = -1.2345678901234567e-300 * -1e300 * 1e25;
  init(long);
  assert.equal(warnings[2][1].split(' ')[3], String(long).slice(0, 40));
  assert.equal('timestamp' in init('1000')[0], false);
  assert.equal('timestamp' in init(Infinity)[0], false);
  assert.equal(warnings.length, 3, 'a time that is no number warns of nothing');
  assert.deepEqual(new LangGraphMapper().map(ev('lifecycle', [], { event: 'running' }, 1e20)).length, 1);
  assert.deepEqual(mapper.map({ method: 'lifecycle' } as Json), []);
  assert.deepEqual(mapper.map(ev('unknown', [], {})), []);
  assert.deepEqual(mapper.map(ev('lifecycle', [], 'no data')), []);
  // Segments that are not text are left out of a namespace.
  assert.deepEqual(mapper.map(ev('lifecycle', [7, null], { event: 'running' })).length, 1);
});

test('LangGraph helpers: protocol events, message fields, content text, tool output, usage', () => {
  assert.equal(isProtocolEvent({ method: 'm', params: { namespace: [] } }), true);
  assert.equal(isProtocolEvent({ method: 1, params: { namespace: [] } }), false);
  assert.equal(isProtocolEvent({ method: 'm', params: { namespace: 'x' } }), false);
  assert.equal(isProtocolEvent({ method: 'm', params: 'x' }), false);
  assert.equal(isProtocolEvent('x'), false);

  assert.deepEqual(messageFields({ lc: 1, kwargs: { a: 1 } }), { a: 1 });
  assert.deepEqual(messageFields({ lc: 2, kwargs: { a: 1 } }), { lc: 2, kwargs: { a: 1 } });
  assert.deepEqual(messageFields({ lc: 1, kwargs: 'x' }), { lc: 1, kwargs: 'x' });
  assert.deepEqual(messageFields('x'), {});

  assert.equal(contentText('t'), 't');
  assert.equal(contentText(['a', { text: 'b' }, { text: 3 }, 5, { type: 'image' }]), 'a\nb');
  assert.equal(contentText({ text: 'x' }), '');

  assert.equal(toolOutputText('s', 'c'), 's');
  assert.equal(toolOutputText(undefined, 'c'), '');
  assert.equal(toolOutputText(null, 'c'), 'null');
  assert.equal(toolOutputText(5, 'c'), '5');
  const reply = (id: string, content: unknown) => ({ lc: 1, kwargs: { tool_call_id: id, content } });
  assert.equal(
    toolOutputText({ update: { messages: [reply('o', 'other'), reply('c', 'mine')] } }, 'c'),
    'mine',
  );
  assert.equal(
    toolOutputText({ lc: 1, kwargs: { update: { messages: [reply('c', ['x', 'y'])] } } }, 'c'),
    'x\ny',
  );
  assert.equal(
    toolOutputText({ update: { messages: [reply('o', 'other')] } }, 'c'),
    JSON.stringify({ update: { messages: [reply('o', 'other')] } }),
  );
  assert.equal(toolOutputText({ update: { messages: 'x' }, content: 'own' }, 'c'), 'own');
  assert.equal(toolOutputText({ lc: 1, kwargs: { content: 'kw' } }, 'c'), 'kw');
  assert.equal(toolOutputText({ a: 1 }, 'c'), '{"a":1}');

  assert.equal(claudeUsage('x'), null);
  assert.equal(claudeUsage({}), null);
  assert.equal(claudeUsage({ input_tokens: NaN, output_tokens: '1', input_token_details: 'x' }), null);
  assert.deepEqual(claudeUsage({ input_tokens: 0 }), { input_tokens: 0 });
  assert.deepEqual(claudeUsage({ output_tokens: 2, input_token_details: { cache_creation: 3 } }), {
    output_tokens: 2,
    cache_creation_input_tokens: 3,
  });
  assert.deepEqual(claudeUsage({ input_token_details: { cache_read: Infinity, cache_creation: 1 } }), {
    cache_creation_input_tokens: 1,
  });
});

test('LangGraph: a task input names the call a later ' +
  'subagent runs for; a later task without one keeps it', () => {
  const mapper = new LangGraphMapper();
  assert.deepEqual(mapper.map(task([], { id: 'T', input: { tool_call: { id: 'd5' } } })), []);
  assert.deepEqual(mapper.map(task([], { id: 'T', input: {} })), []);
  assert.deepEqual(mapper.map(task([], { input: { tool_call: { id: 'd6' } } })), []);
  assert.deepEqual(mapper.map(spawnTask(['tools:T'], 'named')), [
    toolUse(null, null, 'd5', 'Agent', { subagent_type: 'named' }),
    started(['tools:T'], 'd5', 'named', null, 1),
  ]);
});

test('LangGraph: prompts from live and serialised ' +
  'messages; usage and last words kept across messages', () => {
  const mapper = new LangGraphMapper();
  const live = { _getType: () => 'human', content: 'live prompt' };
  const aiLast = {
    messages: [
      { type: 'human', content: 'asked' },
      { type: 'ai', content: 'answered' },
    ],
  };
  assert.deepEqual(
    mapper.map(spawnTask(['tools:a'], 'a', { messages: [live] }))[2],
    promptLine('langgraph:tools:a', 'live prompt'),
  );
  assert.deepEqual(
    mapper.map(spawnTask(['tools:b'], 'b', aiLast))[2],
    promptLine('langgraph:tools:b', 'asked'),
  );
  const msg = (data: Json) => ev('messages', [], { run_id: 'r', ...data });
  mapper.map(msg({ event: 'message-start', id: 'm1', usage: { input_tokens: 4 } }));
  mapper.map(msg({ event: 'content-block-finish', index: 0, content: { type: 'text', text: 'said' } }));
  const finished = mapper.map(msg({ event: 'message-finish' }));
  assert.deepEqual((finished[0] as Json).message.usage, { input_tokens: 4 });
  mapper.map(msg({ event: 'message-start', id: 'm2' }));
  mapper.map(
    msg({ event: 'content-block-finish', index: 0, content: { type: 'reasoning', reasoning: 'r' } }),
  );
  mapper.map(msg({ event: 'content-block-finish', index: 1, content: { type: 'image', text: 'not text' } }));
  assert.deepEqual((mapper.map(msg({ event: 'message-finish' }))[0] as Json).message.content, [
    { type: 'thinking', thinking: 'r' },
  ]);
  // The last words are the run's result; a failed run has none, only its error.
  assert.deepEqual(mapper.map(ev('lifecycle', [], { event: 'completed' })), [
    at(iso(T0), { type: 'result', subtype: 'success', is_error: false, result: 'said' }),
  ]);
  assert.deepEqual(mapper.map(ev('lifecycle', [], { event: 'failed', error: 'plain words' })), [
    at(iso(T0), { type: 'result', subtype: 'error', is_error: true, result: null, errors: ['plain words'] }),
  ]);
});
