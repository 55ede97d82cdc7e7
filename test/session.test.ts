import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  createChannelRouter,
  createIdleWatchdog,
  createLineParser,
  createThinkingTruncator,
  createVersionGuard,
} from '../src/entry/stages.js';
import { createFilesSink, createPinoSink } from '../src/entry/sinks.js';
import { createProjectionSink } from '../src/chain/sinks/projection.js';
import { Projection } from '../src/views/projection.js';
import { processWarnings, tmpDir } from './helpers/helpers.js';
import { OutputError, SubteeError, UsageError } from '../src/errors.js';
import {
  agentNameOf,
  CappedLineList,
  QUARANTINE_LINES_LISTED,
  requireSession,
  Session,
  type Warning,
} from '../src/model/session.js';

test('every factory that shares run state refuses to run without a session', () => {
  const out = join(tmpDir(), 'out');
  const factories: Array<[string, () => unknown]> = [
    ['line parser', () => createLineParser({} as never)],
    ['version guard', () => createVersionGuard({} as never)],
    ['channel router', () => createChannelRouter({} as never)],
    ['thinking truncator', () => createThinkingTruncator({} as never)],
    ['idle watchdog', () => createIdleWatchdog({} as never)],
    ['files sink', () => createFilesSink({ out } as never)],
    ['pino sink', () => createPinoSink({ destination: join(out, 'p.log') } as never)],
    ['projection sink', () => createProjectionSink({ projection: new Projection(new Session()) } as never)],
  ];
  for (const [name, make] of factories) {
    assert.throws(make, { code: 'ERR_SESSION_REQUIRED' }, name);
  }
});

test('a factory called with no options at all refuses the same way, with the same code', () => {
  const factories: Array<[string, () => unknown]> = [
    ['line parser', () => (createLineParser as (o?: unknown) => unknown)()],
    ['version guard', () => (createVersionGuard as (o?: unknown) => unknown)()],
    ['channel router', () => (createChannelRouter as (o?: unknown) => unknown)()],
    ['thinking truncator', () => (createThinkingTruncator as (o?: unknown) => unknown)()],
    ['idle watchdog', () => (createIdleWatchdog as (o?: unknown) => unknown)()],
    ['projection sink', () => (createProjectionSink as (o?: unknown) => unknown)()],
  ];
  for (const [name, make] of factories) {
    assert.throws(make, { code: 'ERR_SESSION_REQUIRED' }, name);
  }
});

// The run state of src/model/session.ts: a new session's fields, warnings once per code or
// subject, failed records counted, capped line lists, and the session a factory requires.

test('a new session: nothing counted, nothing known, not interrupted nor stalled', () => {
  const session = new Session();
  assert.deepEqual(session.input, {
    lines: 0,
    blankLines: 0,
    bytes: 0,
    quarantined: 0,
    failed: 0,
    unwritten: 0,
    dropped: 0,
  });
  assert.deepEqual(session.warnings, []);
  assert.deepEqual([session.quarantineLines.listed, session.quarantineLines.omitted], [[], 0]);
  assert.equal(session.quarantineLines.limit, QUARANTINE_LINES_LISTED);
  assert.equal(QUARANTINE_LINES_LISTED, 1000);
  assert.deepEqual(
    [session.transcripts, session.producer, session.producerVersion, session.checkedCommandVersion],
    [null, null, null, null],
  );
  assert.deepEqual([session.interrupted, session.stalled], [false, false]);
  assert.equal(session.stall, null);
  // No display policy stated yet: no channel's thinking is counted.
  assert.equal(session.thinking.policy, null);
  assert.equal(session.tree.size, 1);
  assert.equal(session.tree.main.status, 'running');
});

