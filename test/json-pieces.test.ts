import assert from 'node:assert/strict';
import { displayPolicy } from '../src/model/display.js';
import { test } from 'node:test';
import { closeSync, openSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { jsonPieces, MadeOnDemand } from '../src/views/json-pieces.js';
import { buildIndex, type ChannelPaths } from '../src/views/index-file.js';
import { writePiecesSync } from '../src/chain/sinks/write-pieces.js';
import { runToFiles, tmpDir } from './helpers/helpers.js';

const joined = (value: unknown, levels?: number) => [...jsonPieces(value, levels)].join('');

test('the pieces joined are JSON.stringify(value, null, 2), for every shape at every depth walked', () => {
  const values: unknown[] = [
    {},
    [],
    { a: [], b: {}, c: [{}], d: [[]] },
    { a: undefined, b: () => 1, c: Symbol('s'), d: 1 },
    { only: undefined },
    [undefined, () => 1, Symbol('s'), null, 0, -0, NaN, Infinity],
    { when: new Date(0), boxed: new Number(3), text: new String('t'), nested: { when: new Date(1) } },
    { toJSON: () => ({ swapped: true }) },
    { gone: { toJSON: () => undefined }, kept: 1 },
    JSON.parse('{"__proto__": {"x": 1}, "2": "two", "1": "one", "b": "b"}'),
    { text: 'line\nbreak "quoted" \u2028 é — 日本語 🚀 \u0000', deep: { a: { b: { c: [1, [2]] } } } },
    Object.assign(Object.create(null), { a: 1, b: [1, 2] }),
    'a string',
    42,
    null,
    [[[[[]]]], { x: [{ y: [{ z: 1 }] }] }],
  ];
  for (const value of values)
    for (const levels of [0, 1, 2, 3, 10])
      assert.equal(
        joined(value, levels),
        JSON.stringify(value, null, 2),
        `${levels} ${JSON.stringify(value)}`,
      );
  assert.deepEqual([...jsonPieces(undefined)], []);
});

test('a document of many channels comes in one piece per channel, never as one string', () => {
  const doc = {
    format: 'f',
    channels: Array.from({ length: 1000 }, (_, i) => ({ id: `a${i}`, usage: { n: i }, tags: [i] })),
  };
  const pieces = [...jsonPieces(doc)];
  assert.equal(pieces.join(''), JSON.stringify(doc, null, 2));
  assert.ok(pieces.length > 1000, `${pieces.length} pieces`);
  const longest = Math.max(...pieces.map((p) => p.length));
  assert.ok(longest < 200, `longest piece ${longest} characters`);
});

test('index.json written in pieces is JSON.stringify(document, null, 2) on every fixture', async () => {
  const fixtures = readdirSync(join('test', 'fixtures')).filter((f) => f.endsWith('.jsonl'));
  assert.ok(fixtures.length > 0);
  for (const fixture of fixtures) {
    const { files } = await runToFiles(readFileSync(join('test', 'fixtures', fixture)));
    const text = files.get('index.json')!.toString('utf8');
    assert.equal(text, `${JSON.stringify(JSON.parse(text), null, 2)}\n`, fixture);
  }
});

test('members made on demand are written as the array they stand for, each made when its piece is', () => {
  const member = (i: number) => ({ id: `a${i}`, usage: { n: i }, tags: [i, { deep: [i] }] });
  const made: number[] = [];
  const channels = new MadeOnDemand(50, (i) => {
    made.push(i);
    return member(i);
  });
  const doc = { format: 'f', channels, after: [1] };
  const expected = JSON.stringify(
    { ...doc, channels: Array.from({ length: 50 }, (_, i) => member(i)) },
    null,
    2,
  );
  for (const levels of [0, 1, 2, 3]) assert.equal(joined(doc, levels), expected, `levels ${levels}`);
  made.length = 0;
  const pieces = jsonPieces(doc);
  for (let taken = 0; taken < 5; taken++) pieces.next();
  // `{`, `"format"`, `"channels": [`, then one piece per member: two members made so far.
  assert.deepEqual(made, [0, 1]);
  assert.equal(joined({ none: new MadeOnDemand(0, member) }), JSON.stringify({ none: [] }, null, 2));
});

test('index.json as written is JSON.stringify(buildIndex(…), null, 2) on every fixture', async () => {
  const fixtures = readdirSync(join('test', 'fixtures')).filter((f) => f.endsWith('.jsonl'));
  for (const fixture of fixtures) {
    const { run, files, index } = await runToFiles(readFileSync(join('test', 'fixtures', fixture)));
    const written = index as {
      quarantine: string | null;
      channels: Array<ChannelPaths & { id: string | null }>;
    };
    const paths = new Map(
      written.channels.map((c) => [c.id, { log: c.log, jsonl: c.jsonl, thinking_log: c.thinking_log }]),
    );
    // The chain has no thinking truncator: its views show thinking whole.
    const document = buildIndex(run, (ch) => paths.get(ch.id), written.quarantine, displayPolicy());
    assert.ok(document.channels.length > 0, fixture);
    assert.equal(
      files.get('index.json')!.toString('utf8'),
      `${JSON.stringify(document, null, 2)}\n`,
      fixture,
    );
  }
});

test('pieces are written as the UTF-8 of their text joined, whatever their sizes and characters', () => {
  const dir = tmpDir('subtee-pieces-');
  // One, two, three and four UTF-8 bytes, and lone surrogates (written as U+FFFD).
  const alphabet = ['a', 'é', '日', '🚀', '\ud800', '\udc00', '\n'];
  let seed = 7;
  const random = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  const textOf = (chars: number) => Array.from({ length: chars }, () => alphabet[random(7)]).join('');
  const sizes = [[0], [1, 2, 3], [70_000], [65_535, 1, 65_536], [200_000, 5, 300_000], [10, 10, 10]];
  // Three and four bytes a character throughout: more bytes than any one write's buffer holds.
  const wide = [['日'.repeat(100_000)], ['🚀'.repeat(70_000), 'x', '日'.repeat(65_536)]];
  for (const pieces of [...sizes.map((chars) => chars.map(textOf)), ...wide]) {
    const path = join(dir, 'out');
    const fd = openSync(path, 'w');
    try {
      writePiecesSync(fd, pieces, '\n');
    } finally {
      closeSync(fd);
    }
    const lengths = pieces.map((p) => p.length).join(', ');
    assert.ok(readFileSync(path).equals(Buffer.from(`${pieces.join('')}\n`)), `pieces of ${lengths}`);
  }
});
