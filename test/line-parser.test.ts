import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createLineParser, LineSplitter, classifyLine } from '../src/chain/stages/line-parser.js';
import { quarantinedLines, type SpooledRecord, type SubteeRecord } from '../src/model/record.js';
import { existsSync, readdirSync } from 'node:fs';
import { Session } from '../src/model/session.js';
import { join } from 'node:path';
import { chunked, splitEvery, tmpDir } from './helpers/helpers.js';

/** One record per input line: a junk run's record stands for each of its lines. */
function perLine(recs: SubteeRecord[]): SubteeRecord[] {
  return recs.flatMap((r): SubteeRecord[] =>
    r.kind === 'quarantine' ? quarantinedLines(r).map((l) => ({ ...r, ...l, lines: undefined })) : [r],
  );
}

async function parse(
  chunks: Buffer[],
  maxLineBytes?: number,
  spoolDir?: string,
): Promise<{ recs: SubteeRecord[]; run: Session }> {
  const run = new Session();
  const recs: SubteeRecord[] = [];
  await pipeline(
    chunked(chunks),
    createLineParser({ session: run, maxLineBytes, spoolDir }),
    new Writable({ objectMode: true, write: (batch: SubteeRecord[], _e, cb) => (recs.push(...batch), cb()) }),
  );
  return { recs, run };
}

const multiByte = Buffer.from(
  '{"type":"assistant","message":{"content":[{"type":"text","text":"é — → ✓ 日本語 🚀"}]}}\n',
);

test('every split point of a line with multi-byte UTF-8 yields the same record', async () => {
  const whole = JSON.parse(multiByte.toString());
  for (let i = 0; i <= multiByte.length; i++) {
    const { recs } = await parse([multiByte.subarray(0, i), multiByte.subarray(i)]);
    assert.equal(recs.length, 1, `split at ${i}`);
    assert.equal(recs[0].kind, 'line');
    assert.deepEqual(recs[0].kind === 'line' && recs[0].value, whole, `split at ${i}`);
    assert.ok(recs[0].raw.equals(multiByte.subarray(0, -1)), `raw bytes at split ${i}`);
  }
});

test('one byte at a time, three lines', async () => {
  const input = Buffer.concat([multiByte, Buffer.from('{"a":1}\n'), multiByte]);
  const { recs } = await parse(splitEvery(input, 1));
  assert.deepEqual(
    recs.map((r) => r.lineNo),
    [1, 2, 3],
  );
  assert.ok(recs.every((r) => r.kind === 'line'));
});

test('CRLF line ends and a BOM, the BOM split over chunks', async () => {
  const input = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}\r\n{"b":2}\r\n')]);
  for (let i = 0; i <= 4; i++) {
    const { recs } = await parse([input.subarray(0, i), input.subarray(i)]);
    assert.deepEqual(
      recs.map((r) => r.kind === 'line' && r.value),
      [{ a: 1 }, { b: 2 }],
      `split at ${i}`,
    );
    assert.deepEqual(
      recs.map((r) => r.kind !== 'spooled' && r.raw.toString()),
      ['{"a":1}', '{"b":2}'],
    );
  }
  // A BOM-like sequence later in the stream is content, not stripped.
  const { recs } = await parse([Buffer.from('{"a":1}\n\ufeff{"b":2}\n')]);
  assert.equal(recs[1].kind, 'quarantine');
});

test('noise, non-objects, blank lines and a truncated last line are quarantined byte for byte', async () => {
  const lines = [
    'npm WARN deprecated foo',
    '42',
    '[1]',
    '"str"',
    'null',
    '{"ok":true}',
    '\x1b[31mred\x1b[0m',
    '{"type":"assistant",',
  ];
  const input = Buffer.from(`${lines.slice(0, 6).join('\n')}\n\n   \n\t\n${lines[6]}\n${lines[7]}`);
  const { recs, run } = await parse([input]);
  const q = perLine(recs).filter((r) => r.kind === 'quarantine');
  assert.deepEqual(
    q.map((r) => r.raw.toString()),
    [...lines.slice(0, 5), lines[6], lines[7]],
  );
  assert.deepEqual(
    q.map((r) => r.kind === 'quarantine' && r.reason),
    ['not-object', 'not-object', 'not-object', 'not-object', 'not-object', 'not-object', 'truncated'],
  );
  assert.equal(run.input.quarantined, 7);
  assert.equal(run.input.blankLines, 3);
  assert.equal(run.input.lines, 8);
  assert.deepEqual(run.quarantineLines.listed, [1, 2, 3, 4, 5, 10, 11]);
});

