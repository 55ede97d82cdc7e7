// The ClickHouse spool's parts, through the module's API on real files: the spool a run
// appends to and claims, the claims that keep two senders off one file, reading a spool back in
// batches, splitting a batch the server refuses as data down to the refused rows, and the
// rows set aside.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import {
  claimFile,
  findSpoolFiles,
  insertSettingAside,
  readSpool,
  refusalReason,
  keepInSpool,
  SendStopped,
  SendTally,
  settleHeld,
  TABLE_REFUSES_AFTER_ROWS,
  TableRefused,
  Rejects,
  REJECTS_FILE,
  removeSpool,
  Spool,
  SPOOL_FILE,
  spooledRows,
} from '../src/chain/sinks/clickhouse-spool.js';
import type { Entry } from '../src/chain/sinks/clickhouse-rows.js';
import { linesOf, tmpDir } from './helpers/helpers.js';

const lineOf = (e: Entry) => (e.r as { line?: number }).line as number;
/** Files this process has open (Linux): one a spool write or read left open leaks for the run. */
const openFiles = () => readdirSync('/proc/self/fd').length;
const entriesIn = (file: string) => linesOf(readFileSync(file)).map((l) => JSON.parse(l) as Entry);

test('insertSettingAside: halves a refused batch down to ' +
  'the rows refused alone; any other failure stops it, every row handed back', async () => {
  const entries: Entry[] = Array.from({ length: 11 }, (_, i) => ({
    t: 'events',
    r: { line: i + 1 } as never,
  }));
  const refusedLines = new Set([3, 8]);
  const refusal = Object.assign(
    new Error('Code: 53, e.displayText() = DB::Exception: Type mismatch: row 1'),
    { code: '53' },
  );
  const inserted: number[][] = [];
  const setAside: Array<[number, string]> = [];
  await insertSettingAside(
    entries,
    {
      insert: async (part) => {
        if (part.some((e) => refusedLines.has(lineOf(e)))) throw refusal;
        inserted.push(part.map((e) => lineOf(e)));
      },
      setAside: (entry, err) => setAside.push([lineOf(entry), refusalReason(err)]),
      stopped: () => false,
    },
    new SendTally(),
  );
  assert.deepEqual(
    inserted.flat().sort((a, b) => a - b),
    [1, 2, 4, 5, 6, 7, 9, 10, 11],
    'every other row once',
  );
  assert.deepEqual(setAside, [
    [3, 'Code: 53, Type mismatch'],
    [8, 'Code: 53, Type mismatch'],
  ]);
  // In order, halves first-half-first.
  assert.deepEqual(inserted, [[1, 2], [4, 5, 6], [7], [9], [10, 11]]);
  const gone = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  const failing = (err: unknown) => ({
    insert: () => Promise.reject(err),
    setAside: () => assert.fail('not data'),
    stopped: () => false,
  });
  const everyRow = entries.map(lineOf).join();
  const stoppedBy = (cause: unknown) => (err: unknown) =>
    err instanceof SendStopped && err.cause === cause && err.rest.map(lineOf).join() === everyRow;
  await assert.rejects(insertSettingAside(entries, failing(gone), new SendTally()), stoppedBy(gone));
  const serverError = new Error('Code: 241. DB::Exception: Memory limit exceeded');
  await assert.rejects(
    insertSettingAside(entries, failing(serverError), new SendTally()),
    stoppedBy(serverError),
  );
  const oldServer = new Error(
    'Code: 27, e.displayText() = DB::Exception: Cannot parse input: expected , before: x',
  );
  assert.equal(refusalReason(oldServer), 'Code: 27, Cannot parse input');
});

