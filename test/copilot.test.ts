// The Copilot CLI mapper event by event: each recorded event is fed to the mapper and the lines it
// makes are compared whole with the lines an independent reading of the same event expects.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  COPILOT_DEFAULTS,
  copilotVersionOf,
  createCopilotMapper,
  isCopilotEvent,
} from '../src/adapters/copilot.js';
import type { MappedEvent } from '../src/adapters/stream-lines.js';
import {
  args,
  assistant,
  Expect,
  init,
  isObj,
  type Json,
  num,
  obj,
  OTHER,
  prompt,
  recordings,
  replay,
  result,
  shown,
  str,
  text,
  timed,
  toolResult,
  withExit,
} from './helpers/expected-lines.js';

const errorText = (e: unknown): string | null => (typeof e === 'string' ? str(e) : str(obj(e).message));

/** Copilot's session events read by their documented fields. */
function copilotReader(spawnTools: readonly string[] = ['task']) {
  const agents = new Map<string, string>();
  const announced = new Set<string>();
  /** Spawn calls shown as Task: a subagent whose call was never shown gets it at its start. */
  const spawned = new Set<string>();
  const perCall = new Set<string>();
  /** The model each channel's latest message named: its usage events are priced by it. */
  const models = new Map<string | null, string>();
  let version: string | null = null;
  let started = false;
  let lastText: string | null = null;
  const call = (id: string, name: string, input: Json): Json => {
    announced.add(id);
    if (!spawnTools.includes(name)) return { type: 'tool_use', id, name, input };
    spawned.add(id);
    return {
      type: 'tool_use',
      id,
      name: 'Task',
      input: { ...input, subagent_type: str(input.agent_type) ?? str(input.name), tool: name },
    };
  };
  return {
    version: () => version,
    event(ev: Json): MappedEvent {
      const out = new Expect();
      const data = obj(ev.data);
      const ts = str(ev.timestamp);
      if (ev.type === 'session.skills_loaded' && Array.isArray(data.skills)) {
        for (const skill of data.skills.slice(0, 100)) {
          const m = /\/pkg\/[^/]{1,64}\/(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\/builtin\//.exec(
            obj(skill).path ?? '',
          );
          if (m) {
            version ??= m[1];
            break;
          }
        }
      }
      const agentId = str(ev.agentId);
      let channel: string | null = str(data.parentToolCallId);
      if (channel === null && agentId !== null) {
        channel =
          (String(ev.type).startsWith('subagent.') ? str(data.toolCallId) : null) ??
          agents.get(agentId) ??
          null;
      }
      if (!started) out.add(init('copilot', version, null, null, ts), false);
      started = true;
      if (ev.ephemeral === true) return out.event(channel);
      const id = str(data.toolCallId);
      switch (ev.type) {
        case 'user.message':
          if (str(data.content)) out.add(prompt(channel, data.content, ts));
          break;
        case 'assistant.reasoning':
          out.add(
            assistant(
              channel,
              str(data.reasoningId),
              [{ type: 'thinking', thinking: shown(data.content) }],
              null,
              ts,
            ),
          );
          break;
        case 'assistant.message': {
          const content: Json[] = [];
          if (str(data.reasoningText)) content.push({ type: 'thinking', thinking: data.reasoningText });
          if (str(data.content)) content.push({ type: 'text', text: data.content });
          if (str(data.content) && channel === null) lastText = data.content;
          for (const r of Array.isArray(data.toolRequests) ? data.toolRequests : []) {
            if (isObj(r) && str(r.toolCallId))
              content.push(call(r.toolCallId, str(r.name) ?? 'tool', args(r.arguments)));
          }
          if (str(data.model)) models.set(channel, data.model);
          out.add(assistant(channel, str(data.messageId), content, null, ts, str(data.model)));
          break;
        }
        case 'assistant.usage': {
          const usage: Json = {};
          for (const [ours, theirs] of [
            ['input_tokens', 'inputTokens'],
            ['output_tokens', 'outputTokens'],
            ['cache_read_input_tokens', 'cacheReadTokens'],
            ['cache_creation_input_tokens', 'cacheWriteTokens'],
          ]) {
            if (num(data[theirs]) !== undefined) usage[ours] = data[theirs];
          }
          if (Object.keys(usage).length > 0) {
            if (channel !== null) perCall.add(channel);
            const model = str(data.model) ?? models.get(channel) ?? null;
            out.add(assistant(channel, str(data.apiCallId) ?? str(ev.id), [], usage, ts, model));
          }
          break;
        }
        case 'tool.execution_start':
          if (id && !announced.has(id)) {
            out.add(
              assistant(
                channel,
                null,
                [call(id, str(data.toolName) ?? 'tool', args(data.arguments))],
                null,
                ts,
              ),
            );
          }
          break;
        case 'tool.execution_complete':
          if (id) {
            announced.delete(id);
            const code = num(obj(data.shellExecution).exitCode);
            const output = shown(obj(data.result).content ?? errorText(data.error) ?? '');
            const words =
              code !== undefined && !/exit code -?\d+/.test(output) ? withExit(output, code) : output;
            out.add(
              toolResult(
                id,
                words,
                data.success === false || (code !== undefined && code !== 0),
                ts,
                channel,
              ),
            );
          }
          break;
        case 'subagent.started':
          if (id && agentId) agents.set(agentId, id);
          if (id) {
            // The parent agent, by `data.parentId` (none: main); an unknown one shows no call.
            const parent = data.parentId === undefined ? null : agents.get(str(data.parentId) ?? '');
            if (!spawned.has(id) && parent !== undefined) {
              spawned.add(id);
              announced.add(id);
              const agent = str(data.agentName) ?? str(data.agentType);
              const input = { description: str(data.agentDescription), subagent_type: agent };
              const task = { type: 'tool_use', id, name: 'Task', input };
              out.add(assistant(parent, null, [task], null, ts), false);
            }
            out.add(
              timed(
                {
                  type: 'system',
                  subtype: 'task_started',
                  tool_use_id: id,
                  subagent_type: str(data.agentName) ?? str(data.agentType),
                  description: str(data.agentDescription),
                  parent_tool_use_id: id,
                },
                ts,
              ),
            );
          }
          break;
        case 'subagent.completed':
        case 'subagent.failed': {
          const task = id ?? channel;
          if (!task) break;
          const failed = ev.type === 'subagent.failed';
          if (num(data.totalTokens) !== undefined && !perCall.has(task)) {
            const usage = { total_tokens: data.totalTokens };
            out.add(assistant(task, `copilot-subagent-usage:${task}`, [], usage, ts, str(data.model)));
          }
          models.delete(task);
          out.add(
            timed(
              {
                type: 'system',
                subtype: 'task_notification',
                tool_use_id: task,
                status: failed ? 'failed' : 'completed',
                summary: failed ? errorText(data.error) : null,
                parent_tool_use_id: task,
              },
              ts,
            ),
          );
          perCall.delete(task);
          // The agent's id keeps naming its channel: its command's late output comes after this.
          break;
        }
        case 'result': {
          const code = num(ev.exitCode);
          out.add(
            result(
              code !== undefined && code !== 0,
              lastText,
              str(ev.sessionId),
              null,
              num(obj(ev.usage).sessionDurationMs) ?? null,
              ts,
            ),
          );
          break;
        }
        case 'session.error':
          out.add(text(channel, str(ev.id), `[error] ${errorText(data) ?? ''}`, ts));
          break;
      }
      return out.event(channel);
    },
  };
}

