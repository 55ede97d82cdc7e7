// InFlight (src/model/in-flight.ts) read directly: after each line, exactly what is awaited, since
// when, with which allowance, and under which name. Every allowance below is worked out from the
// limits given and the call's own input, never read back from the model.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  cleanName,
  InFlight,
  MAX_END_ID_CHARS,
  MAX_ENDS_BEFORE_START,
  MAX_TRACKED_WAITS,
  WAIT_LIMIT_DEFAULTS,
  type StreamFacts,
  type Wait,
  type WaitLimits,
} from '../src/model/in-flight.js';
import { createCodexMapper } from '../src/adapters/codex.js';
import { createGeminiMapper } from '../src/adapters/gemini.js';
import { createOpencodeMapper } from '../src/adapters/opencode.js';
import type { StreamMapper } from '../src/adapters/stream-lines.js';
import type { TranscriptKinds } from '../src/model/message.js';

/** Limits that differ from one another, so each allowance tells where it came from. */
const LIMITS: WaitLimits = {
  idleTimeoutMs: 11_000,
  modelTimeoutMs: 70_000,
  toolTimeoutMs: 45_000,
  bashDefaultTimeoutMs: 25_000,
  bashMaxTimeoutMs: 130_000,
  mcpToolTimeoutMs: null,
  bgWaitCeilingMs: 300_000,
};

type Line = Record<string, unknown>;
const SESSION = '23c2fe03-be1c-4126-9d48-89788c1c5755';
let uuids = 0;
const uuid = () => `00000000-0000-4000-8000-${String(++uuids).padStart(12, '0')}`;

// Lines as Claude Code writes them (`claude -p --output-format stream-json --verbose`).
const system = (subtype: string, fields: Line = {}): Line => ({
  type: 'system',
  subtype,
  ...fields,
  session_id: SESSION,
  uuid: uuid(),
});
const init = () => system('init', { cwd: '/srv/w', model: 'claude-opus-5-5', tools: ['Bash', 'Read'] });
const assistant = (channel: string | null, ...content: unknown[]): Line => ({
  type: 'assistant',
  message: { id: 'msg_01', type: 'message', role: 'assistant', model: 'claude-opus-5-5', content },
  parent_tool_use_id: channel,
  session_id: SESSION,
  uuid: uuid(),
});
const user = (channel: string | null, content: unknown): Line => ({
  type: 'user',
  message: { role: 'user', content },
  parent_tool_use_id: channel,
  session_id: SESSION,
  uuid: uuid(),
});
const text = (value: string) => ({ type: 'text', text: value });
const toolUse = (id: string, name: string, input: unknown = {}) => ({ type: 'tool_use', id, name, input });
const toolResult = (id: string, content: unknown = 'ok') => ({
  type: 'tool_result',
  tool_use_id: id,
  content,
  is_error: false,
});
const streamEvent = (channel: string | null, type: string): Line => ({
  type: 'stream_event',
  event: { type },
  session_id: SESSION,
  parent_tool_use_id: channel,
  uuid: uuid(),
});
const result = (channel: string | null = null): Line => ({
  type: 'result',
  subtype: 'success',
  is_error: false,
  session_id: SESSION,
  ...(channel === null ? {} : { parent_tool_use_id: channel }),
});

/** The public fields of a wait, in one row: [kind, channel, what, since, allowed, declared, graced]. */
const row = (w: Wait) => [w.kind, w.channelId, w.what, w.sinceMs, w.allowedMs, w.declared, w.graced];
const rows = (flight: InFlight) => flight.waits().map(row);
type Channel = string | null;
const modelRow = (what: string, since: number, channel: Channel) => [
  'model',
  channel,
  what,
  since,
  LIMITS.modelTimeoutMs,
  false,
  true,
];
const request = (since: number, channel: Channel = null) => modelRow('model request', since, channel);
const response = (since: number, channel: Channel = null) => modelRow('model response', since, channel);
/** A streamed message: subtee's own idle allowance, exact, so no grace. */
const streaming = (since: number, channel: Channel = null) => [
  'model',
  channel,
  'message stream',
  since,
  LIMITS.idleTimeoutMs,
  false,
  false,
];

function feed(lines: Array<[number, Line]>, limits: WaitLimits = LIMITS): InFlight {
  const flight = new InFlight(limits);
  for (const [now, value] of lines) flight.observe(value, now);
  return flight;
}

test('a recorded run with a quiet background worker: what is awaited after each of its lines', () => {
  const path = fileURLToPath(new URL('../../test/fixtures/quiet-background-worker.jsonl', import.meta.url));
  const lines = readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line);
  assert.equal(lines.length, 20);
  const spawnId = 'toolu_01007sria6ke3usameTail';
  const taskId = 'a1e7c529386c2d942';
  const { modelTimeoutMs: model, toolTimeoutMs: tool, bashDefaultTimeoutMs: bash } = LIMITS;
  const main = (what: string, since: number) => ['model', null, what, since, model, false, true];
  const worker = (what: string, since: number) => ['model', spawnId, what, since, model, false, true];
  const spawnCall = ['tool', null, 'Agent "slow worker"', 3, tool, false, true];
  // No timeout input: the Bash default.
  const echo = ['tool', spawnId, 'Bash "echo slow-ok"', 10, bash, false, true];
  // background_tasks_changed (line 4) names the task before task_started (line 5) does: it is
  // timed from line 4, and its channel is the spawn's from line 5 on (only task_started names it).
  const taskName = `background general-purpose "slow worker" (${taskId})`;
  const listed = ['background', null, taskName, 4, LIMITS.bgWaitCeilingMs, false, true];
  const task = ['background', spawnId, taskName, 4, LIMITS.bgWaitCeilingMs, false, true];
  // task_updated with an end status (line 14) ends the task; the notification after it, the channel.
  const expected: unknown[][][] = [
    /* 1 init */ [main('model request', 1)],
    /* 2 text */ [main('model response', 2)],
    /* 3 Agent, run_in_background */ [spawnCall],
    /* 4 background_tasks_changed */ [listed, spawnCall],
    /* 5 task_started */ [task, spawnCall],
    /* 6 launch result */ [task, main('model request', 6)],
    /* 7 text */ [task, main('model response', 7)],
    /* 8 worker thinks */ [task, main('model response', 7), worker('model response', 8)],
    /* 9 worker text */ [task, main('model response', 7), worker('model response', 8)],
    /* 10 worker Bash */ [task, main('model response', 7), echo],
    /* 11 task_progress */ [task, main('model response', 7), echo],
    /* 12 Bash result */ [task, main('model response', 7), worker('model request', 12)],
    /* 13 worker text */ [task, main('model response', 7), worker('model response', 13)],
    /* 14 task_updated, completed */ [main('model response', 7), worker('model response', 13)],
    /* 15 task_notification */ [main('model response', 7)],
    /* 16 background_tasks_changed [] */ [main('model response', 7)],
    /* 17 init: a new turn */ [main('model request', 17)],
    /* 18 text */ [main('model response', 18)],
    /* 19 result */ [],
    /* 20 result */ [],
  ];
  const flight = new InFlight(LIMITS);
  lines.forEach((value, index) => {
    flight.observe(value, index + 1);
    assert.deepEqual(rows(flight), expected[index], `after line ${index + 1}`);
  });
});

test("the default limits: Claude Code's own, and two minutes between a streamed message's events", () => {
  const minutes = (count: number) => count * 60 * 1000;
  assert.deepEqual(
    { ...WAIT_LIMIT_DEFAULTS },
    {
      idleTimeoutMs: minutes(2), // subtee's own
      modelTimeoutMs: minutes(10), // API_TIMEOUT_MS
      toolTimeoutMs: minutes(10), // as long as a request
      bashDefaultTimeoutMs: minutes(2), // BASH_DEFAULT_TIMEOUT_MS
      bashMaxTimeoutMs: minutes(10), // BASH_MAX_TIMEOUT_MS
      mcpToolTimeoutMs: null, // MCP_TOOL_TIMEOUT unset: the tool timeout
      bgWaitCeilingMs: minutes(10), // CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS
    },
  );
  assert.ok(Object.isFrozen(WAIT_LIMIT_DEFAULTS));
});

