import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { loaderTraceImport, ROOT, tmpDir } from './helpers/helpers.js';
import { codeBlocks, docPages, section } from './helpers/docs.js';
import { satisfies } from '../src/semver.js';
import { installLine, OPTIONAL_PACKAGES } from '../src/optional-package.js';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The files `npm pack` puts in the tarball (scripts off: dist/ is built by `npm test`). */
function packedFiles(): Set<string> {
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return new Set((JSON.parse(out)[0].files as Array<{ path: string }>).map((f) => f.path));
}

/** A `*` in a path matches any characters but `/`. */
function globToRegExp(glob: string): RegExp {
  return new RegExp(
    `^${glob
      .split('*')
      .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('[^/]*')}$`,
  );
}

/** Whether a path named in a document (a file, a folder ending in `/`, or a `*` glob) is in the tarball. */
function shipped(files: Set<string>, ref: string): boolean {
  const path = posix.normalize(ref);
  if (path.includes('*')) {
    const re = globToRegExp(path);
    return [...files].some((f) => re.test(f));
  }
  // A folder, named with or without its last `/`, is shipped when a file under it is.
  const folder = path.endsWith('/') ? path : `${path}/`;
  return files.has(path) || [...files].some((f) => f.startsWith(folder));
}

/**
 * Folders of the source repository that a user of the package never runs: tests, benchmarks,
 * and the TypeScript sources (the package ships what they build to).
 */
const DEVELOPMENT_ONLY = [
  'test/',
  'bench/',
  'src/',
  'plugins/',
  'dist/test/',
  'dist/bench/',
  'dist/examples/',
];

/** Whether a path a document names exists in the repository (a file, a folder or a `*` glob). */
function inRepository(ref: string): boolean {
  const path = posix.normalize(ref);
  if (!path.includes('*')) return existsSync(join(ROOT, path));
  if (path.includes('**/')) {
    // `dir/**/*.ts`: a file so named anywhere under the folder.
    const [under, name] = path.split('**/');
    const re = globToRegExp(name);
    const files = existsSync(join(ROOT, under)) ? readdirSync(join(ROOT, under), { recursive: true }) : [];
    return files.some((f) => re.test(posix.basename(String(f))));
  }
  const folder = posix.dirname(path);
  const re = globToRegExp(posix.basename(path));
  return existsSync(join(ROOT, folder)) && readdirSync(join(ROOT, folder)).some((f) => re.test(f));
}

test('the tarball ships what a user runs: no tests, benchmarks or their fixtures', () => {
  const files = packedFiles();
  const development = [...files].filter(
    (f) => DEVELOPMENT_ONLY.some((d) => f.startsWith(d)) || /\.test\.[cm]?[jt]s$/.test(f),
  );
  assert.deepEqual(development, [], 'files only the repository needs');
  for (const needed of ['bin/subtee.js', 'dist/src/index.js', 'dist/src/index.d.ts', 'package.json']) {
    assert.ok(files.has(needed), needed);
  }
});

