// The coding-agent mappers event by event: each recorded event is fed to its mapper and the
// lines it makes are compared whole with the lines an independent reading of the same event
// expects (Claude Code's stream-json shapes, written out here, not taken from the product).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createGeminiMapper, GEMINI_DEFAULTS, isGeminiEvent } from '../src/adapters/gemini.js';
import { teeJsonl } from '../src/adapters/claude-sdk.js';
import { createCodexMapper, isCodexEvent, itemResult } from '../src/adapters/codex.js';
import {
  createOpencodeMapper,
  isOpencodeEvent,
  OPENCODE_DEFAULTS,
  taskReport,
} from '../src/adapters/opencode.js';
import {
  COPILOT_DEFAULTS,
  copilotVersionOf,
  createCopilotMapper,
  isCopilotEvent,
} from '../src/adapters/copilot.js';
import {
  argumentsOf,
  assistantLine,
  eventLine,
  finite,
  initLine,
  isoFromMs,
  MappedLines,
  promptLine,
  resultLine,
  shellResultText,
  taskNotificationLine,
  taskStartedLine,
  textLine,
  textOf,
  timestampOf,
  toolResultBlock,
  toolResultLine,
  toolUseBlock,
  transcriptOfSpawned,
  usageOf,
} from '../src/adapters/stream-lines.js';
import type { MappedEvent, StreamMapper } from '../src/adapters/stream-lines.js';
import { FIXTURES } from './helpers/helpers.js';

type Json = Record<string, any>;
const OTHER = join(FIXTURES, 'other-agents');

/** Every recording of a producer: `<producer>-*.jsonl` and `<producer>/*.jsonl`. */
function recordings(producer: string): { name: string; events: Json[] }[] {
  const top = readdirSync(OTHER)
    .filter((f) => f.startsWith(`${producer}-`) && f.endsWith('.jsonl'))
    .map((f) => join(OTHER, f));
  const inner = readdirSync(join(OTHER, producer))
    .filter((f) => f.endsWith('.jsonl'))
    .map((f) => join(OTHER, producer, f));
  return [...top, ...inner].map((file) => ({
    name: file.slice(OTHER.length + 1),
    events: readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line.length > 0)
      .map((line) => JSON.parse(line)),
  }));
}

/** Lines an event should make; `own` marks the one standing for the event. */
class Expect {
  lines: Json[] = [];
  own = -1;
  add(line: Json, own = true): void {
    if (own && this.own === -1) this.own = this.lines.length;
    this.lines.push(line);
  }
  event(channel: string | null = null): MappedEvent {
    return { channel, lines: this.lines, own: this.own };
  }
}

const timed = (line: Json, ts: string | null): Json => (ts === null ? line : { ...line, timestamp: ts });
const assistant = (
  channel: string | null,
  id: string | null,
  content: Json[],
  usage: Json | null,
  ts: string | null,
  model: string | null = null,
): Json =>
  timed(
    {
      type: 'assistant',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        content,
        ...(model !== null ? { model } : {}),
        ...(usage ? { usage } : {}),
      },
      parent_tool_use_id: channel,
    },
    ts,
  );
const text = (channel: string | null, id: string | null, words: string, ts: string | null): Json =>
  assistant(channel, id, [{ type: 'text', text: words }], null, ts);
const prompt = (channel: string | null, words: string, ts: string | null): Json =>
  timed(
    {
      type: 'user',
      message: { role: 'user', content: [{ type: 'text', text: words }] },
      parent_tool_use_id: channel,
    },
    ts,
  );
const toolResult = (
  id: string,
  content: string,
  isError: boolean,
  ts: string | null,
  channel: string | null = null,
): Json =>
  timed(
    {
      type: 'user',
      message: {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: id, content, ...(isError ? { is_error: true } : {}) }],
      },
      parent_tool_use_id: channel,
    },
    ts,
  );
const init = (
  producer: string,
  version: string | null,
  session: string | null,
  model: string | null,
  ts: string | null,
): Json =>
  timed(
    {
      type: 'system',
      subtype: 'init',
      session_id: session,
      model,
      producer,
      producer_version: version,
      parent_tool_use_id: null,
    },
    ts,
  );
const result = (
  isError: boolean,
  words: string | null,
  session: string | null,
  usage: Json | null,
  durationMs: number | null,
  ts: string | null,
): Json =>
  timed(
    {
      type: 'result',
      subtype: isError ? 'error_during_execution' : 'success',
      is_error: isError,
      result: words,
      session_id: session,
      parent_tool_use_id: null,
      ...(usage ? { usage } : {}),
      ...(durationMs !== null ? { duration_ms: durationMs } : {}),
    },
    ts,
  );

/** Feeds every event, then end(), checking each against what `expected` says of it. */
function replay(
  mapper: StreamMapper,
  events: Json[],
  expected: (event: Json) => MappedEvent,
  ending: () => Json[],
  label: string,
): void {
  events.forEach((event, n) => {
    assert.deepEqual(mapper.map(event), expected(event), `${label}: event ${n + 1} (${event.type})`);
  });
  assert.deepEqual(mapper.end(), ending(), `${label}: end`);
}

// ---- Gemini CLI ----

