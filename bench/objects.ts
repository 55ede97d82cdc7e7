/**
 * The object input edge against the byte edge on the same recorded run. A program on the
 * Claude Agent SDK hands subtee message objects the SDK has already parsed: the object source
 * skips the line splitter and `JSON.parse`, but writes each object back to JSON text (the
 * `.jsonl` files keep it, as they keep a byte stream's lines). This measures what that trade
 * is worth, each variant in its own process, the median of several runs, and the ratio to
 * the byte path in the same run of the script.
 *
 *   npm run build && node dist/bench/objects.js [--size-mb 50] [--runs 3]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { runChain, type ChainSpec } from '../src/chain/chain.js';
import { writeStream } from './gen.js';

const ROUTE_ONLY = ['input-format', 'channel-router'];
const FULL = ['input-format', 'version-guard', 'channel-router', 'thinking-truncator', 'idle-watchdog'];

type Edge = 'line-parser' | 'object-source';

function specOf(edge: Edge, chain: 'route' | 'files', out: string): ChainSpec {
  const stages = [edge, ...(chain === 'route' ? ROUTE_ONLY : FULL)].map((use) => ({ use }));
  return { stages, sinks: chain === 'files' ? [{ use: 'files', out }] : [] };
}

/** One measured run, in this process: the input is ready in memory before the clock starts. */
async function child(file: string, edge: Edge, chain: 'route' | 'files'): Promise<void> {
  const text = readFileSync(file);
  // The SDK hands over parsed objects: parse them before timing, as the SDK did in its own code.
  const objects =
    edge === 'object-source'
      ? text
          .toString('utf8')
          .split('\n')
          .filter((l) => l !== '')
          .map(safeParse)
      : [];
  const out = mkdtempSync(join(tmpdir(), 'subtee-bench-objects-'));
  const source =
    edge === 'object-source'
      ? Readable.from(objects, { objectMode: true })
      : Readable.from(chunks(text, 256 * 1024), { objectMode: false });
  const started = performance.now();
  const session = await runChain(source, specOf(edge, chain, join(out, 'o')));
  const ms = performance.now() - started;
  rmSync(out, { recursive: true, force: true });
  process.stdout.write(
    JSON.stringify({ ms, lines: session.input.lines, channels: session.tree.size }) + '\n',
  );
}

function safeParse(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return line; // a noise line stays a string: the object source quarantines it
  }
}

function* chunks(buf: Buffer, size: number): Generator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string, fallback: string) =>
    args.includes(name) ? args[args.indexOf(name) + 1] : fallback;
  if (args[0] === '--child') return child(args[1], args[2] as Edge, args[3] as 'route' | 'files');
  const sizeMb = Number(flag('--size-mb', '50'));
  const runs = Number(flag('--runs', '3'));
  const dir = mkdtempSync(join(tmpdir(), 'subtee-bench-objects-'));
  const self = fileURLToPath(import.meta.url);
  process.stdout.write(
    `### objects vs bytes (${sizeMb} MB per shape, median of ${runs} runs, Node ${process.version})\n\n`,
  );
  process.stdout.write(
    '| input | chain | byte path ms | object path ms | objects / bytes | MB/s bytes | MB/s objects |\n|---|---|---|---|---|---|---|\n',
  );
  try {
    for (const shape of ['large', 'small'] as const) {
      const file = join(dir, `${shape}.jsonl`);
      const { bytes } = await writeStream(
        { sizeBytes: sizeMb * 1024 * 1024, fanout: 200, shape, seed: 7 },
        file,
      );
      for (const chain of ['route', 'files'] as const) {
        const times: Record<Edge, number[]> = { 'line-parser': [], 'object-source': [] };
        let lines = 0;
        for (let i = 0; i < runs; i++) {
          // Alternate the two paths so drift on a shared machine hits both alike.
          for (const edge of ['line-parser', 'object-source'] as const) {
            const r = JSON.parse(
              execFileSync(
                process.execPath,
                ['--max-old-space-size=4096', self, '--child', file, edge, chain],
                { encoding: 'utf8' },
              ),
            );
            times[edge].push(r.ms);
            lines = r.lines;
          }
        }
        const b = median(times['line-parser']);
        const o = median(times['object-source']);
        const mb = bytes / 1024 / 1024;
        const label = chain === 'route' ? 'edge → input-format → router' : 'default stages → files';
        process.stdout.write(
          `| ${shape} lines (${lines} lines) | ${label} | ${b.toFixed(0)} | ${o.toFixed(0)} | ${(o / b).toFixed(2)} | ${(mb / (b / 1000)).toFixed(0)} | ${(mb / (o / 1000)).toFixed(0)} |\n`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
