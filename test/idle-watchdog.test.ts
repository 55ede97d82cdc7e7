import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { PassThrough, Writable } from 'node:stream';
import { open } from '../src/index.js';
import {
  createIdleWatchdog,
  IdleWatchdog,
  IDLE_WATCHDOG_DEFAULTS,
  silenceFigures,
  stallMessage,
  type Clock,
} from '../src/chain/stages/idle-watchdog.js';
import { MAX_TRACKED_WAITS } from '../src/model/in-flight.js';
import { createLineParser } from '../src/chain/stages/line-parser.js';
import type { SubteeRecord } from '../src/model/record.js';
import { Session } from '../src/model/session.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';

function fakeClock() {
  let t = 0;
  let tick: (() => void) | null = null;
  const clock: Clock = {
    now: () => t,
    setInterval: (fn) => ((tick = fn), 1),
    clearInterval: () => (tick = null),
  };
  /** Moves time forward one check interval at a time, running each check. */
  const advance = (ms: number, step = 1000) => {
    for (let done = 0; done < ms; done += step) {
      t += step;
      tick?.();
    }
  };
  /** Moves time forward without a check, as between two ticks of the interval. */
  const pass = (ms: number) => void (t += ms);
  return { clock, advance, pass, running: () => tick !== null };
}

/** One batch holding one line record, as the line parser would emit it. */
const line = (value: Record<string, unknown>, lineNo = 1): SubteeRecord[] => [
  { kind: 'line', lineNo, raw: Buffer.from(JSON.stringify(value)), value },
];
/** Lets queued writes reach the stage (a stream processes its write queue on later ticks). */
const settle = () => new Promise((r) => setImmediate(r));
const opts = { idleTimeoutMs: 10_000, bgWaitCeilingMs: 60_000, graceMs: 5_000, checkIntervalMs: 1000 };

function watch(extra: Record<string, unknown> = {}) {
  const fc = fakeClock();
  const run = new Session();
  const dog = createIdleWatchdog({ ...opts, ...extra, clock: fc.clock, session: run });
  dog.on('error', () => {});
  return { ...fc, run, dog };
}

test('a real hang fires after the idle timeout, naming nothing in flight', () => {
  const w = watch();
  w.dog.resume();
  w.advance(10_000);
  assert.equal(w.dog.errored, null);
  w.advance(1000);
  assert.equal((w.dog.errored as any)?.code, 'ERR_STALL');
  assert.equal(w.run.stalled, true);
  assert.equal(w.run.warnings[0].code, 'STALL');
  assert.match(w.run.warnings[0].message, /nothing was in flight/);
  assert.deepEqual(w.run.stall?.waitingOn, []);
  assert.equal(w.running(), false);
});

test('a stall while plugins above hold records names each, the longest held first, and fails as ' +
  'ERR_PLUGIN_FAILED naming that one', () => {
  const held = [
    { plugin: 'tagger', what: 'its function for line 9', heldMs: 2_500 },
    { plugin: 'slow-redact', what: 'its function for line 4', heldMs: 11_400 },
  ];
  let asked = 0;
  const w = watch({ pluginCallsAbove: () => (asked++, held) });
  w.dog.resume();
  w.advance(10_000);
  assert.equal(asked, 0, 'asked only when the watchdog fires');
  w.advance(1000);
  assert.equal(asked, 1);
  const err = w.dog.errored as Error & { code?: string };
  assert.equal(err.code, 'ERR_PLUGIN_FAILED');
  assert.equal(
    err.message,
    "plugin slow-redact: its function for line 4 held records for 11 s, past the idle watchdog's " +
      'allowance (10 s without input)',
  );
  assert.deepEqual(w.run.stall?.heldBy, [held[1], held[0]]);
  assert.equal(
    w.run.warnings[0].message,
    'plugin slow-redact held records for 11 s (its function for line 4 had not settled); ' +
      'plugin tagger held records for 2.5 s (its function for line 9 had not settled): ' +
      'nothing reached the idle watchdog for 11 s (allowed 10 s)',
  );
});

test('a silent background subagent is not a hang until the ceiling plus the grace', async () => {
  const w = watch();
  w.dog.resume();
  w.dog.write(
    line({
      type: 'system',
      subtype: 'task_started',
      task_id: 't1',
      is_backgrounded: true,
      subagent_type: 'Explore',
      description: 'dig',
    }),
  );
  w.dog.write(line({ type: 'result', subtype: 'success' }));
  await settle();
  w.advance(65_000);
  assert.equal(w.dog.errored, null);
  w.advance(1000);
  assert.equal((w.dog.errored as any)?.code, 'ERR_STALL');
  assert.match(w.run.warnings[0].message, /background Explore "dig" \(t1\) silent 66 s of the ceiling 60 s/);
});