/** Gemini's stream read by its documented fields. */
function geminiReader(spawnTools: readonly string[] = ['invoke_agent']) {
  let open: { words: string; ts: string | null } | null = null;
  let session: string | null = null;
  let lastText: string | null = null;
  let counter = 0;
  const spawns = new Set<string>();
  const str = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v : null);
  const shown = (v: unknown) =>
    typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
  const message = (words: string, ts: string | null) => {
    lastText = words;
    return text(null, `gemini-message-${++counter}`, words, ts);
  };
  const flush = (out: Expect) => {
    if (open) out.add(message(open.words, open.ts), false);
    open = null;
  };
  return {
    event(ev: Json): MappedEvent {
      const out = new Expect();
      const ts = str(ev.timestamp);
      const piece = ev.type === 'message' && ev.role === 'assistant';
      if (!piece) flush(out);
      if (ev.type === 'init') {
        session = str(ev.session_id);
        out.add(init('gemini', null, session, str(ev.model), ts));
      } else if (piece && ev.delta === true) {
        if (open) open.words += shown(ev.content);
        else open = { words: shown(ev.content), ts };
      } else if (piece) {
        out.add(message(shown(ev.content), ts));
      } else if (ev.type === 'message' && ev.role === 'user') {
        out.add(prompt(null, shown(ev.content), ts));
      } else if (ev.type === 'tool_use' && str(ev.tool_id)) {
        const args =
          ev.parameters && typeof ev.parameters === 'object' && !Array.isArray(ev.parameters)
            ? ev.parameters
            : {};
        const name = str(ev.tool_name) ?? 'tool';
        const spawn = spawnTools.includes(name);
        const input = spawn
          ? {
              ...args,
              subagent_type: str(args.agent_name) ?? str(args.name),
              description: str(args.description),
              tool: name,
            }
          : args;
        out.add(
          assistant(
            null,
            `gemini-call-${ev.tool_id}`,
            [{ type: 'tool_use', id: ev.tool_id, name: spawn ? 'Task' : name, input }],
            null,
            ts,
          ),
        );
        if (spawn) {
          spawns.add(ev.tool_id);
          const words = str(args.prompt) ?? str(args.task);
          if (words !== null) out.add(prompt(ev.tool_id, words, ts), false);
        }
      } else if (ev.type === 'tool_result' && str(ev.tool_id)) {
        const failed = ev.status !== 'success';
        const output = failed ? (str(ev.error?.message) ?? shown(ev.output)) : shown(ev.output);
        out.add(toolResult(ev.tool_id, output, failed, ts));
        if (spawns.delete(ev.tool_id) && output !== '') {
          out.add(text(ev.tool_id, `gemini-result-${ev.tool_id}`, output, ts), false);
        }
      } else if (ev.type === 'error') {
        out.add(
          text(
            null,
            `gemini-error-${++counter}`,
            `[${shown(ev.severity) || 'error'}] ${shown(ev.message)}`,
            ts,
          ),
        );
      } else if (ev.type === 'result') {
        const stats = ev.stats ?? {};
        const usage: Json = {};
        for (const [ours, theirs] of [
          ['input_tokens', 'input_tokens'],
          ['output_tokens', 'output_tokens'],
          ['cache_read_input_tokens', 'cached'],
        ]) {
          if (typeof stats[theirs] === 'number' && Number.isFinite(stats[theirs]))
            usage[ours] = stats[theirs];
        }
        const hasUsage = Object.keys(usage).length > 0;
        if (hasUsage) out.add(assistant(null, 'gemini-run-usage', [], usage, ts), false);
        const failed = ev.status !== 'success';
        const duration = Number.isFinite(stats.duration_ms) ? stats.duration_ms : null;
        out.add(
          result(
            failed,
            failed ? str(ev.error?.message) : lastText,
            session,
            hasUsage ? usage : null,
            duration,
            ts,
          ),
        );
      }
      return out.event();
    },
    end(): Json[] {
      const out = new Expect();
      flush(out);
      return out.lines;
    },
  };
}

test('Gemini: every recorded event maps to the lines its fields call for; pieces join at the next event', () => {
  for (const { name, events } of recordings('gemini')) {
    const reader = geminiReader();
    const mapper = createGeminiMapper();
    replay(
      mapper,
      events,
      (ev) => reader.event(ev),
      () => reader.end(),
      name,
    );
    // A spawned call's channel carries only its spawn and result; main and the rest carry the stream.
    for (const ev of events.filter((e) => e.type === 'tool_use')) {
      const spawned = ev.tool_name === 'invoke_agent';
      assert.equal(mapper.transcriptOf(ev.tool_id), spawned ? 'spawn-and-result' : 'stream', name);
    }
    assert.equal(mapper.transcriptOf(null), 'stream');
    assert.equal(mapper.version, null);
  }
});

test('Gemini: text left open at the end comes out of end(); a piece after an event starts anew', () => {
  const ts = '2026-12-01T00:00:00.000Z';
  const events = [
    { type: 'message', timestamp: ts, role: 'assistant', content: 'one ', delta: true },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'two', delta: true },
    { type: 'message', timestamp: ts, role: 'user', content: 'more' },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'whole' },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'open ', delta: true },
    // A whole message while pieces are open is shown at once; the pieces stay open.
    { type: 'message', timestamp: ts, role: 'assistant', content: 'whole too' },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'still', delta: true },
    { type: 'message', timestamp: ts, role: 'system', content: 'not a prompt' },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'a', delta: true },
    { type: 'tool_use', timestamp: ts, role: 'assistant', tool_id: 'r', tool_name: 'ls', parameters: {} },
    { type: 'message', timestamp: ts, role: 'assistant', content: { a: 1 }, delta: true },
  ];
  const reader = geminiReader();
  replay(
    createGeminiMapper(),
    events,
    (ev) => reader.event(ev),
    () => reader.end(),
    'pieces',
  );
  const mapper = createGeminiMapper();
  for (const ev of events) mapper.map(ev);
  assert.deepEqual(mapper.end(), [text(null, 'gemini-message-6', '{"a":1}', ts)]);
  assert.deepEqual(mapper.end(), [], 'end() gives the open text once');
});

test('Gemini: errors, failed results, calls without ids, other spawn tools and argument names', () => {
  const ts = '2026-12-01T00:00:00.000Z';
  const events: Json[] = [
    { type: 'init', timestamp: ts, session_id: '', model: '' },
    { type: 'error', timestamp: ts, severity: 'warning', message: 'slow' },
    { type: 'error', timestamp: ts, message: { code: 7 } },
    { type: 'error', message: 'no time' },
    { type: 'tool_use', timestamp: ts, tool_name: 'x', parameters: {} },
    { type: 'tool_use', timestamp: ts, tool_id: 'a', parameters: ['not', 'object'] },
    {
      type: 'tool_use',
      timestamp: ts,
      tool_id: 'b',
      tool_name: 'delegate',
      parameters: { name: 'helper', task: 'do it', description: 'the job' },
    },
    { type: 'tool_use', timestamp: ts, tool_id: 'c', tool_name: 'delegate', parameters: { agent_name: 'x' } },
    { type: 'tool_result', timestamp: ts, status: 'success', output: 'no id' },
    { type: 'tool_result', timestamp: ts, tool_id: 'b', status: 'error', output: { why: 'broken' } },
    { type: 'tool_result', timestamp: ts, tool_id: 'b', status: 'success', output: 'again' },
    { type: 'tool_result', timestamp: ts, tool_id: 'c', status: 'success' },
    {
      type: 'tool_result',
      timestamp: ts,
      tool_id: 'a',
      status: 'error',
      output: 'out',
      error: { message: 'the error' },
    },
    {
      type: 'tool_result',
      timestamp: ts,
      tool_id: 'a',
      status: 'error',
      output: 'out',
      error: { message: '' },
    },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'last words' },
    {
      type: 'result',
      timestamp: ts,
      status: 'error',
      error: { message: 'quota' },
      stats: { input_tokens: 5, cached: 2, duration_ms: 9 },
    },
    { type: 'result', timestamp: ts, status: 'error', stats: 'none' },
    {
      type: 'result',
      timestamp: ts,
      status: 'success',
      stats: { output_tokens: Infinity, duration_ms: NaN },
    },
    { type: 'something', timestamp: ts },
  ];
  const reader = geminiReader(['delegate']);
  const mapper = createGeminiMapper({ spawnTools: ['delegate'] });
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => reader.end(),
    'crafted',
  );
  assert.equal(mapper.transcriptOf('b'), 'spawn-and-result');
  assert.equal(mapper.transcriptOf('a'), 'stream');
  // Spelled out where the reading above could share a slip with the mapper.
  const fresh = createGeminiMapper({ spawnTools: ['delegate'] });
  assert.deepEqual(fresh.map(events[1]).lines, [text(null, 'gemini-error-1', '[warning] slow', ts)]);
  assert.deepEqual(fresh.map(events[2]).lines, [text(null, 'gemini-error-2', '[error] {"code":7}', ts)]);
  const err = fresh.map(events[15]);
  assert.deepEqual(err.lines, [
    assistant(null, 'gemini-run-usage', [], { input_tokens: 5, cache_read_input_tokens: 2 }, ts),
    result(true, 'quota', null, { input_tokens: 5, cache_read_input_tokens: 2 }, 9, ts),
  ]);
  assert.equal(err.own, 1);
  assert.deepEqual(GEMINI_DEFAULTS.spawnTools, ['invoke_agent']);
  assert.ok(Object.isFrozen(GEMINI_DEFAULTS) && Object.isFrozen(GEMINI_DEFAULTS.spawnTools));
});