test('a shell call allows its own timeout input, bounded by the maximum; else the default', () => {
  const allowance = (name: string, input: unknown, limits: WaitLimits = WAIT_LIMIT_DEFAULTS) => {
    const call = assistant(null, toolUse('toolu_01b', name, input));
    const [wait] = feed(
      [
        [0, init()],
        [5, call],
      ],
      limits,
    ).waits();
    return [wait.kind, wait.allowedMs, wait.declared, wait.sinceMs];
  };
  const max = WAIT_LIMIT_DEFAULTS.bashMaxTimeoutMs;
  const byDefault = WAIT_LIMIT_DEFAULTS.bashDefaultTimeoutMs;
  assert.deepEqual(allowance('Bash', { command: 'npm test', timeout: 120_000 }), ['tool', 120_000, true, 5]);
  const asked = 900_000;
  const capped = ['tool', Math.min(asked, max), true, 5];
  assert.deepEqual(allowance('Bash', { command: 'npm test', timeout: asked }), capped);
  assert.deepEqual(allowance('Bash', { command: 'npm test', timeout: max }), ['tool', max, true, 5]);
  assert.deepEqual(allowance('PowerShell', { command: 'ls', timeout: 30_000 }), ['tool', 30_000, true, 5]);
  // A tighter environment bounds even the default.
  const tight = { ...WAIT_LIMIT_DEFAULTS, bashMaxTimeoutMs: 50_000 };
  assert.deepEqual(allowance('Bash', { command: 'make' }, tight), ['tool', 50_000, false, 5]);
  // No usable timeout input: the default, and not declared.
  for (const timeout of [undefined, '120000', 0, -5, Number.NaN, Infinity, null]) {
    const got = allowance('Bash', { command: 'make', timeout });
    assert.deepEqual(got, ['tool', byDefault, false, 5], String(timeout));
  }
  // Other tools ignore a timeout input: the tool timeout, or the MCP one when it is set.
  const otherTool = ['tool', LIMITS.toolTimeoutMs, false, 5];
  assert.deepEqual(allowance('WebFetch', { url: 'https://example.com', timeout: 1000 }, LIMITS), otherTool);
  const mcp = { ...LIMITS, mcpToolTimeoutMs: 90_000 };
  assert.deepEqual(allowance('mcp__db__query', { sql: 'select 1' }, mcp), ['tool', 90_000, false, 5]);
  assert.deepEqual(allowance('mcp__db__query', { sql: 'select 1' }, LIMITS), otherTool);
  assert.deepEqual(allowance('query_mcp__', {}, mcp), otherTool);
  assert.deepEqual(allowance('bash', { command: 'x', timeout: 1000 }, LIMITS), otherTool);
  // An input that is not an object is no input.
  assert.deepEqual(allowance('Bash', null, LIMITS), ['tool', LIMITS.bashDefaultTimeoutMs, false, 5]);
});

test('a call is named by its command, description, file, URL or pattern, in that order, cut to 80', () => {
  const named = (name: string, input: unknown) =>
    feed([
      [0, init()],
      [1, assistant(null, toolUse('toolu_01n', name, input))],
    ]).waits()[0].what;
  assert.equal(named('Bash', { command: 'npm test', description: 'run the tests' }), 'Bash "npm test"');
  const review = { description: 'review the diff', prompt: 'p', run_in_background: true };
  assert.equal(named('Agent', review), 'Agent "review the diff"');
  assert.equal(named('Read', { file_path: 'src/a.ts', offset: 3 }), 'Read "src/a.ts"');
  const url = 'https://example.com/x';
  assert.equal(named('WebFetch', { url, prompt: 'p' }), `WebFetch "${url}"`);
  assert.equal(named('Grep', { pattern: 'TODO', path: 'src' }), 'Grep "TODO"');
  assert.equal(named('TodoWrite', { todos: [] }), 'TodoWrite');
  assert.equal(named('Bash', { command: '', description: 'nothing' }), 'Bash');
  assert.equal(named('Bash', { command: 42, description: 'count' }), 'Bash "count"');
  assert.equal(named('Bash', 'ls'), 'Bash');
  const longName = `mcp__${'n'.repeat(95)}`;
  assert.equal(named(longName, {}), longName.slice(0, 80));
  // A detail is kept whole up to 80 characters; a longer one keeps 81, so that the cut shows.
  const exact = 'e'.repeat(80);
  assert.equal(named('Bash', { command: exact }), `Bash "${exact}"`);
  const over = `${'a'.repeat(81)}${'b'.repeat(119)}`;
  assert.equal(named('Bash', { command: over }), `Bash "${'a'.repeat(81)}"`);
  const huge = `${'c'.repeat(81)}${'d'.repeat(5000)}`;
  assert.equal(named('Bash', { command: huge }), `Bash "${'c'.repeat(81)}"`);
});

test('cleanName makes a name one line of at most 80 characters', () => {
  assert.equal(cleanName('  npm\n\ttest   --watch \r\n'), 'npm test --watch');
  assert.equal(cleanName('Bash "ok"'), 'Bash "ok"');
  assert.equal(cleanName('x'.repeat(80)), 'x'.repeat(80));
  assert.equal(cleanName(`${'y'.repeat(81)}`), `${'y'.repeat(80)}…`);
  assert.equal(cleanName(`  ${'z'.repeat(100)}  `), `${'z'.repeat(80)}…`);
});

test('a background task is named by its kind, description and id', () => {
  const started = (fields: Line) => system('task_started', { is_backgrounded: true, ...fields });
  const flight = feed([
    [1, started({ task_id: 'k1', tool_use_id: 'toolu_01a', subagent_type: 'Explore', description: 'dig' })],
    [2, started({ task_id: 'k2', task_type: 'local_bash', description: 'sleep 100' })],
    [3, started({ task_id: 'k3' })],
    [4, started({ task_id: `k${'4'.repeat(99)}`, subagent_type: 7, task_type: 8, description: 9 })],
  ]);
  const ceiling = LIMITS.bgWaitCeilingMs;
  assert.deepEqual(rows(flight), [
    ['background', 'toolu_01a', 'background Explore "dig" (k1)', 1, ceiling, false, true],
    ['background', null, 'background local_bash "sleep 100" (k2)', 2, ceiling, false, true],
    ['background', null, 'background task (k3)', 3, ceiling, false, true],
    ['background', null, `background task (k${'4'.repeat(79)})`, 4, ceiling, false, true],
  ]);
});

test('the model phases: a request, then a response, kept from their first line', () => {
  const model = LIMITS.modelTimeoutMs;
  // A request stays the one sent first; compacting is no request.
  const status = (value: string) => system('status', { status: value });
  const requested = feed([
    [0, init()],
    [5, status('requesting')],
    [6, status('compacting')],
  ]);
  assert.deepEqual(rows(requested), [request(0)]);
  // A response is timed from its first line, not its last.
  const thinking = { type: 'thinking', thinking: 'b' };
  const answering = feed([
    [0, init()],
    [10, assistant(null, text('a'))],
    [20, assistant(null, thinking)],
  ]);
  assert.deepEqual(rows(answering), [response(10)]);
  // A line with no init before it.
  assert.deepEqual(rows(feed([[3, assistant(null, text('hi'))]])), [response(3)]);
  // A status line on a subagent's channel is that channel's request.
  const subagentStatus = { ...status('requesting'), parent_tool_use_id: 'toolu_01s' };
  assert.deepEqual(rows(feed([[4, subagentStatus]])), [request(4, 'toolu_01s')]);
  // Compacting while a tool runs adds nothing.
  const readCall = assistant(null, toolUse('toolu_01r', 'Read', { file_path: 'a' }));
  const tool = feed([
    [0, init()],
    [1, readCall],
    [2, status('compacting')],
  ]);
  assert.deepEqual(rows(tool), [['tool', null, 'Read "a"', 1, LIMITS.toolTimeoutMs, false, true]]);
  // Text after a tool call, the call still running: the call's allowance covers it.
  const after = feed([
    [0, init()],
    [1, readCall],
    [2, assistant(null, text('and'))],
  ]);
  assert.deepEqual(rows(after), [['tool', null, 'Read "a"', 1, LIMITS.toolTimeoutMs, false, true]]);
});