test('task_notification and background_tasks_changed end the background allowance', async () => {
  const w = watch();
  w.dog.resume();
  w.dog.write(line({ type: 'system', subtype: 'task_started', task_id: 't1', is_backgrounded: true }));
  w.dog.write(line({ type: 'system', subtype: 'task_started', task_id: 't2', is_backgrounded: true }));
  w.dog.write(line({ type: 'system', subtype: 'task_notification', task_id: 't1', status: 'completed' }));
  await settle();
  w.advance(30_000);
  assert.equal(w.dog.errored, null, 't2 still in flight');
  w.dog.write(line({ type: 'system', subtype: 'background_tasks_changed', tasks: [] }));
  await settle();
  w.advance(11_000);
  assert.equal((w.dog.errored as any)?.code, 'ERR_STALL');
});

test('a ceiling of 0 waits for background tasks without limit', async () => {
  const w = watch({ bgWaitCeilingMs: 0 });
  w.dog.resume();
  w.dog.write(
    line({
      type: 'system',
      subtype: 'background_tasks_changed',
      tasks: [{ task_id: 't9', task_type: 'local_agent' }],
    }),
  );
  await settle();
  w.advance(3_600_000, 60_000);
  assert.equal(w.dog.errored, null);
});

test('a slow sink holding the chain back is not silence', async () => {
  const w = watch();
  // Nothing reads the watchdog: its buffer fills and the input stops — subtee's own doing.
  for (let i = 0; i < 40; i++) w.dog.write(line({ type: 'system', subtype: 'hook_response' }, i + 1));
  w.advance(60_000);
  assert.equal(w.dog.errored, null);
  // The sink catches up; from then on silence counts.
  await new Promise<void>((resolve) => {
    w.dog.pipe(new Writable({ objectMode: true, write: (_r, _e, cb) => cb() }));
    setImmediate(resolve);
  });
  w.advance(11_000);
  assert.equal((w.dog.errored as any)?.code, 'ERR_STALL');
});

test('--on-stall warn reports once and lets the run go on', () => {
  const w = watch({ onStall: 'warn' });
  w.dog.resume();
  w.advance(25_000);
  assert.equal(w.dog.errored, null);
  assert.equal(w.run.stalled, true);
  assert.deepEqual(
    w.run.warnings.map((x) => x.code),
    ['STALL'],
  );
});

test('a blocked event loop counts at most two intervals of silence per check', () => {
  const dog = new IdleWatchdog({ ...IDLE_WATCHDOG_DEFAULTS, ...opts }, 0);
  // Three checks, each after a long synchronous block: 2 s of silence each, not minutes.
  assert.equal(dog.check(300_000, false), null);
  assert.equal(dog.check(600_000, false), null);
  assert.equal(dog.check(900_000, false), null);
  let t = 900_000;
  let fired = null;
  let checks = 0;
  while (!fired) {
    t += 1000;
    checks++;
    fired = dog.check(t, false);
  }
  assert.equal(checks, 5);
  assert.equal(fired.silenceMs, 11_000);
});

/** The line parser piped into a watchdog on a fake clock, its stall kept on `dog.errored`. */
function parserIntoWatchdog() {
  const fc = fakeClock();
  const run = new Session();
  const parser = createLineParser({ session: run });
  const dog = createIdleWatchdog({ ...opts, clock: fc.clock, session: run });
  dog.on('error', () => {});
  parser.pipe(dog).resume();
  return { fc, run, parser, dog };
}

test('input bytes reset the idle clock: one long line arriving slowly is not silence', async () => {
  const { fc, run, parser, dog } = parserIntoWatchdog();
  parser.write('{"type":"assistant","message":{"content":[{"type":"text","text":"');
  // 30 s of a line growing by a few bytes every 200 ms: no record reaches the watchdog.
  for (let i = 0; i < 150; i++) {
    parser.write('abcdefgh');
    await settle();
    fc.advance(200, 200);
  }
  assert.equal(dog.errored, null, 'bytes kept arriving');
  assert.equal(run.stalled, false);
  // Then the bytes stop: real silence.
  fc.advance(11_000);
  assert.equal((dog.errored as any)?.code, 'ERR_STALL');
});

test('a stall reports the silence since the last line, not since the check after it', async () => {
  const { fc, run, parser, dog } = parserIntoWatchdog();
  // The line arrives 300 ms into an interval; the checks come at 1 s, 2 s, …
  fc.pass(300);
  parser.write('{"type":"result","subtype":"success"}\n');
  await settle();
  fc.advance(700, 700);
  let firedAt = 1000;
  while (dog.errored === null && firedAt < 60_000) {
    fc.advance(1000);
    firedAt += 1000;
  }
  assert.equal((dog.errored as any)?.code, 'ERR_STALL');
  assert.equal(run.stall?.silenceMs, firedAt - 300, 'silent from the line on');
  assert.equal(firedAt - 300 > opts.idleTimeoutMs && firedAt - 300 <= opts.idleTimeoutMs + 1000, true);
  assert.match(run.warnings[0].message, /^no input for 10\.7 s \(allowed 10\.0 s\); nothing was in flight$/);
});

