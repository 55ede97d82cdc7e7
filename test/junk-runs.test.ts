import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { test } from 'node:test';
import { RowBuilder, type EventRow } from '../src/chain/sinks/clickhouse-rows.js';
import { createLineParser } from '../src/chain/stages/line-parser.js';
import { VersionGuard } from '../src/chain/stages/version-guard.js';
import { JUNK_RUN_BYTES } from '../src/model/lines.js';
import { MAX_BATCH_RECORDS, quarantinedLines, type SubteeRecord } from '../src/model/record.js';
import { Session } from '../src/model/session.js';
import { open, type RunEvent } from '../src/index.js';
import { chunked, FIXTURES, splitEvery, tmpDir } from './helpers/helpers.js';
import { routeThrough } from './helpers/otlp-tree.js';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'subtee.js');

/**
 * Junk among real lines: runs of short lines that cannot be objects (one of them over
 * JUNK_RUN_BYTES long in all), and next to them every kind of line a run must not swallow
 * (CRLF, blank, space-led, too long to join, JSON, a broken object, invalid UTF-8), the CLI's
 * own complaint in the middle of a run, and an unterminated last line.
 */
function mixedInput(): Buffer {
  const real = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8').split('\n').filter(Boolean);
  const lines: Array<string | Buffer> = [];
  real.forEach((line, i) => {
    lines.push(line);
    for (let k = 0; k < 3 + (i % 5); k++) lines.push(`x${i}-${k}`);
    if (i % 4 === 0) lines.push('crlf junk\r', 'after crlf');
    if (i % 4 === 1) lines.push('', '   ', 'after blank');
    if (i % 4 === 2) lines.push('  indented junk', '{"broken":', 'z'.repeat(300), 'short');
    if (i % 4 === 3) lines.push(Buffer.from([0xff, 0xfe, 0x41]), '[1,2]', '42');
  });
  lines.push(...Array.from({ length: 12_000 }, (_, k) => `npm WARN ${k}`));
  lines.splice(lines.length - 6_000, 0, "error: unknown option '--forward-subagent-text'");
  lines.push('tail');
  const parts = lines.map((l) => (typeof l === 'string' ? Buffer.from(l) : l));
  return Buffer.concat([...parts.flatMap((p) => [p, Buffer.from('\n')]), Buffer.from('last, unterminated')]);
}

/** What each non-blank line should become, read here without subtee's splitter or scanner. */
function expected(input: Buffer): Array<{ lineNo: number; raw: string; quarantined: boolean }> {
  const out: Array<{ lineNo: number; raw: string; quarantined: boolean }> = [];
  let start = 0;
  for (let lineNo = 1; start <= input.length; lineNo++) {
    let end = input.indexOf(0x0a, start);
    if (end === -1) end = input.length;
    let line = input.subarray(start, end);
    start = end + 1;
    if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, -1);
    if (/^[ \t\r]*$/.test(line.toString('latin1'))) continue;
    let object = false;
    try {
      const value = JSON.parse(line.toString('utf8'));
      object = typeof value === 'object' && value !== null && !Array.isArray(value);
    } catch {}
    out.push({ lineNo, raw: line.toString('latin1'), quarantined: !object });
  }
  return out;
}

async function parse(
  chunks: Buffer[],
): Promise<{ recs: SubteeRecord[]; run: Session; batchLines: number[] }> {
  const run = new Session();
  const recs: SubteeRecord[] = [];
  const batchLines: number[] = [];
  const take = (batch: SubteeRecord[]) => {
    for (const rec of batch) recs.push(rec);
    batchLines.push(batch.reduce((sum, rec) => sum + (rec.kind === 'quarantine' ? (rec.lines ?? 1) : 1), 0));
  };
  await pipeline(
    chunked(chunks),
    createLineParser({ session: run }),
    new Writable({ objectMode: true, write: (batch: SubteeRecord[], _e, cb) => (take(batch), cb()) }),
  );
  return { recs, run, batchLines };
}

test('junk runs: every line once, in order, with its number, across chunk boundaries', async () => {
  const input = mixedInput();
  const want = expected(input);
  const quarantined = want.filter((line) => line.quarantined);
  for (const size of [1, 2, 3, 7, 64, 1000, 4093, 65_536, input.length]) {
    const { recs, run, batchLines } = await parse(splitEvery(input, size));
    // Sinks that log each line (pino, ClickHouse) take a batch's lines at once: they are bounded.
    assert.ok(Math.max(...batchLines) <= MAX_BATCH_RECORDS, `chunks of ${size}: ${Math.max(...batchLines)}`);
    const got = recs.flatMap((rec) => {
      if (rec.kind === 'spooled') throw new Error('no line here is long enough to spool');
      if (rec.kind === 'line')
        return [{ lineNo: rec.lineNo, raw: rec.raw.toString('latin1'), quarantined: false }];
      return quarantinedLines(rec).map((line) => ({
        ...line,
        raw: line.raw.toString('latin1'),
        quarantined: true,
      }));
    });
    assert.deepEqual(got, want, `chunks of ${size}`);
    assert.equal(run.input.lines, want.length);
    assert.equal(run.input.quarantined, quarantined.length);
    assert.deepEqual(
      run.quarantineLines.listed,
      quarantined.slice(0, run.quarantineLines.limit).map((l) => l.lineNo),
    );
    assert.equal(run.quarantineLines.omitted, Math.max(0, quarantined.length - run.quarantineLines.limit));
    const runs = recs.filter((rec) => rec.kind === 'quarantine' && (rec.lines ?? 1) > 1);
    // A run needs two whole lines in one chunk.
    if (size >= 64) assert.ok(runs.length > 0, `chunks of ${size}: no run`);
    for (const rec of runs) assert.ok(rec.kind === 'quarantine' && rec.raw.length <= JUNK_RUN_BYTES);
    // A record per line would be one per quarantined line; runs take their place.
    if (size === input.length) assert.ok(recs.length < want.length / 4, `${recs.length} records`);
  }
});