test('the tarball ships a LICENSE and the files the ' +
  'documents name; the tests they name are in the repo', () => {
  const files = packedFiles();
  assert.ok(files.has('LICENSE'), 'LICENSE');
  assert.match(
    readFileSync(join(ROOT, 'LICENSE'), 'utf8'),
    /^MIT License\n\nCopyright \(c\) \d{4} subtee contributors\n/,
  );
  assert.equal(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).license, 'MIT');
  let named = 0;
  for (const doc of [...docPages(), 'ARCHITECTURE.md']) {
    assert.ok(files.has(doc), doc);
    const text = readFileSync(join(ROOT, doc), 'utf8');
    const links = [...text.matchAll(/\]\(([^)#\s]+)\)/g)]
      .map((m) => m[1])
      .filter((l) => !/^[a-z]+:/.test(l))
      .map((l) => posix.join(posix.dirname(doc), l));
    const paths = [
      ...text.matchAll(
        /(?<![\w./-])((?:src|test|bench|examples|schema|plugins|bin|dist)\/[A-Za-z0-9_.*/-]*|[A-Z][A-Z_]*\.md)/g,
      ),
    ].map((m) => m[1]);
    const refs = new Set([...links, ...paths].map((r) => r.replace(/[.,;:]+$/, '')));
    named += refs.size;
    const development = (r: string) => DEVELOPMENT_ONLY.some((d) => posix.normalize(r).startsWith(d));
    const missing = [...refs].filter((r) => !development(r) && !shipped(files, r));
    assert.deepEqual(missing, [], `${doc} names files the tarball does not ship`);
    const absent = [...refs].filter((r) => development(r) && !inRepository(r));
    assert.deepEqual(absent, [], `${doc} names tests or benchmarks the repository does not hold`);
  }
  assert.ok(named > 100, `the documents name ${named} files`);
});

/** The packed tarball's own figures, as `npm pack` reports them. */
function packSummary(): { size: number; unpackedSize: number; files: string[] } {
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  type Pack = { size: number; unpackedSize: number; files: Array<{ path: string }> };
  const [pack] = JSON.parse(out) as Pack[];
  return { size: pack.size, unpackedSize: pack.unpackedSize, files: pack.files.map((f) => f.path) };
}

test('the tarball carries no TypeScript sources or source ' +
  'maps: JavaScript and declarations, under 2.5 MB', () => {
  const { size, unpackedSize, files } = packSummary();
  const sources = files.filter(
    (f) => /\.[cm]?ts$/.test(f) && !/\.d\.[cm]?ts$/.test(f) && !f.startsWith('examples/'),
  );
  assert.deepEqual(sources, [], 'TypeScript sources (the examples a user reads aside)');
  assert.deepEqual(
    files.filter((f) => f.endsWith('.map')),
    [],
    'source maps',
  );
  const mapped = files.filter(
    (f) => f.endsWith('.js') && /^\/\/# sourceMappingURL=/m.test(readFileSync(join(ROOT, f), 'utf8')),
  );
  assert.deepEqual(mapped, [], 'JavaScript that names a source map');
  assert.ok(files.some((f) => f.startsWith('dist/src/') && f.endsWith('.d.ts')), 'type declarations');
  // Measured: 954,183 bytes packed and 3,268,412 unpacked when the sources and maps were in it;
  // 710,912 and 1,936,123 without them (184 KB of it the README's picture).
  assert.ok(unpackedSize < 2_500_000, `${unpackedSize} bytes unpacked`);
  assert.ok(size < 800_000, `${size} bytes packed`);
});

test('installing the packed tarball runs no install-time script and npm has nothing to warn about', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  for (const s of ['preinstall', 'install', 'postinstall', 'prepare'])
    assert.equal(pkg.scripts?.[s], undefined, `scripts.${s} runs when the package is installed`);
  assert.match(pkg.scripts.prepack, /^npm run build$/, 'the tarball is built afresh when it is packed');
  assert.match(
    pkg.scripts.test,
    /^npm run build && /,
    'npm test builds first, so `npm ci && npm test` works on a clean clone',
  );
  const ci = readFileSync(join(ROOT, '.ci', 'run'), 'utf8');
  assert.match(ci, /^npm test$/m, 'CI builds through npm test');
  assert.doesNotMatch(ci, /^npm run build$/m, 'and only there: a build before it would run twice');
  // A build starts from an empty dist/: a test or module whose source is gone is not run or packed.
  assert.match(pkg.scripts.build, /rmSync\('dist'.*&& tsc -p tsconfig\.json$/);
  // A real install into a fresh project, from the packed tarball.
  const dir = tmpDir();
  const tarball = execFileSync(npm, ['pack', '--ignore-scripts', '--pack-destination', dir], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  })
    .trim()
    .split('\n')
    .pop()!;
  const project = join(dir, 'project');
  execFileSync('mkdir', [project]);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'host', version: '1.0.0', private: true, type: 'module' }),
  );
  const install = spawnSync(
    npm,
    ['install', join(dir, tarball), '--prefer-offline', '--no-audit', '--no-fund'],
    { cwd: project, encoding: 'utf8', timeout: 120_000 },
  );
  assert.equal(install.status, 0, install.stderr);
  assert.doesNotMatch(install.stderr, /npm warn/i, install.stderr);
  const v = spawnSync(join(project, 'node_modules', '.bin', 'subtee'), ['--version'], { encoding: 'utf8' });
  assert.equal(v.stdout.trim(), `subtee ${pkg.version}`, v.stderr);
});

