import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { classifyLine } from '../src/chain/stages/line-parser.js';
import {
  lineValue,
  parseBounded,
  PARSE_LIMITS,
  PARSE_LINE_BYTES,
  planLine,
  ScannedLine,
  scanLine,
  scannedRecord,
  viewOf,
} from '../src/model/line-view.js';
import {
  elementsAt,
  LazyText,
  LAZY_TEXT_BYTES,
  membersAt,
  scanJson,
  Tape,
  UNDECIDED,
  valueAt,
} from '../src/model/scan.js';
import {
  BLOCK_MEMBER_BYTES,
  MEMBERS_CAPTURED,
  StreamScanner,
  TOOL_BLOCKS_KEPT,
} from '../src/model/stream-scan.js';
import { readFileSync } from 'node:fs';
import { fixtureFiles, runToFiles, splitEvery } from './helpers/helpers.js';

// The scanner must judge every line exactly as classifyLine (JSON.parse) does, and a view
// must equal JSON.parse's value but for the strings it leaves lazy. JSON.parse is the oracle.

const unit = fc.constantFrom(
  'a',
  'Z',
  ' ',
  'é',
  '日',
  '🚀',
  '"',
  '\\',
  '/',
  '\n',
  '\t',
  '\u0001',
  '\u2028',
  '\ud83d',
  '\ude80',
  '\u007f',
);
const text = (maxLength: number) => fc.string({ unit, maxLength });
/** Strings long enough to be left lazy, with escapes and multi-byte characters throughout. */
const longText = fc
  .tuple(text(40), fc.integer({ min: 30, max: 120 }), text(40))
  .map(([a, n, b]) => a + (a + 'xé' + b).repeat(n) + b);

/** A JSON text for `value` with random whitespace and escape spellings (what other writers emit). */
function serialize(value: unknown, rnd: () => number): string {
  const ws = () => ['', '', ' ', '\t', '  '][Math.floor(rnd() * 5)];
  if (typeof value === 'string') {
    let out = '"';
    for (const ch of value) {
      const code = ch.codePointAt(0)!;
      if (code > 0xffff && rnd() < 0.3)
        out += [0, 1].map((k) => `\\u${ch.charCodeAt(k).toString(16)}`).join('');
      else if (ch === '/' && rnd() < 0.5) out += '\\/';
      else if (code < 0x80 && rnd() < 0.05) out += `\\u${code.toString(16).padStart(4, '0').toUpperCase()}`;
      else out += JSON.stringify(ch).slice(1, -1);
    }
    return out + '"';
  }
  if (Array.isArray(value))
    return `[${ws()}${value.map((v) => serialize(v, rnd)).join(`${ws()},${ws()}`)}${ws()}]`;
  if (value && typeof value === 'object') {
    return `{${ws()}${Object.entries(value)
      .map(([k, v]) => `${serialize(k, rnd)}${ws()}:${ws()}${serialize(v, rnd)}`)
      .join(`${ws()},${ws()}`)}${ws()}}`;
  }
  return JSON.stringify(value);
}

const block = fc.oneof(
  fc.record({ type: fc.constant('thinking'), thinking: fc.oneof(text(20), longText), signature: text(8) }),
  fc.record({ type: fc.constant('text'), text: fc.oneof(text(20), longText) }),
  fc.record({
    type: fc.constant('tool_result'),
    tool_use_id: text(8),
    content: fc.oneof(
      text(20),
      longText,
      fc.array(fc.record({ type: fc.constant('text'), text: longText }), { maxLength: 2 }),
    ),
    is_error: fc.boolean(),
  }),
  fc.record({
    type: fc.constant('tool_use'),
    id: text(8),
    name: fc.constantFrom('Agent', 'Bash'),
    input: fc.dictionary(text(6), fc.oneof(text(20), longText, fc.integer())),
  }),
);
const line = fc.record(
  {
    type: fc.constantFrom('assistant', 'user', 'system', 'result', 'stream_event', 'other'),
    message: fc.record({
      id: text(6),
      content: fc.array(block, { maxLength: 3 }),
      usage: fc.dictionary(
        text(5),
        fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })),
      ),
    }),
    parent_tool_use_id: fc.oneof(fc.constant(null), text(10)),
    event: fc.record({ delta: fc.record({ text: text(30) }) }),
    tool_use_result: fc.record({ stdout: fc.oneof(text(10), longText), interrupted: fc.boolean() }),
    subtype: text(8),
    n: fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constant(-0)),
    __proto__: fc.constant('own key'),
  },
  { requiredKeys: ['type'] },
);