test('Gemini: an event is recognised by its type and the field that type always has', () => {
  for (const { events } of recordings('gemini'))
    for (const ev of events) assert.equal(isGeminiEvent(ev), true);
  const t = '2026-12-01T00:00:00.000Z';
  const yes: Json[] = [
    { type: 'init', timestamp: t, session_id: 's' },
    { type: 'message', timestamp: t, role: 'user' },
    { type: 'tool_use', timestamp: t, tool_id: 'a' },
    { type: 'tool_result', timestamp: t, tool_id: 'a' },
    { type: 'result', timestamp: t, stats: {} },
    { type: 'result', timestamp: t, status: 'success' },
    { type: 'error', timestamp: t, message: 'm' },
  ];
  const no: Json[] = [
    { type: 'other', timestamp: t, message: 'm' },
    { type: 7, timestamp: t },
    { type: 'error', message: 'm' },
    { type: 'error', timestamp: t, message: 'm', parent_tool_use_id: null },
    { type: 'error', timestamp: t, message: 'm', subtype: 'x' },
    { type: 'init', timestamp: t },
    { type: 'message', timestamp: t },
    { type: 'tool_use', timestamp: t },
    { type: 'tool_result', timestamp: t, tool_id: 1 },
    { type: 'result', timestamp: t },
    { type: 'error', timestamp: t },
  ];
  for (const ev of yes) assert.equal(isGeminiEvent(ev), true, JSON.stringify(ev));
  for (const ev of no) assert.equal(isGeminiEvent(ev), false, JSON.stringify(ev));
});

// ---- GitHub Copilot CLI ----

const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);
const shown = (v: unknown): string =>
  typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const obj = (v: unknown): Json =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {};
const isObj = (v: unknown): boolean => v !== null && typeof v === 'object' && !Array.isArray(v);
const args = (v: unknown): Json => {
  if (isObj(v)) return v as Json;
  if (typeof v === 'string') {
    try {
      const parsed = JSON.parse(v);
      if (isObj(parsed)) return parsed;
    } catch {
      // text
    }
    return { input: v };
  }
  return v === undefined || v === null ? {} : { input: v };
};
const withExit = (output: string, code: number | undefined): string =>
  code === undefined
    ? output
    : `${output}${output === '' || output.endsWith('\n') ? '' : '\n'}[exit code ${code}]`;
const errorText = (e: unknown): string | null => (typeof e === 'string' ? str(e) : str(obj(e).message));

