import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { test } from 'node:test';
import { ROOT, tmpDir } from './helpers.js';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** The files `npm pack` puts in the tarball (scripts off: dist/ is built by `npm test`). */
function packedFiles(): Set<string> {
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return new Set((JSON.parse(out)[0].files as Array<{ path: string }>).map((f) => f.path));
}

/** Whether a path named in a document (a file, a folder ending in `/`, or a `*` glob) is in the tarball. */
function shipped(files: Set<string>, ref: string): boolean {
  const path = posix.normalize(ref);
  if (path.includes('*')) {
    const re = new RegExp(`^${path.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')}$`);
    return [...files].some((f) => re.test(f));
  }
  if (ref.endsWith('/')) return [...files].some((f) => f.startsWith(path.endsWith('/') ? path : `${path}/`));
  return files.has(path);
}

test('the tarball ships a LICENSE, and every file its README and ARCHITECTURE.md name', () => {
  const files = packedFiles();
  assert.ok(files.has('LICENSE'), 'LICENSE');
  assert.match(readFileSync(join(ROOT, 'LICENSE'), 'utf8'), /^MIT License\n\nCopyright \(c\) \d{4} subtee contributors\n/);
  assert.equal(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).license, 'MIT');
  for (const doc of ['README.md', 'ARCHITECTURE.md']) {
    assert.ok(files.has(doc), doc);
    const text = readFileSync(join(ROOT, doc), 'utf8');
    const links = [...text.matchAll(/\]\(([^)#\s]+)\)/g)].map((m) => m[1]).filter((l) => !/^[a-z]+:/.test(l));
    const paths = [...text.matchAll(/(?<![\w./-])((?:src|test|bench|examples|schema|plugins|bin|dist)\/[A-Za-z0-9_.*/-]*|[A-Z][A-Z_]*\.md)/g)].map((m) => m[1]);
    const refs = new Set([...links, ...paths].map((r) => r.replace(/[.,;:]+$/, '')));
    assert.ok(refs.size > 10, `${doc}: found ${refs.size} references`);
    const missing = [...refs].filter((r) => !shipped(files, r));
    assert.deepEqual(missing, [], `${doc} names files the tarball does not ship`);
  }
});

test('every source map in the tarball points at sources the tarball ships', () => {
  const files = packedFiles();
  const maps = [...files].filter((f) => f.endsWith('.map'));
  assert.ok(maps.length > 0 || ![...files].some((f) => f.endsWith('.js')), 'maps are checked where there are any');
  for (const map of maps) {
    const { sources } = JSON.parse(readFileSync(join(ROOT, map), 'utf8')) as { sources: string[] };
    for (const s of sources) assert.ok(files.has(posix.join(dirname(map), s)), `${map} → ${s}`);
    const js = map.replace(/\.map$/, '');
    assert.ok(files.has(js), `${map} belongs to ${js}`);
  }
});

test('installing the packed tarball runs no install-time script and npm has nothing to warn about', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  for (const s of ['preinstall', 'install', 'postinstall', 'prepare']) assert.equal(pkg.scripts?.[s], undefined, `scripts.${s} runs when the package is installed`);
  assert.match(pkg.scripts.prepack, /tsc/, 'the tarball is built when it is packed');
  assert.match(pkg.scripts.test, /^tsc -p tsconfig\.json && /, 'npm test builds first, so `npm ci && npm test` works on a clean clone');
  assert.match(readFileSync(join(ROOT, '.ci', 'run'), 'utf8'), /^npm run build$/m, 'CI builds explicitly');
  // A real install into a fresh project, from the packed tarball.
  const dir = tmpDir();
  const tarball = execFileSync(npm, ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\n').pop()!;
  const project = join(dir, 'project');
  execFileSync('mkdir', [project]);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'host', version: '1.0.0', private: true, type: 'module' }));
  const install = spawnSync(npm, ['install', join(dir, tarball), '--prefer-offline', '--no-audit', '--no-fund'], { cwd: project, encoding: 'utf8', timeout: 120_000 });
  assert.equal(install.status, 0, install.stderr);
  assert.doesNotMatch(install.stderr, /npm warn/i, install.stderr);
  const v = spawnSync(join(project, 'node_modules', '.bin', 'subtee'), ['--version'], { encoding: 'utf8' });
  assert.equal(v.stdout.trim(), `subtee ${pkg.version}`, v.stderr);
});