test('readSpool: entries in batches of batchRows across 1 MiB pieces; torn and foreign lines skipped', () => {
  const dir = tmpDir();
  const file = join(dir, SPOOL_FILE);
  // Rows with multi-byte text so that pieces cut characters; a line that is no entry; a torn end.
  const wanted: Entry[] = Array.from({ length: 700 }, (_, i) => ({
    t: i % 3 === 0 ? 'channels' : 'events',
    r: { line: i, text: 'é€'.repeat(1000 + (i % 7)) } as never,
  }));
  const text =
    wanted.map((e) => JSON.stringify(e)).join('\n') +
    '\n{"t":"other","r":{}}\n\n{"t":"events","r":null}\n{"t":"events","r":{"line":9';
  writeFileSync(file, text);
  const batches = [...readSpool(file, 64)];
  assert.deepEqual(
    batches.map((b) => b.length),
    [...Array(10).fill(64), 700 - 640],
  );
  assert.deepEqual(batches.flat(), wanted);
  assert.ok(Buffer.byteLength(text) > 2 * 1024 * 1024, 'more than two pieces');
});

test('keepInSpool: the lines after the last batch read kept byte for byte across 1 MiB pieces ' +
  '(a character cut between them, a foreign line, a torn end); a file none of whose entries ' +
  'went anywhere left as it is; spooledRows counts its lines', () => {
  const file = join(tmpDir(), 'clickhouse-spool.sending-1-x-1.jsonl');
  // Written with a space JSON.stringify would not write: a row parsed and written again differs.
  const lines = Array.from({ length: 900 }, (_, i) => ' ' + JSON.stringify({
    t: 'events',
    r: { line: i + 1, text: 'é€'.repeat(1000 + (i % 7)) },
  }));
  const original = Buffer.from(lines.join('\n') + '\n{"t":"other","r":{}}\n{"t":"events","r":{"line":9');
  writeFileSync(file, original);
  const place = { bytes: 0, entries: 0 };
  const batches = readSpool(file, 400, place);
  batches.next();
  const [second] = [batches.next().value as Entry[]];
  assert.equal(place.entries, 800);
  keepInSpool(file, second, place);
  assert.equal(place.entries, 800, 'read no further');
  batches.return(undefined);
  const unread = original.subarray(Buffer.byteLength(lines.slice(0, 800).join('\n') + '\n'));
  const kept = readFileSync(file);
  assert.ok(kept.subarray(kept.length - unread.length).equals(unread), 'the unread bytes as they were');
  assert.deepEqual([...readSpool(file, 400)][0], second, 'the rows handed back first');
  assert.equal(spooledRows(file), 400 + 100 + 2, 'the lines, the foreign and the torn ones too');
  const whole = readFileSync(file);
  const again = { bytes: 0, entries: 0 };
  const reread = readSpool(file, 400, again);
  const first = reread.next().value as Entry[];
  keepInSpool(file, [...first].reverse(), again);
  reread.return(undefined);
  assert.ok(readFileSync(file).equals(whole), 'every entry read handed back: the file as it was');
});

test('claimFile: a spool another live process is sending is ' +
  'left to it; one of a dead process, or unclaimed, is taken', () => {
  const dir = tmpDir();
  const live = join(dir, `clickhouse-spool.sending-${process.ppid}-a-1.jsonl`);
  const dead = join(dir, 'clickhouse-spool.sending-999999998-b-2.jsonl');
  const plain = join(dir, SPOOL_FILE);
  for (const f of [live, dead, plain]) writeFileSync(f, '{}\n');
  mkdirSync(join(dir, 'sub', 'deeper'), { recursive: true });
  writeFileSync(join(dir, 'sub', 'deeper', SPOOL_FILE), '{}\n');
  writeFileSync(join(dir, 'sub', SPOOL_FILE), '{}\n');
  writeFileSync(join(dir, 'clickhouse-spool.jsonl.bak'), '{}\n');
  writeFileSync(join(dir, 'old-clickhouse-spool.jsonl'), '{}\n');
  assert.deepEqual(
    findSpoolFiles(dir),
    [...[plain, live, dead].sort(), join(dir, 'sub', SPOOL_FILE)],
    'one level down, sorted',
  );
  assert.equal(claimFile(live), null, 'a live sender keeps its file');
  const taken = claimFile(dead);
  assert.ok(taken && existsSync(taken) && !existsSync(dead));
  assert.equal(claimFile(taken), null, 'this process is sending it');
  const mine = claimFile(plain)!;
  assert.match(
    basename(mine),
    new RegExp(`^clickhouse-spool\\.sending-${process.pid}-[a-z0-9]+-\\d+\\.jsonl$`),
  );
  assert.notEqual(mine, taken);
  assert.equal(claimFile(plain), null, 'already taken');
});