test('tool results: the next request goes out after a prompt or the last awaited result only', () => {
  const model = LIMITS.modelTimeoutMs;
  const bash = (id: string, command: string, timeout: number) => toolUse(id, 'Bash', { command, timeout });
  const calls = assistant(null, bash('toolu_01x', 'quick', 40_000), bash('toolu_01y', 'slow', 50_000));
  const two: Array<[number, Line]> = [
    [0, init()],
    [1, calls],
  ];
  assert.deepEqual(rows(feed(two)), [
    ['tool', null, 'Bash "slow"', 1, 50_000, true, true],
    ['tool', null, 'Bash "quick"', 1, 40_000, true, true],
  ]);
  const half = [...two, [2, user(null, [toolResult('toolu_01y')])]] as Array<[number, Line]>;
  assert.deepEqual(rows(feed(half)), [['tool', null, 'Bash "quick"', 1, 40_000, true, true]]);
  // A result for a call never seen, the other still running: nothing changes.
  const unknown = [...half, [3, user(null, [toolResult('toolu_01zz')])]] as Array<[number, Line]>;
  assert.deepEqual(rows(feed(unknown)), [['tool', null, 'Bash "quick"', 1, 40_000, true, true]]);
  const mixed = user(null, [null, 'x', { type: 'image' }, toolResult('toolu_01x')]);
  const both = [...unknown, [4, mixed]] as Array<[number, Line]>;
  assert.deepEqual(rows(feed(both)), [request(4)]);
  // A prompt, as a block list or as plain text, sends a request; so does a result for no known call.
  assert.deepEqual(rows(feed([[7, user(null, [text('go on')])]])), [request(7)]);
  assert.deepEqual(rows(feed([[8, user(null, 'go on')]])), [request(8)]);
  const noContent = { ...user(null, []), message: { role: 'user' } };
  assert.deepEqual(rows(feed([[8, noContent]])), [request(8)]);
  // A prompt while a call runs (a queued message): the model is asked again, the call still awaited.
  const readA = assistant(null, toolUse('toolu_01r', 'Read', { file_path: 'a' }));
  const running = feed([
    [0, init()],
    [1, readA],
    [6, user(null, [text('also check b')])],
  ]);
  assert.deepEqual(rows(running), [
    request(6),
    ['tool', null, 'Read "a"', 1, LIMITS.toolTimeoutMs, false, true],
  ]);
  assert.deepEqual(rows(feed([[9, user(null, [toolResult('toolu_01q')])]])), [request(9)]);
  // Blocks that are not tool calls, or not whole ones, are not calls.
  const partial = { type: 'tool_use', id: 'toolu_01w' };
  const odd = feed([
    [0, init()],
    [2, assistant(null, null, 'x', partial, text('t'))],
  ]);
  assert.deepEqual(rows(odd), [response(2)]);
});

test('lines that are not stream lines change nothing', () => {
  const flight = feed([
    [0, init()],
    [1, assistant(null, toolUse('toolu_01r', 'Read', { file_path: 'a' }))],
  ]);
  const before = rows(flight);
  for (const value of [
    { type: 'rate_limit_event', rate_limit_info: { status: 'allowed' } },
    { type: 'assistant', parent_tool_use_id: null },
    { type: 'user', message: 'text' },
    { type: 'system', subtype: 3 },
    { type: 'stream_event', event: null },
    { type: 'stream_event', event: { type: 'content_block_delta' } },
    { type: 'stream_event', event: { type: 'message_delta' } },
    system('task_progress', { task_id: 'k1', tool_use_id: 'toolu_01r' }),
    system('task_started', { task_id: 'k2', tool_use_id: 'toolu_01r', subagent_type: 'x' }),
    system('task_started', { task_id: 'k3', is_backgrounded: 'true' }),
    system('task_started', { task_id: 4, is_backgrounded: true }),
    system('background_tasks_changed', { tasks: { task_id: 'k5' } }),
    system('background_tasks_changed'),
  ]) {
    flight.observe(value, 9);
    assert.deepEqual(rows(flight), before, JSON.stringify(value));
  }
});

test('a streamed message allows the idle timeout between its events, without a grace', () => {
  const idle = LIMITS.idleTimeoutMs;
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  step(0, init());
  assert.deepEqual(step(1, streamEvent(null, 'message_start')), [streaming(1)]);
  assert.deepEqual(step(2, streamEvent(null, 'content_block_delta')), [streaming(1)]);
  // Inside the stream, a finished block and a status line leave the stream as what is awaited.
  assert.deepEqual(step(3, assistant(null, text('x'))), [streaming(1)]);
  assert.deepEqual(step(4, system('status', { status: 'requesting' })), [streaming(1)]);
  assert.deepEqual(step(5, assistant(null, toolUse('toolu_01b', 'Bash', { command: 'b', timeout: 9000 }))), [
    streaming(1),
    ['tool', null, 'Bash "b"', 5, 9000, true, true],
  ]);
  const bashRow = ['tool', null, 'Bash "b"', 5, 9000, true, true];
  assert.deepEqual(step(6, streamEvent(null, 'message_stop')), [bashRow]);
  assert.deepEqual(step(7, user(null, [toolResult('toolu_01b')])), [request(7)]);
  // After message_stop a plain line is the model answering again.
  step(8, streamEvent(null, 'message_start'));
  step(9, streamEvent(null, 'message_stop'));
  assert.deepEqual(step(10, assistant(null, text('late'))), [response(10)]);
  // A subagent's stream is its own.
  assert.deepEqual(step(11, streamEvent('toolu_01s', 'message_start')), [
    response(10),
    streaming(11, 'toolu_01s'),
  ]);
});

test('a foreground subagent is awaited through its own channel, and ends with its result', () => {
  const model = LIMITS.modelTimeoutMs;
  const spawn = (id: string, name = 'Agent') =>
    assistant(null, toolUse(id, name, { description: `sub ${id}`, prompt: 'p', subagent_type: 'Explore' }));
  // The spawn itself is no wait: its channel's first request is.
  for (const name of ['Agent', 'Task']) {
    const spawned = feed([
      [0, init()],
      [1, spawn('toolu_01A', name)],
    ]);
    assert.deepEqual(rows(spawned), [request(1, 'toolu_01A')], name);
  }
  // The subagent's lines came first: its spawn adds no request over its running call.
  const early = feed([
    [0, init()],
    [1, assistant('toolu_01A', toolUse('toolu_01a1', 'Bash', { command: 'npm test', timeout: 95_000 }))],
    [2, spawn('toolu_01A')],
  ]);
  assert.deepEqual(rows(early), [['tool', 'toolu_01A', 'Bash "npm test"', 1, 95_000, true, true]]);
  // Its result ends it: its own calls are no longer awaited, the parent's next request is.
  const ended = feed([
    [0, init()],
    [1, spawn('toolu_01A')],
    [2, assistant('toolu_01A', toolUse('toolu_01a1', 'Bash', { command: 'npm test', timeout: 95_000 }))],
    [3, user(null, [toolResult('toolu_01A', [text('Report: done.')])])],
  ]);
  assert.deepEqual(rows(ended), [request(3)]);
  // A spawn its agent's definition sends to the background: the launch result leaves it running.
  const launched = feed([
    [0, init()],
    [
      1,
      assistant(null, toolUse('toolu_01B', 'Agent', { description: 'bg', prompt: 'p', subagent_type: 'w' })),
    ],
    [2, assistant('toolu_01B', toolUse('toolu_01b1', 'Grep', { pattern: 'x' }))],
    [3, user(null, [toolResult('toolu_01B', [text('Async agent launched successfully.\nagentId: a1')])])],
  ]);
  assert.deepEqual(rows(launched), [
    request(3),
    ['tool', 'toolu_01B', 'Grep "x"', 2, LIMITS.toolTimeoutMs, false, true],
  ]);
  // task_notification ends a subagent's channel, also without a task id.
  launched.observe(system('task_notification', { tool_use_id: 'toolu_01B', status: 'completed' }), 4);
  assert.deepEqual(rows(launched), [request(3)]);
  // A notification for a channel already ended, or never seen, changes nothing.
  launched.observe(system('task_notification', { tool_use_id: 'toolu_01B', status: 'completed' }), 5);
  launched.observe(
    system('task_notification', { task_id: 'k0', tool_use_id: 'toolu_01Z', status: 'failed' }),
    6,
  );
  assert.deepEqual(rows(launched), [request(3)]);
});