/** Copilot's session events read by their documented fields. */
function copilotReader(spawnTools: readonly string[] = ['task']) {
  const agents = new Map<string, string>();
  const announced = new Set<string>();
  const perCall = new Set<string>();
  /** The model each channel's latest message named: its usage events are priced by it. */
  const models = new Map<string | null, string>();
  let version: string | null = null;
  let started = false;
  let lastText: string | null = null;
  const call = (id: string, name: string, input: Json): Json => {
    announced.add(id);
    if (!spawnTools.includes(name)) return { type: 'tool_use', id, name, input };
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

// ---- OpenAI Codex ----

const CODEX_DONE: Json = {
  completed: 'completed',
  errored: 'failed',
  failed: 'failed',
  shutdown: 'failed',
  not_found: 'failed',
  interrupted: 'failed',
};

/** The first 80 UTF-16 units of a prompt, one fewer when the cut would split a surrogate pair. */
function head80(words: string): string {
  if (words.length <= 80) return words;
  const cut = words.slice(0, 80);
  const last = cut.charCodeAt(79);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, 79) : cut;
}

/** Codex's events read by their documented fields. */
function codexReader() {
  let thread: string | null = null;
  const started = new Set<string>();
  const running = new Set<string>();
  const spawned = new Set<string>();
  let lastText: string | null = null;
  let turns = 0;
  const endThreads = (item: Json, out: Expect) => {
    const blocks: Json[] = [];
    for (const [t, state] of Object.entries(obj(item.agents_states))) {
      if (!running.has(t) || !isObj(state) || !(String(state.status) in CODEX_DONE)) continue;
      running.delete(t);
      const message = str(state.message);
      if (message !== null) out.add(text(t, `codex-final-${t}`, message, null), false);
      blocks.push({
        type: 'tool_result',
        tool_use_id: t,
        content: message ?? `agent ${state.status}`,
        ...(CODEX_DONE[state.status] === 'failed' ? { is_error: true } : {}),
      });
    }
    if (blocks.length > 0)
      out.add({ type: 'user', message: { role: 'user', content: blocks }, parent_tool_use_id: null }, false);
  };
  const block = (id: string, content: string, isError: boolean): Json => ({
    type: 'tool_result',
    tool_use_id: id,
    content,
    ...(isError ? { is_error: true } : {}),
  });
  const resultOf = (id: string, item: Json): Json => {
    const failed = item.status === 'failed' || item.status === 'declined';
    if (item.type === 'command_execution') {
      const code = num(item.exit_code);
      return block(
        id,
        withExit(shown(item.aggregated_output), code),
        failed || (code !== undefined && code !== 0),
      );
    }
    if (item.type === 'mcp_tool_call') {
      const error = str(obj(item.error).message);
      return block(id, error ?? shown(item.result), failed || error !== null);
    }
    return block(id, shown(item.status ?? ''), failed);
  };
  const shownAs = (item: Json): [string, Json] => {
    if (item.type === 'command_execution') return ['Bash', { command: shown(item.command) }];
    if (item.type === 'file_change')
      return ['Edit', { changes: Array.isArray(item.changes) ? item.changes : [] }];
    if (item.type === 'mcp_tool_call') {
      return [
        `mcp__${shown(item.server)}__${shown(item.tool)}`,
        isObj(item.arguments) ? item.arguments : { arguments: item.arguments ?? null },
      ];
    }
    if (item.type === 'web_search') return ['WebSearch', { query: shown(item.query) }];
    return [typeof item.type === 'string' ? item.type.slice(0, 100) : 'item', {}];
  };
  const item = (phase: string, it: Json, out: Expect) => {
    const id = str(it.id);
    if (!id) return;
    const done = phase === 'item.completed';
    if (['agent_message', 'reasoning', 'error', 'todo_list'].includes(it.type)) {
      if (!done || it.type === 'todo_list') return;
      if (it.type === 'agent_message') {
        lastText = shown(it.text);
        out.add(text(null, id, lastText, null));
      } else if (it.type === 'reasoning') {
        out.add(assistant(null, id, [{ type: 'thinking', thinking: shown(it.text) }], null, null));
      } else {
        out.add(text(null, id, `[error] ${shown(it.message)}`, null));
      }
      return;
    }
    if (it.type === 'collab_tool_call') {
      const tool = str(it.tool) ?? 'collab';
      const threads = Array.isArray(it.receiver_thread_ids)
        ? it.receiver_thread_ids.filter((t: unknown) => typeof t === 'string' && t !== '')
        : [];
      const words = str(it.prompt);
      if (tool === 'spawn_agent') {
        if (!done) return;
        const fresh = threads.filter((t: string) => !spawned.has(t));
        if (fresh.length > 0) {
          out.add(
            assistant(
              null,
              id,
              fresh.map((t: string) => ({
                type: 'tool_use',
                id: t,
                name: 'Task',
                input: {
                  prompt: words,
                  description: words === null ? null : head80(words),
                  subagent_type: 'codex',
                  tool,
                },
              })),
              null,
              null,
            ),
          );
          for (const t of fresh) {
            spawned.add(t);
            running.add(t);
            if (words !== null) out.add(prompt(t, words, null), false);
          }
        } else if (it.status === 'failed') {
          out.add(
            assistant(null, id, [{ type: 'tool_use', id, name: tool, input: { prompt: words } }], null, null),
          );
          out.add(toolResult(id, 'the agent could not be spawned', true, null), false);
        }
        endThreads(it, out);
        return;
      }
      const call = {
        type: 'tool_use',
        id,
        name: tool,
        input: { receiver_thread_ids: threads, prompt: words },
      };
      if (!done) {
        if (!started.has(id)) out.add(assistant(null, id, [call], null, null));
        started.add(id);
        return;
      }
      if (!started.has(id)) out.add(assistant(null, id, [call], null, null));
      started.delete(id);
      const states = isObj(it.agents_states)
        ? Object.entries(it.agents_states as Json)
            .map(([t, s]) => `${t}: ${isObj(s) ? shown(s.status) : shown(s)}`)
            .join('\n')
        : '';
      out.add(toolResult(id, states, it.status === 'failed', null));
      endThreads(it, out);
      return;
    }
    if (phase === 'item.updated') return;
    if (!started.has(id)) {
      started.add(id);
      const [name, input] = shownAs(it);
      out.add(assistant(null, id, [{ type: 'tool_use', id, name, input }], null, null), !done);
    }
    if (!done) return;
    started.delete(id);
    out.add({
      type: 'user',
      message: { role: 'user', content: [resultOf(id, it)] },
      parent_tool_use_id: null,
    });
  };
  return {
    spawned,
    resultOf,
    event(ev: Json): MappedEvent {
      const out = new Expect();
      if (ev.type === 'thread.started') {
        thread ??= str(ev.thread_id);
        out.add(init('codex', null, str(ev.thread_id), null, null));
      } else if (['item.started', 'item.updated', 'item.completed'].includes(ev.type) && isObj(ev.item)) {
        item(ev.type, ev.item, out);
      } else if (ev.type === 'turn.completed' || ev.type === 'turn.failed') {
        turns++;
        const usage: Json = {};
        for (const [ours, theirs] of [
          ['input_tokens', 'input_tokens'],
          ['cache_read_input_tokens', 'cached_input_tokens'],
          ['cache_creation_input_tokens', 'cache_write_input_tokens'],
          ['output_tokens', 'output_tokens'],
          ['reasoning_output_tokens', 'reasoning_output_tokens'],
        ]) {
          if (num(obj(ev.usage)[theirs]) !== undefined) usage[ours] = ev.usage[theirs];
        }
        const has = Object.keys(usage).length > 0;
        if (has) out.add(assistant(null, `codex-turn-${turns}`, [], usage, null));
        const failed = ev.type === 'turn.failed';
        out.add(
          result(
            failed,
            failed ? str(obj(ev.error).message) : lastText,
            thread,
            has ? usage : null,
            null,
            null,
          ),
        );
      }
      return out.event();
    },
  };
}

test('Codex: every recorded event maps to the lines its fields call for; spawned threads end by their state', () => {
  for (const { name, events } of recordings('codex')) {
    const reader = codexReader();
    const mapper = createCodexMapper();
    replay(
      mapper,
      events,
      (ev) => reader.event(ev),
      () => [],
      name,
    );
    for (const t of reader.spawned) assert.equal(mapper.transcriptOf(t), 'spawn-and-result', name);
    assert.equal(mapper.transcriptOf(null), 'stream');
    assert.equal(mapper.version, null);
  }
});

test('Codex: crafted items: every tool kind, failed spawns and waits, turns failed and without usage', () => {
  const long = 'x'.repeat(79) + '\u{1F600}' + 'tail';
  const events: Json[] = [
    { type: 'thread.started', thread_id: 'th1' },
    { type: 'thread.started', thread_id: 'th2' },
    { type: 'turn.started' },
    { type: 'item.completed', item: { type: 'agent_message', text: 'no id' } },
    { type: 'item.started', item: { id: 'a1', type: 'agent_message', text: 'early' } },
    { type: 'item.started', item: { id: 'r0', type: 'reasoning', text: 'early' } },
    { type: 'item.started', item: { id: 'e0', type: 'error', message: 'early' } },
    { type: 'item.completed', item: { id: 'r1', type: 'reasoning', text: { t: 1 } } },
    { type: 'item.completed', item: { id: 'e1', type: 'error', message: 'broke' } },
    { type: 'item.completed', item: { id: 'td', type: 'todo_list', items: [] } },
    {
      type: 'item.started',
      item: { id: 'c1', type: 'command_execution', command: 'ls', status: 'in_progress' },
    },
    { type: 'item.updated', item: { id: 'c1', type: 'command_execution', command: 'ls' } },
    {
      type: 'item.completed',
      item: {
        id: 'c1',
        type: 'command_execution',
        command: 'ls',
        aggregated_output: 'a\n',
        exit_code: 0,
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 'c2',
        type: 'command_execution',
        command: ['x'],
        aggregated_output: 'b',
        exit_code: 2,
        status: 'completed',
      },
    },
    { type: 'item.completed', item: { id: 'c3', type: 'command_execution', status: 'declined' } },
    {
      type: 'item.completed',
      item: { id: 'f1', type: 'file_change', changes: [{ path: 'a' }], status: 'completed' },
    },
    { type: 'item.completed', item: { id: 'f2', type: 'file_change', changes: 'x', status: 'failed' } },
    {
      type: 'item.completed',
      item: {
        id: 'm1',
        type: 'mcp_tool_call',
        server: 's',
        tool: 't',
        arguments: { q: 1 },
        result: { content: 'r' },
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 'm2',
        type: 'mcp_tool_call',
        server: 's',
        tool: 't',
        arguments: 'raw',
        error: { message: 'mcp down' },
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: { id: 'm3', type: 'mcp_tool_call', error: { message: '' }, result: 'ok' },
    },
    { type: 'item.completed', item: { id: 'w1', type: 'web_search', query: 'q' } },
    { type: 'item.completed', item: { id: 'u1', type: 'unknown_kind', status: 'completed' } },
    { type: 'item.completed', item: { id: 'u2', type: 7 } },
    {
      type: 'item.completed',
      item: {
        id: 's0',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        status: 'failed',
        prompt: 'refused',
        receiver_thread_ids: [],
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's9',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        status: 'completed',
        receiver_thread_ids: 'x',
      },
    },
    { type: 'item.started', item: { id: 's1', type: 'collab_tool_call', tool: 'spawn_agent', prompt: long } },
    {
      type: 'item.completed',
      item: {
        id: 's1',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        prompt: long,
        receiver_thread_ids: ['t1', '', 5, 't2'],
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's2',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        receiver_thread_ids: ['t1', 't3'],
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's3',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        status: 'failed',
        receiver_thread_ids: ['t3'],
      },
    },
    {
      type: 'item.started',
      item: { id: 'wt', type: 'collab_tool_call', tool: 'wait', receiver_thread_ids: ['t1'] },
    },
    {
      type: 'item.started',
      item: { id: 'wt', type: 'collab_tool_call', tool: 'wait', receiver_thread_ids: ['t1'] },
    },
    {
      type: 'item.completed',
      item: {
        id: 'wt',
        type: 'collab_tool_call',
        tool: 'wait',
        status: 'completed',
        receiver_thread_ids: ['t1'],
        agents_states: { t1: { status: 'running' }, t9: { status: 'completed' }, t2: 'completed' },
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 'w2',
        type: 'collab_tool_call',
        status: 'failed',
        agents_states: {
          t1: { status: 'completed', message: 'done one' },
          t2: { status: 'shutdown' },
          t3: { status: 'not_found', message: '' },
        },
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 'w3',
        type: 'collab_tool_call',
        tool: 'wait',
        agents_states: { t1: { status: 'failed', message: 'again' } },
      },
    },
    { type: 'item.completed', item: 'not an object' },
    {
      type: 'turn.completed',
      usage: {
        input_tokens: 10,
        cached_input_tokens: 2,
        cache_write_input_tokens: 1,
        output_tokens: 3,
        reasoning_output_tokens: 4,
      },
    },
    { type: 'turn.failed', error: { message: 'limit' } },
    { type: 'turn.failed', usage: { input_tokens: 1 }, error: 'x' },
  ];
  const reader = codexReader();
  const mapper = createCodexMapper();
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => [],
    'crafted',
  );
  for (const t of ['t1', 't2', 't3']) assert.equal(mapper.transcriptOf(t), 'spawn-and-result');
  assert.equal(mapper.transcriptOf('s1'), 'stream');
  // Spelled out where the reading above could share a slip with the mapper.
  const fresh = createCodexMapper();
  const spawn = fresh.map(events.find((ev) => ev.item?.id === 's1' && ev.type === 'item.completed')!);
  const spawnCall: Json = spawn.lines[0];
  assert.equal(spawnCall.message.content[0].input.description, 'x'.repeat(79));
  assert.equal(spawnCall.message.content[0].input.subagent_type, 'codex');
  assert.deepEqual(
    spawn.lines.map((l: Json) => l.parent_tool_use_id),
    [null, 't1', 't2'],
  );
  const failedTurn = fresh.map({ type: 'turn.failed', error: { message: 'limit' } });
  assert.deepEqual(failedTurn, {
    channel: null,
    own: 0,
    lines: [result(true, 'limit', null, null, null, null)],
  });
  const counted = fresh.map({ type: 'turn.completed', usage: { output_tokens: 3 } });
  assert.equal(counted.own, 0);
  assert.equal((counted.lines[0] as Json).message.id, 'codex-turn-2');
  assert.deepEqual(fresh.end(), []);
  assert.deepEqual(itemResult('c', { type: 'command_execution', aggregated_output: 'o', exit_code: 1 }), {
    type: 'tool_result',
    tool_use_id: 'c',
    content: 'o\n[exit code 1]',
    is_error: true,
  });
});

test('Codex: updates, spawns in progress, threads ended by a later spawn, every failed state', () => {
  const events: Json[] = [
    { type: 'item.completed', item: null },
    { type: 'item.updated', item: { id: 'c9', type: 'command_execution', command: 'ls' } },
    {
      type: 'item.updated',
      item: { id: 'wu', type: 'collab_tool_call', tool: 'wait', receiver_thread_ids: [] },
    },
    {
      type: 'item.started',
      item: {
        id: 's7',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        receiver_thread_ids: ['t7'],
        agents_states: { t7: { status: 'completed' } },
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's8',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        prompt: 'p',
        receiver_thread_ids: ['ta', 'tb', 'tc', ['td']],
        status: 'completed',
      },
    },
    // A spawn naming only threads already known still ends those its states say are done.
    {
      type: 'item.completed',
      item: {
        id: 's9',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        receiver_thread_ids: ['ta'],
        status: 'completed',
        agents_states: { ta: { status: 'failed', message: 'ta died' } },
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's10',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        receiver_thread_ids: [],
        status: 'completed',
        agents_states: { tb: { status: 'interrupted' } },
      },
    },
    {
      type: 'item.completed',
      item: { id: 'wz', type: 'collab_tool_call', tool: 'wait', status: 'completed', agents_states: 'ab' },
    },
    {
      type: 'item.completed',
      item: {
        id: 'wy',
        type: 'collab_tool_call',
        tool: 'wait',
        status: 'completed',
        agents_states: { tc: { status: 'errored' } },
      },
    },
    {
      type: 'item.completed',
      item: { id: 'c8', type: 'command_execution', command: 'true', status: 'completed' },
    },
    { type: 'item.completed', item: { id: 'u3', type: 'y'.repeat(150) } },
  ];
  const reader = codexReader();
  const mapper = createCodexMapper();
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => [],
    'more',
  );
  // Spelled out where the reading above could share a slip with the mapper.
  const fresh = createCodexMapper();
  const [, updated, wait, started, spawn, ended, interrupted, odd, errored, bare, long] = events.map((ev) =>
    fresh.map(ev),
  );
  assert.deepEqual(updated.lines, []);
  assert.equal(wait.lines.length, 1);
  assert.deepEqual(started.lines, []);
  assert.deepEqual(
    spawn.lines.map((l: Json) => l.parent_tool_use_id),
    [null, 'ta', 'tb', 'tc'],
  );
  assert.deepEqual(ended, {
    channel: null,
    own: -1,
    lines: [text('ta', 'codex-final-ta', 'ta died', null), toolResult('ta', 'ta died', true, null)],
  });
  assert.deepEqual(interrupted.lines, [toolResult('tb', 'agent interrupted', true, null)]);
  assert.equal(
    (odd.lines[1] as Json).message.content[0].content,
    '',
    'states that are no object say nothing',
  );
  assert.deepEqual(errored.lines.slice(1), [
    toolResult('wy', 'tc: errored', false, null),
    toolResult('tc', 'agent errored', true, null),
  ]);
  assert.deepEqual(bare.lines.at(-1), toolResult('c8', '', false, null));
  assert.equal((long.lines[0] as Json).message.content[0].name, 'y'.repeat(100));
});