test('a complete last line without a newline is a record', async () => {
  const { recs } = await parse([Buffer.from('{"a":1}\n{"b":2}')]);
  assert.deepEqual(
    recs.map((r) => r.kind),
    ['line', 'line'],
  );
});

test('invalid UTF-8 in a noise line is kept byte for byte', async () => {
  const bad = Buffer.from([0x6e, 0xff, 0xfe, 0xc3, 0x28, 0x0a]);
  const { recs } = await parse([bad]);
  assert.equal(recs[0].kind, 'quarantine');
  assert.ok(recs[0].raw.equals(bad.subarray(0, -1)));
});

test('a line over the limit is spooled, never held: routed ' +
  'when it is a JSON object, quarantined otherwise', async () => {
  const max = 4096;
  const long = Buffer.from(`{"x":"${'y'.repeat(100_000)}","type":"user","n":1}`);
  const bad = Buffer.from(`{"x":"${'y'.repeat(100_000)}"`);
  // The CRLF after the long line falls across two chunks.
  const first = Buffer.concat([Buffer.from('{"a":1}\n'), long, Buffer.from('\r')]);
  const rest = Buffer.concat([Buffer.from('\n{"b":2}\n'), bad, Buffer.from('\n')]);
  const { recs, run } = await parse([...splitEvery(first, 1000), ...splitEvery(rest, 1000)], max);
  const spooled = recs.filter((r) => r.kind === 'spooled');
  assert.deepEqual(
    recs.map((r) => [r.kind, r.lineNo]),
    [
      ['line', 1],
      ['spooled', 2],
      ['line', 3],
      ['spooled', 4],
    ],
  );
  const bytesOf = (r: SpooledRecord) => {
    const parts: Buffer[] = [];
    r.spool.copy((piece) => parts.push(Buffer.from(piece)));
    return Buffer.concat(parts);
  };
  const [routed, quarantined] = spooled as SpooledRecord[];
  assert.ok(bytesOf(routed).equals(long), 'the line byte for byte, its CR left out');
  assert.deepEqual(
    [routed.value, routed.reason],
    [{ type: 'user', n: 1 }, null],
    'top-level scalars short enough to keep',
  );
  assert.ok(routed.head.equals(long.subarray(0, routed.head.length)) && routed.head.length > 0);
  assert.ok(bytesOf(quarantined).equals(bad));
  assert.deepEqual([quarantined.value, quarantined.reason], [null, 'not-json']);
  assert.equal(run.input.lines, 4);
  assert.equal(run.input.quarantined, 1);
  assert.deepEqual(run.quarantineLines.listed, [4]);
  assert.equal(run.warnings[0].code, 'LINE_TOO_LONG');
  for (const r of [routed, quarantined]) {
    assert.ok(existsSync(r.spool.path));
    r.spool.release();
    assert.ok(!existsSync(r.spool.path), 'released spools are deleted');
  }

  const held: number[] = [];
  const splitter = new LineSplitter(max, { line() {}, overflow() {} });
  for (const c of splitEvery(long, 700)) {
    splitter.push(c);
    held.push(splitter.heldBytes);
  }
  assert.ok(Math.max(...held) <= max);
});

test('a blank line is counted blank whatever its length: spaces, tabs or CRs past the limit ' +
  'are skipped as held ones are, not quarantined, and leave no spool', async () => {
  const blanks = [' '.repeat(5000), '\r'.repeat(3000), ' \t'.repeat(2000) + '\r', '\t'.repeat(1500)];
  // Blank lines between lines that are not: a long line that is blank but for its last byte is not.
  const input = Buffer.from(
    blanks.join('\n') + '\n{"type":"x"}\n' + ' '.repeat(4000) + 'x\n' + blanks[0] + '\n' + blanks[1],
  );
  const counts = (run: Session) => [run.input.lines, run.input.blankLines, run.input.quarantined];
  const held = await parse([input]);
  assert.deepEqual(counts(held.run), [2, 6, 1], 'held: 6 blank lines, 2 lines, the x one quarantined');
  for (const size of [input.length, 700, 1]) {
    const dir = tmpDir();
    const got = await parse(splitEvery(input, size), 1024, dir);
    const name = `limit 1024, chunks of ${size}`;
    assert.deepEqual(counts(got.run), counts(held.run), name);
    assert.deepEqual(got.recs.map((r) => [r.kind, r.lineNo]), [['line', 5], ['spooled', 6]], name);
    assert.deepEqual(got.run.warnings.map((w) => w.message), [
      'line 6 is longer than 1024 bytes: it is not a JSON object and was kept in the quarantine file',
    ], name);
    (got.recs[1] as SpooledRecord).spool.release();
    assert.deepEqual(readdirSync(dir), [], `${name}: no spool left behind`);
  }
});

