// The opencode mapper event by event: each recorded event is fed to the mapper and the lines it
// makes are compared whole with the lines an independent reading of the same event expects.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createOpencodeMapper,
  isOpencodeEvent,
  OPENCODE_DEFAULTS,
  taskReport,
} from '../src/adapters/opencode.js';
import type { MappedEvent } from '../src/adapters/stream-lines.js';
import {
  assistant,
  Expect,
  init,
  isObj,
  type Json,
  num,
  obj,
  prompt,
  recordings,
  replay,
  result,
  shown,
  str,
  text,
  toolResult,
  withExit,
} from './helpers/expected-lines.js';


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

test('opencode: every recorded event maps to the lines ' +
  'its fields call for; the result is made at the end', () => {
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