/** The agent CLIs the end-to-end tests run: their own package, test/e2e, never the repository's. */
const AGENT_CLIS = [
  '@anthropic-ai/claude-code',
  '@github/copilot',
  '@google/gemini-cli',
  '@openai/codex',
  'opencode-ai',
];

test("the repository's npm ci is light: the agent CLIs are test/e2e's, every package it installs runs " +
  "on the Node engines names", () => {
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8'));
  const e2e = JSON.parse(readFileSync(join(ROOT, 'test', 'e2e', 'package-lock.json'), 'utf8'));
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  for (const name of AGENT_CLIS) {
    assert.equal(lock.packages[`node_modules/${name}`], undefined, `${name} is in the repository's lockfile`);
    assert.ok(e2e.packages[`node_modules/${name}`], `${name} is pinned by test/e2e/package-lock.json`);
  }
  // Optional dependencies are left out (.npmrc): those are the Agent SDK's own platform binaries.
  assert.match(readFileSync(join(ROOT, '.npmrc'), 'utf8'), /^omit=optional$/m);
  const installed = Object.entries<any>(lock.packages).filter(([path, e]) => path !== '' && !e.optional);
  assert.ok(installed.length > 100, `${installed.length} packages`);
  const [major, minor = '0', patch = '0'] = /^>=([\d.]+)$/.exec(pkg.engines.node)![1].split('.');
  const least = `${major}.${minor}.${patch}`;
  // Read as npm reads `engines` (semver ranges as packages write them: `>= 8`, `*`).
  const refused = installed
    .filter(([, e]) => e.engines?.node && !satisfies(least, e.engines.node))
    .map(([path, e]) => `${path} wants node ${e.engines.node}`);
  const why = `packages that refuse Node ${least}, the least package.json's engines allows`;
  assert.deepEqual(refused, [], why);
  assert.ok(satisfies(process.versions.node, pkg.engines.node), `this Node is ${process.versions.node}`);
  const installsFirst = /&& node test\/e2e\/install\.mjs && /;
  assert.match(pkg.scripts.test, installsFirst, 'npm test installs the agent CLIs first');
});

/** The packed tarball, built from dist/ as it stands (scripts off: `npm test` has built it). */
function packTarball(dir: string): string {
  const name = execFileSync(npm, ['pack', '--ignore-scripts', '--pack-destination', dir], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  })
    .trim()
    .split('\n')
    .pop()!;
  return join(dir, name);
}

/** Bytes of the regular files under a folder (links not followed). */
function folderBytes(dir: string): number {
  let bytes = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) bytes += statSync(join(entry.parentPath, entry.name)).size;
  }
  return bytes;
}

let globalInstall: { dir: string; prefix: string; stderr: string } | null = null;

/** The packed tarball installed into a fresh global prefix (once for this file's tests). */
function installedGlobally(): { dir: string; prefix: string; stderr: string } {
  if (globalInstall) return globalInstall;
  const dir = tmpDir();
  const prefix = join(dir, 'prefix');
  const install = spawnSync(
    npm,
    ['install', '-g', '--prefix', prefix, packTarball(dir), '--prefer-offline', '--no-audit', '--no-fund'],
    { encoding: 'utf8', timeout: 180_000 },
  );
  assert.equal(install.status, 0, install.stderr);
  return (globalInstall = { dir, prefix, stderr: install.stderr });
}