test('Copilot: every recorded event maps to the lines and channel its fields call for', () => {
  for (const { name, events } of recordings('copilot')) {
    const reader = copilotReader();
    const mapper = createCopilotMapper();
    replay(
      mapper,
      events,
      (ev) => reader.event(ev),
      () => [],
      name,
    );
    assert.equal(mapper.version, reader.version(), name);
    assert.equal(mapper.transcriptOf(), 'stream');
  }
  // Every recording states its version in its skills path, as VERSION says.
  const stated = /\d+\.\d+\.\d+/.exec(readFileSync(join(OTHER, 'copilot', 'VERSION'), 'utf8'))?.[0];
  const mapper = createCopilotMapper();
  for (const ev of recordings('copilot')[0].events) mapper.map(ev);
  assert.equal(mapper.version, stated);
});

test('Copilot: crafted events: ids missing, usage per call, failures, other spawn tools', () => {
  const ts = '2026-12-01T00:00:00.000Z';
  const skill = (path: unknown) => ({ path });
  const events: Json[] = [
    {
      type: 'session.skills_loaded',
      timestamp: ts,
      data: {
        skills: [
          skill(3),
          'x',
          skill('/a/pkg/linux/1.2.3/x/'),
          skill('/a/pkg/linux/1.2.3-beta.1/builtin/s'),
          skill('/a/pkg/linux/9.9.9/builtin/s'),
        ],
      },
    },
    {
      type: 'session.skills_loaded',
      timestamp: ts,
      data: { skills: [skill('/a/pkg/linux/2.0.0/builtin/s')] },
    },
    { type: 'user.message', timestamp: ts, data: { content: '' } },
    { type: 'user.message', data: { content: 'hi' } },
    { type: 'assistant.reasoning', timestamp: ts, data: { content: { deep: 1 }, reasoningId: 'r1' } },
    { type: 'assistant.reasoning', timestamp: ts, data: {} },
    {
      type: 'assistant.message',
      timestamp: ts,
      data: {
        messageId: 'm1',
        reasoningText: 'hmm',
        content: 'go',
        toolRequests: [
          7,
          { name: 'x' },
          { toolCallId: 't1', name: 'spawn', arguments: '{"name":"helper"}' },
          { toolCallId: 't2', arguments: 'plain text' },
          { toolCallId: 't3', name: 'task', arguments: { agent_type: 'kind', name: 'other' } },
          { toolCallId: 't4', arguments: 5 },
        ],
      },
    },
    { type: 'assistant.message', timestamp: ts, data: { toolRequests: 'none', content: '' } },
    { type: 'tool.execution_start', timestamp: ts, data: { toolCallId: 't1', toolName: 'spawn' } },
    { type: 'tool.execution_start', timestamp: ts, data: { toolCallId: 't5', arguments: '[1]' } },
    { type: 'tool.execution_start', timestamp: ts, data: { toolName: 'x' } },
    {
      type: 'subagent.started',
      timestamp: ts,
      agentId: 'ag1',
      data: { toolCallId: 't1', agentType: 'general', agentDescription: 'helps' },
    },
    { type: 'subagent.started', timestamp: ts, agentId: 'ag9', data: { agentName: 'x' } },
    {
      type: 'assistant.usage',
      timestamp: ts,
      agentId: 'ag1',
      id: 'e1',
      data: { inputTokens: 3, cacheWriteTokens: 4 },
    },
    {
      type: 'assistant.usage',
      timestamp: ts,
      id: 'e2',
      data: { apiCallId: 'c1', outputTokens: 2, cacheReadTokens: 1 },
    },
    { type: 'assistant.usage', timestamp: ts, id: 'e3', data: { model: 'm' } },
    { type: 'assistant.message', timestamp: ts, agentId: 'ag1', data: { content: 'child words' } },
    { type: 'assistant.message', timestamp: ts, agentId: 'unknown', data: { content: 'stray' } },
    {
      type: 'tool.execution_complete',
      timestamp: ts,
      data: { toolCallId: 't2', success: false, error: { message: 'denied' } },
    },
    {
      type: 'tool.execution_complete',
      timestamp: ts,
      data: { toolCallId: 't4', success: false, error: 'bad' },
    },
    {
      type: 'tool.execution_complete',
      timestamp: ts,
      data: { toolCallId: 't5', result: { content: 'out' }, shellExecution: { exitCode: 2 } },
    },
    {
      type: 'tool.execution_complete',
      timestamp: ts,
      data: { toolCallId: 't5', result: { content: 'out\n' }, shellExecution: { exitCode: 0 } },
    },
    {
      type: 'tool.execution_complete',
      timestamp: ts,
      data: { toolCallId: 't5', result: { content: 'x [exit code -1]' }, shellExecution: { exitCode: 1 } },
    },
    {
      type: 'tool.execution_complete',
      timestamp: ts,
      data: { toolCallId: 't5', result: { content: { j: 1 } } },
    },
    { type: 'tool.execution_complete', timestamp: ts, data: {} },
    { type: 'tool.execution_start', timestamp: ts, data: { toolCallId: 't5' } },
    { type: 'subagent.completed', timestamp: ts, agentId: 'ag1', data: { totalTokens: 50 } },
    { type: 'assistant.message', timestamp: ts, agentId: 'ag1', data: { content: 'after end' } },
    {
      type: 'subagent.started',
      timestamp: ts,
      agentId: 'ag2',
      data: { toolCallId: 't3', agentName: 'named' },
    },
    {
      type: 'subagent.failed',
      timestamp: ts,
      agentId: 'ag2',
      data: { toolCallId: 't3', totalTokens: 9, error: { message: 'crashed' } },
    },
    { type: 'subagent.failed', timestamp: ts, data: { error: 'no id' } },
    { type: 'subagent.failed', timestamp: ts, data: { parentToolCallId: 'p', error: 'by channel' } },
    { type: 'session.error', timestamp: ts, id: 'se', data: { message: 'boom' } },
    { type: 'session.error', timestamp: ts, data: {} },
    { type: 'assistant.message', timestamp: ts, data: 'not an object' },
    { type: 'result', timestamp: ts, exitCode: 1, sessionId: 's1', usage: { sessionDurationMs: 77 } },
    { type: 'result', timestamp: ts, exitCode: 0, usage: 'x' },
    { type: 'result', timestamp: ts },
  ];
  const reader = copilotReader(['task', 'spawn']);
  const mapper = createCopilotMapper({ spawnTools: ['task', 'spawn'] });
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => [],
    'crafted',
  );
  assert.equal(mapper.version, '1.2.3-beta.1');
  // Spelled out where the reading above could share a slip with the mapper.
  const fresh = createCopilotMapper();
  assert.equal(fresh.map(events[0]).own, -1);
  const first = (type: string) => events.find((ev) => ev.type === type)!;
  assert.deepEqual(fresh.map(first('result')).lines, [result(true, null, 's1', null, 77, ts)]);
  assert.deepEqual(
    fresh.map({ type: 'subagent.completed', timestamp: ts, data: { toolCallId: 't1', totalTokens: 50 } })
      .lines,
    [
      assistant('t1', 'copilot-subagent-usage:t1', [], { total_tokens: 50 }, ts),
      timed(
        {
          type: 'system',
          subtype: 'task_notification',
          tool_use_id: 't1',
          status: 'completed',
          summary: null,
          parent_tool_use_id: 't1',
        },
        ts,
      ),
    ],
  );
  const shell = (content: string, exitCode: number) => ({
    type: 'tool.execution_complete',
    timestamp: ts,
    data: { toolCallId: 't5', result: { content }, shellExecution: { exitCode } },
  });
  assert.deepEqual(fresh.map(shell('out', 2)).lines, [toolResult('t5', 'out\n[exit code 2]', true, ts)]);
  assert.deepEqual(fresh.map(shell('out\n', 0)).lines, [toolResult('t5', 'out\n[exit code 0]', false, ts)]);
  assert.deepEqual(COPILOT_DEFAULTS.spawnTools, ['task']);
  assert.ok(Object.isFrozen(COPILOT_DEFAULTS) && Object.isFrozen(COPILOT_DEFAULTS.spawnTools));
  assert.deepEqual(createCopilotMapper().end(), []);
});