test('Spool: appends under the folder resolved at the first row; ' +
  'claimOwn takes it once; nothing spooled, nothing claimed', () => {
  const base = tmpDir();
  let resolved = 0;
  const spool = new Spool(() => (resolved++, join(base, 'made', 'here')));
  spool.append([]);
  assert.equal(resolved, 0, 'no row, no folder');
  assert.equal(spool.claimOwn(), null);
  assert.equal(resolved, 0, 'nothing to claim, no folder asked for');
  const rows: Entry[] = [
    { t: 'events', r: { line: 1 } as never },
    { t: 'channels', r: { channel: 'c' } as never },
  ];
  spool.append(rows);
  const filesBefore = openFiles();
  spool.append(rows.slice(0, 1));
  assert.equal(openFiles(), filesBefore, 'the spool closed after each append');
  assert.equal(resolved, 1);
  assert.equal(spool.rows, 3);
  assert.equal(spool.file, join(base, 'made', 'here', SPOOL_FILE));
  assert.deepEqual(entriesIn(spool.file), [...rows, rows[0]]);
  const claimed = spool.claimOwn()!;
  assert.deepEqual(entriesIn(claimed), [...rows, rows[0]]);
  assert.equal(spool.rows, 0);
  assert.equal(spool.claimOwn(), null, 'nothing new');
  spool.append(rows);
  rmSync(spool.file);
  assert.equal(spool.claimOwn(), null, 'gone before it was claimed');
  assert.equal(spool.rows, 2, 'still owed');
  removeSpool(claimed);
  assert.equal(existsSync(claimed), false);
  removeSpool(claimed);
});

test('Spool and Rejects: a file that cannot be written is ' +
  'ERR_WRITE; Rejects counts rows, files and the first reason', () => {
  const blocker = join(tmpDir(), 'a-file');
  writeFileSync(blocker, '');
  const entry: Entry = { t: 'events', r: { line: 7 } as never };
  assert.throws(
    () => new Spool(() => join(blocker, 'sub')).append([entry]),
    (err: { code?: string }) => err.code === 'ERR_WRITE',
  );
  const rejects = new Rejects();
  assert.throws(
    () => rejects.add(join(blocker, 'sub'), entry, 'why'),
    (err: { code?: string }) => err.code === 'ERR_WRITE',
  );
  assert.equal(rejects.rows, 0);
  const [a, b] = [tmpDir(), tmpDir()];
  const filesBefore = openFiles();
  rejects.add(a, entry, 'first');
  assert.equal(openFiles(), filesBefore, 'the rejects file closed after each row');
  rejects.add(b, entry, 'second');
  rejects.add(a, entry, 'third');
  assert.deepEqual(
    [rejects.rows, [...rejects.files], rejects.reason],
    [3, [join(a, REJECTS_FILE), join(b, REJECTS_FILE)], 'first'],
  );
  assert.deepEqual(entriesIn(join(a, REJECTS_FILE)), [entry, entry]);
  assert.deepEqual(findSpoolFiles(join(a, 'missing')), []);
});