/** A view with its lazy strings decoded, to compare with JSON.parse. */
function decoded(v: unknown): unknown {
  if (v instanceof LazyText) return v.toString();
  if (Array.isArray(v)) return v.map(decoded);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v))
      Object.defineProperty(out, k, {
        value: decoded(x),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  }
  return v;
}

const HEAD_ONLY = (value: Record<string, unknown>) =>
  typeof value.type === 'string' && !['assistant', 'user', 'system', 'result'].includes(value.type);

test("a line view is JSON.parse but for lazy strings and uninterpreted types' heads (property)", () => {
  fc.assert(
    fc.property(line, fc.integer(), (value, seed) => {
      let s = seed;
      const rnd = () => (s = (s * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
      const raw = Buffer.from(serialize(value, rnd));
      const expected = JSON.parse(raw.toString('utf8'));
      // The scanner from 1 KiB on (by default it reads lines of PARSE_LINE_BYTES or more).
      const scanned = scanLine(raw, true, LAZY_TEXT_BYTES);
      assert.ok(scanned.ok);
      const rec = scannedRecord(1, raw, scanned);
      const view = viewOf(rec);
      // Short lines are parsed whole; any other line of an uninterpreted type keeps its top-level
      // scalars only, and a stream event the scalars of its `event` (and of the event's `usage`) too.
      const scalars = (object: Record<string, unknown>) =>
        Object.fromEntries(Object.entries(object).filter(([, x]) => typeof x !== 'object' || x === null));
      const head = scalars(expected);
      const event = expected.event;
      if (expected.type === 'stream_event' && event && typeof event === 'object' && !Array.isArray(event)) {
        const inner = scalars(event);
        const usage = event.usage;
        if (usage && typeof usage === 'object' && !Array.isArray(usage)) inner.usage = scalars(usage);
        head.event = inner;
      }
      const partial = HEAD_ONLY(expected) && scanned.view !== undefined;
      assert.deepStrictEqual(decoded(view), partial ? head : expected);
      assert.deepStrictEqual(rec.value, expected, 'value is the whole parse');
    }),
    { numRuns: 300, seed: 20261201 },
  );
});

test('a document read member by member and element by element equals JSON.parse of it (property)', () => {
  // What the report reads index.json with: the same values, built one part at a time.
  const doc = fc.dictionary(
    fc.oneof(text(6), fc.constantFrom('channels', '__proto__')),
    fc.oneof(fc.array(line, { maxLength: 4 }), line, text(20), fc.integer(), fc.constant(null)),
  );
  fc.assert(
    fc.property(doc, fc.integer(), (value, seed) => {
      let s = seed;
      const rnd = () => (s = (s * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
      const raw = Buffer.from(serialize(value, rnd));
      const expected = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
      const tape = new Tape(16);
      const root = scanJson(raw, 0, raw.length, tape);
      assert.ok(root >= 0);
      const members = membersAt(raw, tape, root);
      assert.deepStrictEqual(
        members.map(([key]) => key),
        Object.keys(expected),
      );
      for (const [key, at] of members) {
        assert.deepStrictEqual(valueAt(raw, tape, at), expected[key]);
        const elements = elementsAt(tape, at);
        if (!Array.isArray(expected[key])) assert.equal(elements, null);
        else
          assert.deepStrictEqual(
            elements!.map((e) => valueAt(raw, tape, e)),
            expected[key],
          );
      }
    }),
    { numRuns: 200, seed: 20261202 },
  );
});

test('lazy strings: length and any head or tail slice as String has them (property)', () => {
  fc.assert(
    fc.property(longText, fc.nat(), fc.nat(), fc.integer(), (s, a, b, seed) => {
      let r = seed;
      const rnd = () => (r = (r * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
      const json = serialize(s, rnd);
      if (Buffer.byteLength(json) < LAZY_TEXT_BYTES + 2) return;
      const raw = Buffer.from(
        `{"type":"assistant","message":{"content":[{"type":"thinking","thinking":${json}}]}}`,
      );
      const scanned = scanLine(raw, true, LAZY_TEXT_BYTES);
      assert.ok(scanned.ok && scanned.view);
      const lazy = ((scanned.view.message as any).content[0] as { thinking: unknown }).thinking;
      assert.ok(lazy instanceof LazyText, 'long strings are lazy');
      assert.equal(lazy.length, s.length);
      const n = a % (s.length + 2);
      const m = b % (s.length + 2);
      assert.equal(lazy.slice(0, n), s.slice(0, n), `head ${n}`);
      assert.equal(lazy.slice(s.length - m), s.slice(s.length - m), `tail ${m}`);
      assert.equal(lazy.slice(-m), s.slice(-m));
      assert.equal(lazy.slice(n, n + m), s.slice(n, n + m));
      assert.equal(lazy.toString(), s);
    }),
    { numRuns: 300, seed: 20261202 },
  );
});

const isPlain = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x);

/**
 * What the streaming checker keeps of a line, from the value JSON.parse makes of it whole:
 * its top-level scalars, and the tool calls and results among its `message.content` blocks
 * (the first TOOL_BLOCKS_KEPT), each named by its ids, name and error flag, what it carries cut.
 */
function keptOfLine(value: Record<string, unknown>): Record<string, unknown> {
  const scalar = ([, x]: [string, unknown]) => typeof x !== 'object' || x === null;
  const kept = Object.fromEntries(Object.entries(value).filter(scalar));
  const content = isPlain(value.message) && Array.isArray(value.message.content) ? value.message.content : [];
  const tools: unknown[] = [];
  for (const b of content) {
    if (tools.length === TOOL_BLOCKS_KEPT || !isPlain(b)) continue;
    if (b.type === 'tool_use' && typeof b.id === 'string' && typeof b.name === 'string') {
      tools.push({ type: 'tool_use', id: b.id, name: b.name, input: '[…cut…]' });
    } else if (b.type === 'tool_result' && typeof b.tool_use_id === 'string') {
      const error = typeof b.is_error === 'boolean' ? { is_error: b.is_error } : {};
      tools.push({ type: 'tool_result', tool_use_id: b.tool_use_id, content: '[…cut…]', ...error });
    }
  }
  if (tools.length > 0) kept.message = { content: tools };
  return kept;
}

/** Real lines with bytes changed, dropped or inserted: mostly not JSON any more. */
const mutated = fc
  .tuple(
    line,
    fc.array(fc.tuple(fc.nat(), fc.nat(255), fc.constantFrom('set', 'drop', 'insert', 'cut')), {
      minLength: 1,
      maxLength: 3,
    }),
  )
  .map(([value, edits]) => {
    let b = Buffer.from(JSON.stringify(value));
    for (const [at0, byte, op] of edits) {
      const at = at0 % (b.length + 1);
      if (op === 'set' && at < b.length) b[at] = byte;
      else if (op === 'drop') b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1)]);
      else if (op === 'insert') b = Buffer.concat([b.subarray(0, at), Buffer.from([byte]), b.subarray(at)]);
      else b = b.subarray(0, at);
    }
    return b;
  });

test('the scanners judge every line as JSON.parse does: same verdict and reason (property)', () => {
  fc.assert(
    fc.property(mutated, fc.boolean(), fc.array(fc.nat(), { maxLength: 6 }), (raw, terminated, cuts) => {
      const expected = classifyLine(raw, terminated);
      // The byte scanner from 1 KiB on, as well as JSON.parse below it.
      const scanned = scanLine(raw, terminated, LAZY_TEXT_BYTES);
      assert.equal(scanned.ok, expected.ok);
      if (!scanned.ok && !expected.ok) assert.equal(scanned.reason, expected.reason);
      // The streaming scanner, fed in arbitrary pieces.
      const stream = new StreamScanner();
      let prev = 0;
      for (const c of [...cuts.map((x) => x % (raw.length + 1)).sort((x, y) => x - y), raw.length]) {
        stream.push(raw.subarray(prev, c));
        prev = c;
      }
      const verdict = stream.end(terminated);
      assert.equal(verdict.ok, expected.ok);
      if (!verdict.ok && !expected.ok) assert.equal(verdict.reason, expected.reason);
      if (verdict.ok && expected.ok) assert.deepStrictEqual(verdict.value, keptOfLine(expected.value));
    }),
    { numRuns: 1500, seed: 20261203 },
  );
});

test('grammar corners are judged as JSON.parse judges them', () => {
  const lines = [
    '{"a":1}',
    ' \t{"a":-0.5e-3}',
    '{"a":01}',
    '{"a":1.}',
    '{"a":.5}',
    '{"a":1e}',
    '{"a":1e+}',
    '{"a":-}',
    '{"a":+1}',
    '{"a":"\\u00e9\\ud800"}',
    '{"a":"\\x41"}',
    '{"a":"\\u12"}',
    '{"a":"\t"}',
    '{}',
    '{"a":{}}',
    '{"a":[]}',
    '{"a":[,]}',
    '\r{"a":1}',
    '{"a":1}\r',
    '{"a":1} x',
    '{"a":1}}',
    '{"a":1,}',
    '{,}',
    '{"a"}',
    '{"a":}',
    '{"a":1 2}',
    '{"a":tru}',
    '{"a":true,"b":false,"c":null}',
    '{"a":nul}',
    '[1]',
    '"s"',
    '42',
    '{"a":"\u00e9"}',
    '{"a":1,"a":"dup"}',
  ];
  for (const l of lines) {
    const raw = Buffer.from(l);
    const expected = classifyLine(raw, true);
    const scanned = scanLine(raw, true);
    assert.deepEqual(
      [scanned.ok, scanned.ok ? null : scanned.reason],
      [expected.ok, expected.ok ? null : expected.reason],
      l,
    );
    const stream = new StreamScanner();
    stream.push(raw);
    const verdict = stream.end(true);
    assert.deepEqual(
      [verdict.ok, verdict.ok ? null : verdict.reason],
      [expected.ok, expected.ok ? null : expected.reason],
      `stream: ${l}`,
    );
  }
  // Invalid UTF-8 is accepted inside strings (it decodes to U+FFFD) and nowhere else.
  for (const raw of [
    Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xc3, 0x22, 0x7d]),
    Buffer.from([0x7b, 0xff, 0x7d]),
  ]) {
    assert.equal(scanLine(raw, true).ok, classifyLine(raw, true).ok);
  }
});