test('Codex: an event is a thread, turn or item event; an item event carries its item', () => {
  for (const { events } of recordings('codex')) for (const ev of events) assert.equal(isCodexEvent(ev), true);
  const yes: Json[] = [
    { type: 'thread.started', thread_id: 't' },
    { type: 'turn.started' },
    { type: 'turn.completed' },
    { type: 'turn.failed' },
    { type: 'item.started', item: {} },
    { type: 'item.updated', item: {} },
    { type: 'item.completed', item: {} },
  ];
  const no: Json[] = [
    { type: 'thread.started' },
    { type: 'item.completed' },
    { type: 'item.started', item: 'x' },
    { type: 'turn.started', data: {} },
    { type: 'turn.other' },
    { type: 3 },
  ];
  for (const ev of yes) assert.equal(isCodexEvent(ev), true, JSON.stringify(ev));
  for (const ev of no) assert.equal(isCodexEvent(ev), false, JSON.stringify(ev));
});

// ---- opencode ----

/** opencode's events read by their documented fields; the run's result is made at the end. */
function opencodeReader(spawnTools: readonly string[] = ['task']) {
  let seen = false;
  let session: string | null = null;
  let lastText: string | null = null;
  let error: string | null = null;
  let lastTime: string | null = null;
  let errors = 0;
  let finished = false;
  const spawned = new Set<string>();
  const report = (output: string): string | null => {
    const open = output.indexOf('<task_result>');
    const close = output.lastIndexOf('</task_result>');
    return open < 0 || close < open ? null : output.slice(open + 13, close).trim();
  };
  const tool = (part: Json, messageId: string | null, ts: string | null, out: Expect) => {
    const id = str(part.callID) ?? str(part.id);
    if (!id) return;
    const name = str(part.tool) ?? 'tool';
    const state = obj(part.state);
    const input = obj(state.input);
    const spawn = spawnTools.includes(name);
    out.add(
      assistant(
        null,
        messageId,
        [
          {
            type: 'tool_use',
            id,
            name: spawn ? 'Task' : name,
            input: spawn ? { ...input, subagent_type: str(input.subagent_type), tool: name } : input,
          },
        ],
        null,
        ts,
      ),
    );
    if (spawn) {
      spawned.add(id);
      if (str(input.prompt)) out.add(prompt(id, input.prompt, ts), false);
    }
    if (state.status !== 'completed' && state.status !== 'error') return;
    const failed = state.status === 'error';
    const code = num(obj(state.metadata).exit);
    let words = failed ? shown(state.error) : shown(state.output);
    if (name === 'bash' && !failed) words = withExit(words, code);
    const isError = failed || (code !== undefined && code !== 0);
    const told = spawn ? report(words) : null;
    out.add(toolResult(id, told ?? words, isError, ts), false);
    if (spawn && (told !== null || words !== '')) {
      out.add(text(id, `opencode-result-${id}`, told ?? words, ts), false);
    }
  };
  return {
    spawned,
    event(ev: Json): MappedEvent {
      const out = new Expect();
      const ms = num(ev.timestamp);
      const ts = ms === undefined || Math.abs(ms) > 8.64e15 ? null : new Date(ms).toISOString();
      if (ts !== null) lastTime = ts;
      const part = obj(ev.part);
      if (!seen) {
        seen = true;
        session = str(ev.sessionID);
        out.add(init('opencode', null, session, null, ts), false);
      }
      const messageId = str(part.messageID);
      if (ev.type === 'text') {
        lastText = shown(part.text);
        out.add(text(null, messageId, lastText, ts));
      } else if (ev.type === 'reasoning') {
        out.add(assistant(null, messageId, [{ type: 'thinking', thinking: shown(part.text) }], null, ts));
      } else if (ev.type === 'tool_use') {
        tool(part, messageId, ts, out);
      } else if (ev.type === 'step_start') {
        finished = false;
      } else if (ev.type === 'step_finish') {
        // A step that asks for tools is followed by another; only the last one ends the run.
        finished = part.reason !== 'tool-calls';
        const tokens = obj(part.tokens);
        const usage: Json = {};
        const fields = [
          ['input_tokens', tokens.input],
          ['output_tokens', tokens.output],
          ['reasoning_output_tokens', tokens.reasoning],
          ['cache_read_input_tokens', obj(tokens.cache).read],
          ['cache_creation_input_tokens', obj(tokens.cache).write],
        ];
        for (const [ours, value] of fields) if (num(value) !== undefined) usage[ours] = value;
        if (isObj(part.tokens) && Object.keys(usage).length > 0)
          out.add(assistant(null, messageId, [], usage, ts));
      } else if (ev.type === 'error') {
        const e = obj(ev.error);
        error = str(obj(e.data).message) ?? str(e.message) ?? str(e.name) ?? 'error';
        out.add(text(null, `opencode-error-${++errors}`, `[error] ${error}`, ts));
      }
      return out.event();
    },
    end(): Json[] {
      if (!seen || (error === null && !finished)) return [];
      return [result(error !== null, error ?? lastText, session, null, null, lastTime)];
    },
  };
}

