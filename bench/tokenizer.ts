/**
 * The checker subtee runs over a line too long to hold, beside stream-json's streaming
 * parser (the tokenizer made for such lines), on one generated line of N MB:
 *
 *   npm run build && node dist/bench/tokenizer.js [MB] [RUNS]
 */
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parser as streamJsonParser } from 'stream-json/parser.js';
import { StreamScanner } from '../src/model/stream-scan.js';

const mb = Number(process.argv[2] ?? 50);
const runs = Number(process.argv[3] ?? 3);
const MiB = 1024 * 1024;
// JSON string content with escapes and multi-byte text, as bench/huge-line.ts writes it.
const unit = Buffer.from('lorem ipsum é 日本 🚀 \\n \\" \\\\ \\u00e9 \\t end. ');
const body = Buffer.alloc(MiB, ' ');
for (let at = 0; at + unit.length <= MiB; at += unit.length) unit.copy(body, at);
const pieces = [
  Buffer.from('{"type":"user","message":{"content":[{"type":"tool_result","content":"'),
  ...Array.from({ length: mb }, () => body),
  Buffer.from('"}]},"parent_tool_use_id":"toolu_01x"}'),
];

for (let run = 1; run <= runs; run++) {
  let t0 = performance.now();
  const scanner = new StreamScanner();
  for (const piece of pieces) scanner.push(piece);
  const verdict = scanner.end();
  const scannerMs = performance.now() - t0;

  t0 = performance.now();
  let tokens = 0;
  await pipeline(
    Readable.from(pieces),
    streamJsonParser.asStream(),
    new Writable({
      objectMode: true,
      write: (_token, _enc, cb) => {
        tokens++;
        cb();
      },
    }),
  );
  const tokenizerMs = performance.now() - t0;
  const rate = (ms: number) => `${Math.round((mb / ms) * 1000)} MB/s`;
  const ratio = (tokenizerMs / scannerMs).toFixed(1);
  console.log(
    `run ${run}, ${mb} MB line: subtee's checker ${rate(scannerMs)} (JSON object: ${verdict.ok}); ` +
      `stream-json parser ${rate(tokenizerMs)} (${tokens} tokens); ratio ${ratio}×`,
  );
}