test('a scanned line parses its value on first read; a copy carries the value, not the view; ' +
  'the record itself is never written on', () => {
  const raw = Buffer.from(
    `{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"${'x'.repeat(5000)}"}]}}`,
  );
  const scanned = scanLine(raw, true, LAZY_TEXT_BYTES);
  assert.ok(scanned.ok);
  const rec = scannedRecord(7, raw, scanned);
  assert.ok(rec instanceof ScannedLine);
  assert.ok((viewOf(rec).message as any).content[0].thinking instanceof LazyText);
  const copy = { ...rec, raw: Buffer.from('{"other":true}') };
  assert.equal(
    (copy.value as any).message.content[0].thinking,
    'x'.repeat(5000),
    'a spread parses and copies value',
  );
  assert.equal(viewOf(copy), copy.value);
  const writable = rec as { value: unknown; raw: Buffer; lineNo: number };
  assert.throws(() => void (writable.value = { replaced: true }), TypeError);
  assert.throws(() => void (writable.raw = Buffer.from('{}')), TypeError);
  assert.throws(() => void (writable.lineNo = 1), TypeError);
  assert.ok(Object.isFrozen(rec));
  assert.equal(rec.raw, raw);
  assert.equal((viewOf(rec).message as any).content[0].thinking, 'x'.repeat(5000));
  const changed = { ...rec, value: { replaced: true } };
  assert.deepEqual(viewOf(changed), { replaced: true }, 'a new record with a new value is read as it');
});