/** The subtee a global install put on PATH, run with `args`. */
function globalSubtee(prefix: string, args: string[]) {
  return spawnSync('subtee', args, {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${join(prefix, 'bin')}:${process.env.PATH}` },
    timeout: 60_000,
  });
}

const NESTED = join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl');

test('the packed tarball installs into a fresh global ' +
  'prefix, light, and the subtee it puts on PATH runs', () => {
  const { dir, prefix, stderr } = installedGlobally();
  assert.doesNotMatch(stderr, /npm warn/i, stderr);
  const installed = join(prefix, 'lib', 'node_modules');
  // The OpenTelemetry SDK and the ClickHouse client are optional peers: not installed with it.
  assert.deepEqual(
    readdirSync(installed, { recursive: true }).filter((p) =>
      /^(?:.*\/)?@(?:opentelemetry|clickhouse)$/.test(String(p)),
    ),
    [],
  );
  const mb = folderBytes(prefix) / 2 ** 20;
  assert.ok(mb < 15, `the install takes ${mb.toFixed(1)} MB`);
  const out = join(dir, 'out');
  const r = globalSubtee(prefix, ['--out', out, '-q', '--stdout', 'none', NESTED]);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).channels.length, 4);
});

test('a sink whose optional package is not installed fails in one line naming what to ' +
  'install (exit 2), before anything is made or started; installed beside subtee, it runs', () => {
  const { dir, prefix } = installedGlobally();
  const closed = 'http://127.0.0.1:9';
  // The package that is missing, and the line that installs every one the sink needs.
  const otlpLine = new RegExp(
    '^subtee: the otlp sink \\(--otlp\\) needs @opentelemetry/[a-z-]+, which is not installed: ' +
      `${escapeRegExp(installLine('otlp'))} .*\\[ERR_OPTIONAL_DEPENDENCY\\]$`,
  );
  const clickhouseLine = new RegExp(
    '^subtee: the clickhouse sink \\(--clickhouse\\) and stats --clickhouse need @clickhouse/client, ' +
      `which is not installed: ${escapeRegExp(installLine('clickhouse'))} .*\\[ERR_OPTIONAL_DEPENDENCY\\]$`,
  );
  assert.match(installLine('otlp'), /^npm install @opentelemetry\/api@~1\.9\.1 .*sdk-trace-base@\^2/);
  const cases: Array<[string[], RegExp]> = [
    [['--otlp', closed], otlpLine],
    [['--clickhouse', closed], clickhouseLine],
  ];
  for (const [flags, line] of cases) {
    const out = join(dir, `out-${flags[0].slice(2)}`);
    const r = globalSubtee(prefix, ['--out', out, '-q', '--stdout', 'none', ...flags, NESTED]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr.trimEnd(), line);
    assert.equal(r.stderr.trimEnd().split('\n').length, 1, r.stderr);
    assert.equal(existsSync(out), false, 'no output folder is left behind');
    // Under `subtee run`, the command is never started.
    const marker = join(dir, `started-${flags[0].slice(2)}`);
    const run = globalSubtee(prefix, [
      'run', '--out', `${out}-run`, '-q', '--stdout', 'none', ...flags, '--',
      process.execPath, '-e', `require('fs').writeFileSync(${JSON.stringify(marker)}, '')`,
    ]);
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr.trimEnd(), line);
    assert.equal(existsSync(marker), false, 'the command was started');
  }
  const stats = globalSubtee(prefix, ['stats', '--clickhouse', closed]);
  assert.equal(stats.status, 2, stats.stderr);
  assert.match(stats.stderr.trimEnd(), clickhouseLine);
  // A program: open() with the sink fails its run with the same code.
  const index = join(prefix, 'lib', 'node_modules', 'subtee', 'dist', 'src', 'index.js');
  const program = `
    const { open } = await import(${JSON.stringify(pathToFileURL(index).href)});
    const run = open(${JSON.stringify(NESTED)}, { config: { sinks: [{ use: 'otlp', url: '${closed}' }] } });
    const failure = await run.done.then(() => null, (err) => err);
    const { code, exitCode, message } = failure ?? {};
    console.log(JSON.stringify({ code, exitCode, message }));`;
  const lib = spawnSync(process.execPath, ['--input-type=module', '-e', program], { encoding: 'utf8' });
  assert.equal(lib.status, 0, lib.stderr);
  const failure = JSON.parse(lib.stdout);
  assert.equal(failure.code, 'ERR_OPTIONAL_DEPENDENCY');
  assert.equal(failure.exitCode, 2);
  assert.match(`subtee: ${failure.message} [${failure.code}]`, otlpLine);
  // Installed beside a global subtee (linked here from this repository), the same run goes.
  for (const name of ['@opentelemetry', '@clickhouse']) {
    symlinkSync(join(ROOT, 'node_modules', name), join(prefix, 'lib', 'node_modules', name));
  }
  const out = join(dir, 'out-with-packages');
  const config = join(dir, 'sinks.json');
  const sinks = [
    { use: 'stdout', mode: 'none' },
    { use: 'otlp', url: closed, retryMs: 0, flushTimeoutMs: 0, timeoutMs: 50 },
    { use: 'clickhouse', url: closed, flushTimeoutMs: 0, timeoutMs: 50 },
  ];
  writeFileSync(config, JSON.stringify({ sinks }));
  const withPackages = globalSubtee(prefix, ['--out', out, '-q', '-c', config, NESTED]);
  assert.equal(withPackages.status, 0, withPackages.stderr);
  assert.match(withPackages.stderr, /OTLP_UNDELIVERED/);
  assert.match(withPackages.stderr, /CLICKHOUSE_SPOOLED/);
  assert.equal(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).channels.length, 4);
});

test("the README's line for a clone puts the clone's subtee on PATH", () => {
  const blocks = codeBlocks(section('README.md', '## Install'), 'sh');
  assert.deepEqual(blocks[0], 'npm i -g subtee');
  const steps = blocks[1].split(' && ');
  // The first steps are what `npm test` has done in this clone; the last puts it on PATH.
  assert.deepEqual(steps.slice(0, -1), ['npm ci', 'npm run build']);
  const prefix = join(tmpDir(), 'prefix');
  const [command, ...args] = steps.at(-1)!.split(' ');
  const link = spawnSync(command, [...args, '--no-audit', '--no-fund'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, npm_config_prefix: prefix },
    timeout: 120_000,
  });
  assert.equal(link.status, 0, link.stderr);
  const v = spawnSync('subtee', ['--version'], {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${join(prefix, 'bin')}:${process.env.PATH}` },
  });
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  assert.equal(v.stdout.trim(), `subtee ${pkg.version}`, v.stderr);
});

