import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { test } from 'node:test';
import { ROOT, tmpDir } from './helpers/helpers.js';
import { codeBlocks, docPages, section } from './helpers/docs.js';
import { satisfies } from '../src/semver.js';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

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

/** Folders of the source repository that a user of the package never runs. */
const DEVELOPMENT_ONLY = ['test/', 'bench/', 'dist/test/', 'dist/bench/', 'dist/examples/'];

/** Whether a path a document names exists in the repository (a file, a folder or a `*` glob). */
function inRepository(ref: string): boolean {
  const path = posix.normalize(ref);
  if (!path.includes('*')) return existsSync(join(ROOT, path));
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

test('the tarball ships a LICENSE and the files the documents name; the tests they name are in the repo', () => {
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

test('every source map in the tarball points at sources the tarball ships', () => {
  const files = packedFiles();
  const maps = [...files].filter((f) => f.endsWith('.map'));
  assert.ok(
    maps.length > 0 || ![...files].some((f) => f.endsWith('.js')),
    'maps are checked where there are any',
  );
  for (const map of maps) {
    const { sources } = JSON.parse(readFileSync(join(ROOT, map), 'utf8')) as { sources: string[] };
    for (const s of sources) assert.ok(files.has(posix.join(dirname(map), s)), `${map} → ${s}`);
    const js = map.replace(/\.map$/, '');
    assert.ok(files.has(js), `${map} belongs to ${js}`);
  }
});

test('installing the packed tarball runs no install-time script and npm has nothing to warn about', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  for (const s of ['preinstall', 'install', 'postinstall', 'prepare'])
    assert.equal(pkg.scripts?.[s], undefined, `scripts.${s} runs when the package is installed`);
  assert.match(pkg.scripts.prepack, /tsc/, 'the tarball is built when it is packed');
  assert.match(
    pkg.scripts.test,
    /^tsc -p tsconfig\.json && /,
    'npm test builds first, so `npm ci && npm test` works on a clean clone',
  );
  assert.match(readFileSync(join(ROOT, '.ci', 'run'), 'utf8'), /^npm run build$/m, 'CI builds explicitly');
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

test("the repository's npm ci is light: the agent CLIs are test/e2e's, every package it installs runs on the Node engines names", () => {
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
  // Ranges as packages write them (`>= 8`, `*`), in the comparator form the range checker reads.
  const range = (r: string) => (r.trim() === '*' ? '>=0' : r.replace(/([<>=^~]+)\s+/g, '$1'));
  const refused = installed
    .filter(([, e]) => e.engines?.node && !satisfies(least, range(e.engines.node)))
    .map(([path, e]) => `${path} wants node ${e.engines.node}`);
  assert.deepEqual(refused, [], `packages that refuse Node ${least}, the least package.json's engines allows`);
  assert.ok(satisfies(process.versions.node, pkg.engines.node), `this Node is ${process.versions.node}`);
  assert.match(pkg.scripts.test, /&& node test\/e2e\/install\.mjs && /, 'npm test installs the agent CLIs first');
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

test('the packed tarball installs into a fresh global prefix, light, and the subtee it puts on PATH runs', () => {
  const dir = tmpDir();
  const prefix = join(dir, 'prefix');
  const install = spawnSync(
    npm,
    ['install', '-g', '--prefix', prefix, packTarball(dir), '--prefer-offline', '--no-audit', '--no-fund'],
    { encoding: 'utf8', timeout: 180_000 },
  );
  assert.equal(install.status, 0, install.stderr);
  assert.doesNotMatch(install.stderr, /npm warn/i, install.stderr);
  const mb = folderBytes(prefix) / 2 ** 20;
  assert.ok(mb < 60, `the install takes ${mb.toFixed(1)} MB`);
  const out = join(dir, 'out');
  const input = join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl');
  const r = spawnSync('subtee', ['--out', out, '-q', '--stdout', 'none', input], {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${join(prefix, 'bin')}:${process.env.PATH}` },
  });
  assert.equal(r.status, 0, r.stderr);
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
