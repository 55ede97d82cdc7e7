// Hostile numbers (negative, huge, past every bound) in the usage and dollars of every producer's
// stream, through every view the CLI writes: index.json, the .log files, stderr, the report
// page, pino and stats (text, CSV, JSON). No figure anywhere may be negative, NaN or infinite,
// and each refusal names its line.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import { main } from '../src/cli/main.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';
import { assertSane, assertSaneText, files, HOSTILE, numbers, poisoned } from './helpers/hostile-figures.js';

const PRODUCERS: Array<[string, string]> = [
  ['claude', join(FIXTURES, 'nested-depth-3.jsonl')],
  ['claude, partial messages', join(FIXTURES, 'partial-messages.jsonl')],
  ['codex', join(FIXTURES, 'other-agents', 'codex-spawn.jsonl')],
  ['copilot', join(FIXTURES, 'other-agents', 'copilot-spawn.jsonl')],
  ['gemini', join(FIXTURES, 'other-agents', 'gemini-spawn.jsonl')],
  ['opencode', join(FIXTURES, 'other-agents', 'opencode-spawn.jsonl')],
];

/**
 * `subtee stats OUT FLAG…`, run by the command line's own `main` in this process (90 of them
 * would spend most of their time starting Node): its exit code and what it printed.
 */
async function stats(out: string, ...flags: string[]) {
  const [stdout, stderr] = [new PassThrough(), new PassThrough()];
  const printed = [stdout, stderr].map((stream) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    return () => Buffer.concat(chunks).toString('utf8');
  });
  const io = { stdin: new PassThrough(), stdout, stderr, env: process.env };
  const status = await main(['stats', out, ...flags], io);
  return { status, stdout: printed[0](), stderr: printed[1]() };
}

describe('hostile figures through every view, every producer', () => {
  for (const [producer, file] of PRODUCERS) {
    const views = 'index.json, logs, stderr, report, pino and stats';
    test(`${producer}: ${views} stay finite and not negative`, async () => {
      for (const value of HOSTILE) {
        const label = `${producer} ${value}`;
        const input = poisoned(file, value);
        const out = join(tmpDir(), 'out');
        const pino = join(tmpDir(), 'events.pino.log');
        const r = spawnSync(
          process.execPath,
          [BIN, '--out', out, '--stdout', 'none', '--html', '--pino', pino, input],
          { encoding: 'utf8' },
        );
        assert.equal(r.status, 0, `${label}: ${r.stderr}`);
        const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
        assertSane(index, `${label} index.json`);
        // A refused figure is named with its line, and only when one was refused.
        const refused = index.warnings.find((w: any) => w.code === 'COST_FIGURE_REFUSED');
        if (value < 0 || value > 1e7) assert.match(refused?.message ?? '', /^input line \d+: /, label);
        assertSaneText(r.stderr, `${label} stderr`);
        for (const f of files(out).filter((p) => p.endsWith('.log')))
          assertSaneText(readFileSync(f, 'utf8'), `${label} ${f}`);
        // The page's data: every usage and cost figure (its script's own text names Infinity).
        const page = readFileSync(join(out, 'report.html'), 'utf8');
        const data = /<script type="application\/json" id="subtee-data">([^<]*)<\/script>/.exec(page)!;
        for (const [path, n] of numbers(JSON.parse(data[1])))
          if (/usage|cost|usd|tokens/i.test(path))
            assert.ok(Number.isFinite(n) && n >= 0, `${label} page ${path} = ${n}`);
        for (const l of readFileSync(pino, 'utf8').split('\n').filter(Boolean)) {
          const event = JSON.parse(l);
          if ('cost_usd' in event) assertSane({ cost_usd: event.cost_usd }, `${label} pino`);
        }
        const json = await stats(out, '--json');
        assert.equal(json.status, 0, json.stderr);
        assertSane(JSON.parse(json.stdout).total, `${label} stats --json`);
        const csv = await stats(out, '--csv');
        assert.equal(csv.status, 0, csv.stderr);
        assertSaneText(csv.stdout, `${label} stats --csv`);
        assert.doesNotMatch(csv.stdout, /,-\d/, `${label} stats --csv`);
        const text = await stats(out);
        assert.equal(text.status, 0, text.stderr);
        assertSaneText(text.stdout, `${label} stats`);
      }
    });
  }
});