test('a subagent stopped by the user is awaited no more: neither its calls nor its background task', () => {
  const flight = feed([
    [0, init()],
    [1, assistant(null, toolUse('toolu_01S', 'Agent', { description: 'bg', run_in_background: true }))],
    [2, system('task_started', { task_id: 'k1', tool_use_id: 'toolu_01S', is_backgrounded: true })],
    [3, user(null, [toolResult('toolu_01S', [text('Async agent launched successfully.\nagentId: a1')])])],
    [4, assistant('toolu_01S', toolUse('toolu_01s1', 'Grep', { pattern: 'x' }))],
  ]);
  assert.deepEqual(
    rows(flight).map(([kind, channel]) => [kind, channel]),
    [
      ['background', 'toolu_01S'],
      ['model', null],
      ['tool', 'toolu_01S'],
    ],
  );
  const stop = { task_id: 'k1', tool_use_id: 'toolu_01S', status: 'stopped' };
  flight.observe(system('task_notification', { ...stop, summary: 'Task stopped by user' }), 5);
  assert.deepEqual(rows(flight), [request(3)]);
});

/** A recording of another CLI through its own mapper, as the chain maps it: the waits after each event. */
function mappedWaits(
  producer: string,
  mapper: StreamMapper,
  file: string,
  limits: WaitLimits,
): unknown[][][] {
  const path = fileURLToPath(new URL(`../../test/fixtures/other-agents/${file}`, import.meta.url));
  const events = readFileSync(path, 'utf8').split('\n').filter(Boolean);
  const flight = new InFlight(limits, { producer, transcripts: mapper });
  const after: unknown[][][] = [];
  events.forEach((event, index) => {
    for (const line of mapper.map(JSON.parse(event)).lines) flight.observe(line, index + 1);
    after.push(rows(flight));
  });
  for (const line of mapper.end()) flight.observe(line, events.length + 1);
  after.push(rows(flight));
  return after;
}

/** Limits where the tool allowance is the larger: a subagent the stream does not show gets it. */
const TOOL_LONGER: WaitLimits = { ...LIMITS, toolTimeoutMs: 95_000 };

test('a Gemini CLI subagent, shown only spawned and ended, is awaited as its call: the larger of the ' +
  'model and tool allowances, its channel awaiting nothing', () => {
  const unseen = (id: string, prompt: string, since: number, allowed: number) =>
    ['tool', null, `Task "${prompt}"`, since, allowed, false, true];
  const [a, b] = ['invoke_agent__invoke_agent_1796151785122_0', 'invoke_agent__invoke_agent_1796151785465_1'];
  for (const limits of [TOOL_LONGER, LIMITS]) {
    const longer = Math.max(limits.modelTimeoutMs, limits.toolTimeoutMs);
    const req = (since: number) =>
      ['model', null, 'model request', since, limits.modelTimeoutMs, false, true];
    const expected = [
      /* 1 init */ [req(1)],
      /* 2 prompt */ [req(1)],
      /* 3-5 text pieces */ [req(1)],
      [req(1)],
      [req(1)],
      /* 6 invoke_agent 0, and its prompt on its channel */ [unseen(a, 'SCRIPT:leaf:0', 6, longer)],
      /* 7 invoke_agent 1 */ [unseen(a, 'SCRIPT:leaf:0', 6, longer), unseen(b, 'SCRIPT:leaf:1', 7, longer)],
      /* 8 result 0, and its text on its channel */ [unseen(b, 'SCRIPT:leaf:1', 7, longer)],
      /* 9 result 1: the next request */ [req(9)],
      /* 10-13 text pieces */ [req(9)],
      [req(9)],
      [req(9)],
      [req(9)],
      /* 14 result */ [],
      /* end */ [],
    ];
    const after = mappedWaits('gemini', createGeminiMapper(), 'gemini/two-subagents.jsonl', limits);
    after.forEach((waits, index) => assert.deepEqual(waits, expected[index], `after event ${index + 1}`));
  }
});

test('a Codex agent, shown only spawned and ended, is awaited as its call from spawn_agent to the wait ' +
  'that ends it: the larger of the model and tool allowances', () => {
  const [a, b] = ['01a232fc-b34f-7872-b0f4-99f098067015', '01a232fc-b366-7291-a240-d2548af29c8f'];
  for (const limits of [TOOL_LONGER, LIMITS]) {
    const longer = Math.max(limits.modelTimeoutMs, limits.toolTimeoutMs);
    const model = (what: string, since: number) =>
      ['model', null, what, since, limits.modelTimeoutMs, false, true];
    const agent = (id: string, since: number) =>
      ['tool', null, `Task "SCRIPT:leaf:${id === a ? 0 : 1}"`, since, longer, false, true];
    const wait = (since: number) => ['tool', null, 'wait', since, limits.toolTimeoutMs, false, true];
    // Spawns allowed longer than the wait are listed before it; with equal allowances, oldest first.
    const byAllowance = (...waits: unknown[][]) =>
      limits === LIMITS
        ? waits.filter((w) => w[2] !== 'wait').concat(waits.filter((w) => w[2] === 'wait'))
        : waits;
    const expected = [
      /* 1 thread.started */ [model('model request', 1)],
      /* 2 error item */ [model('model response', 2)],
      /* 3 turn.started */ [model('model response', 2)],
      /* 4 agent_message */ [model('model response', 2)],
      /* 5 spawn_agent started */ [model('model response', 2)],
      /* 6 spawn_agent completed: thread a */ [agent(a, 6)],
      /* 7 spawn_agent started */ [agent(a, 6)],
      /* 8 spawn_agent completed: thread b */ [agent(a, 6), agent(b, 8)],
      /* 9 wait started */ byAllowance(agent(a, 6), agent(b, 8), wait(9)),
      /* 10 wait completed: a done */ [agent(b, 8)],
      /* 11 wait started */ byAllowance(agent(b, 8), wait(11)),
      /* 12 wait completed: b done, the next request */ [model('model request', 12)],
      /* 13 agent_message */ [model('model response', 13)],
      /* 14 turn.completed */ [],
      /* end */ [],
    ];
    const after = mappedWaits('codex', createCodexMapper(), 'codex/two-subagents.jsonl', limits);
    after.forEach((waits, index) => assert.deepEqual(waits, expected[index], `after event ${index + 1}`));
  }
});

test('opencode, which prints a call only once it has ended: every model wait allows the larger of the ' +
  'model and tool allowances and says a call may be running; its tasks leave no wait behind', () => {
  for (const limits of [TOOL_LONGER, LIMITS]) {
    const longer = Math.max(limits.modelTimeoutMs, limits.toolTimeoutMs);
    const step = (phase: string, since: number) =>
      ['model', null, `${phase} or a tool call not yet shown`, since, longer, false, true];
    const expected = [
      /* 1 step_start */ [step('model request', 1)],
      /* 2 text */ [step('model response', 2)],
      /* 3 task 1, ended */ [step('model request', 3)],
      /* 4 task 0, ended */ [step('model request', 4)],
      /* 5 step_finish */ [step('model response', 5)],
      /* 6 step_start */ [step('model response', 5)],
      /* 7 text */ [step('model response', 5)],
      /* 8 step_finish */ [step('model response', 5)],
      /* end: the run's result */ [],
    ];
    const after = mappedWaits('opencode', createOpencodeMapper(), 'opencode/spawn-2.jsonl', limits);
    after.forEach((waits, index) => assert.deepEqual(waits, expected[index], `after event ${index + 1}`));
  }
  // A call the stream shows while it runs is awaited as it is (opencode prints none such today).
  const flight = new InFlight(TOOL_LONGER, { producer: 'opencode', transcripts: null });
  flight.observe(assistant(null, toolUse('call-1', 'bash', { command: 'make' })), 1);
  assert.deepEqual(rows(flight), [['tool', null, 'bash "make"', 1, TOOL_LONGER.toolTimeoutMs, false, true]]);
});

