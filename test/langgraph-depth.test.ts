import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { LangGraphMapper } from '../src/adapters/langgraph.js';
import { BIN, tmpDir } from './helpers/helpers.js';

const DEEP = 40_000;
const segments = Array.from({ length: DEEP }, (_, i) => `tools:${i.toString(36)}`);
const at = (levels: number) => segments.slice(0, levels);

const event = (method: string, namespace: string[], data: object) => ({
  type: 'event',
  method,
  params: { namespace, timestamp: 1_700_000_000_000, data },
});
const spawnAt = (levels: number, name: string) =>
  event('tasks', at(levels), {
    id: `t${levels}`,
    name: 'agent',
    input: {},
    metadata: { lc_agent_name: name },
  });

/**
 * Subagents at namespace levels 1, 2 and 3; a tool call and a would-be subagent 40,000 levels
 * down inside the third; a subagent at level 4. Each event's namespace is what LangGraph sends.
 */
const EVENTS = [
  event('lifecycle', [], { event: 'running' }),
  spawnAt(1, 'one'),
  spawnAt(2, 'two'),
  spawnAt(3, 'three'),
  event('tools', at(DEEP), { event: 'tool-started', tool_call_id: 'deep-call', tool_name: 'ls', input: {} }),
  event('tools', at(DEEP), { event: 'tool-finished', tool_call_id: 'deep-call', output: 'listed' }),
  spawnAt(DEEP, 'too-deep'),
  spawnAt(4, 'four'),
  event('lifecycle', at(4), { event: 'completed' }),
  event('lifecycle', [], { event: 'completed' }),
];
const channelId = (levels: number) => `langgraph:${at(levels).join('/')}`;

test('a namespace 40,000 levels deep maps to its nearest enclosing subagent, depth by depth', () => {
  const mapper = new LangGraphMapper();
  const lines = EVENTS.flatMap((e) => mapper.map(JSON.parse(JSON.stringify(e)))).concat(mapper.end());
  const started = lines.filter((l) => l.subtype === 'task_started');
  assert.deepEqual(
    started.map((l) => [l.subagent_type, l.tool_use_id, l.spawn_depth]),
    [1, 2, 3, 4].map((levels) => [['one', 'two', 'three', 'four'][levels - 1], channelId(levels), levels]),
  );
  // Each Agent call is on its parent's channel.
  const agentCalls = lines.filter((l: any) => l.message?.content?.[0]?.name === 'Agent');
  assert.deepEqual(
    agentCalls.map((l) => l.parent_tool_use_id),
    [null, channelId(1), channelId(2), channelId(3)],
  );
  const deepCall = lines.find((l: any) => l.message?.content?.[0]?.id === 'deep-call');
  assert.equal(deepCall?.parent_tool_use_id, channelId(3));
  const deepResult = lines.find((l: any) => l.message?.content?.[0]?.tool_use_id === 'deep-call');
  assert.equal(deepResult?.parent_tool_use_id, channelId(3));
  const finished = lines.filter((l) => l.subtype === 'task_notification');
  assert.deepEqual(
    finished.map((l) => [l.tool_use_id, l.status]),
    [[channelId(4), 'completed']],
  );
});

test('the CLI routes a 40,000-level namespace to its subagent, with each channel at its depth', () => {
  const out = join(tmpDir(), 'out');
  const input = EVENTS.map((e) => JSON.stringify(e)).join('\n') + '\n';
  const r = spawnSync(process.execPath, [BIN, '--out', out, '-q', '--stdout', 'none'], {
    input,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const channels = index.channels as Array<{
    id: string | null;
    depth: number;
    agent: string;
    log: string;
    counts: { tool_use: number; tool_result: number };
  }>;
  assert.deepEqual(
    channels.map((c) => [c.agent, c.depth]),
    [
      [null, 0],
      ['one', 1],
      ['two', 2],
      ['three', 3],
      ['four', 4],
    ],
  );
  // The deep call and its result are the third subagent's, shown in its transcript (beside
  // the Agent call that starts the fourth).
  const third = channels.find((c) => c.agent === 'three')!;
  assert.deepEqual([third.counts.tool_use, third.counts.tool_result], [2, 1]);
  assert.match(readFileSync(join(out, third.log), 'utf8'), /^\[tool\] ls /m);
  // The events themselves are in main's file as they came.
  assert.equal(readFileSync(join(out, 'main.jsonl'), 'utf8'), input);
});

test('a LangGraph subagent that failed stays failed when its task call finishes afterwards', () => {
  const spawnCall = { id: 'call-1', name: 'task', args: { description: 'check', subagent_type: 'worker' } };
  const events = [
    event('lifecycle', [], { event: 'running' }),
    event('tasks', [], {
      id: 'root-1',
      result: { messages: [{ type: 'ai', id: 'm1', tool_calls: [spawnCall] }] },
    }),
    event('tools', ['tools:w'], {
      event: 'tool-started',
      tool_call_id: 'call-1',
      tool_name: 'task',
      input: {},
    }),
    event('tasks', ['tools:w'], { id: 'w-1', input: {}, metadata: { lc_agent_name: 'worker' } }),
    event('lifecycle', ['tools:w'], { event: 'failed', error: { message: 'the worker broke' } }),
    event('tools', ['tools:w'], { event: 'tool-finished', tool_call_id: 'call-1', output: 'late words' }),
    event('lifecycle', [], { event: 'completed' }),
  ];
  const out = join(tmpDir(), 'out');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '-q', '--stdout', 'none'], {
    input: events.map((e) => JSON.stringify(e)).join('\n') + '\n',
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const worker = index.channels.find((c: { id: string | null }) => c.id === 'call-1');
  assert.deepEqual([worker?.status, worker?.summary], ['failed', 'the worker broke']);
});