/** Lines in `bytes` as a reader splits them: at newlines, a last one without its newline too. */
function linesIn(bytes: Buffer): string[] {
  const lines = bytes.toString('latin1').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
}

test('a spool write that fails fails the parser; the long line, the lines after it in the bytes ' +
  'read and one they leave unterminated are counted, and none of them is handed on', async () => {
  const lines = [
    '{"a":1}',
    'not json',
    '  ',
    `{"x":"${'y'.repeat(5000)}"}`,
    '{"b":2}',
    'junk',
    '',
    ' '.repeat(2000),
    `{"z":"${'y'.repeat(3000)}"}`,
  ];
  const input = Buffer.from(lines.join('\n') + '\n{"cut');
  const failedLine = 4;
  const [before, through] = [19, 6000];
  const cuts: Array<[string, Buffer[]]> = [
    ['one chunk', [input]],
    [
      'the long line whole in a chunk, with lines after it',
      [input.subarray(0, before), input.subarray(before, through), input.subarray(through)],
    ],
    ['chunks of 700', splitEvery(input, 700)],
    ['chunks of 1', splitEvery(input, 1)],
  ];
  for (const [name, chunks] of cuts) {
    const run = new Session();
    const recs: SubteeRecord[] = [];
    const spoolDir = join(tmpDir(), 'no-such-folder');
    await assert.rejects(
      pipeline(
        chunked(chunks),
        createLineParser({ session: run, maxLineBytes: 1024, spoolDir }),
        new Writable({ objectMode: true, write: (b: SubteeRecord[], _e, cb) => (recs.push(...b), cb()) }),
      ),
      (err: Error & { code?: string }) => err.code === 'ERR_WRITE' && err.message.includes(spoolDir),
      name,
    );
    // Counted here from the bytes the parser says it read.
    const read = linesIn(input.subarray(0, run.input.bytes));
    const blank = read.filter((l) => !/[^ \t]/.test(l)).length;
    assert.ok(read.length >= failedLine, `${name}: the long line was begun`);
    assert.deepEqual([run.input.lines, run.input.blankLines], [read.length - blank, blank], name);
    const handed = perLine(recs);
    assert.ok(handed.every((r) => r.lineNo < failedLine), `${name}: nothing from the long line on handed on`);
    // Junk split before the failed line is quarantined (the files sink counts what its file
    // holds, see disk-full.test.ts); none read after it is.
    const listed = run.quarantineLines.listed;
    assert.ok(listed.every((n) => n < failedLine), `${name}: quarantined ${listed.join()}`);
    for (const r of handed) if (r.kind === 'quarantine') assert.ok(listed.includes(r.lineNo), name);
  }
});

test('classifyLine tells objects from everything else', () => {
  assert.equal(classifyLine(Buffer.from('  {"a":1}')).ok, true);
  assert.deepEqual(classifyLine(Buffer.from('{"a":')), { ok: false, reason: 'not-json' });
  assert.deepEqual(classifyLine(Buffer.from('{"a":'), false), { ok: false, reason: 'truncated' });
  assert.deepEqual(classifyLine(Buffer.from('[1]')), { ok: false, reason: 'not-object' });
});