test("a stall's figures show its silence above its allowance, cut and never rounded up", () => {
  assert.deepEqual(silenceFigures(631_000, 630_000), { silence: '631 s', allowed: '630 s' });
  assert.deepEqual(silenceFigures(630_999, 630_000), { silence: '630.9 s', allowed: '630.0 s' });
  assert.deepEqual(silenceFigures(630_003, 630_000), { silence: '630.003 s', allowed: '630.000 s' });
  assert.deepEqual(silenceFigures(2_900, 2_000), { silence: '2.9 s', allowed: '2.0 s' });
  assert.deepEqual(silenceFigures(2_001, 2_000), { silence: '2.001 s', allowed: '2.000 s' });
  const allowances = [1, 999, 1_500, 2_000, 9_950, 9_999, 10_000, 12_345, 630_000, 3_600_000];
  const excesses = [1, 2, 7, 49, 50, 51, 99, 100, 449, 450, 499, 500, 501, 999, 1_000, 1_999, 60_000];
  for (const allowedMs of allowances) {
    for (const excess of excesses) {
      const silenceMs = allowedMs + excess;
      const f = silenceFigures(silenceMs, allowedMs);
      const [silenceText, allowedText] = [f.silence, f.allowed].map((x) => x.replace(/ s$/, ''));
      const [silence, allowed] = [Number(silenceText), Number(allowedText)];
      const decimals = silenceText.split('.')[1]?.length ?? 0;
      const why = `${silenceMs} of ${allowedMs} read ${f.silence} of ${f.allowed}`;
      assert.ok(silence > allowed, `${why}: the silence reads above the allowance`);
      assert.ok(Math.round(silence * 1000) <= silenceMs, `${why}: never more than was silent`);
      assert.ok(Math.abs(allowed * 1000 - allowedMs) <= 500 / 10 ** decimals, `${why}: the allowance`);
      assert.equal(allowedText.split('.')[1]?.length ?? 0, decimals, `${why}: one precision`);
    }
  }
  const stall = { silenceMs: 630_400, allowedMs: 630_000, waitingOn: [], moreWaiting: 0, heldBy: [] };
  assert.equal(stallMessage(stall), 'no input for 630.4 s (allowed 630.0 s); nothing was in flight');
});

test("after a stall, the chain's drain deadline counts from the input's end, not from the " +
  'stall', async () => {
  let inputEnds = () => {};
  const inputEnded = new Promise<void>((resolve) => (inputEnds = resolve));
  const stops: Error[] = [];
  const w = watch({ stallDrainMs: 0, stopInput: (err: Error) => stops.push(err), inputEnded });
  w.dog.resume();
  w.advance(11_000);
  assert.equal(stops.length, 1, 'the input was told to stop');
  assert.equal(w.run.stalled, true);
  // A timer of the same length, set after the stall, runs after any deadline the stall set.
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(w.dog.destroyed, false, 'not torn down while the input is still ending');
  inputEnds();
  await inputEnded;
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(w.dog.destroyed, true, 'torn down once the input ended and the deadline passed');
  assert.equal((w.dog.errored as any)?.code, 'ERR_STALL');
});

// ---- what is in flight, with plain numbers -------------------------------------------------

const limits = {
  ...IDLE_WATCHDOG_DEFAULTS,
  idleTimeoutMs: 10_000,
  modelTimeoutMs: 60_000,
  toolTimeoutMs: 40_000,
  bashDefaultTimeoutMs: 20_000,
  bashMaxTimeoutMs: 100_000,
  mcpToolTimeoutMs: null as number | null,
  bgWaitCeilingMs: 200_000,
  graceMs: 5_000,
  checkIntervalMs: 1000,
};

const init = { type: 'system', subtype: 'init', session_id: 's' };
const say = (channel: string | null, ...content: unknown[]) => ({
  type: 'assistant',
  parent_tool_use_id: channel,
  message: { id: 'm', content },
});
const reply = (channel: string | null, ...content: unknown[]) => ({
  type: 'user',
  parent_tool_use_id: channel,
  message: { content },
});
const toolUse = (id: string, name: string, input: Record<string, unknown> = {}) => ({
  type: 'tool_use',
  id,
  name,
  input,
});
const toolResult = (id: string, content = 'ok') => ({ type: 'tool_result', tool_use_id: id, content });
const event = (channel: string | null, type: string) => ({
  type: 'stream_event',
  parent_tool_use_id: channel,
  event: { type },
});