test('Copilot: the channel, the last main text and ephemeral events, each on its own', () => {
  const ts = '2026-12-01T00:00:00.000Z';
  const mapper = createCopilotMapper();
  const events: Json[] = [
    { type: 'subagent.started', timestamp: ts, agentId: 'ag', data: { toolCallId: 't1', agentName: 'a' } },
    // A later start of the same agent without a call id leaves its channel as it was.
    { type: 'subagent.started', timestamp: ts, agentId: 'ag', data: { agentName: 'a' } },
    { type: 'subagent.started', timestamp: ts, data: { toolCallId: 't2', agentName: 'b' } },
    { type: 'assistant.message', timestamp: ts, data: { content: 'main words', toolRequests: [null] } },
    { type: 'assistant.message', timestamp: ts, agentId: 'ag', data: { content: 'child words' } },
    { type: 'assistant.message', timestamp: ts, ephemeral: true, data: { content: 'passing' } },
    { type: 'assistant.message', timestamp: ts, ephemeral: false, data: { content: 'kept' } },
    { type: 'assistant.message', timestamp: ts, agentId: 'ag', data: { content: 'child again' } },
    { type: 'subagent.completed', timestamp: ts, data: { toolCallId: 't2' } },
    { type: 'tool.execution_complete', timestamp: ts, data: { toolCallId: 't9' } },
    { type: 5, timestamp: ts, agentId: 'ag', data: {} },
    { type: 'result', timestamp: ts, exitCode: 0 },
  ];
  const reader = copilotReader();
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => [],
    'channels',
  );
  const fresh = createCopilotMapper();
  const channels = events.map((ev) => fresh.map(ev).channel);
  assert.deepEqual(channels, ['t1', 't1', null, null, 't1', null, null, 't1', null, null, 't1', null]);
  const last = createCopilotMapper();
  for (const ev of events.slice(0, -1)) last.map(ev);
  assert.deepEqual(last.map(events.at(-1)!).lines, [result(false, 'kept', null, null, null, ts)]);
  const passing = createCopilotMapper();
  passing.map(events[0]);
  assert.deepEqual(passing.map(events[5]).lines, []);
  assert.deepEqual(
    createCopilotMapper().map({ type: 'subagent.completed', data: { toolCallId: 't' } }).channel,
    null,
  );
  assert.deepEqual(passing.map(events[9]).lines, [toolResult('t9', '', false, ts)]);
});

