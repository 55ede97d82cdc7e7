import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { spawn, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { ROOT, tmpDir } from './helpers/helpers.js';

/** What makes a test file reach outside Node: the agent CLIs, Chromium, ClickHouse, npm. */
const OUTSIDE_USE: Array<[string, RegExp]> = [
  ['an agent CLI', /from '\.\/e2e\/(claude|codex|gemini|chat-clis|sdk|pipe-cli|cli-suite)\.js'/],
  ['Chromium', /\blaunchBrowser\(/],
  ['ClickHouse', /\bstartClickHouse\(|clickhouse-server/],
  ['npm', /\b(spawnSync|execFileSync|spawn)\(npm\b/],
];

test('npm run test:unit runs the files that need no outside program; npm test runs every file', async () => {
  const lanes = await import(pathToFileURL(join(ROOT, 'scripts', 'test-lanes.mjs')).href);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  assert.match(pkg.scripts['test:unit'], /node scripts\/test-unit\.mjs$/);
  assert.match(pkg.scripts.test, /node scripts\/test-all\.mjs$/, 'npm test: every file');
  const sources = readdirSync(join(ROOT, 'test')).filter((f) => f.endsWith('.test.ts'));
  const all: string[] = lanes.allFiles(join(ROOT, 'test'), join(ROOT, 'dist', 'test'));
  assert.deepEqual(
    all.map((f) => f.split('/').pop()!.replace(/\.js$/, '.ts')).sort(),
    [...sources].sort(),
    'npm test runs every test file once',
  );
  const built: string[] = lanes.unitFiles(join(ROOT, 'test'), join(ROOT, 'dist', 'test'));
  const unit = new Set(built.map((f) => f.split('/').pop()!.replace(/\.js$/, '.ts')));
  const reaching: string[] = [];
  for (const file of sources.filter((f) => f !== 'lanes.test.ts')) {
    const text = readFileSync(join(ROOT, 'test', file), 'utf8');
    const uses = OUTSIDE_USE.filter(([, re]) => re.test(text)).map(([what]) => what);
    if (uses.length > 0 && unit.has(file)) reaching.push(`${file}: ${uses.join(', ')}`);
  }
  assert.deepEqual(reaching, [], 'files of the unit lane that run an outside program');
  // Every name the lists give is a test file (a renamed file is not silently run in the quick lane).
  const names = new Set(sources.map((f) => f.slice(0, -'.test.ts'.length)));
  const listed = [...lanes.OUTSIDE, ...lanes.SLOW, ...lanes.LONGEST, ...lanes.LONGEST_OF_ALL];
  const stale = listed.filter((n: string) => !names.has(n));
  assert.deepEqual(stale, [], 'names in scripts/test-lanes.mjs without a test file');
  assert.ok(unit.size >= 40, `${unit.size} files in the unit lane`);
});

test('npm run test:unit builds incrementally and runs the built files of test sources only, ' +
  'never the output of a deleted test file', async () => {
  const lanes = await import(pathToFileURL(join(ROOT, 'scripts', 'test-lanes.mjs')).href);
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  // The build info lives in dist/, so `npm run build` (which removes dist/) forgets it too.
  assert.equal(pkg.scripts['test:unit'], 'node scripts/test-unit.mjs');
  const tsconfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8'));
  assert.equal(tsconfig.compilerOptions.incremental, true, 'every build keeps the build info current');
  assert.match(tsconfig.compilerOptions.tsBuildInfoFile, /^dist\//);
  assert.match(pkg.scripts.build, /rmSync\('dist'/);
  assert.match(pkg.scripts.test, /^npm run build && /, 'npm test builds from clean');
  const dir = tmpDir();
  const [sources, built] = [join(dir, 'test'), join(dir, 'dist')];
  mkdirSync(sources);
  mkdirSync(built);
  for (const f of ['kept.test.ts', 'e2e.test.ts', 'helper.ts']) writeFileSync(join(sources, f), '');
  for (const f of ['kept.test.js', 'e2e.test.js', 'deleted.test.js']) writeFileSync(join(built, f), '');
  assert.deepEqual(lanes.unitFiles(sources, built), [join(built, 'kept.test.js')]);
  // The longest files start first, in the order the list gives; the others by name.
  for (const f of ['a', 'report', 'cli', 'z']) writeFileSync(join(sources, `${f}.test.ts`), '');
  const order = lanes.unitFiles(sources, built).map((f: string) => f.slice(built.length + 1));
  assert.deepEqual(order, ['cli.test.js', 'report.test.js', 'a.test.js', 'kept.test.js', 'z.test.js']);
  // npm test: every file, its longest first.
  const every = lanes.allFiles(sources, built).map((f: string) => f.slice(built.length + 1));
  const firstAll = ['e2e.test.js', 'a.test.js', 'cli.test.js', 'kept.test.js', 'report.test.js', 'z.test.js'];
  assert.deepEqual(every, firstAll);
});

test('the unit lane builds in full when a compiled file is missing: ' +
  'tsc would not write it again', async () => {
  const lanes = await import(pathToFileURL(join(ROOT, 'scripts', 'test-lanes.mjs')).href);
  const dir = tmpDir();
  for (const d of ['src/model', 'test/e2e/node_modules/x', 'dist/src/model', 'dist/test'])
    mkdirSync(join(dir, d), { recursive: true });
  const sources = ['src/model/cost.ts', 'src/types.d.ts', 'test/a.test.ts', 'test/e2e/node_modules/x/y.ts'];
  for (const f of sources) writeFileSync(join(dir, f), '');
  writeFileSync(join(dir, 'dist/test/a.test.js'), '');
  assert.deepEqual(lanes.missingOutputs(['src', 'test'], 'dist', dir), [join('src', 'model', 'cost.ts')]);
  writeFileSync(join(dir, 'dist/src/model/cost.js'), '');
  assert.deepEqual(lanes.missingOutputs(['src', 'test'], 'dist', dir), []);
  // The repository's own build is complete.
  assert.deepEqual(lanes.missingOutputs(lanes.sourceDirs(ROOT), 'dist', ROOT), []);
});

test('a failing todo test does not fail the unit lane; any other failing test does', () => {
  const dir = tmpDir();
  const file = join(dir, 'fails.test.mjs');
  writeFileSync(
    file,
    "import { test } from 'node:test';\n" +
      "test('later', { todo: true }, () => { throw new Error('not yet'); });\n" +
      "test('broken', () => { throw new Error('broken'); });\n",
  );
  // node:test's run() over that file, in a process of its own (not as a child of this test
  // runner), each failure judged as the lane judges it.
  const lanes = pathToFileURL(join(ROOT, 'scripts', 'test-lanes.mjs')).href;
  const program =
    `import { run } from 'node:test'; import { failsTheLane } from ${JSON.stringify(lanes)};\n` +
    'const verdicts = {};\n' +
    `for await (const e of run({ files: [${JSON.stringify(file)}] }))\n` +
    "  if (e.type === 'test:fail') verdicts[e.data.name] = failsTheLane(e.data);\n" +
    'console.log(JSON.stringify(verdicts));\n';
  const runner = join(dir, 'runner.mjs');
  writeFileSync(runner, program);
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  const r = spawnSync(process.execPath, [runner], { encoding: 'utf8', env });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { later: false, broken: true });
});

test("the tests' folders go in a folder of their own under the memory folder when TMPDIR is " +
  'unset and it has room, removed at exit and on SIGTERM; a TMPDIR set is kept', async () => {
  const memory = tmpDir();
  const lanes = pathToFileURL(join(ROOT, 'scripts', 'test-lanes.mjs')).href;
  const script = (leastFreeBytes: number, then = '') =>
    `const { testFoldersInMemory } = await import(${JSON.stringify(lanes)});` +
    `testFoldersInMemory(${JSON.stringify(memory)}, ${leastFreeBytes});` +
    `const { existsSync } = await import('node:fs');` +
    `console.log(JSON.stringify([process.env.TMPDIR ?? null, existsSync(process.env.TMPDIR ?? '')]));${then}`;
  const envWith = (tmp: string | undefined) => {
    const env = { ...process.env };
    delete env.TMPDIR;
    if (tmp !== undefined) env.TMPDIR = tmp;
    return env;
  };
  const runWith = (tmp: string | undefined, leastFreeBytes = 0) => {
    const args = ['--input-type=module', '-e', script(leastFreeBytes)];
    const r = spawnSync(process.execPath, args, { env: envWith(tmp), encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as [string | null, boolean];
  };
  const [folder, existed] = runWith(undefined);
  assert.equal(join(folder!, '..'), memory, 'under the memory folder');
  assert.ok(existed, 'made before the tests start');
  assert.deepEqual(readdirSync(memory), [], 'removed at exit');
  assert.deepEqual(runWith(undefined, 2 ** 60), [null, false], 'a memory folder without room is not used');
  const own = tmpDir();
  assert.deepEqual(runWith(own), [own, true], 'a TMPDIR set is used as it is');
  // A run stopped by a signal removes its folder too.
  const waiting = script(0, 'setInterval(() => {}, 1000);');
  const child = spawn(process.execPath, ['--input-type=module', '-e', waiting], {
    env: envWith(undefined),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  const [made] = JSON.parse(line.toString('utf8')) as [string];
  assert.ok(existsSync(made));
  child.kill('SIGTERM');
  const [, signal] = await once(child, 'exit');
  assert.equal(signal, 'SIGTERM');
  assert.ok(!existsSync(made), 'removed on SIGTERM');
});