/**
 * Feeds `lines` at time 0, then checks once a second until the watchdog fires: the silence
 * at which it fired, and the stall. Every line is activity, as in the stage.
 */
function silenceUntilStall(lines: Array<Record<string, unknown>>, settings: Partial<typeof limits> = {}) {
  const dog = new IdleWatchdog({ ...limits, ...settings }, 0);
  for (const value of lines) dog.observe(value, 0);
  dog.activity(0);
  for (let t = 1000; t <= 10_000_000; t += 1000) {
    const stall = dog.check(t, false);
    if (stall) return { firedAtMs: t, stall, dog };
  }
  return { firedAtMs: Infinity, stall: null, dog };
}

test('before the first line and after the result, nothing is in flight: the idle timeout', () => {
  assert.equal(silenceUntilStall([]).firedAtMs, 11_000);
  const ended = silenceUntilStall([
    init,
    say(null, { type: 'text', text: 'done' }),
    { type: 'result', subtype: 'success' },
  ]);
  assert.equal(ended.firedAtMs, 11_000);
  assert.deepEqual(ended.stall?.waitingOn, []);
  assert.match(stallMessage(ended.stall!), /^no input for 11 s \(allowed 10 s\); nothing was in flight$/);
});

test('a model request (after init, a prompt or the last ' +
  'tool result) allows the model timeout plus the grace', () => {
  for (const lines of [
    [init],
    [init, say(null, toolUse('t1', 'Read', { file_path: 'a.ts' })), reply(null, toolResult('t1'))],
    [init, say(null, { type: 'text', text: 'thinking on' })],
  ]) {
    const { firedAtMs, stall } = silenceUntilStall(lines);
    assert.equal(firedAtMs, 66_000, JSON.stringify(lines));
    assert.equal(stall!.allowedMs, 65_000);
    assert.equal(stall!.waitingOn[0].kind, 'model');
    assert.equal(stall!.waitingOn[0].channel, 'main');
  }
  const { stall } = silenceUntilStall([init]);
  assert.match(stallMessage(stall!), /model request silent 66 s of its allowed 60 s in main/);
});

test('a foreground Bash call allows its declared timeout, else the default, capped by the maximum', () => {
  const bash = (input: Record<string, unknown>) =>
    silenceUntilStall([init, say(null, toolUse('b1', 'Bash', input))]);
  const declared = bash({ command: 'npm test', timeout: 85_000 });
  assert.equal(declared.firedAtMs, 91_000);
  assert.equal(declared.stall!.waitingOn[0].declared, true);
  assert.match(stallMessage(declared.stall!), /Bash "npm test" silent 91 s of its declared 85 s in main/);
  assert.equal(bash({ command: 'make' }).firedAtMs, 26_000);
  assert.equal(bash({ command: 'make', timeout: 10_000_000 }).firedAtMs, 106_000);
  const powershell = silenceUntilStall([
    init,
    say(null, toolUse('p1', 'PowerShell', { command: 'x', timeout: 50_000 })),
  ]);
  assert.equal(powershell.firedAtMs, 56_000);
});

test('other tools allow the tool timeout; MCP tools their own when it is set', () => {
  assert.equal(
    silenceUntilStall([init, say(null, toolUse('w', 'WebFetch', { url: 'u' }))]).firedAtMs,
    46_000,
  );
  const mcp = [init, say(null, toolUse('m', 'mcp__db__query', {}))];
  assert.equal(silenceUntilStall(mcp).firedAtMs, 46_000);
  assert.equal(silenceUntilStall(mcp, { mcpToolTimeoutMs: 150_000 }).firedAtMs, 156_000);
});

test('a tool_result that never comes is a hang after the allowance; one that comes ends the wait', () => {
  const pending = silenceUntilStall([
    init,
    say(null, toolUse('b1', 'Bash', { command: 'build', timeout: 30_000 })),
  ]);
  assert.equal(pending.firedAtMs, 36_000);
  assert.equal(pending.stall!.waitingOn.length, 1);
  // Two calls in parallel: the first result leaves the second in flight, the model not asked yet.
  const half = silenceUntilStall([
    init,
    say(null, toolUse('b1', 'Bash', { command: 'quick', timeout: 90_000 })),
    say(null, toolUse('b2', 'Bash', { command: 'slow', timeout: 30_000 })),
    reply(null, toolResult('b1')),
  ]);
  assert.equal(half.firedAtMs, 36_000);
  assert.match(stallMessage(half.stall!), /Bash "slow"/);
});

