import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { CodexMapper, itemResult } from '../src/adapters/codex.js';
import {
  copilotVersionOf,
  CopilotMapper,
  MAX_AGENTS_REMEMBERED,
  toolResult,
} from '../src/adapters/copilot.js';
import { GEMINI_DEFAULTS, GeminiMapper } from '../src/adapters/gemini.js';
import { OpencodeMapper, taskReport } from '../src/adapters/opencode.js';
import { shellResultText, usageOf, type StreamMapper } from '../src/adapters/stream-lines.js';
import { runChain } from '../src/chain/chain.js';
import { open } from '../src/index.js';
import { AgentEvents, createInputFormat, detectProducer } from '../src/chain/stages/input-format.js';
import type { RecordBatch } from '../src/model/record.js';
import { Session } from '../src/model/session.js';
import type { JsonObject } from '../src/model/message.js';
import { ChannelTree } from '../src/model/tree.js';
import { BIN, chunked, FIXTURES, ROOT, splitEvery, tmpDir } from './helpers/helpers.js';
import { codeBlocks, section } from './helpers/docs.js';
import { codexFanOut } from './helpers/codex-fan-out.js';

const DIR = join(FIXTURES, 'other-agents');
const RECORDINGS = readdirSync(DIR)
  .filter((f) => f.endsWith('.jsonl'))
  .sort();
const PRODUCERS = ['copilot', 'codex', 'gemini', 'opencode'] as const;
type Producer = (typeof PRODUCERS)[number];

const producerOf = (file: string) => file.slice(0, file.indexOf('-')) as Producer;

/** The input's lines as byte strings (latin1 keeps every byte), blank lines left out. */
function inputLines(bytes: Buffer): string[] {
  return bytes
    .toString('latin1')
    .split('\n')
    .filter((l) => l.length > 0);
}

const events = (bytes: Buffer): any[] =>
  inputLines(bytes).map((l) => JSON.parse(Buffer.from(l, 'latin1').toString('utf8')));

interface Expected {
  /** Subagent channels by id: parent, status. */
  children: Map<string, { parent: string | null; status: string }>;
  mainStatus: string;
  /** tool calls and results per channel ('' = main). */
  toolUses: Map<string, number>;
  toolResults: Map<string, number>;
  /** Token counts per channel ('' = main): the field names index.json uses. */
  usage: Map<string, Record<string, number>>;
  /** Channels whose transcript is the spawn and the result only. */
  spawnOnly: Set<string>;
}

/** Codex `agents_states` statuses of a thread that ended without completing. */
const FAILED_STATES = ['errored', 'failed', 'shutdown', 'not_found', 'interrupted'];

const bump = (m: Map<string, number>, k: string, by = 1) => m.set(k, (m.get(k) ?? 0) + by);
const addUsage = (m: Map<string, Record<string, number>>, k: string, name: string, n: number) => {
  const u = m.get(k) ?? {};
  u[name] = (u[name] ?? 0) + n;
  m.set(k, u);
};

function blank(): Expected {
  return {
    children: new Map(),
    mainStatus: 'running',
    toolUses: new Map(),
    toolResults: new Map(),
    usage: new Map(),
    spawnOnly: new Set(),
  };
}

/**
 * Each producer read from its own events, by their documented fields, without the mappers:
 * which agents there are, who started them, how they ended, their tool calls and tokens.
 */
const READERS: Record<Producer, (evs: any[]) => Expected> = {
  copilot(evs) {
    const e = blank();
    const callChannel = new Map<string, string>();
    for (const ev of evs) {
      if (ev.ephemeral === true) continue;
      const ch = ev.data?.parentToolCallId ?? '';
      if (ev.type === 'assistant.message') {
        for (const r of ev.data.toolRequests ?? []) {
          callChannel.set(r.toolCallId, ch);
          bump(e.toolUses, ch);
        }
      }
      if (ev.type === 'tool.execution_complete') bump(e.toolResults, ch);
      if (ev.type === 'subagent.started') {
        const parent = callChannel.get(ev.data.toolCallId) ?? '';
        e.children.set(ev.data.toolCallId, { parent: parent === '' ? null : parent, status: 'running' });
      }
      if (ev.type === 'subagent.completed' || ev.type === 'subagent.failed') {
        const done = ev.type === 'subagent.completed';
        e.children.get(ev.data.toolCallId)!.status = done ? 'completed' : 'failed';
        addUsage(e.usage, ev.data.toolCallId, 'total_tokens', ev.data.totalTokens);
      }
      if (ev.type === 'result') e.mainStatus = ev.exitCode === 0 ? 'completed' : 'failed';
    }
    return e;
  },
  codex(evs) {
    const e = blank();
    const seenItems = new Set<string>();
    for (const ev of evs) {
      if (ev.type === 'turn.completed' || ev.type === 'turn.failed') {
        e.mainStatus = ev.type === 'turn.completed' ? 'completed' : 'failed';
        // A turn failed by an API error states no usage.
        if (ev.usage) {
          addUsage(e.usage, '', 'input_tokens', ev.usage.input_tokens);
          addUsage(e.usage, '', 'output_tokens', ev.usage.output_tokens);
        }
      }
      const item = ev.item;
      if (!item || ev.type !== 'item.completed') continue;
      if (item.type === 'collab_tool_call') {
        if (item.tool === 'spawn_agent') {
          for (const t of item.receiver_thread_ids) {
            e.children.set(t, { parent: null, status: 'running' });
            e.spawnOnly.add(t);
            bump(e.toolUses, '');
          }
        } else {
          bump(e.toolUses, '');
          bump(e.toolResults, '');
        }
        for (const [t, s] of Object.entries<any>(item.agents_states ?? {})) {
          const child = e.children.get(t);
          if (!child || child.status !== 'running') continue;
          if (s.status === 'completed') child.status = 'completed';
          else if (FAILED_STATES.includes(s.status)) child.status = 'failed';
          if (child.status !== 'running') bump(e.toolResults, '');
        }
      } else if (['command_execution', 'file_change', 'mcp_tool_call', 'web_search'].includes(item.type)) {
        if (!seenItems.has(item.id)) bump(e.toolUses, '');
        seenItems.add(item.id);
        bump(e.toolResults, '');
      }
    }
    return e;
  },
  gemini(evs) {
    const e = blank();
    for (const ev of evs) {
      if (ev.type === 'tool_use') {
        bump(e.toolUses, '');
        if (ev.tool_name === 'invoke_agent') {
          e.children.set(ev.tool_id, { parent: null, status: 'running' });
          e.spawnOnly.add(ev.tool_id);
        }
      }
      if (ev.type === 'tool_result') {
        bump(e.toolResults, '');
        const child = e.children.get(ev.tool_id);
        if (child) child.status = ev.status === 'success' ? 'completed' : 'failed';
      }
      if (ev.type === 'result') {
        e.mainStatus = ev.status === 'success' ? 'completed' : 'failed';
        addUsage(e.usage, '', 'input_tokens', ev.stats.input_tokens);
        addUsage(e.usage, '', 'output_tokens', ev.stats.output_tokens);
      }
    }
    return e;
  },
  opencode(evs) {
    const e = blank();
    let failed = false;
    for (const ev of evs) {
      if (ev.type === 'error') failed = true;
      if (ev.type === 'tool_use') {
        bump(e.toolUses, '');
        const status = ev.part.state.status;
        if (status === 'completed' || status === 'error') bump(e.toolResults, '');
        if (ev.part.tool === 'task') {
          const ended = status === 'completed' ? 'completed' : 'failed';
          e.children.set(ev.part.callID, { parent: null, status: ended });
          e.spawnOnly.add(ev.part.callID);
        }
      }
      if (ev.type === 'step_finish') {
        addUsage(e.usage, '', 'input_tokens', ev.part.tokens.input);
        addUsage(e.usage, '', 'output_tokens', ev.part.tokens.output);
      }
    }
    e.mainStatus = failed ? 'failed' : 'completed';
    return e;
  },
};