test('Copilot: the version is the first install path a skill shows, within the first 100 skills', () => {
  const path = (v: string) => ({ path: `/home/u/.copilot/pkg/linux-x64/${v}/builtin/skills/a/SKILL.md` });
  const loaded = (skills: unknown) => ({ type: 'session.skills_loaded', data: { skills } });
  assert.equal(copilotVersionOf(loaded([path('1.0.102')])), '1.0.102');
  assert.equal(copilotVersionOf(loaded([...Array(99).fill({}), path('3.4.5')])), '3.4.5');
  assert.equal(copilotVersionOf(loaded([...Array(100).fill({}), path('3.4.5')])), null);
  assert.equal(copilotVersionOf(loaded('x')), null);
  assert.equal(copilotVersionOf({ type: 'session.skills_loaded', data: 'x' }), null);
  assert.equal(copilotVersionOf({ type: 'session.other', data: { skills: [path('1.0.0')] } }), null);
  assert.equal(copilotVersionOf(loaded([path('1.0')])), null);
  assert.equal(copilotVersionOf(loaded([{ path: '/pkg/a/1.0.0/builtin/' }])), '1.0.0');
  assert.equal(copilotVersionOf(loaded([{ path: `/pkg/${'a'.repeat(65)}/1.0.0/builtin/` }])), null);
  assert.equal(copilotVersionOf(loaded([{ path: '/pkg/a/1234567.0.0/builtin/' }])), null);
  assert.equal(copilotVersionOf(loaded([{ path: '/pkg/a/x1.0.0/builtin/' }])), null);
  assert.equal(copilotVersionOf(loaded([{ path: `/pkg/a/1.0.0-${'b'.repeat(41)}/builtin/` }])), null);
  assert.equal(copilotVersionOf(loaded([{ path: '/pkg//1.0.0/builtin/' }])), null);
  assert.equal(copilotVersionOf(loaded([{ path: '/pkg/a/123456.654321.10/builtin/' }])), '123456.654321.10');
  assert.equal(copilotVersionOf(loaded({ length: 1, 0: path('1.0.0') })), null);
});