test('opencode: every recorded event maps to the lines its fields call for; the result is made at the end', () => {
  for (const { name, events } of recordings('opencode')) {
    const reader = opencodeReader();
    const mapper = createOpencodeMapper();
    replay(
      mapper,
      events,
      (ev) => reader.event(ev),
      () => reader.end(),
      name,
    );
    assert.ok(reader.spawned.size > 0 || !name.includes('spawn'), name);
    for (const id of reader.spawned) assert.equal(mapper.transcriptOf(id), 'spawn-and-result', name);
    assert.equal(mapper.transcriptOf(null), 'stream');
    assert.equal(mapper.version, null);
  }
});

test('opencode: crafted events: errors by every field, reasoning, calls running or failed, odd times', () => {
  const part = (fields: Json) => ({ messageID: 'msg', ...fields });
  const tool = (fields: Json) => ({ type: 'tool_use', timestamp: 1000, sessionID: 's', part: part(fields) });
  const events: Json[] = [
    { type: 'step_start', timestamp: 8.64e15 + 1, sessionID: 's', part: part({}) },
    { type: 'reasoning', timestamp: -5, sessionID: 's', part: part({ text: 'think' }) },
    { type: 'reasoning', sessionID: 's', part: { text: { n: 1 } } },
    { type: 'text', timestamp: 1000, sessionID: 's', part: part({ text: 'said' }) },
    tool({ tool: 'read', state: { status: 'running', input: { p: 1 } } }),
    tool({ id: 'p1', tool: 'read', state: { status: 'completed', output: 'body', metadata: { exit: 0 } } }),
    tool({
      callID: 'b1',
      tool: 'bash',
      state: { status: 'completed', output: 'out', metadata: { exit: 3 } },
    }),
    tool({ callID: 'b2', tool: 'bash', state: { status: 'error', error: 'killed', metadata: { exit: 1 } } }),
    tool({ callID: 'b3', tool: 'bash', state: { status: 'completed', output: '' } }),
    tool({ callID: 'x1', state: 'none' }),
    tool({
      callID: 'k1',
      tool: 'spawn',
      state: { status: 'running', input: { prompt: 'go', subagent_type: 'gen' } },
    }),
    tool({
      callID: 'k1',
      tool: 'spawn',
      state: {
        status: 'completed',
        input: { prompt: '' },
        output: 'x <task_result>\n report \n</task_result> y',
      },
    }),
    tool({
      callID: 'k2',
      tool: 'spawn',
      state: { status: 'completed', output: '</task_result><task_result>' },
    }),
    tool({ callID: 'k3', tool: 'spawn', state: { status: 'completed', output: '' } }),
    tool({ callID: 'k4', tool: 'spawn', state: { status: 'error', error: { m: 1 } } }),
    tool({
      callID: 'k5',
      tool: 'spawn',
      state: { status: 'completed', output: '<task_result></task_result>' },
    }),
    tool({ tool: 'read', state: { status: 'completed' } }),
    {
      type: 'step_finish',
      timestamp: 1000,
      sessionID: 's',
      part: part({ tokens: { input: 1, output: 2, reasoning: 3, cache: { read: 4, write: 5 } } }),
    },
    { type: 'step_finish', timestamp: 1000, sessionID: 's', part: part({ tokens: { cache: 'x' } }) },
    { type: 'step_finish', timestamp: 1000, sessionID: 's', part: part({}) },
    {
      type: 'error',
      timestamp: 2000,
      sessionID: 's',
      error: { name: 'Named', message: 'msg', data: { message: 'deep' } },
    },
    { type: 'error', timestamp: 3000, sessionID: 's', error: { name: 'Named', message: 'msg' } },
    { type: 'error', sessionID: 's', error: { name: 'Named' } },
    { type: 'error', sessionID: 's', error: 'x' },
    { type: 'other', sessionID: 's' },
  ];
  const reader = opencodeReader(['spawn']);
  const mapper = createOpencodeMapper({ spawnTools: ['spawn'] });
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => reader.end(),
    'crafted',
  );
  // Spelled out where the reading above could share a slip with the mapper.
  assert.deepEqual(mapper.end(), [result(true, 'error', 's', null, null, '1970-01-01T00:00:03.000Z')]);
  const fresh = createOpencodeMapper();
  const first = fresh.map({
    type: 'text',
    timestamp: 0,
    sessionID: 'sess',
    part: { text: 'hi', messageID: 'm' },
  });
  assert.deepEqual(first, {
    channel: null,
    own: 1,
    lines: [
      init('opencode', null, 'sess', null, '1970-01-01T00:00:00.000Z'),
      text(null, 'm', 'hi', '1970-01-01T00:00:00.000Z'),
    ],
  });
  assert.equal(fresh.map({ type: 'step_start', sessionID: 'other', part: {} }).lines.length, 0);
  assert.deepEqual(fresh.end(), [], 'cut short inside a step: no result');
  fresh.map({ type: 'step_finish', sessionID: 'sess', part: { reason: 'tool-calls' } });
  assert.deepEqual(fresh.end(), [], 'cut short between steps: no result');
  fresh.map({ type: 'step_start', sessionID: 'sess', part: {} });
  fresh.map({ type: 'step_finish', sessionID: 'sess', part: { reason: 'stop' } });
  assert.deepEqual(fresh.end(), [result(false, 'hi', 'sess', null, null, '1970-01-01T00:00:00.000Z')]);
  assert.deepEqual(createOpencodeMapper().end(), []);
  assert.equal(taskReport('<task_result> a </task_result>'), 'a');
  assert.equal(taskReport('<task_result>a</task_result>b</task_result>'), 'a</task_result>b');
  assert.equal(taskReport('</task_result><task_result>'), null);
  assert.equal(taskReport('no report'), null);
  assert.deepEqual(OPENCODE_DEFAULTS.spawnTools, ['task']);
  assert.ok(Object.isFrozen(OPENCODE_DEFAULTS) && Object.isFrozen(OPENCODE_DEFAULTS.spawnTools));
});