test('a line shorter than PARSE_LINE_BYTES is parsed whole, a longer one read through a view', () => {
  // `{"type":"user","t":""}` is 22 bytes.
  const line = (bytes: number) => Buffer.from(`{"type":"user","t":"${'x'.repeat(bytes - 22)}"}`);
  const short = line(PARSE_LINE_BYTES - 1);
  const long = line(PARSE_LINE_BYTES);
  assert.equal(short.length, PARSE_LINE_BYTES - 1);
  assert.equal(planLine(short), 'parse');
  assert.equal(planLine(long), 'scan');
  const parsed = scanLine(short, true);
  assert.ok(parsed.ok && parsed.view === undefined);
  assert.ok(!(scannedRecord(1, short, parsed) instanceof ScannedLine));
  const scanned = scanLine(long, true);
  assert.ok(scanned.ok && scanned.view !== undefined);
  assert.ok(scannedRecord(2, long, scanned) instanceof ScannedLine);
});

test('a line nested deeper than the scanner goes is judged by JSON.parse', async () => {
  // Short enough to be held and scanned, with a string long enough that the tape has room.
  const deep = `{"type":"user","t":${'['.repeat(20000)}"${'x'.repeat(200000)}"${']'.repeat(20000)}}`;
  assert.equal(scanJson(Buffer.from(deep), 0, deep.length, new Tape(1024)), UNDECIDED);
  const input = Buffer.from(`{"a":1}\n${deep}\n${deep.slice(0, -1)}\n{"b":2}\n`);
  const plain = await runToFiles(splitEvery(input, 65536));
  assert.equal(plain.index.input.quarantined, 1, 'the cut copy only');
});