function runCli(file: string, extra: string[] = []): { out: string; index: any } {
  const out = join(tmpDir(), 'out');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', ...extra, file], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return { out, index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) };
}

/** Every line of every `.jsonl` and of the quarantine, as byte strings. */
function writtenLines(out: string, index: any): { all: string[]; byChannel: Map<string | null, string[]> } {
  const all: string[] = [];
  const byChannel = new Map<string | null, string[]>();
  for (const ch of index.channels) {
    if (ch.jsonl === null) continue;
    const lines = inputLines(readFileSync(join(out, ch.jsonl)));
    byChannel.set(ch.id, lines);
    all.push(...lines);
  }
  if (index.quarantine !== null) all.push(...inputLines(readFileSync(join(out, index.quarantine))));
  return { all, byChannel };
}

for (const name of RECORDINGS) {
  test(`${name}: index.json agrees with an independent reading; every line kept once`, () => {
    const file = join(DIR, name);
    const bytes = readFileSync(file);
    const producer = producerOf(name);
    const expected = READERS[producer](events(bytes));
    const { out, index } = runCli(file);

    assert.equal(index.producer, producer);
    assert.equal(index.channels.length, 1 + expected.children.size, 'one channel per agent');
    const main = index.channels[0];
    assert.equal(main.id, null);
    assert.equal(main.status, expected.mainStatus, 'main status');
    for (const ch of index.channels) {
      const key = ch.id ?? '';
      if (ch.id !== null) {
        const want = expected.children.get(ch.id);
        assert.ok(want, `channel ${ch.id} is an agent of the stream`);
        assert.equal(ch.parent, want.parent, `${ch.id} parent`);
        assert.equal(ch.status, want.status, `${ch.id} status`);
        assert.equal(ch.orphan, false);
      }
      assert.equal(ch.counts.tool_use, expected.toolUses.get(key) ?? 0, `${key || 'main'} tool calls`);
      const results = expected.toolResults.get(key) ?? 0;
      assert.equal(ch.counts.tool_result, results, `${key || 'main'} tool results`);
      const want = expected.usage.get(key) ?? {};
      for (const [k, n] of Object.entries(want)) assert.equal(ch.usage[k], n, `${key || 'main'} ${k}`);
      if (Object.keys(want).length === 0) assert.equal(ch.usage.input_tokens ?? 0, 0);
      const transcript = expected.spawnOnly.has(key) ? 'spawn-and-result' : 'stream';
      assert.equal(ch.transcript, transcript, `${key} transcript`);
    }

    // Nothing lost, nothing doubled: the files hold the input's lines, byte for byte, once.
    const input = inputLines(bytes);
    const { all, byChannel } = writtenLines(out, index);
    assert.equal(all.length, input.length, 'lines over all .jsonl files and the quarantine');
    assert.deepEqual([...all].sort(), [...input].sort(), 'the same lines, byte for byte');
    assert.equal(index.input.lines, input.length);

    if (producer === 'copilot') {
      // The run's result is the main agent's last message.
      const mainMessages = events(bytes).filter(
        (ev) => ev.type === 'assistant.message' && !ev.data.parentToolCallId,
      );
      const last = mainMessages[mainMessages.length - 1].data.content;
      assert.ok(readFileSync(join(out, 'main.log'), 'utf8').includes(`[run] success — ${last}\n`));
      // A subagent's own events are in its file, all of them (deltas and progress included),
      // and nothing else.
      for (const ch of index.channels.filter((c: any) => c.id !== null)) {
        const started = events(bytes).find(
          (ev) => ev.type === 'subagent.started' && ev.data.toolCallId === ch.id,
        );
        const its = input.filter((l) => JSON.parse(l).agentId === started.agentId);
        assert.deepEqual(byChannel.get(ch.id), its, `${ch.id} holds its agent's events`);
      }
    }
  });
}