test('a spawned channel the stream carries (Claude Code, Copilot CLI) is still awaited by its own ' +
  'lines', () => {
  // The same spawn, streamed: its channel's first request decides, at the model allowance.
  const copilot = { producer: 'copilot', transcripts: { transcriptOf: () => 'stream' as const } };
  const streamed = new InFlight(TOOL_LONGER, copilot);
  streamed.observe(init(), 0);
  streamed.observe(assistant(null, toolUse('call-A', 'Task', { description: 'dig', prompt: 'p' })), 1);
  const childRequest = ['model', 'call-A', 'model request', 1, LIMITS.modelTimeoutMs, false, true];
  assert.deepEqual(rows(streamed), [childRequest]);
  // Shown only spawned and ended: the call is awaited, its prompt and result on its channel add nothing.
  const unseen = new InFlight(TOOL_LONGER, {
    producer: null,
    transcripts: { transcriptOf: (channel) => (channel === 'call-A' ? 'spawn-and-result' : 'stream') },
  });
  unseen.observe(init(), 0);
  unseen.observe(assistant(null, toolUse('call-A', 'Task', { description: 'dig', prompt: 'p' })), 1);
  unseen.observe(user('call-A', 'p'), 1);
  unseen.observe(assistant('call-A', toolUse('call-A1', 'Read', { file_path: 'x' })), 2);
  const call = ['tool', null, 'Task "dig"', 1, TOOL_LONGER.toolTimeoutMs, false, true];
  assert.deepEqual(rows(unseen), [call]);
  unseen.observe(user(null, [toolResult('call-A', 'done')]), 3);
  unseen.observe(assistant('call-A', text('done')), 3);
  assert.deepEqual(rows(unseen), [request(3)]);
});

test("the run's stream facts are read as each line comes, never copied when the flight is made: " +
  'transcripts stated later decide the spawns after them', () => {
  const facts: StreamFacts & { transcripts: TranscriptKinds | null } = { producer: null, transcripts: null };
  const flight = new InFlight(TOOL_LONGER, facts);
  flight.observe(init(), 0);
  facts.transcripts = { transcriptOf: (channel) => (channel === 'call-A' ? 'spawn-and-result' : 'stream') };
  flight.observe(assistant(null, toolUse('call-A', 'Task', { description: 'dig', prompt: 'p' })), 1);
  flight.observe(user('call-A', 'p'), 1);
  assert.deepEqual(rows(flight), [['tool', null, 'Task "dig"', 1, TOOL_LONGER.toolTimeoutMs, false, true]]);
});

test('background tasks: started, listed again, replaced by the list, ended', () => {
  const ceiling = LIMITS.bgWaitCeilingMs;
  const bg = (id: string, since: number, channel: Channel = null) => [
    'background',
    channel,
    `background Explore "${id}" (${id})`,
    since,
    ceiling,
    false,
    true,
  ];
  const entry = (id: string) => ({
    task_id: id,
    task_type: 'local_agent',
    subagent_type: 'Explore',
    description: id,
  });
  const started = (id: string) =>
    system('task_started', { ...entry(id), tool_use_id: `toolu_${id}`, is_backgrounded: true });
  const listed = (...ids: string[]) => system('background_tasks_changed', { tasks: ids.map(entry) });
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  assert.deepEqual(step(1, started('k1')), [bg('k1', 1, 'toolu_k1')]);
  // Started again later: still timed from the first.
  assert.deepEqual(step(2, started('k1')), [bg('k1', 1, 'toolu_k1')]);
  assert.deepEqual(step(3, started('k2')), [bg('k1', 1, 'toolu_k1'), bg('k2', 3, 'toolu_k2')]);
  // The list names every task alive: k1 keeps its start and channel, k2 is gone, k3 is new;
  // odd entries are skipped.
  const list = listed('k1', 'k3');
  (list.tasks as unknown[]).push(null, 'k9', { task_id: 9 });
  const k1 = bg('k1', 1, 'toolu_k1');
  assert.deepEqual(step(5, list), [k1, bg('k3', 5)]);
  // task_notification without the task's own id leaves it.
  assert.deepEqual(step(6, system('task_notification', { status: 'completed' })), [k1, bg('k3', 5)]);
  const notified = system('task_notification', { task_id: 'k1', status: 'completed' });
  assert.deepEqual(step(7, notified), [bg('k3', 5)]);
  // After the run's result only background tasks are awaited; a subagent's result ends nothing.
  step(8, init());
  assert.equal(step(9, result('toolu_01A')).length, 2);
  assert.deepEqual(step(10, result()), [bg('k3', 5)]);
});

test('waits are listed by allowance, longest first (no limit before all), then oldest first', () => {
  const unbounded = { ...LIMITS, bgWaitCeilingMs: 0 };
  const bash = (id: string, timeout: number) =>
    assistant(null, toolUse(id, 'Bash', { command: id, timeout }));
  const flight = feed(
    [
      [0, init()],
      [5, bash('b5', 30_000)],
      [2, bash('b2', 30_000)],
      [9, bash('b9', 30_000)],
      [1, bash('b1', 20_000)],
      [3, bash('b3', 60_000)],
      [7, system('task_started', { task_id: 'k7', is_backgrounded: true })],
    ],
    unbounded,
  );
  assert.deepEqual(
    flight.waits().map((w) => [w.what, w.allowedMs]),
    [
      ['background task (k7)', null],
      ['Bash "b3"', 60_000],
      ['Bash "b2"', 30_000],
      ['Bash "b5"', 30_000],
      ['Bash "b9"', 30_000],
      ['Bash "b1"', 20_000],
    ],
  );
});

// ---- ends that come before what they end: lines of different channels interleave ----

test("a call whose result came before its line is not awaited: the result's channel is not held", () => {
  const bash = (id: string, timeout: number) => toolUse(id, 'Bash', { command: id, timeout });
  const spawn = (id: string, input: Line = {}) =>
    assistant(null, toolUse(id, 'Agent', { description: `sub ${id}`, prompt: 'p', ...input }));
  // A foreground subagent's report first, then its spawn: the parent's request (out since init)
  // is awaited, no request of the subagent's.
  const reported = feed([
    [0, init()],
    [1, user(null, [toolResult('toolu_01A', [text('Report: done.')])])],
    [2, spawn('toolu_01A')],
  ]);
  assert.deepEqual(rows(reported), [request(0)]);
  // Its own lines came first too, a long command among them: the report ends them, and a line
  // of it after its spawn opens nothing again.
  const early = feed([
    [0, init()],
    [1, assistant('toolu_01A', bash('toolu_01a1', 95_000))],
    [2, user(null, [toolResult('toolu_01A', [text('Report: done.')])])],
    [3, spawn('toolu_01A')],
    [4, assistant('toolu_01A', text('late'))],
  ]);
  assert.deepEqual(rows(early), [request(0)]);
  // A plain call answered first; with another still running, that one alone is awaited.
  const plain = feed([
    [0, init()],
    [1, user(null, [toolResult('toolu_01b')])],
    [2, assistant(null, bash('toolu_01b', 95_000))],
  ]);
  assert.deepEqual(rows(plain), [request(0)]);
  const beside = feed([
    [0, init()],
    [1, assistant(null, toolUse('toolu_01r', 'Read', { file_path: 'a' }))],
    [2, user(null, [toolResult('toolu_01b')])],
    [3, assistant(null, bash('toolu_01b', 95_000))],
  ]);
  assert.deepEqual(rows(beside), [['tool', null, 'Read "a"', 1, LIMITS.toolTimeoutMs, false, true]]);
  // A streamed message whose call was answered first: at its stop the next request is out.
  const streamed = feed([
    [0, init()],
    [1, user(null, [toolResult('toolu_01b')])],
    [2, streamEvent(null, 'message_start')],
    [3, assistant(null, bash('toolu_01b', 95_000))],
    [4, streamEvent(null, 'message_stop')],
  ]);
  assert.deepEqual(rows(streamed), [request(4)]);
  // A background launch first: the launch is no wait, but the subagent runs on in its channel.
  const launched = feed([
    [0, init()],
    [1, user(null, [toolResult('toolu_01B', [text('Async agent launched successfully.\nagentId: a1')])])],
    [2, spawn('toolu_01B', { run_in_background: true })],
    [3, assistant('toolu_01B', toolUse('toolu_01b1', 'Grep', { pattern: 'x' }))],
  ]);
  assert.deepEqual(rows(launched), [
    request(0),
    ['tool', 'toolu_01B', 'Grep "x"', 3, LIMITS.toolTimeoutMs, false, true],
  ]);
  // A result is applied to its call once: the same id shown again is a call of its own.
  reported.observe(assistant(null, bash('toolu_01A', 95_000)), 5);
  assert.deepEqual(rows(reported), [['tool', null, 'Bash "toolu_01A"', 5, 95_000, true, true]]);
});