test('a tool_result on a line too long to hold ends its call as any other does', async () => {
  const fc = fakeClock();
  const run = new Session();
  const parser = createLineParser({ session: run, maxLineBytes: 4096, spoolDir: tmpDir() });
  const dog = createIdleWatchdog({ ...opts, clock: fc.clock, session: run });
  dog.on('error', () => {});
  parser.pipe(dog).resume();
  const lines = [
    init,
    say(null, toolUse('b1', 'Bash', { command: 'quick', timeout: 90_000 })),
    say(null, toolUse('b2', 'Bash', { command: 'slow', timeout: 30_000 })),
    reply(null, toolResult('b1', 'x'.repeat(20_000))),
  ];
  parser.write(lines.map((value) => JSON.stringify(value)).join('\n') + '\n');
  // The result's line, 20 KB, is past maxLineBytes: spooled, not held.
  while (run.input.lines < lines.length) await settle();
  await settle();
  let firedAt = 0;
  while (dog.errored === null && firedAt < 120_000) {
    fc.advance(1000);
    firedAt += 1000;
  }
  assert.equal(firedAt, 36_000, 'b2 alone in flight: its 30 s and the grace');
  assert.match(stallMessage(run.stall!), /Bash "slow"/);
});

test('with partial messages, a streamed message allows the idle timeout between events', () => {
  const midMessage = silenceUntilStall([
    init,
    event(null, 'message_start'),
    event(null, 'content_block_delta'),
  ]);
  assert.equal(midMessage.firedAtMs, 11_000);
  assert.match(stallMessage(midMessage.stall!), /message stream silent 11 s of its allowed 10 s in main/);
  // An assistant line inside the stream does not turn it into a model response.
  assert.equal(
    silenceUntilStall([init, event(null, 'message_start'), say(null, { type: 'text', text: 'x' })]).firedAtMs,
    11_000,
  );
  // After message_stop the tool it asked for is what is awaited; before message_start, the request.
  const tool = [
    init,
    event(null, 'message_start'),
    say(null, toolUse('b', 'Bash', { command: 'x', timeout: 50_000 })),
    event(null, 'message_stop'),
  ];
  assert.equal(silenceUntilStall(tool).firedAtMs, 56_000);
  const next = [
    ...tool,
    reply(null, toolResult('b')),
    { type: 'system', subtype: 'status', status: 'requesting' },
  ];
  assert.equal(silenceUntilStall(next).firedAtMs, 66_000);
});

test('a foreground subagent is decided by its own channel, interleaved with the others', () => {
  const spawn = say(
    null,
    toolUse('A', 'Agent', { description: 'review', subagent_type: 'general-purpose', prompt: 'p' }),
  );
  // Spawned, not a line of its own yet: its first request is on its way.
  const silentChild = silenceUntilStall([init, spawn]);
  assert.equal(silentChild.firedAtMs, 66_000);
  assert.deepEqual(
    silentChild.stall!.waitingOn.map((w) => [w.what, w.channelId]),
    [['model request', 'A']],
  );
  // Its own long command rides through; the parent's spawn adds nothing of its own.
  const longCommand = [
    init,
    spawn,
    reply('A', { type: 'text', text: 'prompt' }),
    say('A', toolUse('a1', 'Bash', { command: 'npm test', timeout: 95_000 })),
  ];
  const child = silenceUntilStall(longCommand);
  assert.equal(child.firedAtMs, 101_000);
  assert.match(stallMessage(child.stall!), /Bash "npm test" silent 101 s of its declared 95 s in A/);
  // Another subagent interleaved, waiting on its model, keeps its own state.
  const two = silenceUntilStall(
    [
      ...longCommand,
      say(null, toolUse('B', 'Agent', { description: 'b', prompt: 'p' })),
      reply('B', { type: 'text', text: 'prompt' }),
      say('A', toolUse('a2', 'Read', { file_path: 'x' })),
      reply('A', toolResult('a1')),
    ],
    { toolTimeoutMs: 150_000 },
  );
  assert.equal(two.firedAtMs, 156_000);
  assert.deepEqual(
    two.stall!.waitingOn.map((w) => `${w.channelId}:${w.what}`),
    ['A:Read "x"', 'B:model request'],
  );
  // The parent's tool_result ends the subagent: the parent's next request is what is left.
  const ended = silenceUntilStall([...longCommand, reply(null, toolResult('A', 'report'))]);
  assert.deepEqual(
    ended.stall!.waitingOn.map((w) => `${w.channelId}:${w.what}`),
    ['null:model request'],
  );
});