test('opencode: an event has a known type, a session id, and a part unless it is an error', () => {
  for (const { events } of recordings('opencode'))
    for (const ev of events) assert.equal(isOpencodeEvent(ev), true);
  for (const type of ['step_start', 'text', 'reasoning', 'tool_use', 'step_finish', 'error']) {
    assert.equal(isOpencodeEvent({ type, sessionID: 's', part: {} }), true, type);
    assert.equal(isOpencodeEvent({ type, sessionID: 's' }), type === 'error', type);
    assert.equal(isOpencodeEvent({ type, part: {} }), false, type);
  }
  assert.equal(isOpencodeEvent({ type: 'other', sessionID: 's', part: {} }), false);
  assert.equal(isOpencodeEvent({ type: 1, sessionID: 's', part: {} }), false);
});

// ---- the shared pieces ----

test('stream lines: placeholders, arguments, times, shell results and usage by dotted field names', () => {
  assert.deepEqual(eventLine('codex', { type: 'item.completed' }, 'ch'), {
    type: 'producer_event',
    producer: 'codex',
    event: 'item.completed',
    parent_tool_use_id: 'ch',
  });
  assert.deepEqual(eventLine('gemini', { type: 'x'.repeat(150) }, null), {
    type: 'producer_event',
    producer: 'gemini',
    event: 'x'.repeat(100),
    parent_tool_use_id: null,
  });
  assert.equal(eventLine('gemini', { type: 5 }, null).event, null);
  assert.equal(eventLine('gemini', {}, null).event, null);

  assert.deepEqual(argumentsOf({ a: 1 }), { a: 1 });
  assert.deepEqual(argumentsOf('{"a":1}'), { a: 1 });
  assert.deepEqual(argumentsOf('[1]'), { input: '[1]' });
  assert.deepEqual(argumentsOf('not json'), { input: 'not json' });
  assert.deepEqual(argumentsOf(''), { input: '' });
  assert.deepEqual(argumentsOf(4), { input: 4 });
  assert.deepEqual(argumentsOf([1]), { input: [1] });
  assert.deepEqual(argumentsOf(null), {});
  assert.deepEqual(argumentsOf(undefined), {});

  assert.equal(isoFromMs(0), '1970-01-01T00:00:00.000Z');
  assert.equal(isoFromMs(8.64e15), '+275760-09-13T00:00:00.000Z');
  assert.equal(isoFromMs(-8.64e15), '-271821-04-20T00:00:00.000Z');
  assert.equal(isoFromMs(8.64e15 + 1), null);
  assert.equal(isoFromMs(-8.64e15 - 1), null);
  assert.equal(isoFromMs('1000'), null);
  assert.equal(isoFromMs(Infinity), null);
  assert.equal(finite(NaN), undefined);
  assert.equal(finite(-Infinity), undefined);
  assert.equal(finite('1'), undefined);
  assert.equal(finite(-2.5), -2.5);

  assert.equal(shellResultText('out', undefined), 'out');
  assert.equal(shellResultText('out', 0), 'out\n[exit code 0]');
  assert.equal(shellResultText('out\n', 2), 'out\n[exit code 2]');
  assert.equal(shellResultText('', -1), '[exit code -1]');

  assert.equal(textOf('t'), 't');
  assert.equal(textOf(''), '');
  assert.equal(textOf(null), '');
  assert.equal(textOf(undefined), '');
  assert.equal(textOf(0), '0');
  assert.equal(textOf(false), 'false');
  assert.equal(textOf({ a: [1] }), '{"a":[1]}');

  const names = { input_tokens: 'in', cache_read_input_tokens: 'cache.read', deep: 'a.b.c' };
  assert.deepEqual(usageOf({ in: 1, cache: { read: 2 }, a: { b: { c: 3 } } }, names), {
    input_tokens: 1,
    cache_read_input_tokens: 2,
    deep: 3,
  });
  assert.deepEqual(usageOf({ in: 0, cache: 5, a: { b: 'x' } }, names), { input_tokens: 0 });
  assert.equal(usageOf({ in: '1', cache: null }, names), null);
  assert.equal(usageOf({}, names), null);
  assert.equal(usageOf('x', names), null);
  assert.equal(usageOf([1], names), null);
  assert.equal(timestampOf({ timestamp: '' }), null);
  assert.equal(timestampOf({ timestamp: 5 }), null);
  assert.equal(timestampOf({ timestamp: 'T' }), 'T');
});