test('a task_notification before its task_started: the task is not awaited; a later spawn of the ' +
  'same task is', () => {
  const started = (taskId: string, spawnId: string) =>
    system('task_started', { task_id: taskId, tool_use_id: spawnId, is_backgrounded: true });
  const notified = (taskId: string, spawnId: string) =>
    system('task_notification', { task_id: taskId, tool_use_id: spawnId, status: 'completed' });
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  assert.deepEqual(step(1, notified('k1', 'toolu_01k')), []);
  assert.deepEqual(step(2, started('k1', 'toolu_01k')), []);
  // Listed (without its spawn) between the two: the list was taken before the notification was
  // processed, and the task_started that names its spawn is over.
  step(3, notified('k2', 'toolu_01m'));
  const listed = system('background_tasks_changed', { tasks: [{ task_id: 'k2' }] });
  assert.deepEqual(step(4, listed), []);
  assert.deepEqual(step(5, started('k2', 'toolu_01m')), []);
  // A subagent whose notification came before its lines: they open no channel.
  assert.deepEqual(step(6, assistant('toolu_01k', text('late'))), []);
  // The same task started again by a new spawn (resumed) runs again.
  assert.deepEqual(step(7, started('k1', 'toolu_01n')), [
    ['background', 'toolu_01n', 'background task (k1)', 7, LIMITS.bgWaitCeilingMs, false, true],
  ]);
});

test('a background task whose task_notification (task_id only) came before its task_started is not ' +
  'awaited', () => {
  const started = (taskId: string, fields: Line = {}) =>
    system('task_started', { task_id: taskId, is_backgrounded: true, ...fields });
  const notified = (taskId: string) => system('task_notification', { task_id: taskId, status: 'completed' });
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  // An agent's task_started names its spawn, a notification of the task id alone does not.
  assert.deepEqual(step(1, notified('k1')), []);
  assert.deepEqual(step(2, started('k1', { tool_use_id: 'toolu_01k' })), []);
  // A command's task, neither line naming a spawn.
  assert.deepEqual(step(3, notified('k2')), []);
  assert.deepEqual(step(4, started('k2', { task_type: 'local_bash' })), []);
  // The end is applied once: the same task started again by a new spawn (resumed) runs again.
  assert.deepEqual(step(5, started('k1', { tool_use_id: 'toolu_01n' })), [
    ['background', 'toolu_01n', 'background task (k1)', 5, LIMITS.bgWaitCeilingMs, false, true],
  ]);
  // Notified by the task id alone after its start: that start is what ended, not the next one.
  assert.deepEqual(step(6, notified('k1')), []);
  assert.deepEqual(step(7, started('k1', { tool_use_id: 'toolu_01r' })), [
    ['background', 'toolu_01r', 'background task (k1)', 7, LIMITS.bgWaitCeilingMs, false, true],
  ]);
});

test('a background_tasks_changed that still lists a task already notified does not await it again', () => {
  const agent = { task_type: 'local_agent' };
  const started = (taskId: string, spawnId: string) =>
    system('task_started', { task_id: taskId, tool_use_id: spawnId, ...agent, is_backgrounded: true });
  const notified = (fields: Line) => system('task_notification', { ...fields, status: 'completed' });
  const listed = (...ids: string[]) =>
    system('background_tasks_changed', { tasks: ids.map((id) => ({ task_id: id, ...agent })) });
  const task = (taskId: string, since: number, spawnId: string | null = null) =>
    ['background', spawnId, `background local_agent (${taskId})`, since, LIMITS.bgWaitCeilingMs, false, true];
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  step(1, listed('k1', 'k2'));
  step(2, started('k1', 'toolu_01k'));
  assert.deepEqual(step(3, notified({ task_id: 'k1', tool_use_id: 'toolu_01k' })), [task('k2', 1)]);
  // A list taken before the notification was processed: k1 is over, k2 still runs.
  assert.deepEqual(step(4, listed('k1', 'k2')), [task('k2', 1)]);
  // The same with a notification of the task id alone, and with one that came before its task_started.
  assert.deepEqual(step(5, notified({ task_id: 'k2' })), []);
  assert.deepEqual(step(6, listed('k1', 'k2')), []);
  step(7, notified({ task_id: 'k3', tool_use_id: 'toolu_01m' }));
  assert.deepEqual(step(8, listed('k3')), []);
  assert.deepEqual(step(9, started('k3', 'toolu_01m')), []);
  assert.deepEqual(step(10, listed('k3')), []);
  // A task started again by a new spawn (resumed) is listed as running again.
  assert.deepEqual(step(11, started('k1', 'toolu_01r')), [task('k1', 11, 'toolu_01r')]);
  assert.deepEqual(step(12, listed('k1')), [task('k1', 11, 'toolu_01r')]);
  // What is kept is bounded: past MAX_ENDS_BEFORE_START later ends, the oldest is forgotten.
  const later = Array.from({ length: MAX_ENDS_BEFORE_START }, (_, index) => `n${index}`);
  for (const id of ['k4', ...later]) step(13, notified({ task_id: id }));
  assert.deepEqual(step(14, listed('k4', later[0])), [task('k4', 14)]);
});

test('a task_notification naming only its spawn ends the background task started on that spawn', () => {
  const agent = { task_type: 'local_agent' };
  const started = (taskId: string, spawnId: string) =>
    system('task_started', { task_id: taskId, tool_use_id: spawnId, ...agent, is_backgrounded: true });
  const notified = (spawnId: string) =>
    system('task_notification', { tool_use_id: spawnId, status: 'completed' });
  const listed = (...ids: string[]) =>
    system('background_tasks_changed', { tasks: ids.map((id) => ({ task_id: id, ...agent })) });
  const task = (taskId: string, since: number, spawnId: string | null) =>
    ['background', spawnId, `background local_agent (${taskId})`, since, LIMITS.bgWaitCeilingMs, false, true];
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  step(1, started('k1', 'toolu_01a'));
  step(2, started('k2', 'toolu_01b'));
  assert.deepEqual(step(3, notified('toolu_01a')), [task('k2', 2, 'toolu_01b')]);
  // A list taken before the notification was processed does not bring the task back.
  assert.deepEqual(step(4, listed('k1', 'k2')), [task('k2', 2, 'toolu_01b')]);
  // A spawn no task was started on: nothing ends.
  assert.deepEqual(step(5, notified('toolu_01z')), [task('k2', 2, 'toolu_01b')]);
  // A task listed before its task_started names the spawn ends by that spawn too.
  assert.deepEqual(step(6, listed('k2', 'k3')), [task('k2', 2, 'toolu_01b'), task('k3', 6, null)]);
  step(7, started('k3', 'toolu_01c'));
  assert.deepEqual(step(8, notified('toolu_01c')), [task('k2', 2, 'toolu_01b')]);
  // Resumed by a new spawn, a task is ended by that spawn's notification, not by its first spawn's.
  step(9, started('k1', 'toolu_01d'));
  assert.deepEqual(step(10, notified('toolu_01a')), [
    task('k2', 2, 'toolu_01b'),
    task('k1', 9, 'toolu_01d'),
  ]);
  assert.deepEqual(step(11, notified('toolu_01d')), [task('k2', 2, 'toolu_01b')]);
});

