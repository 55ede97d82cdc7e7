import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Writable } from 'node:stream';
import { createIdleWatchdog, IdleWatchdog, IDLE_WATCHDOG_DEFAULTS, type Clock } from '../src/chain/stages/idle-watchdog.js';
import { createLineParser } from '../src/chain/stages/line-parser.js';
import type { SubteeRecord } from '../src/model/record.js';
import { Session } from '../src/model/session.js';

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
  return { clock, advance, running: () => tick !== null };
}

/** One batch holding one line record, as the line parser would emit it. */
const line = (value: Record<string, unknown>, lineNo = 1): SubteeRecord[] => [{ kind: 'line', lineNo, raw: Buffer.from(JSON.stringify(value)), value }];
/** Lets queued writes reach the stage (a stream processes its write queue on later ticks). */
const settle = () => new Promise((r) => setImmediate(r));
const opts = { idleTimeoutMs: 10_000, bgWaitCeilingMs: 60_000, drainGraceMs: 5_000, checkIntervalMs: 1000 };

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
  assert.match(w.run.warnings[0].message, /no background task/);
  assert.equal(w.running(), false);
});

test('a silent background subagent is not a hang until the ceiling plus drain grace', async () => {
  const w = watch();
  w.dog.resume();
  w.dog.write(line({ type: 'system', subtype: 'task_started', task_id: 't1', is_backgrounded: true, subagent_type: 'Explore', description: 'dig' }));
  w.dog.write(line({ type: 'result', subtype: 'success' }));
  await settle();
  w.advance(65_000);
  assert.equal(w.dog.errored, null);
  w.advance(1000);
  assert.equal((w.dog.errored as any)?.code, 'ERR_STALL');
  assert.match(w.run.warnings[0].message, /Explore "dig" \(t1\)/);
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
  w.dog.write(line({ type: 'system', subtype: 'background_tasks_changed', tasks: [{ task_id: 't9', task_type: 'local_agent' }] }));
  await settle();
  w.advance(3_600_000, 60_000);
  assert.equal(w.dog.errored, null);
});

test('a slow sink holding the chain back is not silence', async () => {
  const w = watch();
  // Nothing reads the watchdog: its buffer fills and the input stops — subtee's own doing.
  for (let i = 0; i < 40; i++) w.dog.write(line({ type: 'assistant', message: { content: [] } }, i + 1));
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
  assert.deepEqual(w.run.warnings.map((x) => x.code), ['STALL']);
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

test('input bytes reset the idle clock: one long line arriving slowly is not silence', async () => {
  const fc = fakeClock();
  const run = new Session();
  const parser = createLineParser({ session: run });
  const dog = createIdleWatchdog({ ...opts, clock: fc.clock, session: run });
  dog.on('error', () => {});
  parser.pipe(dog).resume();
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
