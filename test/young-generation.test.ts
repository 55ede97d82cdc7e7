import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { openSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { writeStream } from '../bench/gen.js';
import { YOUNG_GENERATION_CAP_BYTES } from '../src/cli/young-generation.js';
import { BIN, ROOT, tmpDir } from './helpers.js';

const MAIN = pathToFileURL(join(ROOT, 'dist', 'src', 'cli', 'main.js')).href;
const REPORT_FILE = pathToFileURL(join(ROOT, 'dist', 'src', 'chain', 'sinks', 'report-file.js')).href;

/** The largest young generation V8 commits in a run, in bytes (`--trace-gc-verbose` prints it on stdout). */
function largestYoungGeneration(args: string[], input?: string): number {
  const run = spawnSync(process.execPath, ['--trace-gc-verbose', ...args], {
    stdio: [input === undefined ? 'ignore' : openSync(input, 'r'), 'pipe', 'pipe'],
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    timeout: 120_000,
  });
  assert.equal(run.status, 0, run.stderr.slice(-2000));
  const committed = [...run.stdout.matchAll(/New space,.*committed: *(\d+) KB/g)].map((m) => Number(m[1]));
  assert.ok(committed.length > 0, 'V8 printed its spaces');
  return Math.max(...committed) * 1024;
}

test('the command line keeps the young generation at its cap where V8 alone doubles it', async () => {
  const dir = tmpDir('subtee-young-');
  const input = join(dir, 'in.jsonl');
  await writeStream({ sizeBytes: 30 * 1024 * 1024, fanout: 2000, shape: 'large', seed: 3 }, input);
  const flags = ['--stdout', 'none', '-q'];
  // The same command line without the cap: what V8 grows to on this input.
  const script = `const { main } = await import(${JSON.stringify(MAIN)});
process.exitCode = await main(process.argv.slice(1));`;
  const uncapped = largestYoungGeneration(
    ['--input-type=module', '-e', script, '--', '--out', join(dir, 'uncapped'), ...flags],
    input,
  );
  const capped = largestYoungGeneration([BIN, '--out', join(dir, 'capped'), ...flags], input);
  assert.ok(uncapped > YOUNG_GENERATION_CAP_BYTES, `V8 alone grew it to ${uncapped} bytes`);
  assert.equal(capped, YOUNG_GENERATION_CAP_BYTES, 'grown to the cap, not past it');

  // A semi-space size given to Node is the user's: no cap then.
  const own = largestYoungGeneration(
    ['--max-semi-space-size=32', BIN, '--out', join(dir, 'own'), ...flags],
    input,
  );
  assert.ok(own > YOUNG_GENERATION_CAP_BYTES, `the user's size kept: ${own} bytes`);

  // `subtee report` holds the event loop while it builds the page: no timer runs there.
  const writeReport = `const { writeReport } = await import(${JSON.stringify(REPORT_FILE)});
writeReport(process.argv[1]);`;
  const pageUncapped = largestYoungGeneration([
    '--input-type=module',
    '-e',
    writeReport,
    '--',
    join(dir, 'capped'),
  ]);
  const pageCapped = largestYoungGeneration([BIN, 'report', '-q', join(dir, 'capped')]);
  assert.ok(pageUncapped > YOUNG_GENERATION_CAP_BYTES, `V8 alone grew it to ${pageUncapped} bytes`);
  assert.equal(pageCapped, YOUNG_GENERATION_CAP_BYTES, 'grown to the cap, not past it');
});
