/**
 * The line parsers subtee did not choose, doing the same work as `parse-only` (split, parse,
 * count bad lines, route by parent_tool_use_id) for the benchmark tables:
 *   node dist/bench/alt-parse.js split2|stream-json < FILE
 */
import { createReadStream } from 'node:fs';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import split2 from 'split2';
import jsonl from 'stream-json/jsonl/parser.js';

const which = process.argv[2];
const input = createReadStream('', { fd: 0, highWaterMark: 1 << 20 });
const channels = new Map<string, number>();
let bad = 0;
const route = (v: unknown) => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return void bad++;
  const p = (v as Record<string, unknown>).parent_tool_use_id;
  const key = typeof p === 'string' && p !== '' ? p : 'main';
  channels.set(key, (channels.get(key) ?? 0) + 1);
};
const sink = new Writable({
  objectMode: true,
  write: (v, _e, cb) => (route(which === 'split2' ? v : (v as { value: unknown }).value), cb()),
});
if (which === 'split2') {
  // split2 fails the stream on a mapper error, so the mapper must catch; blank lines are skipped.
  const BAD = Symbol('bad');
  await pipeline(
    input,
    split2((line: string) => {
      if (line.trim() === '') return undefined;
      try {
        return JSON.parse(line);
      } catch {
        return BAD;
      }
    }),
    sink,
  );
} else if (which === 'stream-json') {
  await pipeline(input, jsonl.asStream({ errorIndicator: () => Symbol('bad') }), sink);
} else {
  throw new Error('usage: alt-parse.js split2|stream-json');
}
process.stderr.write(
  `${[...channels.values()].reduce((a, b) => a + b, 0)} routed, ${bad} bad, ${channels.size} channels\n`,
);