/** Resolved module URLs and the CommonJS module cache of a program run under a loader trace. */
function tracedProgram(dir: string, program: string, args: string[]) {
  const register = loaderTraceImport(dir);
  const trace = join(dir, `trace-${args.join('-').replace(/\W+/g, '_').slice(-40)}.txt`);
  writeFileSync(trace, '');
  const file = join(dir, 'program.mjs');
  writeFileSync(file, program);
  const r = spawnSync(process.execPath, ['--import', register, file, ...args], {
    encoding: 'utf8',
    env: { ...process.env, SUBTEE_LOADER_TRACE: trace },
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const resolved = readFileSync(trace, 'utf8').split('\n').filter(Boolean);
  const report = JSON.parse(r.stdout.trim().split('\n').pop()!) as { cached: string[]; channels: number };
  return { resolved, ...report };
}

test('importing subtee and running open() loads neither OpenTelemetry ' +
  'nor the ClickHouse client; a run with their sinks loads both', () => {
  const dir = tmpDir();
  // A program of its own importing the package by name, as a user's does.
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'subtee'));
  const program = `
import { createRequire } from 'node:module';
import { open } from 'subtee';
const [input, out, withSinks] = process.argv.slice(2);
const sinks = [
  { use: 'otlp', url: 'http://127.0.0.1:9', retryMs: 0, flushTimeoutMs: 0, timeoutMs: 50 },
  { use: 'clickhouse', url: 'http://127.0.0.1:9', flushTimeoutMs: 0, timeoutMs: 50 },
];
const run = open(input, withSinks ? { out, config: { sinks } } : { out });
for await (const sub of run.allSubagents) await sub.outcome;
const index = await run.done;
const cached = Object.keys(createRequire(import.meta.url).cache);
console.log(JSON.stringify({ channels: index.channels.length, cached }));
`;
  const optional = /\/node_modules\/@(?:opentelemetry|clickhouse)\//;
  const plain = tracedProgram(dir, program, [NESTED, join(dir, 'plain')]);
  assert.equal(plain.channels, 4);
  assert.ok(
    plain.resolved.some((url) => url.endsWith('/dist/src/open.js')),
    "the trace sees subtee's own modules",
  );
  assert.deepEqual(plain.resolved.filter((url) => optional.test(url)), [], 'modules resolved by open()');
  assert.deepEqual(plain.cached.filter((path) => optional.test(path)), [], 'modules in the module cache');
  const sinks = tracedProgram(dir, program, [NESTED, join(dir, 'sinks'), 'sinks']);
  assert.equal(sinks.channels, 4);
  for (const name of ['@opentelemetry/sdk-trace-base', '@opentelemetry/api', '@clickhouse/client']) {
    assert.ok(sinks.resolved.some((url) => url.includes(`/node_modules/${name}/`)), `${name} resolved`);
    assert.ok(sinks.cached.some((path) => path.includes(`/node_modules/${name}/`)), `${name} in the cache`);
  }
});