test('the CLI files, counts and logs each junk line of a run as its own line', () => {
  const dir = tmpDir();
  const input = mixedInput();
  const file = join(dir, 'in.jsonl');
  writeFileSync(file, input);
  const out = join(dir, 'out');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '--pino', '-q', file], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const quarantined = expected(input).filter((line) => line.quarantined);
  const quarantineLog = readFileSync(join(out, 'quarantine.log'));
  assert.equal(quarantineLog.toString('latin1'), quarantined.map((l) => `${l.raw}\n`).join(''));
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.input.quarantined, quarantined.length);
  assert.deepEqual(
    index.quarantine_lines,
    quarantined.slice(0, index.quarantine_lines.length).map((l) => l.lineNo),
  );
  assert.equal(index.quarantine_lines.length + index.quarantine_lines_omitted, quarantined.length);
  // The complaint sat in the middle of a run of 12,000 junk lines.
  assert.ok(
    index.warnings.some((w: { code: string }) => w.code === 'UNKNOWN_OPTION'),
    r.stderr,
  );
  const events = readFileSync(join(out, 'events.pino.log'), 'utf8').split('\n').filter(Boolean);
  const logged = events.map((line) => JSON.parse(line)).filter((event) => event.kind === 'quarantine');
  assert.deepEqual(
    logged.map((event) => event.line),
    quarantined.map((l) => l.lineNo),
  );
  assert.deepEqual(
    logged.map((event) => event.content),
    quarantined.map((l) => Buffer.from(l.raw, 'latin1').toString('utf8')),
  );
});

test("the version guard hears the CLI's complaint anywhere in a run", async () => {
  const junk = Array.from({ length: 1000 }, (_, k) => `npm WARN ${k}`);
  for (const at of [0, 400, 999]) {
    const lines = [...junk];
    lines.splice(at, 0, "error: unknown option '--forward-subagent-text'");
    const { recs } = await parse([Buffer.from(`${lines.join('\n')}\n`)]);
    const guard = new VersionGuard(null);
    const heard = recs.flatMap((rec) => guard.observe(rec).map((w) => w.code));
    assert.deepEqual(heard, ['UNKNOWN_OPTION'], `complaint at line ${at + 1}`);
    assert.ok(recs.some((rec) => rec.kind === 'quarantine' && (rec.lines ?? 1) > 1));
  }
  // One option named, not a run's worth of text up to some later quote.
  const { recs } = await parse([
    Buffer.from("error: unknown option 'x\nthen 'quoted'\nerror: unknown option '-q'\n"),
  ]);
  const guard = new VersionGuard(null);
  const said = recs.flatMap((rec) => guard.observe(rec));
  assert.equal(said.length, 1);
  assert.match(said[0].message, /option -q:/);
});

test('ClickHouse away: 200,000 junk lines from a file are 200,000 spooled rows', async () => {
  const dir = tmpDir();
  const file = join(dir, 'junk.txt');
  writeFileSync(file, 'a\n'.repeat(200_000));
  // A port nothing listens on: taken, then given back.
  const probe = createServer();
  await new Promise<void>((done) => probe.listen(0, '127.0.0.1', done));
  const { port } = probe.address() as AddressInfo;
  await new Promise((done) => probe.close(done));
  const out = join(dir, 'out');
  const url = `http://127.0.0.1:${port}`;
  const r = spawnSync(
    process.execPath,
    [BIN, '--out', out, '--stdout', 'none', '-q', '--clickhouse', url, file],
    {
      encoding: 'utf8',
    },
  );
  assert.equal(r.status, 0, r.stderr);
  const rows = readFileSync(join(out, 'clickhouse-spool.jsonl'), 'utf8').split('\n').filter(Boolean);
  const events = rows.map((row) => JSON.parse(row)).filter((row) => row.t === 'events');
  assert.equal(events.length, 200_000);
  assert.ok(events.every((row, k) => row.r.line === k + 1 && row.r.content === 'a' && row.r.bytes === 1));
});

test('ClickHouse rows and the projection see each junk line of a run', async () => {
  const input = mixedInput();
  const quarantined = expected(input).filter((line) => line.quarantined);
  const events: EventRow[] = [];
  let builder: RowBuilder | null = null;
  await routeThrough(
    input,
    (batch, session) => {
      builder ??= new RowBuilder({ costs: session.cost });
      for (const rec of batch)
        for (const entry of builder.rows(rec)) if (entry.t === 'events') events.push(entry.r as EventRow);
    },
    65_536,
  );
  const rows = events.filter((row) => row.kind === 'quarantine');
  assert.deepEqual(
    rows.map((row) => row.line),
    quarantined.map((l) => l.lineNo),
  );
  assert.deepEqual(
    rows.map((row) => row.bytes),
    quarantined.map((l) => Buffer.byteLength(l.raw, 'latin1')),
  );

  const run = open(chunked(splitEvery(input, 65_536)));
  const seen: RunEvent[] = [];
  const reading = (async () => {
    for await (const event of run.events) seen.push(event);
  })();
  await run.done;
  await reading;
  assert.deepEqual(
    seen.filter((event) => event.kind === 'quarantine').map((event) => event.lineNo),
    quarantined.map((l) => l.lineNo),
  );
});