test('a background subagent: its launch result does not end it, task_notification does', () => {
  const lines = [
    init,
    say(null, toolUse('A', 'Agent', { description: 'dig', run_in_background: true, prompt: 'p' })),
    {
      type: 'system',
      subtype: 'task_started',
      task_id: 'k1',
      tool_use_id: 'A',
      is_backgrounded: true,
      subagent_type: 'Explore',
      description: 'dig',
    },
    reply(null, toolResult('A', 'Async agent launched successfully.')),
    say(null, { type: 'text', text: 'waiting' }),
    say('A', toolUse('a1', 'Bash', { command: 'find /', timeout: 90_000 })),
  ];
  const running = silenceUntilStall(lines);
  assert.equal(running.firedAtMs, 206_000, 'the ceiling plus the grace');
  assert.deepEqual(
    running.stall!.waitingOn.map((w) => w.kind),
    ['background', 'tool', 'model'],
  );
  const done = silenceUntilStall([
    ...lines,
    { type: 'system', subtype: 'task_notification', task_id: 'k1', tool_use_id: 'A', status: 'completed' },
  ]);
  assert.deepEqual(
    done.stall!.waitingOn.map((w) => w.what),
    ['model response'],
  );
});

test("a subagent's report that came before its spawn line ends it: the stall is timed by the parent's " +
  'request, not held for the long command the subagent had running', async () => {
  const w = watch({ modelTimeoutMs: 20_000 });
  w.dog.resume();
  // Lines of different channels interleave: the subagent's lines and its report come first.
  for (const value of [
    init,
    say('A', toolUse('a1', 'Bash', { command: 'npm test', timeout: 300_000 })),
    reply(null, toolResult('A', 'report')),
    say(null, toolUse('A', 'Agent', { description: 'review', prompt: 'p' })),
  ])
    w.dog.write(line(value));
  await settle();
  w.advance(25_000);
  assert.equal(w.dog.errored, null, "the parent's request: 20 s and the grace");
  w.advance(1000);
  assert.equal((w.dog.errored as any)?.code, 'ERR_STALL');
  assert.equal(
    w.run.warnings[0].message,
    'no input for 26 s (allowed 25 s): model request silent 26 s of its allowed 20 s in main',
  );
});

test('a background task whose task_notification came before its task_started is not awaited: ' +
  'after the result, silence is a hang at the idle timeout', async () => {
  const w = watch();
  w.dog.resume();
  const task = { task_id: 'k1', tool_use_id: 'A' };
  for (const value of [
    init,
    { type: 'system', subtype: 'task_notification', ...task, status: 'completed' },
    { type: 'system', subtype: 'task_started', ...task, is_backgrounded: true, description: 'dig' },
    { type: 'result', subtype: 'success' },
  ])
    w.dog.write(line(value));
  await settle();
  w.advance(10_000);
  assert.equal(w.dog.errored, null);
  w.advance(1000);
  assert.equal((w.dog.errored as any)?.code, 'ERR_STALL');
  assert.match(w.run.warnings[0].message, /nothing was in flight/);
});

test('state stays bounded: calls past the tracking limit are folded, their longest allowance kept', () => {
  const dog = new IdleWatchdog({ ...limits }, 0);
  dog.observe(init, 0);
  for (let i = 0; i < MAX_TRACKED_WAITS + 5000; i++) dog.observe(say(null, toolUse(`t${i}`, 'Read', {})), 0);
  dog.observe(say(null, toolUse('long', 'Bash', { command: 'x', timeout: 99_000 })), 0);
  const waits = dog.waits();
  assert.ok(waits.length <= MAX_TRACKED_WAITS + 1, `${waits.length} waits`);
  assert.equal(dog.allowedSilenceMs(), 104_000);
  dog.observe({ type: 'result', subtype: 'success' }, 0);
  assert.deepEqual(dog.waits(), []);
});

test('a stall lists at most 20 waits, the longest allowance first, and counts the rest', () => {
  const calls = Array.from({ length: 30 }, (_, i) =>
    say(null, toolUse(`b${i}`, 'Bash', { command: `job ${i}`, timeout: 10_000 + i * 1000 })),
  );
  const { stall } = silenceUntilStall([init, ...calls]);
  assert.equal(stall!.waitingOn.length, 20);
  assert.equal(stall!.moreWaiting, 10);
  assert.equal(stall!.waitingOn[0].what, 'Bash "job 29"');
  assert.match(stallMessage(stall!), /; and 25 more$/);
});

test('names from the stream are cut and made one line in the message', () => {
  const command = `evil\x1b[31m\n${'x'.repeat(10_000)}`;
  const { stall } = silenceUntilStall([init, say(null, toolUse('b', 'Bash', { command, timeout: 1000 }))]);
  assert.ok(stall!.waitingOn[0].what.length < 100);
  assert.doesNotMatch(stallMessage(stall!), /[\x00-\x1f]/);
});