test('readSpool: a last entry without its newline kept, no empty ' +
  'batch, a row that is no object skipped, the file closed', () => {
  const dir = tmpDir();
  const file = join(dir, SPOOL_FILE);
  const wanted: Entry[] = Array.from({ length: 6 }, (_, i) => ({ t: 'events', r: { line: i + 1 } as never }));
  const lines = wanted.map((e) => JSON.stringify(e));
  // A row that is text, not an object, among them; the last line whole but not ended.
  writeFileSync(file, [lines[0], '{"t":"events","r":"text"}', ...lines.slice(1)].join('\n'));
  const before = openFiles();
  assert.deepEqual(
    [...readSpool(file, 3)],
    [wanted.slice(0, 3), wanted.slice(3)],
    'two full batches, no third',
  );
  assert.equal(openFiles(), before, 'closed when read to the end');
  const reader = readSpool(file, 1);
  assert.deepEqual(reader.next().value, [wanted[0]]);
  assert.equal(openFiles(), before + 1, 'open while read');
  reader.return(undefined);
  assert.equal(openFiles(), before, 'closed when the reader stops early');
});

test("refusalReason: the code the client parsed, or the one the message states, or none; the " +
  "exception's first clause", () => {
  const parsed = Object.assign(new Error('Type mismatch in VALUES: row 3'), { code: '53' });
  assert.equal(refusalReason(parsed), 'Code: 53, Type mismatch in VALUES');
  const stated = new Error('Code: 117. DB::Exception: Unknown field found while parsing: x');
  assert.equal(refusalReason(stated), 'Code: 117, Unknown field found while parsing');
  const unanswered = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
  assert.equal(refusalReason(unanswered), 'Code: null, socket hang up');
  assert.equal(refusalReason('refused: why'), 'Code: null, refused');
  assert.equal(refusalReason(new Error('')), 'Code: null, refused', 'no clause at all');
  assert.equal(refusalReason(undefined), 'Code: null, undefined');
  // Only a code of digits is ClickHouse's, and only a message that starts with one states it.
  for (const code of ['E2', '2E'])
    assert.equal(refusalReason(Object.assign(new Error('gone'), { code })), 'Code: null, gone', code);
  const quoted = new Error('bad gateway, the upstream said Code: 27, e.displayText() = x');
  assert.equal(refusalReason(quoted), 'Code: null, bad gateway, the upstream said Code');
  // A row's text the server quotes without a colon before it stays out.
  const inQuotes = new Error(
    "Code: 6, e.displayText() = DB::Exception: Cannot parse string 'a secret\\nb' as Date",
  );
  assert.equal(refusalReason(inQuotes), 'Code: 6, Cannot parse string');
});

test('insertSettingAside: a failure that is no error at all stops the send ' +
  'with it, its row handed back', async () => {
  const entries: Entry[] = [{ t: 'events', r: { line: 1 } as never }];
  for (const failure of [undefined, null]) {
    await assert.rejects(
      insertSettingAside(
        entries,
        {
          insert: () => Promise.reject(failure),
          setAside: () => assert.fail('not data'),
          stopped: () => false,
        },
        new SendTally(),
      ),
      (err) => err instanceof SendStopped && err.cause === failure && err.rest.length === 1,
    );
  }
});

const rowsOf = (lines: number[], t: Entry['t'] = 'events'): Entry[] =>
  lines.map((line) => ({ t, r: { line } as never }));
const dataRefusal = () =>
  Object.assign(new Error('Code: 38, e.displayText() = DB::Exception: Cannot parse date: x'), { code: '38' });