test('grammar corners in lines long enough for the byte scanner are judged as JSON.parse judges them', () => {
  const corners = [
    '{"a":01}',
    '{"a":-01}',
    '{"a":1.}',
    '{"a":1e}',
    '{"a":+1}',
    '{"a":"\\x41"}',
    '{"a":"\\u12"}',
    '{"a":[,]}',
    '{"a":[1}}',
    '{"a":{"b":1]}',
    '{"a":[1]]}',
    '{"a":1,}',
    '{"a":tru}',
    '{"a":1} x',
    '{"a":0,"b":[0.5,-0,1e5]}',
  ];
  // A first member long enough that a line is judged by the scanner, not JSON.parse.
  const pad = `"pad":"${'p'.repeat(LAZY_TEXT_BYTES)}",`;
  for (const corner of corners) {
    const raw = Buffer.from(`{${pad}${corner.slice(1)}`);
    assert.equal(planLine(raw, LAZY_TEXT_BYTES), 'scan', corner);
    const expected = classifyLine(raw, true);
    const scanned = scanLine(raw, true, LAZY_TEXT_BYTES);
    const verdict = (s: { ok: boolean; reason?: string }) => [s.ok, s.ok ? null : s.reason];
    assert.deepEqual(verdict(scanned), verdict(expected), `scanner: ${corner}`);
    const stream = new StreamScanner();
    stream.push(raw);
    assert.deepEqual(verdict(stream.end(true)), verdict(expected), `streaming checker: ${corner}`);
  }
});