test(
  'open() takes the watchdog limits directly: a stall rejects done with ERR_STALL and says what was waiting',
  { timeout: 30_000 },
  async (t) => {
    // A PassThrough keeps no handle open, and the watchdog's timer does not keep a process alive.
    const keepAlive = setInterval(() => {}, 1000);
    t.after(() => clearInterval(keepAlive));
    const input = new PassThrough();
    const run = open(input, { idleTimeoutMs: 200, modelTimeoutMs: 400, stallGraceMs: 0 });
    input.write(`${JSON.stringify(init)}\n`);
    await assert.rejects(run.done, { code: 'ERR_STALL' });
    input.destroy();
    assert.equal(run.session.stall?.allowedMs, 400);
    assert.deepEqual(
      run.session.stall?.waitingOn.map((w) => w.what),
      ['model request'],
    );
    // With warn the stall is recorded and the run goes on to its end.
    const warned = new PassThrough();
    const going = open(warned, { idleTimeoutMs: 200, modelTimeoutMs: 300, stallGraceMs: 0, onStall: 'warn' });
    void (async () => {
      for (let seen = 0; ; seen++) {
        const w = await going.session.warningAt(seen);
        if (w.code !== 'STALL') continue;
        warned.end(`${JSON.stringify({ type: 'result', subtype: 'success' })}\n`);
        return;
      }
    })();
    warned.write(`${JSON.stringify(init)}\n`);
    const index = await going.done;
    assert.equal(index.stalled, true);
    assert.equal(index.stall?.allowedMs, 300);
  },
);

test("backed up is read on the watchdog's output side: full there, with its input side empty, is not " +
  "silence", () => {
  const w = watch();
  // Nothing reads the watchdog: what it passed on fills its output; nothing waits at its input yet.
  for (let i = 0; i < w.dog.readableHighWaterMark; i++) {
    w.dog.write(line({ type: 'system', subtype: 'hook_response' }, i + 1));
  }
  assert.ok(w.dog.readableLength >= w.dog.readableHighWaterMark, 'its output is full');
  assert.ok(w.dog.writableLength < w.dog.writableHighWaterMark, 'its input is not');
  w.advance(60_000);
  assert.equal(w.dog.errored, null);
  assert.equal(w.run.stalled, false);
});

/** A command that prints `before`, is silent for `silentMs`, then prints `after` and exits 0. */
function agentScript(before: object[], silentMs: number, after: object[]): string {
  const print = (lines: object[]) => lines.map((l) => `w(${JSON.stringify(l)});`).join('');
  return (
    `const w = (o) => process.stdout.write(JSON.stringify(o) + '\\n');${print(before)}` +
    `setTimeout(() => {${print(after)}}, ${silentMs});`
  );
}

test("subtee run: a Codex turn's first answer slower than the idle timeout is its model request, " +
  'not a stall: the first lines go on at once', () => {
  const codex = agentScript(
    [{ type: 'thread.started', thread_id: 'th_1' }, { type: 'turn.started' }],
    2500,
    [
      { type: 'item.completed', item: { id: 'item_0', type: 'agent_message', text: 'done' } },
      { type: 'turn.completed', usage: { input_tokens: 5, output_tokens: 2 } },
    ],
  );
  const out = join(tmpDir(), 'out');
  const flags = ['--stall-grace-ms', '0', '--idle-timeout-ms', '1000', '--model-timeout-ms', '20000'];
  const r = spawnSync(
    process.execPath,
    [BIN, 'run', '--out', out, '--stdout', 'none', '-q', ...flags, '--', process.execPath, '-e', codex],
    { encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.stalled, false);
  assert.match(index.run_id, /^[0-9a-f-]{36}$/, 'the run is named by its first answer');
});

test("subtee run: a Codex command silent past Claude Code's Bash default is not a stall; a Bash call " +
  "is", () => {
  const command = { id: 'item_1', type: 'command_execution', command: 'npm test', status: 'in_progress' };
  const codex = agentScript(
    [
      { type: 'thread.started', thread_id: 'th_1' },
      { type: 'turn.started' },
      { type: 'item.started', item: command },
    ],
    4000,
    [
      {
        type: 'item.completed',
        item: { ...command, aggregated_output: 'ok', exit_code: 0, status: 'completed' },
      },
      { type: 'item.completed', item: { id: 'item_2', type: 'agent_message', text: 'tests pass' } },
      { type: 'turn.completed', usage: { input_tokens: 5, output_tokens: 2 } },
    ],
  );
  const claude = agentScript(
    [init, say(null, toolUse('b1', 'Bash', { command: 'npm test' }))],
    4000,
    [reply(null, toolResult('b1')), { type: 'result', subtype: 'success', is_error: false }],
  );
  const run = (script: string) => {
    const out = join(tmpDir(), 'out');
    const flags = ['--stall-grace-ms', '0', '--idle-timeout-ms', '1000', '--tool-timeout-ms', '20000'];
    const argv = [BIN, 'run', '--out', out, '--stdout', 'none', '-q', ...flags, '--'];
    const r = spawnSync(process.execPath, [...argv, process.execPath, '-e', script], {
      encoding: 'utf8',
      // Claude Code's own default, shortened: subtee reads it from the environment it shares.
      env: { ...process.env, BASH_DEFAULT_TIMEOUT_MS: '1500' },
      timeout: 60_000,
    });
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    return { code: r.status, stderr: r.stderr, index };
  };
  const fromCodex = run(codex);
  assert.equal(fromCodex.code, 0, fromCodex.stderr);
  assert.equal(fromCodex.index.producer, 'codex');
  assert.equal(fromCodex.index.stalled, false);
  assert.equal(fromCodex.index.channels[0].status, 'completed');
  const fromClaude = run(claude);
  assert.equal(fromClaude.code, 124, fromClaude.stderr);
  assert.equal(fromClaude.index.stalled, true);
  assert.match(fromClaude.stderr, /Bash "npm test" silent \d\.\d+ s of its allowed 1\.5 s in main/);
});

/**
 * A fake agent replaying a recording: its first `upTo` lines, then silence; `resumeAfterMs`
 * later the rest (the subagent finished), or never (it hung: subtee stops it).
 */
function replayScript(file: string, upTo: number, resumeAfterMs: number | null): string {
  const path = JSON.stringify(join(FIXTURES, 'other-agents', file));
  const resume =
    resumeAfterMs === null
      ? 'setInterval(() => {}, 60_000);'
      : `setTimeout(() => process.stdout.write(lines.slice(${upTo}).join('')), ${resumeAfterMs});`;
  return (
    `const lines = require('fs').readFileSync(${path}, 'utf8').split(/(?<=\\n)/);` +
    `process.stdout.write(lines.slice(0, ${upTo}).join(''));${resume}`
  );
}

/**
 * `subtee run` of a script under a model allowance (0.4 s) far below the subagent's silence;
 * resolves when it exits.
 */
function runAgent(script: string, toolTimeoutMs: number) {
  const out = join(tmpDir(), 'out');
  const flags = ['--stall-grace-ms', '0', '--idle-timeout-ms', '300', '--model-timeout-ms', '400'];
  const argv = [BIN, 'run', '--out', out, '--stdout', 'none', '-q', ...flags];
  argv.push('--tool-timeout-ms', String(toolTimeoutMs), '--', process.execPath, '-e', script);
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise<{ code: number | null; stderr: string; index: any }>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      resolve({ code, stderr, index });
    });
  });
}

