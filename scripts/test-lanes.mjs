// The test lanes: `npm test` runs every built test file; `npm run test:unit` leaves out those
// that run an outside program (the agent CLIs, Chromium, ClickHouse, npm) or take minutes by
// design (lines of gigabytes, tens of millions of lines, the benchmarks, fuzzing).
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const OUTSIDE = new Set([
  // The agent CLIs (test/e2e).
  'adapters-examples', 'ci-recipe', 'e2e', 'e2e-codex', 'e2e-copilot', 'e2e-gemini', 'e2e-opencode',
  'otlp', 'run-command', 'sdk', 'transcripts', 'watchdog-live',
  // Chromium.
  'cost', 'report-browser', 'report-index-browser', 'report-live',
  // ClickHouse.
  'clickhouse', 'clickhouse-bench', 'clickhouse-spool', 'hardening-probe',
  'stats-clickhouse',
  // npm and the packed tarball.
  'package', 'tarball-snippets',
]);
export const SLOW = new Set([
  'huge-lines', 'junk-runs', 'bench-smoke', 'bench-stats-smoke', 'reliability', 'disk-full', 'property',
  // 150 runs of the CLI: six producers by five hostile values by every view (the same refusals
  // are checked in process by cost-ledger and cost-hostile).
  'cost-hostile-views',
  // One index.json of 100,000 subagents read five times (stats.test.ts checks --top on small runs).
  'stats-top',
  // Inputs of thousands of threads with a 1 MiB prompt, peak memory measured (other-agents.test.ts
  // checks the same bound in process).
  'amplification',
  // The TypeScript compiler run twice over the .mjs examples (the build type-checks src/).
  'examples-types',
]);

/**
 * The unit lane's longest files, longest first (wall time on 2 cores), started before the
 * others: the lane then ends on short files spread over every core, not on one long file
 * with the other cores idle.
 */
export const LONGEST = [
  'cli', 'report', 'projection', 'stats', 'hardening-inputs', 'idle-watchdog', 'hardening-files',
  'mapped-conservation', 'projection-replay', 'other-agents', 'output-folder', 'deep-agents-parity',
];

/**
 * Every file's longest, longest first (wall time on 2 cores, the whole suite running): `npm
 * test` starts them before the others, so that it does not end on one of them alone (run by
 * name, the suite ended on `watchdog-live`'s two minutes with the other core idle).
 */
export const LONGEST_OF_ALL = [
  'watchdog-live', 'e2e-opencode', 'e2e', 'clickhouse', 'otlp', 'bench-smoke', 'cost-hostile-views',
  'report-browser', 'e2e-gemini', 'stats-clickhouse', 'sdk', 'clickhouse-spool', 'huge-lines',
  'report-live',
];

/** Every test file `npm test` runs, those of LONGEST_OF_ALL first in its order, then by name. */
export function allFiles(sourceDir = 'test', builtDir = join('dist', 'test')) {
  return testNames(sourceDir)
    .sort((a, b) => rankIn(LONGEST_OF_ALL, a) - rankIn(LONGEST_OF_ALL, b) || (a < b ? -1 : a > b ? 1 : 0))
    .map((name) => join(builtDir, `${name}.test.js`));
}

/**
 * The unit lane's test files, the longest first, then by name: one built file
 * (`dist/test/NAME.test.js`) per test source (`test/NAME.test.ts`). Listed from the sources,
 * so the output of a test file since deleted, which an incremental build leaves in `dist/`,
 * is never run.
 */
export function unitFiles(sourceDir = 'test', builtDir = join('dist', 'test')) {
  return testNames(sourceDir)
    .filter((name) => !OUTSIDE.has(name) && !SLOW.has(name))
    .sort((a, b) => rankIn(LONGEST, a) - rankIn(LONGEST, b) || (a < b ? -1 : a > b ? 1 : 0))
    .map((name) => join(builtDir, `${name}.test.js`));
}

/** The names of the test sources (`NAME.test.ts`) in `sourceDir`. */
function testNames(sourceDir) {
  return readdirSync(sourceDir)
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => f.slice(0, -'.test.ts'.length));
}

function rankIn(list, name) {
  const at = list.indexOf(name);
  return at === -1 ? list.length : at;
}

/** Where tsc compiles from: tsconfig.json's `include`, folders under `root`. */
export function sourceDirs(root = '.') {
  return JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')).include;
}

/**
 * The TypeScript sources under `dirs` whose output (`builtRoot/<path>.js`) is missing. tsc's
 * incremental build trusts its build info and does not check its outputs: one deleted since
 * would never be written again, so the unit lane builds in full when this is not empty.
 */
export function missingOutputs(dirs = sourceDirs(), builtRoot = 'dist', root = '.') {
  return dirs
    .flatMap((dir) => sourcesUnder(root, dir))
    .filter((ts) => !existsSync(join(root, builtRoot, ts.replace(/\.ts$/, '.js'))));
}

/** The sources tsc compiles under `dir` (relative to `root`); like tsc, it skips node_modules. */
function sourcesUnder(root, dir) {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourcesUnder(root, join(dir, e.name));
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [join(dir, e.name)] : [];
  });
}

/** Whether a `test:fail` event fails the lane: a failing `todo` test does not, as with `node --test`. */
export const failsTheLane = (event) => !event.todo;

/**
 * The tests' folders (TMPDIR, for the test files this process starts) go under a folder of
 * their own in memory (/dev/shm) when the machine has one with room (`leastFreeBytes`: the
 * suite writes a line of 2 GB twice) and TMPDIR is not set, removed at exit or on SIGINT or
 * SIGTERM: on a virtual machine's disk each file created costs about a millisecond, and a test
 * of 12,000 subagents creates 24,000 (that test ran in 31 s on disk, 18 s in memory).
 */
export function testFoldersInMemory(memory = '/dev/shm', leastFreeBytes = 8 * 2 ** 30) {
  if (process.env.TMPDIR !== undefined || !statSync(memory, { throwIfNoEntry: false })?.isDirectory()) return;
  const { bavail, bsize } = statfsSync(memory);
  if (bavail * bsize < leastFreeBytes) return;
  const folder = mkdtempSync(join(memory, 'subtee-tests-'));
  process.env.TMPDIR = folder;
  const remove = () => {
    try {
      rmSync(folder, { recursive: true, force: true });
    } catch (err) {
      process.stderr.write(`could not remove the tests' folder ${folder}: ${err.message}\n`);
    }
  };
  process.on('exit', remove);
  for (const signal of ['SIGINT', 'SIGTERM'])
    process.once(signal, () => {
      remove();
      process.kill(process.pid, signal);
    });
}