test('Copilot: an event is a dotted session type with a data object and no params', () => {
  // The final `result` line has no dotted type: the run's first line decides the format.
  for (const { events } of recordings('copilot')) {
    for (const ev of events) assert.equal(isCopilotEvent(ev), ev.type !== 'result');
  }
  for (const type of [
    'session',
    'user',
    'assistant',
    'tool',
    'subagent',
    'model',
    'skill',
    'hook',
    'system',
    'abort',
  ]) {
    assert.equal(isCopilotEvent({ type: `${type}.a_b.c`, data: {} }), true, type);
    assert.equal(isCopilotEvent({ type: `x${type}.a`, data: {} }), false, type);
  }
  assert.equal(isCopilotEvent({ type: 'tool.start', data: {}, params: {} }), false);
  assert.equal(isCopilotEvent({ type: 'tool.start', data: 'x' }), false);
  assert.equal(isCopilotEvent({ type: 'tool.Start', data: {} }), false);
  assert.equal(isCopilotEvent({ type: 'tool.start!', data: {} }), false);
  assert.equal(isCopilotEvent({ type: 'tool.', data: {} }), false);
  assert.equal(isCopilotEvent({ type: 5, data: {} }), false);
  assert.equal(isCopilotEvent({ type: ['tool.start'], data: {} }), false);
  assert.equal(isCopilotEvent({ type: 'result', data: {} }), false);
});