test('auto: each recording is recognised from its first line; a forced format gives the same index', () => {
  for (const name of RECORDINGS) {
    const first = JSON.parse(readFileSync(join(DIR, name), 'utf8').split('\n')[0]);
    assert.equal(detectProducer(first), producerOf(name), name);
  }
  const claude = JSON.parse(readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8').split('\n')[0]);
  assert.equal(detectProducer(claude), 'claude');
  for (const name of ['copilot-shell.jsonl', 'gemini-spawn.jsonl']) {
    const auto = runCli(join(DIR, name)).index;
    const forced = runCli(join(DIR, name), ['--input-format', producerOf(name)]).index;
    assert.deepEqual(forced, auto);
  }
});

test('the version: Copilot states it in its skills path; ' +
  '--require-version outside the range is exit 4', () => {
  const file = join(DIR, 'copilot-shell.jsonl');
  assert.equal(runCli(file, ['--require-version', '>=1.0.0 <2']).index.producer_version, '1.0.102');
  const args = [BIN, '--out', join(tmpDir(), 'o'), '-q', '--require-version', '>=1.1', file];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
  assert.equal(r.status, 4, r.stderr);
  assert.match(r.stderr, /GitHub Copilot CLI 1\.0\.102 does not satisfy --require-version >=1\.1/);
  assert.match(r.stderr, /\[ERR_VERSION\]\n$/);
  // A stray line after the one stating it: the version stays the run's, and is checked.
  const lines = inputLines(readFileSync(file));
  const strayed = join(tmpDir(), 'strayed.jsonl');
  writeFileSync(strayed, [lines[0], STRAY.claude, ...lines.slice(1)].join('\n') + '\n');
  assert.equal(runCli(strayed, ['--require-version', '>=1.0.0 <2']).index.producer_version, '1.0.102');
  const again = [BIN, '--out', join(tmpDir(), 'o'), '-q', '--require-version', '>=1.1', strayed];
  const refused = spawnSync(process.execPath, again, { encoding: 'utf8' });
  assert.equal(refused.status, 4, refused.stderr);
  // Codex states none: a required version cannot be checked.
  const codex = spawnSync(
    process.execPath,
    [BIN, '--out', join(tmpDir(), 'o'), '-q', '--require-version', '>=0.1', join(DIR, 'codex-shell.jsonl')],
    { encoding: 'utf8' },
  );
  assert.equal(codex.status, 4);
  assert.match(codex.stderr, /version is unknown/);
});

test('chunk boundaries: the library chain writes the same files and index.json for any chunks', async () => {
  for (const name of ['copilot-spawn.jsonl', 'gemini-spawn.jsonl', 'codex-spawn.jsonl']) {
    const bytes = readFileSync(join(DIR, name));
    let first: { index: string; files: string[] } | null = null;
    for (const size of [1, 7, 64, 1000, 4096, bytes.length]) {
      if (size === 1 && bytes.length > 5000) continue;
      const out = join(tmpDir(), 'out');
      await runChain(chunked(splitEvery(bytes, size)), {
        stages: [{ use: 'line-parser' }, { use: 'input-format' }, { use: 'channel-router' }],
        sinks: [{ use: 'files', out }],
      });
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      const files = index.channels.map((c: any) => readFileSync(join(out, c.jsonl), 'latin1'));
      const seen = { index: JSON.stringify(index), files };
      if (first === null) {
        first = seen;
        assert.equal(index.producer, producerOf(name));
        assert.equal(files.join('').split('\n').filter(Boolean).length, inputLines(bytes).length);
      } else {
        assert.deepEqual(seen, first, `${name} in chunks of ${size}`);
      }
    }
  }
});

/** A mapper's lines for these events through the tree, as the chain routes them. */
function routed(mapper: StreamMapper, evs: JsonObject[]): ChannelTree {
  const tree = new ChannelTree();
  for (const ev of evs) for (const line of mapper.map(ev).lines) tree.route(line);
  for (const line of mapper.end()) tree.route(line);
  return tree;
}

test('Copilot: subagents nest at any depth by their task call; agentId routes the rest', () => {
  const mapper = new CopilotMapper();
  const task = (id: string, parent: string | null) => ({
    type: 'assistant.message',
    data: {
      messageId: `m-${id}`,
      content: '',
      toolRequests: [
        { toolCallId: id, name: 'task', arguments: { name: id, agent_type: 'general-purpose', prompt: 'p' } },
      ],
      ...(parent ? { parentToolCallId: parent } : {}),
    },
  });
  const started = (id: string, agentId: string) => ({
    type: 'subagent.started',
    agentId,
    data: { toolCallId: id, agentName: 'x' },
  });
  const evs: JsonObject[] = [
    task('call_A', null),
    started('call_A', 'agent-a'),
    task('call_B', 'call_A'),
    started('call_B', 'agent-b'),
    task('call_C', 'call_B'),
    started('call_C', 'agent-c'),
    { type: 'assistant.message_delta', ephemeral: true, agentId: 'agent-c', data: { deltaContent: 'hi' } },
    { type: 'subagent.failed', agentId: 'agent-c', data: { toolCallId: 'call_C', error: 'boom' } },
  ];
  assert.equal(mapper.map(evs[0]).channel, null);
  for (const ev of evs.slice(1, 6)) mapper.map(ev);
  assert.equal(mapper.map(evs[6]).channel, 'call_C', 'an ephemeral event finds its channel by agentId');
  const tree = routed(new CopilotMapper(), evs);
  const c = tree.get('call_C')!;
  assert.equal(tree.get('call_B')!.parent, 'call_A');
  assert.equal(c.parent, 'call_B');
  assert.equal(c.depth, 3);
  assert.equal(c.status, 'failed');
  assert.equal(c.summary, 'boom');
});

test("Copilot: an agent's late output keeps its channel after it completed; the latest agents only", () => {
  const mapper = new CopilotMapper();
  const output = (agentId: string) => ({
    type: 'tool.shell_output',
    ephemeral: true,
    agentId,
    data: { toolCallId: 'cmd', output: 'tick' },
  });
  const start = (i: number) => ({
    type: 'subagent.started',
    agentId: `agent-${i}`,
    data: { toolCallId: `call_${i}` },
  });
  mapper.map(start(0));
  mapper.map({ type: 'subagent.completed', agentId: 'agent-0', data: { toolCallId: 'call_0' } });
  assert.equal(mapper.map(output('agent-0')).channel, 'call_0');
  for (let i = 1; i <= MAX_AGENTS_REMEMBERED; i++) mapper.map(start(i));
  assert.equal(mapper.map(output('agent-0')).channel, null, 'the oldest agent is forgotten');
  assert.equal(mapper.map(output('agent-1')).channel, 'call_1');
  const huge = 'x'.repeat(10_000);
  mapper.map({ type: 'subagent.started', agentId: huge, data: { toolCallId: 'call_huge' } });
  assert.equal(mapper.map(output(huge)).channel, null, 'an id no CLI makes is not held');
});

test('Copilot pure functions: version from the skills path; a shell result with its exit code', () => {
  const skills = (path: string) => ({ type: 'session.skills_loaded', data: { skills: [{ path }] } });
  const installed = '/h/.cache/copilot/pkg/linux-x64/1.0.102/builtin/x/SKILL.md';
  assert.equal(copilotVersionOf(skills(installed)), '1.0.102');
  assert.equal(copilotVersionOf(skills('/h/skills/x/SKILL.md')), null);
  assert.equal(copilotVersionOf({ type: 'user.message', data: {} }), null);
  const shell = (exitCode: number, content: string) => ({
    success: exitCode === 0,
    shellExecution: { exitCode },
    result: { content },
  });
  assert.deepEqual(toolResult('c1', shell(2, 'no such file')), {
    type: 'tool_result',
    tool_use_id: 'c1',
    content: 'no such file\n[exit code 2]',
    is_error: true,
  });
  const ok = toolResult('c2', shell(0, 'x\n<shellId: 0 completed with exit code 0>'));
  assert.equal(ok.content, 'x\n<shellId: 0 completed with exit code 0>');
  assert.equal(ok.is_error, undefined);
});

test('Codex: a spawned thread has its prompt, ends with its last message or fails by its state', () => {
  const spawn = (thread: string) => ({
    type: 'item.completed',
    item: {
      id: `s-${thread}`,
      type: 'collab_tool_call',
      tool: 'spawn_agent',
      receiver_thread_ids: [thread],
      prompt: `do ${thread}`,
      agents_states: {},
      status: 'completed',
    },
  });
  const wait = {
    type: 'item.completed',
    item: {
      id: 'w',
      type: 'collab_tool_call',
      tool: 'wait',
      receiver_thread_ids: ['t1', 't2'],
      agents_states: {
        t1: { status: 'completed', message: 'done 1' },
        t2: { status: 'errored', message: 'broke' },
      },
      status: 'completed',
    },
  };
  const mapper = new CodexMapper();
  const mapped = mapper.map(spawn('t1'));
  assert.equal(mapped.lines[mapped.own].type, 'assistant', 'the spawn call stands for the event');
  const inChild = mapped.lines.filter((l) => l.parent_tool_use_id === 't1');
  assert.deepEqual(
    inChild.map((l: any) => l.message.content[0].text),
    ['do t1'],
  );
  const tree = routed(new CodexMapper(), [spawn('t1'), spawn('t2'), wait]);
  assert.equal(tree.get('t1')!.status, 'completed');
  assert.equal(tree.get('t1')!.summary, 'done 1');
  assert.equal(tree.get('t2')!.status, 'failed');
  assert.equal(tree.get('t2')!.summary, 'broke');
  assert.equal(mapper.transcriptOf('t1'), 'spawn-and-result');
  assert.equal(mapper.transcriptOf(null), 'stream');
  const item = { type: 'command_execution', aggregated_output: 'oops\n', exit_code: 1, status: 'failed' };
  assert.deepEqual(itemResult('i', item), {
    type: 'tool_result',
    tool_use_id: 'i',
    content: 'oops\n[exit code 1]',
    is_error: true,
  });
});

test('Gemini: pieces become one message when the next event comes; a failed invoke_agent fails', () => {
  const mapper = new GeminiMapper();
  const piece = (content: string) => ({
    type: 'message',
    timestamp: 't',
    role: 'assistant',
    content,
    delta: true,
  });
  const invoke = (parameters: JsonObject) => ({
    type: 'tool_use',
    timestamp: 't',
    tool_name: 'invoke_agent',
    tool_id: 'a1',
    parameters,
  });
  // A piece is held: no line stands for it (the input-format stage routes its bytes).
  assert.deepEqual(mapper.map(piece('Hel')), { channel: null, lines: [], own: -1 });
  assert.equal(mapper.map(piece('lo')).own, -1);
  const next = mapper.map(invoke({ agent_name: 'g', prompt: 'go' }));
  const texts = next.lines
    .filter((l: any) => l.type === 'assistant' && l.message.content[0]?.type === 'text')
    .map((l: any) => l.message.content[0].text);
  assert.deepEqual(texts, ['Hello'], 'one message, the pieces joined');
  assert.equal((next.lines[next.own] as any).message.content[0].name, 'Task');
  assert.deepEqual(
    next.lines.filter((l) => l.parent_tool_use_id === 'a1').map((l: any) => l.message.content[0].text),
    ['go'],
    "the child's channel opens with its prompt",
  );
  mapper.map(piece('tail'));
  assert.equal((mapper.end()[0] as any).message.content[0].text, 'tail', 'pieces left at the end are shown');
  const tree = routed(new GeminiMapper(), [
    invoke({ prompt: 'go' }),
    {
      type: 'tool_result',
      timestamp: 't',
      tool_id: 'a1',
      status: 'error',
      error: { message: 'agent failed' },
    },
  ]);
  assert.equal(tree.get('a1')!.status, 'failed');
  assert.equal(tree.get('a1')!.summary, 'agent failed');
});

/** A Gemini assistant `delta` piece, its other fields as the recordings have them. */
const geminiPiece = (content: string) => ({
  type: 'message',
  timestamp: '2026-12-01T14:21:55.846Z',
  role: 'assistant',
  content,
  delta: true,
});
const shownText = (line: JsonObject) => (line as any).message.content[0].text as string;
const CUT_MARK = / \[…(\d+) chars cut; every piece is in the \.jsonl…\]$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

test('Gemini: a message joined from many large pieces holds its first part only, the cut marked', () => {
  const warnings: string[] = [];
  const mapper = new GeminiMapper({ onWarning: (code) => warnings.push(code) });
  const max = GEMINI_DEFAULTS.maxJoinedChars;
  const pieces = Array.from({ length: 12 }, (_, i) => String.fromCharCode(97 + i).repeat(1 << 20));
  for (const piece of pieces) {
    assert.deepEqual(mapper.map(geminiPiece(piece)).lines, []);
    // What is held (a private field) stays within the limit however many pieces come.
    assert.ok((mapper as any).open.text.length <= max);
  }
  const [line] = mapper.end();
  const shown = shownText(line);
  assert.ok(shown.length <= max, `${shown.length} chars shown`);
  const mark = CUT_MARK.exec(shown);
  assert.ok(mark, 'the cut is marked');
  const kept = shown.slice(0, mark.index);
  const whole = pieces.join('');
  assert.ok(kept.length > max - 100 && whole.startsWith(kept), 'the first part is kept');
  assert.equal(Number(mark[1]), whole.length - kept.length);
  assert.deepEqual(warnings, ['JOINED_TEXT_CUT']);
  // The next message starts anew, whole.
  mapper.map(geminiPiece('next'));
  assert.equal(shownText(mapper.end()[0]), 'next');
});

test('Gemini: the joined-text limit counts the marker, never splits a pair, and spares what fits', () => {
  const joined = (pieces: string[]) => {
    const warnings: string[] = [];
    const mapper = new GeminiMapper({ maxJoinedChars: 100, onWarning: (code) => warnings.push(code) });
    for (const piece of pieces) mapper.map(geminiPiece(piece));
    return { text: shownText(mapper.end()[0]), warnings };
  };
  assert.deepEqual(joined(['x'.repeat(60), 'y'.repeat(40)]), {
    text: 'x'.repeat(60) + 'y'.repeat(40),
    warnings: [],
  });
  const over = joined(['x'.repeat(60), 'y'.repeat(41)]);
  assert.ok(over.text.length <= 100 && /^x+ \[…\d+ chars cut/.test(over.text));
  assert.equal(Number(CUT_MARK.exec(over.text)![1]) + over.text.indexOf(' […'), 101);
  assert.deepEqual(over.warnings, ['JOINED_TEXT_CUT']);
  // A pair the cut would split goes whole into the cut, whether one piece holds it or two.
  const room = over.text.indexOf(' […');
  for (const pieces of [
    ['x'.repeat(room - 1) + '😀'.repeat(50)],
    ['x'.repeat(room - 1) + '\uD83D', '\uDE00' + 'y'.repeat(100)],
  ]) {
    const { text } = joined(pieces);
    assert.ok(!LONE_SURROGATE.test(text), JSON.stringify(text.slice(0, room + 1)));
    assert.equal(text.indexOf(' […'), room - 1);
    assert.equal(Number(CUT_MARK.exec(text)![1]) + room - 1, pieces.join('').length);
  }
});

test('Gemini: pieces past the limit through the chain: lines kept byte for byte; a warning', async () => {
  const recorded = inputLines(readFileSync(join(DIR, 'gemini-shell.jsonl')));
  const piece = JSON.stringify(geminiPiece('a'.repeat(1 << 20)));
  const count = Math.ceil(GEMINI_DEFAULTS.maxJoinedChars / (1 << 20)) + 2;
  const input = [recorded[0], ...Array.from({ length: count }, () => piece), recorded.at(-1)!];
  const out = join(tmpDir(), 'out');
  const run = await runChain(chunked([Buffer.from(input.join('\n') + '\n')]), {
    stages: [{ use: 'line-parser' }, { use: 'input-format' }, { use: 'channel-router' }],
    sinks: [{ use: 'files', out }],
  });
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.producer, 'gemini');
  assert.equal(index.input.lines, input.length);
  assert.deepEqual(writtenLines(out, index).all, input);
  assert.ok(run.warnings.some((w) => w.code === 'JOINED_TEXT_CUT'));
  assert.ok(index.warnings.some((w: { code: string }) => w.code === 'JOINED_TEXT_CUT'));
  const log = readFileSync(join(out, index.channels[0].log), 'utf8');
  assert.ok(log.length < GEMINI_DEFAULTS.maxJoinedChars + 1000, `${log.length} chars in the .log`);
  assert.match(log, / \[…\d+ chars cut; every piece is in the \.jsonl…\]/);
});

test("opencode: a task's report is its result; step tokens are usage; the run's result is made", () => {
  const output = '<task id="s" state="completed">\n<task_result>\nAll good.\n</task_result>\n</task>';
  assert.equal(taskReport(output), 'All good.');
  assert.equal(taskReport('plain'), null);
  const step = (input: number) => ({
    type: 'step_finish',
    timestamp: 1,
    sessionID: 's',
    part: {
      messageID: `m${input}`,
      tokens: { input, output: 2, reasoning: 0, cache: { read: 1, write: 0 } },
    },
  });
  const failedTask = {
    type: 'tool_use',
    timestamp: 1,
    sessionID: 's',
    part: {
      tool: 'task',
      callID: 'c1',
      state: { status: 'error', input: { prompt: 'p', subagent_type: 'general' }, error: 'it broke' },
    },
  };
  const apiError = { name: 'APIError', data: { message: 'down' } };
  const error = { type: 'error', timestamp: 1, sessionID: 's', error: apiError };
  const tree = routed(new OpencodeMapper(), [step(10), failedTask, step(5), error]);
  const { input_tokens: input, cache_read_input_tokens: read } = tree.main.usage;
  assert.deepEqual({ input, read }, { input: 15, read: 2 });
  assert.equal(tree.get('c1')!.status, 'failed');
  assert.equal(tree.main.status, 'failed', 'an error event fails the run');
});

test('shared pieces: usage in Claude Code names, a shell result with its exit code', () => {
  const names = { input_tokens: 'a', cache_read_input_tokens: 'b.c', output_tokens: 'd' };
  const usage = usageOf({ a: 3, b: { c: 4 }, d: 'x' }, names);
  assert.deepEqual(usage, { input_tokens: 3, cache_read_input_tokens: 4 });
  assert.equal(usageOf({}, { input_tokens: 'a' }), null);
  assert.equal(shellResultText('out', 3), 'out\n[exit code 3]');
  assert.equal(shellResultText('', 0), '[exit code 0]');
  assert.equal(shellResultText('x\n', undefined), 'x\n');
});

test('the report of a mapped run shows each channel its own transcript, read back through the mapper', () => {
  const { out } = runCli(join(DIR, 'copilot-spawn.jsonl'), ['--html']);
  assert.ok(existsSync(join(out, 'report.html')));
  const html = readFileSync(join(out, 'report.html'), 'utf8');
  // Written by each leaf in its own channel only: the main transcript does not hold it.
  for (const leaf of ['Leaf 0: checking.', 'Leaf 1: checking.']) {
    assert.equal(html.split(leaf).length - 1, 1, leaf);
  }
});

test("the documented commands for other coding agents run on the recordings they name", () => {
  const [block] = codeBlocks(section('docs/producers.md', '## Other coding agents'), 'sh');
  const commands = block.split('\n').filter((l) => l.startsWith('subtee '));
  assert.ok(commands.length >= 2);
  for (const command of commands) {
    const args = command.split(/\s+/).slice(1);
    const at = args.indexOf('--out');
    const out = join(tmpDir(), args[at + 1]);
    args[at + 1] = out;
    const r = spawnSync(process.execPath, [BIN, '-q', ...args], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(r.status, 0, `${command}: ${r.stderr}`);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.producer, producerOf(args[args.length - 1].split('/').pop()!), command);
  }
});

test("a Copilot run's projection: late readers get each subagent's messages and tool calls", async () => {
  const file = join(DIR, 'copilot-spawn.jsonl');
  const evs = events(readFileSync(file));
  // Independent: per task call, the assistant texts and the tool calls its messages made.
  const want = new Map<string, { texts: string[]; calls: string[] }>();
  for (const ev of evs) {
    const ch = ev.data?.parentToolCallId;
    if (ev.type !== 'assistant.message' || !ch) continue;
    const w = want.get(ch) ?? { texts: [], calls: [] };
    if (ev.data.content) w.texts.push(ev.data.content);
    for (const r of ev.data.toolRequests) w.calls.push(r.toolCallId);
    want.set(ch, w);
  }
  const run = open(file, { out: join(tmpDir(), 'out') });
  const index = await run.done;
  assert.equal(index.producer, 'copilot');
  const seen = new Map<string, { texts: string[]; calls: string[] }>();
  for await (const handle of run.allSubagents) {
    const texts: string[] = [];
    for await (const message of handle.messages)
      if (message.role === 'assistant') {
        const text = await message.text;
        if (text) texts.push(text);
      }
    const calls: string[] = [];
    for await (const call of handle.toolCalls) calls.push(call.id);
    seen.set(handle.id, { texts, calls });
    const output = await handle.output;
    assert.equal(output.status, 'completed');
    const completed = evs.find((ev) => ev.type === 'subagent.completed' && ev.data.toolCallId === handle.id);
    assert.equal(output.tokens, completed.data.totalTokens, 'the only token count Copilot gives a subagent');
  }
  assert.deepEqual(seen, want);
});

test('lines too long to hold (spooled) land once, in ' +
  'the file of the agent whose events they are', async () => {
  // The recording with a subagent's events made longer than the parser holds: their `data`
  // is padded, so only their top-level fields (`agentId` among them) are read.
  const source = inputLines(readFileSync(join(DIR, 'copilot-spawn.jsonl')));
  const pad = `"data":{"pad":"${'x'.repeat(2000)}",`;
  const padded = (l: string, i: number) => l.includes('"agentId"') && i % 3 === 0;
  const input = source.map((l, i) => (padded(l, i) ? l.replace('"data":{', pad) : l));
  const bytes = Buffer.from(input.join('\n') + '\n', 'latin1');
  const out = join(tmpDir(), 'out');
  // Chunks smaller than a long line: the parser cannot hold one whole, and spools it.
  const run = await runChain(chunked(splitEvery(bytes, 700)), {
    stages: [{ use: 'line-parser', maxLineBytes: 1024 }, { use: 'input-format' }, { use: 'channel-router' }],
    sinks: [{ use: 'files', out }],
  });
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.ok(run.warnings.some((w) => w.code === 'LINE_TOO_LONG'));
  const { all, byChannel } = writtenLines(out, index);
  assert.deepEqual([...all].sort(), [...input].sort());
  for (const ev of events(bytes).filter((e) => e.type === 'subagent.started')) {
    const its = input.filter((l) => JSON.parse(l).agentId === ev.agentId);
    assert.ok(its.filter((l) => l.length > 1024).length >= 3, 'some of its lines are spooled');
    assert.deepEqual(byChannel.get(ev.data.toolCallId), its);
  }
});

test('an event no mapped line stands for keeps its bytes: a placeholder carries them to its channel', () => {
  const events = new AgentEvents(new Session(), 'codex');
  const derived = { type: 'assistant', message: { id: 'm', content: [] }, parent_tool_use_id: null };
  Object.defineProperty(events, 'mapper', {
    value: { map: () => ({ channel: 'toolu_x', lines: [derived], own: -1 }), end: () => [], version: null },
  });
  const raw = Buffer.from('{"type":"item.started","id":"a"}');
  const out: RecordBatch = [];
  events.push({ kind: 'line', lineNo: 1, raw, value: JSON.parse(raw.toString()) }, out);
  assert.equal(out.length, 2);
  const [first, placeholder] = out;
  assert.ok(first.kind === 'line' && first.derived, 'the derived line first');
  assert.ok(placeholder.kind === 'line' && !placeholder.derived, 'then the input line, once');
  assert.equal(placeholder.raw, raw);
  assert.equal(placeholder.value.parent_tool_use_id, 'toolu_x');
});

/** What the input-format stage makes of each input line: the records it hands on, by line number. */
async function mappedPerLine(format: 'codex' | 'langgraph', values: object[]) {
  const session = new Session();
  const stage = createInputFormat({ format, session });
  const raws = values.map((v) => Buffer.from(JSON.stringify(v)));
  const byLine = new Map<number, JsonObject[]>();
  stage.on('data', (batch: RecordBatch) => {
    for (const rec of batch)
      if (rec.kind === 'line') byLine.set(rec.lineNo, [...(byLine.get(rec.lineNo) ?? []), rec.value]);
  });
  const ended = once(stage, 'end');
  raws.forEach((raw, i) => stage.write([{ kind: 'line', lineNo: i + 1, raw, value: JSON.parse(`${raw}`) }]));
  stage.end();
  await ended;
  return { raws, byLine };
}

const jsonChars = (values: JsonObject[]) => values.reduce((n, v) => n + JSON.stringify(v).length, 0);
const countOf = (text: string, part: string) => text.split(part).length - 1;

/** `subagents` LangGraph subagents that fail saying nothing, then the run fails with an error of `chars`. */
function langgraphFanOut(subagents: number, chars: number): object[] {
  const ev = (method: string, namespace: string[], data: object) => ({ method, params: { namespace, data } });
  const out: object[] = [ev('lifecycle', [], { event: 'running' })];
  for (let i = 0; i < subagents; i++) {
    out.push(ev('tasks', [`worker:${i}`], { id: `t${i}`, metadata: { lc_agent_name: 'worker' } }));
    out.push(ev('lifecycle', [`worker:${i}`], { event: 'failed' }));
  }
  out.push(ev('lifecycle', [], { event: 'failed', error: 'E'.repeat(chars) }));
  return out;
}

test('an event naming a long text on many agents maps to lines bounded by its size, not copies', async () => {
  const KiB = 1024;
  for (const [agents, chars] of [
    [1, 300 * KiB],
    [3, 2 * KiB],
    [40, 100 * KiB],
    [400, 256 * KiB],
    [2000, 4 * KiB],
  ]) {
    for (const [format, values, text] of [
      ['codex', codexFanOut(agents, chars), 'do the part you are given. '],
      ['langgraph', langgraphFanOut(agents, chars), 'EEEEEEEEEEEEEEEEEEEE'],
    ] as const) {
      const name = `${format}: ${agents} agents, ${chars} characters`;
      const { raws, byLine } = await mappedPerLine(format, values);
      const last = raws.length;
      const lines = byLine.get(last)!;
      const shown = JSON.stringify(lines);
      // Bounded: the event's own size twice (whole, then once more), a floor, and a little per agent.
      const bound = 2 * raws[last - 1].length + 256 * KiB + agents * 2 * KiB;
      assert.ok(jsonChars(lines) <= bound, `${name}: ${jsonChars(lines)} characters mapped, bound ${bound}`);
      // Nothing lost: each agent still gets its call or its end, and the text is there whole once.
      const whole = countOf(shown, text.repeat(Math.floor(chars / text.length / 2)).slice(0, chars - 60));
      assert.ok(whole >= 1, `${name}: the text is shown whole`);
      if (format === 'codex') {
        assert.equal(countOf(shown, '"name":"Task"'), agents, `${name}: a Task call per thread`);
        const prompts = lines.filter((l) => l.type === 'user' && l.parent_tool_use_id !== null);
        assert.equal(prompts.length, agents, `${name}: a prompt line per thread`);
      } else {
        const ends = lines.filter((l) => l.subtype === 'task_notification' && l.status === 'failed');
        assert.equal(ends.length, agents, `${name}: each subagent's end`);
        for (const end of ends) assert.match(String(end.summary), /^E{200}/, `${name}: the error's head`);
      }
      // Small fan-outs are untouched: every copy whole.
      if (agents * chars <= 256 * KiB) assert.equal(countOf(shown, 'shown whole above'), 0, name);
    }
  }
});

/** A stream through parser, input format and router: what `auto` decided, the channels, the warnings. */
async function detected(input: string, format = 'auto') {
  const run = await runChain(chunked(splitEvery(Buffer.from(input), 4096)), {
    stages: [{ use: 'line-parser' }, { use: 'input-format', format }, { use: 'channel-router' }],
    sinks: [],
  });
  return {
    producer: run.producer,
    channels: run.tree.channels().length,
    codes: run.warnings.map((w) => w.code).filter((c) => c.startsWith('INPUT_FORMAT')),
  };
}

/** A line each producer's shape fits and no other's, as a stray line before a stream. */
const STRAY: Record<string, string> = {
  gemini: '{"type":"error","timestamp":"2026-12-01T10:00:00.000Z","message":"npm warn deprecated x@1"}',
  codex: '{"type":"turn.started"}',
  copilot: '{"type":"session.warning","data":{"message":"npm warn"}}',
  claude: '{"type":"system","subtype":"notice","message":"npm warn"}',
  // A LangGraph protocol event that maps to no line (graph state).
  langgraph: '{"method":"updates","params":{"namespace":[],"data":{"x":1}}}',
};

test('--input-format auto is not misled by one stray ' +
  'line: decided from more than one, the change warned', async () => {
  const streams: Array<[string, string]> = [
    ...['nested-depth-3', 'failing-beside-healthy', 'background-fanout-12'].map(
      (f) => ['claude', readFileSync(join(FIXTURES, `${f}.jsonl`), 'utf8')] as [string, string],
    ),
    ...['codex', 'copilot', 'gemini', 'opencode'].flatMap((p) =>
      ['two-subagents', 'spawn-2', 'nested-2', 'failing-subagent']
        .filter((f) => existsSync(join(DIR, p, `${f}.jsonl`)))
        .slice(0, 2)
        .map((f) => [p, readFileSync(join(DIR, p, `${f}.jsonl`), 'utf8')] as [string, string]),
    ),
    ['langgraph', langgraphFanOut(3, 10).map((v) => JSON.stringify(v)).join('\n') + '\n'],
  ];
  for (const [producer, stream] of streams) {
    const clean = await detected(stream);
    assert.deepEqual([clean.producer, clean.codes], [producer, []], `${producer}: read as it is, no warning`);
    const given = await detected(stream, producer);
    assert.equal(given.channels, clean.channels, `${producer}: auto reads it as --input-format does`);
    for (const [stray, line] of Object.entries(STRAY)) {
      if (stray === producer) continue;
      for (const strays of [1, 2, 5]) {
        const name = `${producer} after ${strays} stray ${stray} line(s)`;
        const got = await detected(`${line}\n`.repeat(strays) + stream);
        assert.equal(got.producer, producer, name);
        assert.equal(got.channels, clean.channels, `${name}: every subagent`);
        assert.deepEqual(got.codes, ['INPUT_FORMAT_CHANGED'], name);
      }
    }
  }
});

test('a stream that stops fitting the producer chosen is ' +
  'told once (INPUT_FORMAT_MISMATCH), given or decided', async () => {
  const codex = readFileSync(join(DIR, 'codex', 'two-subagents.jsonl'), 'utf8');
  const claude = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8');
  for (const [name, input, format, producer] of [
    ['claude, then codex lines', claude + codex, 'auto', 'claude'],
    ['codex, then claude lines', codex + claude, 'auto', 'codex'],
    ['claude given, codex stream', codex, 'claude', 'claude'],
    ['gemini given, claude stream', claude + claude, 'gemini', 'gemini'],
  ] as const) {
    const got = await detected(input, format);
    assert.equal(got.producer, producer, name);
    assert.deepEqual(got.codes, ['INPUT_FORMAT_MISMATCH'], name);
  }
});

/** A stream through the built-in chain into an output folder: its index.json and warnings. */
async function intoFolder(bytes: Buffer, maxLineBytes?: number) {
  const out = join(tmpDir(), 'out');
  const run = await runChain(chunked(splitEvery(bytes, 4096)), {
    stages: [
      { use: 'line-parser', ...(maxLineBytes === undefined ? {} : { maxLineBytes }) },
      { use: 'input-format' },
      { use: 'channel-router' },
    ],
    sinks: [{ use: 'files', out }],
  });
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  return { out, index, warnings: run.warnings };
}

/** A channel of index.json as a subagent's figures: all but its paths and times. */
const figures = (ch: any) => {
  const { log, jsonl, first_seen, last_seen, ...rest } = ch;
  for (const k of Object.keys(rest)) if (k.endsWith('_ms') || k.endsWith('_at')) delete rest[k];
  return rest;
};

test('a stray line among the first costs that line: the mapper goes on where it left off, ' +
  'the tree, transcripts and version as without it, each change told', async () => {
  const streams: Array<[string, string]> = [
    ['codex', join(DIR, 'codex', 'two-subagents.jsonl')],
    ['codex', join(DIR, 'codex', 'nested-subagent.jsonl')],
    ['copilot', join(DIR, 'copilot', 'spawn-2.jsonl')],
    ['copilot', join(DIR, 'copilot', 'nested-2.jsonl')],
    ['gemini', join(DIR, 'gemini', 'two-subagents.jsonl')],
    ['opencode', join(DIR, 'opencode', 'nested-2.jsonl')],
    ['claude', join(FIXTURES, 'nested-depth-3.jsonl')],
  ];
  for (const [producer, file] of streams) {
    const lines = inputLines(readFileSync(file));
    const clean = await intoFolder(readFileSync(file));
    assert.equal(clean.index.producer, producer, file);
    for (const [stray, line] of Object.entries(STRAY)) {
      if (stray === producer) continue;
      for (const at of [2, 4, 7, 8]) {
        const name = `${producer} (${file.slice(DIR.length)}) with a stray ${stray} line ${at}`;
        const input = [...lines.slice(0, at - 1), line, ...lines.slice(at - 1)];
        const got = await intoFolder(Buffer.from(input.join('\n') + '\n', 'latin1'));
        const { index } = got;
        assert.equal(index.producer, producer, name);
        assert.equal(index.producer_version, clean.index.producer_version, `${name}: the version`);
        assert.equal(index.channels.length, clean.index.channels.length, `${name}: every channel`);
        // Every subagent exactly as without the stray line; main as well, but for its lines.
        const subagents = (i: any) => i.channels.slice(1).map(figures);
        assert.deepEqual(subagents(index), subagents(clean.index), name);
        const [main, cleanMain] = [index.channels[0], clean.index.channels[0]];
        for (const k of ['status', 'summary', 'usage', 'transcript'])
          assert.deepEqual(main[k], cleanMain[k], `${name}: main ${k}`);
        // Its calls and their results (a spawn's result among them) as without the stray line.
        for (const k of ['tool_use', 'tool_result'])
          assert.equal(main.counts[k], cleanMain.counts[k], `${name}: main ${k}`);
        assert.ok(main.lines > cleanMain.lines, `${name}: the stray line is routed to main`);
        // Each input line lands once; the stray one in main's file.
        const { all, byChannel } = writtenLines(got.out, index);
        assert.deepEqual([...all].sort(), [...input].sort(), `${name}: every line kept once`);
        assert.ok(byChannel.get(null)!.includes(line), `${name}: the stray line is in main.jsonl`);
        // Told both ways: read as the stray's producer at its line, as the stream's again after.
        const told = got.warnings.filter((w) => w.code.startsWith('INPUT_FORMAT'));
        assert.deepEqual(told.map((w) => w.code), ['INPUT_FORMAT_CHANGED', 'INPUT_FORMAT_CHANGED'], name);
        assert.match(told[0].message, new RegExp(`^line ${at} fits ${stray}, not ${producer} `), name);
        const back =
          at > lines.length
            ? `^the input ended read as ${stray} from line ${at} \\(1 line\\); ${at - 1} lines were ` +
              `read as ${producer}: the run is ${producer}'s`
            : `^line ${at + 1} fits ${producer}, not ${stray} \\(read as ${stray} from line ${at}\\): ` +
              `read as ${producer} again from there on, going on from line ${at - 1}`;
        assert.match(told[1].message, new RegExp(back), name);
      }
    }
  }
});

test("a stray first line of another producer's shape, a LangGraph event's among them, costs only " +
  'itself: kept once in main.jsonl, every subagent as without it, the change told', async () => {
  const streams: Array<[string, string]> = [
    ['codex', join(DIR, 'codex', 'two-subagents.jsonl')],
    ['copilot', join(DIR, 'copilot', 'spawn-2.jsonl')],
    ['gemini', join(DIR, 'gemini', 'two-subagents.jsonl')],
    ['opencode', join(DIR, 'opencode', 'nested-2.jsonl')],
    ['claude', join(FIXTURES, 'nested-depth-3.jsonl')],
  ];
  for (const [producer, file] of streams) {
    const lines = inputLines(readFileSync(file));
    const clean = await intoFolder(readFileSync(file));
    for (const [stray, line] of Object.entries(STRAY)) {
      if (stray === producer) continue;
      const name = `${producer} (${file.slice(DIR.length)}) after a stray ${stray} line`;
      const input = [line, ...lines];
      const got = await intoFolder(Buffer.from(input.join('\n') + '\n', 'latin1'));
      assert.equal(got.index.producer, producer, name);
      const subagents = (i: any) => i.channels.slice(1).map(figures);
      assert.deepEqual(subagents(got.index), subagents(clean.index), name);
      const { all, byChannel } = writtenLines(got.out, got.index);
      assert.deepEqual([...all].sort(), [...input].sort(), `${name}: every line kept once`);
      assert.equal(byChannel.get(null)![0], line, `${name}: the stray line first in main.jsonl`);
      const told = got.warnings.filter((w) => w.code.startsWith('INPUT_FORMAT'));
      assert.deepEqual(told.map((w) => w.code), ['INPUT_FORMAT_CHANGED'], name);
      assert.match(told[0].message, new RegExp(`^line 2 fits ${producer}, not ${stray} `), name);
    }
  }
});

test("another producer's line while a Codex run's id is pending: the Codex lines that waited go " +
  'on first, in order, and none is lost when the input ends there', async () => {
  const lines = inputLines(readFileSync(join(DIR, 'codex', 'two-subagents.jsonl')));
  for (const input of [[lines[0], STRAY.gemini, ...lines.slice(1)], [lines[0], STRAY.gemini]]) {
    const { out, index } = await intoFolder(Buffer.from(input.join('\n') + '\n', 'latin1'));
    const { all, byChannel } = writtenLines(out, index);
    assert.deepEqual([...all].sort(), [...input].sort(), `${input.length} lines: every line kept once`);
    const main = byChannel.get(null)!;
    assert.deepEqual(main.slice(0, 2), input.slice(0, 2), `${input.length} lines: in their order`);
  }
});

test('a stray line among the first: a late reader still replays main whole', async () => {
  /**
   * The main conversation's texts and tool calls as a reader opened after the run sees them.
   * The lines up to `at` are given first, the rest once the run has routed line `at` (as a live
   * agent's lines come).
   */
  const mainOf = async (input: string[], at: number) => {
    const source = new PassThrough();
    const run = open(source, { out: join(tmpDir(), 'out') });
    source.write(input.slice(0, at).join('\n') + '\n');
    for await (const event of run.events) {
      if (event.lineNo < at) continue;
      source.end(input.slice(at).join('\n') + '\n');
      break;
    }
    await run.done;
    const texts: string[] = [];
    for await (const message of run.messages) texts.push(`${message.role}: ${await message.text}`);
    const calls: string[] = [];
    for await (const call of run.toolCalls) calls.push(`${call.name} ${await call.output}`);
    return { texts, calls };
  };
  for (const [file, strays, places] of [
    [join(DIR, 'codex', 'two-subagents.jsonl'), ['claude', 'gemini'], [2, 7]],
    [join(FIXTURES, 'nested-depth-3.jsonl'), ['codex', 'gemini'], [1, 2, 7]],
  ] as const) {
    const lines = inputLines(readFileSync(file));
    const clean = await mainOf(lines, 7);
    assert.ok(clean.calls.length >= 1 && clean.texts.length >= 1, `${file}: the run has calls and text`);
    for (const stray of strays) {
      for (const at of places) {
        const input = [...lines.slice(0, at - 1), STRAY[stray], ...lines.slice(at - 1)];
        const got = await mainOf(input, at);
        // A stray line another producer's reader shows (Gemini's error) is one message more.
        const shown = got.texts.filter((t) => !t.includes('npm warn'));
        assert.deepEqual({ ...got, texts: shown }, clean, `${file}: a stray ${stray} line ${at}`);
      }
    }
  }
});

test('a stream that keeps changing producer is told each change up to 4, then read as it is: ' +
  'warnings bounded, every line kept', async () => {
  const codex = inputLines(readFileSync(join(DIR, 'codex', 'two-subagents.jsonl')));
  // A Claude line after each Codex line: the choice never settles by itself.
  const input = codex.flatMap((l) => [l, STRAY.claude]);
  const got = await intoFolder(Buffer.from(input.join('\n') + '\n', 'latin1'));
  const told = got.warnings.filter((w) => w.code.startsWith('INPUT_FORMAT'));
  assert.deepEqual(
    told.map((w) => `${w.code} ${/^line (\d+)/.exec(w.message)?.[1]}`),
    [2, 3, 4, 5].map((n) => `INPUT_FORMAT_CHANGED ${n}`).concat('INPUT_FORMAT_MISMATCH 6'),
  );
  assert.match(told[4].message, /the input changed producer 4 times/);
  assert.equal(got.index.producer, 'codex');
  const { all } = writtenLines(got.out, got.index);
  assert.deepEqual([...all].sort(), [...input].sort(), 'every line kept once');
});

test("Codex's top-level errors (real recordings) are shown on main, in its .log and on stdout; " +
  'a turn.failed after one fails the run', () => {
  for (const [name, status] of [
    ['codex-api-error.jsonl', 'failed'],
    ['codex-unreachable.jsonl', 'running'],
  ]) {
    const file = join(DIR, name);
    const errors = events(readFileSync(file))
      .filter((ev) => ev.type === 'error' || ev.item?.type === 'error')
      .map((ev) => `[error] ${ev.message ?? ev.item.message}`);
    assert.ok(errors.length >= 2, `${name}: errors to show`);
    const out = join(tmpDir(), 'out');
    const r = spawnSync(process.execPath, [BIN, '--out', out, '-q', file], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const log = readFileSync(join(out, 'main.log'), 'utf8');
    assert.deepEqual(log.split('\n').filter((l) => l.startsWith('[error] ')), errors, `${name}: main.log`);
    assert.deepEqual(r.stdout.split('\n').filter((l) => l.startsWith('[error] ')), errors, `${name}: stdout`);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.equal(index.channels[0].status, status, name);
    assert.equal(index.channels[0].counts.text, errors.length, `${name}: each error a text`);
  }
});

/** A Copilot event line made longer than `bytes` (its `data` padded), when `pad` says so. */
const paddedPast = (bytes: number, pad: (ev: any) => boolean) => (l: string) =>
  pad(JSON.parse(l)) ? l.replace('"data":{', `"data":{"pad":"${'x'.repeat(bytes)}",`) : l;

/** Whether a Copilot event is (or carries) a spawn: a task call, or a subagent's start or end. */
const carriesSpawn = (ev: any) =>
  ev.type.startsWith('subagent.') ||
  (ev.data.toolRequests ?? []).some((r: any) => r.name === 'task') ||
  ev.data.toolName === 'task';

test('a line too long to hold of a mapped producer is routed once, as a held one: ' +
  "each channel's lines and figures as when held", async () => {
  for (const name of ['copilot/nested-2.jsonl', 'copilot-spawn.jsonl', 'copilot/spawn-2.jsonl']) {
    const input = inputLines(readFileSync(join(DIR, name)));
    const held = await intoFolder(Buffer.from(input.join('\n') + '\n', 'latin1'));
    // Every line of an agent but those of its spawns goes past the limit.
    const padded = input.map(paddedPast(5000, (ev) => ev.agentId !== undefined && !carriesSpawn(ev)));
    const bytes = Buffer.from(padded.join('\n') + '\n', 'latin1');
    const noLimit = await intoFolder(bytes);
    const spooled = await intoFolder(bytes, 4096);
    assert.ok(spooled.warnings.some((w) => w.code === 'LINE_TOO_LONG'), name);
    assert.deepEqual(held.index.channels.length > 1, true, `${name}: subagents`);
    for (const [run, what] of [[held, 'held'], [spooled, 'spooled']] as const) {
      // Their top-level fields route them: the subagents' own events still name their agent.
      assert.deepEqual(
        run.index.channels.map((c: any) => [c.id, c.parent, c.depth, c.status, c.lines]),
        noLimit.index.channels.map((c: any) => [c.id, c.parent, c.depth, c.status, c.lines]),
        `${name}: ${what}`,
      );
    }
    for (const ch of spooled.index.channels)
      assert.equal(
        readFileSync(join(spooled.out, ch.jsonl), 'latin1'),
        readFileSync(join(noLimit.out, ch.jsonl), 'latin1'),
        `${name}: ${ch.jsonl}, byte for byte`,
      );
  }
});

test('a Copilot subagent whose spawn call was too long to hold still nests under its parent ' +
  "(subagent.started's data.parentId), its call shown once", async () => {
  for (const name of ['copilot/nested-2.jsonl', 'copilot-spawn.jsonl']) {
    const input = inputLines(readFileSync(join(DIR, name)));
    const held = await intoFolder(Buffer.from(input.join('\n') + '\n', 'latin1'));
    // Every line but the subagents' starts and ends past the limit: spawn calls among them.
    const padded = input.map(paddedPast(5000, (ev) => !ev.type.startsWith('subagent.')));
    const spooled = await intoFolder(Buffer.from(padded.join('\n') + '\n', 'latin1'), 4096);
    const tree = (run: typeof held) =>
      run.index.channels.map((c: any) => [c.id, c.parent, c.depth, c.orphan, c.agent, c.status]);
    assert.deepEqual(tree(spooled), tree(held), name);
    // Each spawn call once, on its parent's channel: where the start was, a Task call.
    const parentOf = new Map(held.index.channels.map((c: any) => [c.id, c.parent]));
    const starts = events(Buffer.from(input.join('\n'), 'latin1'))
      .filter((e) => e.type === 'subagent.started');
    for (const ch of spooled.index.channels) {
      const spawns = starts.filter((s) => parentOf.get(s.data.toolCallId) === ch.id);
      assert.equal(ch.counts.tool_use, spawns.length, `${name}: ${ch.id ?? 'main'} shows each spawn call`);
    }
  }
});