test('a task_updated whose patch.status is completed, failed or killed ends its task; running, pending or ' +
  'any other patch changes nothing', () => {
  const started = system('task_started', { task_id: 'k1', tool_use_id: 'toolu_01a', is_backgrounded: true });
  const task = ['background', 'toolu_01a', 'background task (k1)', 1, LIMITS.bgWaitCeilingMs, false, true];
  const updated = (patch: unknown) => system('task_updated', { task_id: 'k1', patch });
  const after = (update: Line) =>
    rows(
      feed([
        [1, started],
        [2, update],
        // A list taken before the update was processed.
        [3, system('background_tasks_changed', { tasks: [{ task_id: 'k1' }] })],
      ]),
    );
  for (const status of ['completed', 'failed', 'killed'])
    assert.deepEqual(after(updated({ status, end_time: 1796039368000 })), [], status);
  const notEnds: unknown[] = [
    { status: 'running' },
    { status: 'pending' },
    { status: 'stopped' },
    { status: 'Completed' },
    { description: 'completed' },
    {},
    'completed',
    null,
  ];
  for (const patch of notEnds) assert.deepEqual(after(updated(patch)), [task], JSON.stringify(patch));
  // The status outside the patch, or a task_updated naming no task, ends nothing either.
  assert.deepEqual(after(system('task_updated', { task_id: 'k1', status: 'completed' })), [task]);
  assert.deepEqual(after(system('task_updated', { patch: { status: 'completed' } })), [task]);
});

/** Lines of one background task's life, as Claude Code writes them, and its row while awaited. */
const taskLines = {
  started: (taskId: string, fields: Line = {}) =>
    system('task_started', { task_id: taskId, is_backgrounded: true, ...fields }),
  updated: (taskId: string) =>
    system('task_updated', { task_id: taskId, patch: { status: 'completed', end_time: 1796039368000 } }),
  notified: (fields: Line) => system('task_notification', { ...fields, status: 'completed' }),
  row: (taskId: string, since: number, spawnId: string | null, kind = 'task') =>
    ['background', spawnId, `background ${kind} (${taskId})`, since, LIMITS.bgWaitCeilingMs, false, true],
};

test('a task_updated end before its task_started ends that start only: the task resumed by a new spawn ' +
  'is awaited', () => {
  const { started, updated, row } = taskLines;
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  assert.deepEqual(step(1, updated('k1')), []);
  assert.deepEqual(step(2, started('k1', { tool_use_id: 'toolu_01a' })), []);
  assert.deepEqual(step(3, started('k1', { tool_use_id: 'toolu_01b' })), [row('k1', 3, 'toolu_01b')]);
});

test('a task ended by its task_updated, then by its task_notification, is awaited again when resumed', () => {
  const { started, updated, notified, row } = taskLines;
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  // An agent's: the notification names the task and its spawn.
  step(1, started('k1', { tool_use_id: 'toolu_01a' }));
  assert.deepEqual(step(2, updated('k1')), []);
  assert.deepEqual(step(3, notified({ task_id: 'k1', tool_use_id: 'toolu_01a' })), []);
  assert.deepEqual(step(4, started('k1', { tool_use_id: 'toolu_01b' })), [row('k1', 4, 'toolu_01b')]);
  // A notification naming the task alone, after the task_updated, ends the same start.
  const command = { task_type: 'local_bash' };
  step(5, started('k2', command));
  step(6, updated('k2'));
  assert.deepEqual(step(7, notified({ task_id: 'k2' })), [row('k1', 4, 'toolu_01b')]);
  assert.deepEqual(step(8, started('k2', command)), [
    row('k1', 4, 'toolu_01b'),
    row('k2', 8, null, 'local_bash'),
  ]);
});

test('a foreground task ended by its task_updated is awaited when resumed in the background', () => {
  const { started, updated, row } = taskLines;
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  // Awaited through its spawn's channel, not as a task.
  assert.deepEqual(step(1, started('k1', { tool_use_id: 'toolu_01a', is_backgrounded: false })), []);
  assert.deepEqual(step(2, updated('k1')), []);
  assert.deepEqual(step(3, started('k1', { tool_use_id: 'toolu_01b' })), [row('k1', 3, 'toolu_01b')]);
});

// ---- bounded state: MAX_TRACKED_WAITS channels, calls and tasks are tracked one by one ----

const read = (id: string, channel: Channel = null) =>
  assistant(channel, toolUse(id, 'Read', { file_path: id }));
/** `count` Read calls on main, one a line, all at `now`. */
function reads(flight: InFlight, count: number, now: number, prefix = 'r') {
  for (let index = 0; index < count; index++) flight.observe(read(`${prefix}${index}`), now);
}
const overflowOf = (flight: InFlight) =>
  flight.waits().filter((w) => w.what.endsWith('not tracked one by one'));
/** How many calls the folded wait counts (0: none). */
const foldedCount = (flight: InFlight) =>
  Number(/^(\d+) more calls/.exec(overflowOf(flight)[0]?.what ?? '')?.[1] ?? 0);

test('exactly MAX_TRACKED_WAITS are tracked; past it calls, channels and tasks fold into one wait', () => {
  const flight = new InFlight(LIMITS);
  flight.observe(init(), 0);
  // The main channel is one; the calls fill the rest.
  reads(flight, MAX_TRACKED_WAITS - 1, 1);
  assert.equal(flight.waits().length, MAX_TRACKED_WAITS - 1);
  assert.deepEqual(overflowOf(flight), []);
  const folded = (count: number, allowedMs: number | null) => [
    ['tool', null, `${count} more calls not tracked one by one`, 2, allowedMs, false, true],
  ];
  // A foreground spawn past the limit counts with the model timeout (its subagent's request).
  flight.observe(assistant(null, toolUse('toolu_01sp', 'Agent', { description: 'd', prompt: 'p' })), 2);
  assert.deepEqual(overflowOf(flight).map(row), folded(1, LIMITS.modelTimeoutMs));
  flight.observe(assistant(null, toolUse('toolu_01big', 'Bash', { command: 'x', timeout: 99_000 })), 3);
  assert.deepEqual(overflowOf(flight).map(row), folded(2, 99_000));
  assert.equal(flight.waits()[0].what, '2 more calls not tracked one by one', 'the longest allowance first');
  flight.observe(read('late'), 3);
  assert.deepEqual(overflowOf(flight).map(row), folded(3, 99_000));
  // New channels, whatever their first line; then a background task with the ceiling.
  flight.observe(assistant('toolu_01c1', text('x')), 5);
  flight.observe(streamEvent('toolu_01c2', 'message_start'), 5);
  flight.observe(user('toolu_01c3', [text('prompt')]), 5);
  assert.deepEqual(overflowOf(flight).map(row), folded(6, 99_000));
  flight.observe(system('task_started', { task_id: 'k1', is_backgrounded: true }), 6);
  assert.deepEqual(overflowOf(flight).map(row), folded(7, LIMITS.bgWaitCeilingMs));
  assert.equal(flight.waits().length, MAX_TRACKED_WAITS - 1 + 1);
  // The result ends the conversation: nothing is awaited, folded or not.
  flight.observe(result(), 7);
  assert.deepEqual(flight.waits(), []);
});