test('stream lines: each line builder makes the stream-json shape, with a time only when there is one', () => {
  const ts = '2026-12-01T00:00:00.000Z';
  assert.deepEqual(taskStartedLine('t', 'agent', 'desc', ts), {
    type: 'system',
    subtype: 'task_started',
    tool_use_id: 't',
    subagent_type: 'agent',
    description: 'desc',
    parent_tool_use_id: 't',
    timestamp: ts,
  });
  assert.deepEqual(taskStartedLine('t', null, null, null), {
    type: 'system',
    subtype: 'task_started',
    tool_use_id: 't',
    subagent_type: null,
    description: null,
    parent_tool_use_id: 't',
  });
  assert.deepEqual(taskNotificationLine('t', 'failed', 'why', ts), {
    type: 'system',
    subtype: 'task_notification',
    tool_use_id: 't',
    status: 'failed',
    summary: 'why',
    parent_tool_use_id: 't',
    timestamp: ts,
  });
  assert.deepEqual(initLine('p', '1.0', 's', 'm', null), init('p', '1.0', 's', 'm', null));
  assert.deepEqual(resultLine(false, 'r', null, { a: 1 }, 0, ts), result(false, 'r', null, { a: 1 }, 0, ts));
  assert.equal('duration_ms' in resultLine(true, null, null, null, null, null), false);
  assert.equal('usage' in resultLine(true, null, null, null, null, null), false);
  assert.deepEqual(toolResultBlock('u', 'c', false), { type: 'tool_result', tool_use_id: 'u', content: 'c' });
  assert.deepEqual(toolResultLine('ch', [], null), {
    type: 'user',
    message: { role: 'user', content: [] },
    parent_tool_use_id: 'ch',
  });
  assert.deepEqual(promptLine(null, 'p', ts), prompt(null, 'p', ts));
  assert.deepEqual(textLine('c', 'i', 'w', null), text('c', 'i', 'w', null));
  assert.deepEqual(assistantLine(null, null, [], null, null), {
    type: 'assistant',
    message: { id: null, type: 'message', role: 'assistant', content: [] },
    parent_tool_use_id: null,
  });
  assert.deepEqual(toolUseBlock('i', 'n', { a: 1 }), {
    type: 'tool_use',
    id: 'i',
    name: 'n',
    input: { a: 1 },
  });
  assert.equal(transcriptOfSpawned(new Set(['a']), 'a'), 'spawn-and-result');
  assert.equal(transcriptOfSpawned(new Set(['a']), 'b'), 'stream');
  assert.equal(transcriptOfSpawned(new Set(['null']), null), 'stream');

  const mapped = new MappedLines();
  mapped.push({ n: 1 }, false);
  assert.equal(mapped.of(null).own, -1);
  mapped.push({ n: 2 });
  mapped.push({ n: 3 });
  mapped.push({ n: 4 }, true);
  assert.deepEqual(mapped.of('c'), { channel: 'c', own: 1, lines: [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }] });
});

// ---- Claude Agent SDK ----

test('teeJsonl: passes each message on after writing it as one JSON line; a full writer holds the run', async () => {
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