test('the streaming checker pairs every closer with its opener at any depth, as JSON.parse does', () => {
  // Openers of both kinds across the byte boundaries of the checker's stack (8 levels a byte,
  // grown from 512), each line closed rightly or with one closer of the other kind.
  for (const depth of [1, 7, 8, 9, 63, 64, 65, 511, 512, 513, 4097, 100_000]) {
    const openers = Array.from({ length: depth }, (_, k) => ((k * 7919) % 3 === 0 ? '[' : '{"k":'));
    const closer = (o: string) => (o === '[' ? ']' : '}');
    const closers = openers.map(closer).reverse();
    for (const wrongAt of [-1, 0, depth >> 1, depth - 1]) {
      const shut = closers.slice();
      if (wrongAt >= 0) shut[wrongAt] = shut[wrongAt] === ']' ? '}' : ']';
      const raw = Buffer.from(`{"type":"x","v":${openers.join('')}1${shut.join('')}}`);
      const name = `depth ${depth}, wrong closer at ${wrongAt}`;
      let parses = true;
      try {
        JSON.parse(raw.toString());
      } catch {
        parses = false;
      }
      assert.equal(parses, wrongAt < 0, name);
      const stream = new StreamScanner();
      stream.push(raw);
      const verdict = stream.end(true);
      assert.equal(verdict.ok, parses, name);
      if (verdict.ok) assert.deepEqual(verdict.value, { type: 'x' }, name);
      assert.equal(stream.containers, depth + 1, `${name}: containers counted`);
    }
  }
});

test('a line that would make more containers than its size allows is read by its top-level members', () => {
  const { containersFloor, bytesPerContainer } = PARSE_LIMITS;
  for (const [count, shape] of [
    [1000, 'arrays'],
    [containersFloor - 2, 'arrays'],
    [containersFloor + 10, 'arrays'],
    [containersFloor * 3, 'objects'],
    [containersFloor * 3, 'siblings'],
  ] as const) {
    const body =
      shape === 'arrays'
        ? `${'['.repeat(count)}${']'.repeat(count)}`
        : shape === 'objects'
          ? `${'{"a":'.repeat(count)}1${'}'.repeat(count)}`
          : `[${'{},'.repeat(count - 1)}{}]`;
    const raw = Buffer.from(`{"type":"user","n":${count},"v":${body}}`);
    const read = parseBounded(raw, true);
    const allowed = Math.max(containersFloor, raw.length / bytesPerContainer);
    const name = `${shape} x ${count}`;
    // The line's own object, and the siblings' array.
    const containers = count + (shape === 'siblings' ? 2 : 1);
    assert.ok(read.ok, name);
    if (containers <= allowed) {
      assert.equal(read.shallow, undefined, `${name}: parsed whole`);
      // (deepEqual recurses: compared whole only where it can.)
      if (count <= 1000) assert.deepEqual(read.value, JSON.parse(raw.toString()), name);
      else {
        const shown = [read.value!.n, Array.isArray(read.value!.v)];
        assert.deepEqual(shown, [count, shape !== 'objects'], name);
      }
    } else {
      assert.equal(read.shallow, containers, `${name}: too many to parse`);
      assert.deepEqual(read.value, { type: 'user', n: count }, `${name}: its top-level scalars`);
      assert.deepEqual(lineValue(raw), { type: 'user', n: count }, `${name}: read back the same way`);
    }
    // Broken the same way, it is refused as JSON.parse refuses it.
    const broken = parseBounded(raw.subarray(0, raw.length - 2), true);
    assert.deepEqual(broken, { ok: false, reason: 'not-json' }, `${name}: cut short`);
  }
});

/** A content block of any kind, its members in any order, some with members of the wrong type. */
const anyBlock = fc
  .tuple(
    fc.oneof(
      fc.record({
        type: fc.constant('tool_use'),
        id: text(8),
        name: text(8),
        input: fc.jsonValue({ maxDepth: 2 }),
      }),
      fc.record({
        type: fc.constant('tool_result'),
        tool_use_id: text(8),
        is_error: fc.oneof(fc.boolean(), fc.constant(null)),
        content: fc.oneof(text(8), fc.array(fc.record({ type: fc.constant('text'), text: text(8) }))),
      }),
      fc.record({ type: fc.constantFrom('text', 'thinking', 'tool_use'), text: text(8), id: fc.integer() }),
      fc.record({ type: fc.constant('tool_result'), tool_use_id: fc.integer() }),
      fc.oneof(text(4), fc.integer(), fc.constant(null), fc.array(fc.integer(), { maxLength: 2 })),
    ),
    fc.integer(),
  )
  .map(([b, seed]) => {
    if (!isPlain(b)) return b;
    // The members shuffled, so each member may come before or after the block's nested values.
    const entries = Object.entries(b);
    let r = seed;
    for (let i = entries.length - 1; i > 0; i--) {
      r = (r * 1103515245 + 12345) & 0x7fffffff;
      const j = r % (i + 1);
      [entries[i], entries[j]] = [entries[j], entries[i]];
    }
    return Object.fromEntries(entries);
  });

