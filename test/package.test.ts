import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { test } from 'node:test';
import { ROOT, tmpDir } from './helpers.js';
import { docPages } from './helpers/docs.js';

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
  if (ref.endsWith('/')) return [...files].some((f) => f.startsWith(path.endsWith('/') ? path : `${path}/`));
  return files.has(path);
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