/**
 * Gemini CLI, opencode and Codex show a subagent only spawned and ended: its whole life is
 * silence in the stream. Scaled down: the model allows 0.4 s, the subagent works 2.5 s.
 */
const unseenSubagents = [
  { producer: 'gemini', file: 'gemini/two-subagents.jsonl', upTo: 7, waits: /Task "SCRIPT:leaf:0"/ },
  // opencode prints the task call once it has ended: main's step is what is awaited.
  {
    producer: 'opencode',
    file: 'opencode/spawn-2.jsonl',
    upTo: 2,
    waits: /model response or a tool call not yet shown/,
  },
  // Between spawn_agent and the wait that ends the agents, main's model decides its next call.
  { producer: 'codex', file: 'codex/two-subagents.jsonl', upTo: 8, waits: /Task "SCRIPT:leaf:0"/ },
];

for (const { producer, file, upTo, waits } of unseenSubagents) {
  test(`subtee run: a ${producer} subagent working past the model allowance rides through under the ` +
    'tool allowance; silent past it, it is a stall naming what was awaited', async () => {
    const [healthy, hung] = await Promise.all([
      runAgent(replayScript(file, upTo, 2500), 20_000),
      runAgent(replayScript(file, upTo, null), 1500),
    ]);
    assert.equal(healthy.code, 0, healthy.stderr);
    assert.equal(healthy.index.producer, producer);
    assert.equal(healthy.index.stalled, false);
    assert.equal(hung.code, 124, hung.stderr);
    assert.equal(hung.index.stalled, true);
    const named = new RegExp(`${waits.source} silent \\d\\.\\d+ s of its allowed 1\\.5 s in main`);
    assert.match(hung.stderr, named);
    assert.equal(hung.index.stall.waitingOn[0].allowedMs, 1500);
  });
}

test('subtee run: a Claude Code subagent, whose steps the stream carries, silent past the model ' +
  "allowance is a stall whatever the tool allowance, named as the summary's tree names it", async () => {
  const spawnCall = toolUse('A', 'Agent', { description: 'dig', subagent_type: 'Explore', prompt: 'p' });
  const prompt = reply('A', { type: 'text', text: 'p' });
  const script = agentScript([init, say(null, spawnCall), prompt], 60_000, []);
  const silent = await runAgent(script, 20_000);
  assert.equal(silent.code, 124, silent.stderr);
  assert.match(silent.stderr, /model request silent \d\.\d+ s of its allowed 0\.4 s in dig\n/);
  assert.equal(silent.index.stall.waitingOn[0].channel, 'dig');
});