test('the streaming checker keeps the tool calls and results of message.content, what they ' +
  'carry cut, whatever their order, spelling and neighbours, the first 64 (property)', () => {
  const message = fc.record(
    {
      id: text(4),
      content: fc.oneof(
        fc.array(anyBlock, { maxLength: 6 }),
        fc.array(anyBlock, { minLength: 60, maxLength: 80 }),
      ),
      usage: fc.jsonValue({ maxDepth: 1 }),
    },
    { requiredKeys: ['content'] },
  );
  const lineWithBlocks = fc.record({
    type: fc.constantFrom('assistant', 'user'),
    before: fc.jsonValue({ maxDepth: 2 }),
    message: fc.oneof(message, text(4)),
    uuid: text(6),
  });
  fc.assert(
    fc.property(lineWithBlocks, fc.integer(), fc.array(fc.nat(), { maxLength: 6 }), (value, seed, cuts) => {
      let r = seed;
      const rnd = () => (r = (r * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
      const raw = Buffer.from(serialize(value, rnd));
      const stream = new StreamScanner();
      let prev = 0;
      for (const c of [...cuts.map((x) => x % (raw.length + 1)).sort((x, y) => x - y), raw.length]) {
        stream.push(raw.subarray(prev, c));
        prev = c;
      }
      const verdict = stream.end(true);
      assert.ok(verdict.ok);
      assert.deepStrictEqual(verdict.value, keptOfLine(JSON.parse(raw.toString())));
    }),
    { numRuns: 400, seed: 20261206 },
  );
  // The last `message` of a line is its own, as JSON.parse keeps the last of a key.
  const call = { type: 'tool_use', id: 't1', name: 'Bash', input: {} };
  for (const json of [
    `{"message":"m","message":{"content":[${JSON.stringify(call)}]}}`,
    `{"message":{"content":[${JSON.stringify(call)}]},"message":"m"}`,
    `{"message":{"content":[${JSON.stringify(call)}]},"message":{"content":[]}}`,
    `{"message":{"content":[${JSON.stringify(call)}],"content":"c"}}`,
    // More tool calls than are kept: the first 64.
    JSON.stringify({
      message: { content: Array.from({ length: 70 }, (_, k) => ({ ...call, id: `t${k}` })) },
    }),
  ]) {
    const stream = new StreamScanner();
    stream.push(Buffer.from(json));
    const verdict = stream.end(true);
    assert.ok(verdict.ok);
    assert.deepStrictEqual(verdict.value, keptOfLine(JSON.parse(json)), json);
  }
});

test('a tool call or result whose id or name is longer than BLOCK_MEMBER_BYTES counts on a spooled ' +
  'line as on a held one, read with an empty id; the tool counts of index.json the same', async () => {
  const pad = 'p'.repeat(2000);
  const long = (n: number) => 'toolu_' + 'i'.repeat(n - 6);
  // Ids just under, at and past the bound (as JSON text, quotes included), a name past it.
  const blocks = [
    { type: 'tool_use', id: long(BLOCK_MEMBER_BYTES - 2), name: 'Bash', input: {} },
    { type: 'tool_use', id: long(BLOCK_MEMBER_BYTES - 1), name: 'Bash', input: {} },
    { type: 'tool_use', id: long(5000), name: 'Bash', input: {} },
    { type: 'tool_use', id: 'toolu_1', name: 'n'.repeat(5000), input: {} },
    { type: 'tool_result', tool_use_id: long(5000), content: 'ok', is_error: true },
  ];
  const line = (type: string, content: unknown[]) =>
    JSON.stringify({ type, parent_tool_use_id: null, pad, message: { id: 'm', role: type, content } });
  const calls = line('assistant', blocks.slice(0, 4));
  const scanned = new StreamScanner();
  scanned.push(Buffer.from(calls));
  const verdict = scanned.end(true);
  assert.ok(verdict.ok);
  assert.deepStrictEqual(
    (verdict.value.message as { content: Array<{ id: string; name: string }> }).content.map((b) => [
      b.id,
      b.name,
    ]),
    [[long(BLOCK_MEMBER_BYTES - 2), 'Bash'], ['', 'Bash'], ['', 'Bash'], ['toolu_1', '']],
  );
  const input = Buffer.from(`${calls}\n${line('user', blocks.slice(4))}\n`);
  const held = await runToFiles(input);
  const spooled = await runToFiles(input, {}, { maxLineBytes: 1024 });
  assert.ok(spooled.run.warnings.some((w) => w.code === 'LINE_TOO_LONG'), 'the lines were spooled');
  assert.deepEqual(held.index.channels[0].counts, { text: 0, thinking: 0, tool_use: 4, tool_result: 1 });
  assert.deepEqual(spooled.index.channels[0].counts, held.index.channels[0].counts);
});

test('the streaming checker holds a bounded value whatever a line repeats: a key seen again ' +
  'replaces its member, and members past the bound are left out, the line still read', () => {
  const captureBytes = 1024;
  const repeated = new StreamScanner(captureBytes);
  repeated.push(Buffer.from('{"type":"assistant"'));
  for (let k = 0; k < 10_000; k++) repeated.push(Buffer.from(`,"a":${k},"b":"${'x'.repeat(k % 7)}"`));
  repeated.push(Buffer.from('}'));
  const kept = repeated.end(true);
  assert.ok(kept.ok);
  assert.deepStrictEqual(kept.value, { type: 'assistant', a: 9999, b: 'x'.repeat(9999 % 7) });
  // Many long members: what is kept stays within the bound, the first of them kept whole.
  const wide = new StreamScanner(captureBytes);
  wide.push(Buffer.from('{"type":"user"'));
  for (let k = 0; k < 2000; k++) wide.push(Buffer.from(`,"f${k}":"${'y'.repeat(1000)}"`));
  wide.push(Buffer.from(`,"type":"${'z'.repeat(1000)}"}`));
  const bounded = wide.end(true);
  assert.ok(bounded.ok);
  const size = Buffer.byteLength(JSON.stringify(bounded.value));
  assert.ok(size <= MEMBERS_CAPTURED * captureBytes, `${size} bytes held`);
  assert.equal(bounded.value.f0, 'y'.repeat(1000));
  assert.equal(bounded.value.f1999, undefined);
  assert.equal(bounded.value.type, undefined, 'a later type past the bound leaves out the earlier one');
  // One name spelled many ways (`"type"`, `"\u0074ype"`…) is one member: the bound is not
  // spent on it.
  const spelled = new StreamScanner(captureBytes);
  spelled.push(Buffer.from('{"type":"user"'));
  const spellings = ['ty', '\\u0074y', 't\\u0079', '\\u0074\\u0079'].flatMap((ty) =>
    ['pe', '\\u0070e'].map((pe) => ty + pe),
  );
  const spelledValue = (k: number) => `${'z'.repeat(900)}${k}`;
  for (let k = 0; k < 200; k++)
    spelled.push(Buffer.from(`,"${spellings[k % spellings.length]}":"${spelledValue(k)}"`));
  spelled.push(Buffer.from(',"uuid":"u1"}'));
  const one = spelled.end(true);
  assert.ok(one.ok);
  assert.deepStrictEqual(one.value, { type: spelledValue(199), uuid: 'u1' });
});