test('the chain\'s facts are stated through the Session\'s methods; a stated producer replaces the ' +
  'last one\'s version and transcripts; prices are stated before the first line', () => {
  const session = new Session();
  const kinds = Object.freeze({ transcriptOf: () => 'spawn-and-result' as const });
  session.stateProducer('codex', { version: '0.46.0', transcripts: kinds });
  const facts = () => [session.producer, session.producerVersion, session.transcripts];
  assert.deepEqual(facts(), ['codex', '0.46.0', kinds]);
  // Read as another producer: that one's facts, none of the last one's.
  session.stateProducer('claude');
  assert.deepEqual(facts(), ['claude', null, null]);
  session.stateCheckedCommandVersion('2.1.328');
  session.stateInterrupted();
  session.stateCommandEnd({ name: 'claude', exit_code: 130, signal: 'SIGINT' });
  assert.deepEqual(
    [session.checkedCommandVersion, session.interrupted, session.command],
    ['2.1.328', true, { name: 'claude', exit_code: 130, signal: 'SIGINT' }],
  );
  // Nothing to assign: each fact is a getter over the Session's own state.
  const fields = session as unknown as Record<string, unknown>;
  const keys = [
    'producer',
    'producerVersion',
    'transcripts',
    'checkedCommandVersion',
    'interrupted',
    'command',
  ];
  for (const key of keys) assert.throws(() => (fields[key] = null), TypeError, key);
  assert.equal(session.interrupted, true);
  const table = Object.freeze({ ...session.cost.prices, date: '2030-01-01' });
  session.statePrices(table);
  assert.equal(session.cost.prices, table);
  session.countLines(1);
  assert.throws(() => session.statePrices(table), { code: 'ERR_PRICES' });
});

test('warn: once per code, or once per subject of a ' +
  'code; a reader waiting at each place gets it', async () => {
  const session = new Session();
  // Two readers waiting before anything is recorded, each at its own places in the list.
  const heardA = Promise.all([0, 1, 2, 3, 4].map((at) => session.warningAt(at)));
  const heardB = Promise.all([0, 1, 2, 3, 4].map((at) => session.warningAt(at).then((w) => w.code)));
  assert.equal(session.warn('SLOW', 'first'), true);
  assert.equal(session.warn('SLOW', 'second'), false);
  assert.equal(session.warn('NO_PRICE', 'model a', 'a'), true);
  assert.equal(session.warn('NO_PRICE', 'model a again', 'a'), false);
  assert.equal(session.warn('NO_PRICE', 'model b', 'b'), true);
  // A subject never collides with a plain code, nor with another code's subject.
  assert.equal(session.warn('NO_PRICE', 'no subject'), true);
  assert.equal(session.warn('SLOW', 'with a subject', ''), true);
  assert.equal(session.warn('SLOW', 'again', ''), false);
  const expected = [
    { code: 'SLOW', message: 'first' },
    { code: 'NO_PRICE', message: 'model a' },
    { code: 'NO_PRICE', message: 'model b' },
    { code: 'NO_PRICE', message: 'no subject' },
    { code: 'SLOW', message: 'with a subject' },
  ];
  assert.deepEqual(session.warnings, expected);
  assert.deepEqual(await heardA, expected);
  assert.deepEqual(await heardB, ['SLOW', 'NO_PRICE', 'NO_PRICE', 'NO_PRICE', 'SLOW']);
  // A reader that comes late reads what is recorded at once.
  assert.deepEqual(await session.warningAt(2), expected[2]);
  // Code and subject are kept apart: code "A" with subject "B" is not code "A\0B" without one.
  const other = new Session();
  assert.equal(other.warn('A', 'x', 'B'), true);
  assert.equal(other.warn('A\u0000B', 'y'), true);
  assert.equal(other.warn('A', 'w'), true);
  assert.equal(other.warn('A', 'v', 'B'), false);
  assert.equal(other.warn('A\u0000', 'z', 'B'), true);
});

test('10,000 readers waiting for the next warning each get it, in the order they asked, ' +
  'with no listener-leak warning', async () => {
  const warnings = processWarnings();
  const session = new Session();
  const heard: number[] = [];
  const readers = Array.from({ length: 10_000 }, (_, reader) =>
    session.warningAt(0).then((w) => {
      heard.push(reader);
      return w.code;
    }),
  );
  session.warn('SLOW', 'first');
  assert.deepEqual(new Set(await Promise.all(readers)), new Set(['SLOW']));
  assert.deepEqual(heard, [...heard.keys()]);
  assert.deepEqual(await warnings.settled(), []);
});