test('insertSettingAside: stopped midway, the rows neither inserted nor set aside are handed ' +
  'back in order, and no insert is made after', async () => {
  const entries = rowsOf([1, 2, 3, 4, 5, 6, 7, 8]);
  const inserted: number[] = [];
  const setAside: number[] = [];
  let stop = false;
  const err = await insertSettingAside(
    entries,
    {
      insert: async (part) => {
        assert.equal(stop, false, 'no insert once stopped');
        if (part.some((e) => lineOf(e) === 2)) throw dataRefusal();
        inserted.push(...part.map(lineOf));
        // The end comes once the first half is done.
        if (part.some((e) => lineOf(e) === 4)) stop = true;
      },
      setAside: (e) => setAside.push(lineOf(e)),
      stopped: () => stop,
    },
    new SendTally(),
  ).then(
    () => assert.fail('stopped'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SendStopped);
  assert.equal(err.cause, null);
  assert.deepEqual([inserted, setAside], [[1, 3, 4], [2]]);
  assert.deepEqual(err.rest.map(lineOf), [5, 6, 7, 8], 'each row in one place');
});

test('insertSettingAside: a table that took none of the rows and refused TABLE_REFUSES_AFTER_ROWS ' +
  'alone is the problem; none is set aside, every row handed back', async () => {
  const events = rowsOf(Array.from({ length: 40 }, (_, i) => i + 1));
  const channels = rowsOf([100, 101], 'channels');
  let inserts = 0;
  const took: number[] = [];
  const err = await insertSettingAside(
    [...events.slice(0, 5), ...channels, ...events.slice(5)],
    {
      insert: async (part) => {
        inserts++;
        // The events table refuses every row; the channels table takes its own.
        if (part.some((e) => e.t === 'events')) throw dataRefusal();
        took.push(...part.map(lineOf));
      },
      setAside: () => assert.fail('the rows are not at fault'),
      stopped: () => false,
    },
    new SendTally(),
  ).then(
    () => assert.fail('refused'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SendStopped && err.cause instanceof TableRefused);
  assert.equal(err.cause.kind, 'events');
  assert.equal(err.cause.reason, 'Code: 38, Cannot parse date');
  assert.deepEqual(took, [100, 101], 'the channels rows went in');
  assert.deepEqual(
    err.rest.map(lineOf).sort((a, b) => a - b),
    events.map(lineOf),
    'every events row back once',
  );
  assert.ok(inserts < 3 * TABLE_REFUSES_AFTER_ROWS, `${inserts} inserts, not one per row`);
});

test('insertSettingAside: rows refused alone before their table took one are set aside once it ' +
  'takes one, or at the end of the file (settleHeld)', async () => {
  const refused = new Set([1, 2, 3]);
  const setAside: number[] = [];
  const to = {
    insert: async (part: Entry[]) => {
      if (part.some((e) => refused.has(lineOf(e)))) throw dataRefusal();
    },
    setAside: (e: Entry) => setAside.push(lineOf(e)),
    stopped: () => false,
  };
  const tally = new SendTally();
  await insertSettingAside(rowsOf([1, 2]), to, tally);
  assert.deepEqual(setAside, [], 'held while the table took nothing');
  await insertSettingAside(rowsOf([3, 4]), to, tally);
  assert.deepEqual(setAside, [1, 2, 3], 'the table took row 4: the rows were at fault');
  const few = new SendTally();
  await insertSettingAside(rowsOf([1]), to, few);
  settleHeld(few, to);
  assert.deepEqual(setAside, [1, 2, 3, 1], 'fewer than the limit, alone in the file: set aside');
});

test('keepInSpool: a claimed file rewritten to the rows handed back and the batches not read yet', () => {
  const file = join(tmpDir(), 'clickhouse-spool.sending-1-x-1.jsonl');
  const entries = rowsOf([1, 2, 3, 4, 5, 6, 7]);
  writeFileSync(file, entries.map((e) => JSON.stringify(e) + '\n').join(''));
  const place = { bytes: 0, entries: 0 };
  const batches = readSpool(file, 3, place);
  batches.next();
  keepInSpool(file, rowsOf([2, 3]), place);
  assert.deepEqual(entriesIn(file).map(lineOf), [2, 3, 4, 5, 6, 7]);
  assert.equal(existsSync(`${file}.tmp`), false);
});