test('a call past the limit still means the model has answered: no response is awaited', () => {
  const flight = new InFlight(LIMITS);
  flight.observe(init(), 0);
  // The main channel is one place; background tasks take the others.
  for (let index = 0; index < MAX_TRACKED_WAITS - 1; index++) {
    flight.observe(system('task_started', { task_id: `k${index}`, is_backgrounded: true }), 1);
  }
  flight.observe(assistant(null, toolUse('toolu_01f', 'Read', { file_path: 'f' })), 2);
  assert.deepEqual(overflowOf(flight).map(row), [
    ['tool', null, '1 more calls not tracked one by one', 2, LIMITS.toolTimeoutMs, false, true],
  ]);
  assert.deepEqual(
    flight.waits().filter((w) => w.kind === 'model'),
    [],
  );
  assert.equal(flight.waits().length, MAX_TRACKED_WAITS - 1 + 1);
});

test('a task with no limit folded in makes the folded wait unlimited, whatever comes after', () => {
  const flight = new InFlight({ ...LIMITS, bgWaitCeilingMs: 0 });
  flight.observe(init(), 0);
  reads(flight, MAX_TRACKED_WAITS - 1, 1);
  const folded = (count: number, allowedMs: number | null) => [
    ['tool', null, `${count} more calls not tracked one by one`, 2, allowedMs, false, true],
  ];
  // A subagent's first line past the limit counts with the model timeout.
  flight.observe(assistant('toolu_01c', text('x')), 2);
  assert.deepEqual(overflowOf(flight).map(row), folded(1, LIMITS.modelTimeoutMs));
  flight.observe(read('first'), 3);
  assert.deepEqual(overflowOf(flight).map(row), folded(2, LIMITS.modelTimeoutMs));
  flight.observe(system('task_started', { task_id: 'k1', is_backgrounded: true }), 4);
  assert.deepEqual(overflowOf(flight).map(row), folded(3, null));
  flight.observe(read('then'), 5);
  assert.deepEqual(overflowOf(flight).map(row), folded(4, null));
  assert.equal(flight.waits()[0].allowedMs, null);
});

test("what ends frees its place: results, ended subagents, ended tasks, and the run's result", () => {
  // `before` takes `used` places (the main channel's included); filled to the limit, `end`
  // then frees exactly `freed`: that many more calls are tracked, and the next is folded.
  type Step = (flight: InFlight) => void;
  function freedBy(used: number, before: Step, end: Step, freed: number) {
    const flight = new InFlight(LIMITS);
    flight.observe(init(), 0);
    before(flight);
    reads(flight, MAX_TRACKED_WAITS - used, 1, 'fill');
    assert.deepEqual(overflowOf(flight), [], 'full, not over');
    flight.observe(read('over'), 1);
    assert.equal(overflowOf(flight).length, 1, 'full');
    end(flight);
    const folded = foldedCount(flight);
    reads(flight, freed, 2, 'after');
    assert.equal(foldedCount(flight), folded, `${freed} places freed`);
    flight.observe(read('one-more'), 3);
    assert.equal(foldedCount(flight), folded + 1, `not more than ${freed}`);
  }
  // A tool result frees its call's place.
  freedBy(
    1 + 1,
    (flight) => flight.observe(read('toolu_01r1'), 0),
    (flight) => flight.observe(user(null, [toolResult('toolu_01r1')]), 1),
    1,
  );
  // A foreground subagent with two calls running: its spawn call, its channel and both calls.
  freedBy(
    1 + 1 + 1 + 2,
    (flight) => {
      flight.observe(assistant(null, toolUse('toolu_01A', 'Agent', { description: 'd', prompt: 'p' })), 0);
      flight.observe(read('toolu_01a1', 'toolu_01A'), 0);
      flight.observe(read('toolu_01a2', 'toolu_01A'), 0);
    },
    (flight) => flight.observe(user(null, [toolResult('toolu_01A', 'done')]), 1),
    1 + 1 + 2,
  );
  // Ended by task_notification: the channel and its call.
  freedBy(
    1 + 1 + 1,
    (flight) => flight.observe(read('toolu_01b1', 'toolu_01B'), 0),
    (flight) => flight.observe(system('task_notification', { tool_use_id: 'toolu_01B' }), 1),
    1 + 1,
  );
  // Background tasks ended by their notification, or left out of the list.
  const bg = (id: string) => system('task_started', { task_id: id, is_backgrounded: true });
  freedBy(
    1 + 3,
    (flight) => ['k1', 'k2', 'k3'].forEach((id) => flight.observe(bg(id), 0)),
    (flight) => {
      flight.observe(system('task_notification', { task_id: 'k1' }), 1);
      flight.observe(system('background_tasks_changed', { tasks: [{ task_id: 'k3' }] }), 1);
    },
    2,
  );
  // A background task ended by a notification naming only its spawn.
  const spawned = { task_id: 'k1', tool_use_id: 'toolu_01k', is_backgrounded: true };
  freedBy(
    1 + 1,
    (flight) => flight.observe(system('task_started', spawned), 0),
    (flight) => flight.observe(system('task_notification', { tool_use_id: 'toolu_01k' }), 1),
    1,
  );
  // A background task ended by its task_updated.
  freedBy(
    1 + 1,
    (flight) => flight.observe(bg('k1'), 0),
    (flight) => flight.observe(system('task_updated', { task_id: 'k1', patch: { status: 'killed' } }), 1),
    1,
  );
  // The run's result: every place but the background tasks' (and then a new turn's main channel).
  freedBy(
    1 + 2,
    (flight) => ['k1', 'k2'].forEach((id) => flight.observe(bg(id), 0)),
    (flight) => {
      flight.observe(result(), 1);
      flight.observe(init(), 1);
    },
    MAX_TRACKED_WAITS - 2 - 1,
  );
});

test('results kept for calls not shown yet are bounded: the latest MAX_ENDS_BEFORE_START ids, ' +
  'none longer than MAX_END_ID_CHARS', () => {
  /** The calls awaited once each of `results` has come, then a call for each of `ids`. */
  const awaitedAfter = (results: string[], ids: string[]) => {
    const flight = new InFlight(LIMITS);
    flight.observe(init(), 0);
    for (const id of results) flight.observe(user(null, [toolResult(id)]), 1);
    for (const id of ids) flight.observe(read(id), 2);
    return flight
      .waits()
      .filter((w) => w.kind === 'tool')
      .map((w) => w.what);
  };
  const many = Array.from({ length: MAX_ENDS_BEFORE_START + 1 }, (_, i) => `toolu_${i}`);
  const newest = `toolu_${MAX_ENDS_BEFORE_START}`;
  const shown = ['toolu_0', 'toolu_1', newest];
  assert.deepEqual(awaitedAfter(many, shown), ['Read "toolu_0"'], 'the oldest is forgotten');
  const longest = 'a'.repeat(MAX_END_ID_CHARS);
  const tooLong = 'b'.repeat(MAX_END_ID_CHARS + 1);
  assert.deepEqual(
    awaitedAfter([...many.slice(1), tooLong], [longest, tooLong, 'toolu_1']).map((what) => what.slice(0, 7)),
    ['Read "a', 'Read "b'],
    'an id too long is not kept, and pushes none out',
  );
  assert.deepEqual(awaitedAfter([longest, 'toolu_1'], [longest, 'toolu_1']), [], 'the longest kept');
});

test('an empty task_id names no task: its start is not awaited, and its notification ends the task by ' +
  'its spawn', () => {
  const agent = { task_type: 'local_agent', is_backgrounded: true };
  const flight = new InFlight(LIMITS);
  const step = (now: number, value: Line) => (flight.observe(value, now), rows(flight));
  assert.deepEqual(step(1, system('task_started', { task_id: '', tool_use_id: 'toolu_01a', ...agent })), []);
  step(2, system('task_started', { task_id: 'k2', tool_use_id: 'toolu_01b', ...agent }));
  assert.equal(rows(flight).length, 1);
  assert.deepEqual(step(3, system('task_notification', { task_id: '', tool_use_id: 'toolu_01b' })), []);
});