test('recordFailed: a plain error counted and warned once with name and message; a typed one thrown', () => {
  const session = new Session();
  const why = session.recordFailed('the pino sink', 7, new TypeError('bad value'));
  assert.equal(why, 'TypeError: bad value');
  assert.equal(session.recordFailed('the pino sink', 9, 'a thrown string'), 'a thrown string');
  assert.equal(session.recordFailed('a stage', 10, undefined), 'undefined');
  assert.equal(session.input.failed, 3);
  assert.equal(session.warnings.length, 1);
  assert.equal(session.warnings[0].code, 'RECORD_FAILED');
  assert.match(session.warnings[0].message, /the pino sink/);
  assert.match(session.warnings[0].message, /\b7\b/);
  assert.match(session.warnings[0].message, /TypeError: bad value/);
  const typed = [
    new SubteeError('ERR_X', 'x'),
    new UsageError('ERR_Y', 'y'),
    new OutputError('ERR_W', '/', 'w'),
  ];
  for (const err of typed) {
    assert.throws(
      () => session.recordFailed('s', 1, err),
      (thrown) => thrown === err,
    );
  }
  assert.equal(session.input.failed, 3, 'a typed error is not counted as a failed record');
});

test('CappedLineList: the first `limit` line numbers listed in order, the rest only counted', () => {
  const list = new CappedLineList(3);
  for (const lineNo of [5, 9, 12]) list.push(lineNo);
  assert.deepEqual([list.listed, list.omitted], [[5, 9, 12], 0]);
  list.push(20);
  list.push(21);
  assert.deepEqual([list.listed, list.omitted], [[5, 9, 12], 2]);
  const none = new CappedLineList(0);
  none.push(1);
  assert.deepEqual([none.listed, none.omitted], [[], 1]);
});

test('requireSession: the session given, else ERR_SESSION_REQUIRED naming the factory', () => {
  const session = new Session();
  assert.equal(requireSession({ session }, 'createX'), session);
  for (const options of [undefined, {}, { session: undefined }, { session: {} as Session }]) {
    assert.throws(
      () => requireSession(options, 'createThing'),
      (err) =>
        err instanceof UsageError && err.code === 'ERR_SESSION_REQUIRED' && /createThing/.test(err.message),
    );
  }
});

test('agentNameOf: the agent for each producer or command name, null for anything else', () => {
  assert.equal(agentNameOf('copilot'), 'GitHub Copilot CLI');
  assert.equal(agentNameOf('codex'), 'Codex');
  assert.equal(agentNameOf('gemini'), 'Gemini CLI');
  assert.equal(agentNameOf('opencode'), 'opencode');
  for (const name of [null, 'claude', 'langgraph', '', 'toString', 'constructor', '__proto__'])
    assert.equal(agentNameOf(name), null, String(name));
});

test('thinking counts: none before a policy is stated; ' +
  'then per channel, kept and cut as it shows', async () => {
  const { ThinkingCounts, displayPolicy } = await import('../src/model/display.js');
  const counts = new ThinkingCounts();
  counts.add(null, 'x'.repeat(50));
  assert.equal(counts.policy, null);
  assert.deepEqual(counts.of(null), { kept_chars: 0, cut_chars: 0 });
  counts.countWith(displayPolicy({ thinking: 'truncate', thinkingChars: 10 }));
  counts.add(null, 'x'.repeat(50));
  counts.add(null, 'short');
  counts.add('agent-1', 'y'.repeat(8));
  // The marker's spaces aside, truncate keeps 10 of 50 characters, cutting 40; short text is whole.
  assert.deepEqual(counts.of(null), { kept_chars: 15, cut_chars: 40 });
  assert.deepEqual(counts.of('agent-1'), { kept_chars: 8, cut_chars: 0 });
  assert.deepEqual(counts.of('never-seen'), { kept_chars: 0, cut_chars: 0 });
  // A copy: a reader cannot change the counts.
  counts.of(null).kept_chars = 99;
  assert.equal(counts.of(null).kept_chars, 15);
});