/** The commands of a shell block: continued lines joined, comments left out. */
const commandsOf = (block: string) =>
  block
    .replace(/ \\\n\s*/g, ' ')
    .split('\n')
    .filter((l) => !l.startsWith('#'));

test('the optional packages are peer dependencies, and the install ' +
  'lines the documents show are the ones the error names', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const optional = Object.assign({}, ...Object.values(OPTIONAL_PACKAGES));
  assert.deepEqual(pkg.peerDependencies, optional);
  for (const [name, range] of Object.entries(optional)) {
    assert.deepEqual(pkg.peerDependenciesMeta[name], { optional: true }, name);
    assert.equal(pkg.devDependencies[name], range, `${name}: the tests run with it`);
    assert.equal(pkg.dependencies[name], undefined, `${name} is installed with subtee`);
  }
  const library = commandsOf(codeBlocks(section('docs/library.md', '## Install'), 'sh')[0]);
  assert.deepEqual(library, ['npm install subtee', installLine('otlp'), installLine('clickhouse')]);
  const sinks = codeBlocks(readFileSync(join(ROOT, 'docs', 'otlp-clickhouse.md'), 'utf8'), 'sh')
    .flatMap(commandsOf)
    .filter((c) => c.startsWith('npm install'));
  const globally = (line: string) => line.replace(/^npm install /, 'npm install -g ');
  assert.deepEqual(sinks, [globally(installLine('otlp')), globally(installLine('clickhouse'))]);
});

test("every entry of the package, the shipped plugins' too, type-checks under --strict with its libraries " +
  "checked too, without the optional packages", () => {
  const { dir, prefix } = installedGlobally();
  const project = join(dir, 'types-project');
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  symlinkSync(join(prefix, 'lib', 'node_modules', 'subtee'), join(project, 'node_modules', 'subtee'));
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const shipped = readdirSync(join(ROOT, 'plugins'));
  const entries = Object.keys(pkg.exports)
    .flatMap((e) => (e.includes('*') ? shipped.map((name) => e.replace('*', name)) : [e]))
    .map((e) => posix.join('subtee', e));
  assert.ok(entries.includes('subtee/plugins/redact-secrets') && entries.length >= 9, entries.join(' '));
  writeFileSync(
    join(project, 'entries.ts'),
    entries
      .map((e, i) => `import * as entry${i} from '${e}';\nconsole.log(Object.keys(entry${i}));\n`)
      .join(''),
  );
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        target: 'es2022',
        module: 'nodenext',
        moduleResolution: 'nodenext',
        // TypeScript's default: the package's declarations are checked, and may name no
        // package a user has not installed.
        skipLibCheck: false,
        noEmit: true,
        types: ['node'],
        typeRoots: [join(ROOT, 'node_modules', '@types')],
      },
      files: ['entries.ts'],
    }),
  );
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const check = spawnSync(process.execPath, [tsc, '-p', project], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stdout + check.stderr);
});