test('a chunk of tiny lines is handed on in bounded batches, each once the next stage wants it', async () => {
  const { MAX_BATCH_RECORDS } = await import('../src/model/record.js');
  const total = 5 * MAX_BATCH_RECORDS + 7;
  // Led by a space, each line must be looked at on its own (it might be an object).
  const input = Buffer.from(' x\n'.repeat(total - 1) + '{"a":1}\n');
  const run = new Session();
  const parser = createLineParser({ session: run });
  // One write, nothing read yet: the parser splits what its buffer holds and waits.
  parser.write(input);
  assert.ok(run.input.lines < total, `split ${run.input.lines} of ${total} lines before anything was read`);
  parser.end();
  const sizes: number[] = [];
  const recs: SubteeRecord[] = [];
  for await (const batch of parser as AsyncIterable<SubteeRecord[]>) {
    sizes.push(batch.length);
    recs.push(...batch);
  }
  assert.ok(Math.max(...sizes) <= MAX_BATCH_RECORDS, `largest batch ${Math.max(...sizes)}`);
  assert.deepEqual(
    recs.map((r) => r.lineNo),
    Array.from({ length: total }, (_, i) => i + 1),
  );
  assert.equal(recs.filter((r) => r.kind === 'quarantine').length, total - 1);
  assert.equal(recs[total - 1].kind, 'line');
  assert.equal(run.input.quarantined, total - 1);
});

test('bounded batches keep every line across chunk boundaries, a long line among tiny ones', async () => {
  const { MAX_BATCH_RECORDS } = await import('../src/model/record.js');
  const long = `{"type":"user","x":"${'y'.repeat(3000)}"}`;
  const lines = [...Array.from({ length: 3 * MAX_BATCH_RECORDS }, (_, i) => `j${i % 10}`), long, 'z', long];
  const input = Buffer.from(`${lines.join('\n')}\n`);
  for (const every of [1000, 4093, input.length]) {
    const recs = perLine((await parse(splitEvery(input, every), 2048)).recs);
    assert.equal(recs.length, lines.length, `chunks of ${every}`);
    const texts = recs.map((r) => {
      if (r.kind !== 'spooled') return r.raw.toString();
      const parts: Buffer[] = [];
      r.spool.copy((piece) => parts.push(Buffer.from(piece)));
      r.spool.release();
      return Buffer.concat(parts).toString();
    });
    assert.deepEqual(texts, lines, `chunks of ${every}`);
    assert.deepEqual(
      recs.map((r) => r.lineNo),
      Array.from({ length: lines.length }, (_, i) => i + 1),
    );
  }
});

test('a line over the limit is spooled however the input is cut, whole in one chunk or in many', async () => {
  const max = 2000;
  const long = `{"type":"user","x":"${'y'.repeat(3000)}"}`;
  const input = Buffer.from(`{"a":1}\n${long}\r\n{"b":2}\n${long.slice(0, -1)}\n${long}\n`);
  const shapes = [];
  for (const size of [input.length, 4096, 2500, 256, 7]) {
    const { recs, run } = await parse(splitEvery(input, size), max);
    for (const rec of recs) if (rec.kind === 'spooled') rec.spool.release();
    const kinds = recs.map((r) => [r.kind, r.lineNo, r.kind === 'spooled' ? r.reason : null]);
    shapes.push({ kinds, warnings: run.warnings.map((w) => w.message), quarantined: run.input.quarantined });
  }
  assert.deepEqual(shapes[0].kinds, [
    ['line', 1, null],
    ['spooled', 2, null],
    ['line', 3, null],
    ['spooled', 4, 'not-json'],
    ['spooled', 5, null],
  ]);
  for (const shape of shapes.slice(1)) assert.deepEqual(shape, shapes[0]);
});

test('a line over the limit loses exactly the one CR before its newline, as a short line does, ' +
  'wherever the chunks split its CRs', async () => {
  const max = 1024;
  const bytesOf = (rec: SubteeRecord) => {
    if (rec.kind === 'line') return rec.raw;
    assert.equal(rec.kind, 'spooled');
    const parts: Buffer[] = [];
    rec.spool.copy((piece) => parts.push(Buffer.from(piece)));
    rec.spool.release();
    return Buffer.concat(parts);
  };
  for (const body of ['{"x":1}', `{"x":"${'y'.repeat(2000)}"}`]) {
    for (const [end, kept] of [['\r\r\n', '\r'], ['\r\r\r\n', '\r\r'], ['\r\n', ''], ['\r', '\r']]) {
      const input = Buffer.from(body + end);
      // Every split among the last bytes: between the CRs, between a CR and the newline.
      for (let at = input.length - end.length - 1; at <= input.length; at++) {
        const { recs } = await parse([input.subarray(0, at), input.subarray(at)], max);
        assert.equal(recs.length, 1);
        assert.equal(
          JSON.stringify(bytesOf(recs[0]).toString()),
          JSON.stringify(body + kept),
          `${body.length} bytes ending ${JSON.stringify(end)}, split at ${at}`,
        );
      }
    }
  }
});
