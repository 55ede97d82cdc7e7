import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { FIXTURES, ROOT, tmpDir } from './helpers/helpers.js';
import { allDocs } from './helpers/docs.js';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** The TypeScript and JavaScript code blocks of the README and the docs/ pages, in order. */
function readmeSnippets(): Array<{ lang: 'ts' | 'js'; code: string }> {
  const readme = allDocs();
  return [...readme.matchAll(/^```(ts|js)\n([\s\S]*?)^```$/gm)].map((m) => ({
    lang: m[1] as 'ts' | 'js',
    code: m[2],
  }));
}

/** The packages a snippet imports, other than subtee and Node's own modules (`@scope/name` or `name`). */
function otherPackages(code: string): string[] {
  const specifiers = [...code.matchAll(/from '([^'.][^']*)'/g)].map((m) => m[1]);
  const roots = specifiers
    .filter((s) => !s.startsWith('node:') && s !== 'subtee' && !s.startsWith('subtee/'))
    .map((s) =>
      s
        .split('/')
        .slice(0, s.startsWith('@') ? 2 : 1)
        .join('/'),
    );
  return [...new Set(roots)];
}

/**
 * A fresh project with the packed tarball installed, as a user gets it. The other packages a
 * snippet imports (the Agent SDK, Deep Agents) are linked from this repository's node_modules;
 * subtee itself comes only from the tarball.
 */
function installTarball(): string {
  const dir = tmpDir();
  const packed = execFileSync(npm, ['pack', '--ignore-scripts', '--pack-destination', dir], {
    cwd: ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const tarball = join(dir, packed.trim().split('\n').pop()!);
  const project = join(dir, 'project');
  mkdirSync(project);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'host', version: '1.0.0', private: true, type: 'module' }),
  );
  const install = spawnSync(npm, ['install', tarball, '--prefer-offline', '--no-audit', '--no-fund'], {
    cwd: project,
    encoding: 'utf8',
    timeout: 180_000,
  });
  assert.equal(install.status, 0, install.stderr);
  return project;
}

test(
  'every documented code snippet type-checks under --strict against the installed tarball, and runs',
  { timeout: 300_000 },
  () => {
    const snippets = readmeSnippets();
    assert.ok(snippets.length >= 5, `${snippets.length} snippets`);
    const project = installTarball();
    const names = snippets.map((snippet, i) => `snippet-${i + 1}.${snippet.lang === 'ts' ? 'ts' : 'mjs'}`);
    snippets.forEach((snippet, i) => writeFileSync(join(project, names[i]), snippet.code));
    const repoModules = join(ROOT, 'node_modules');
    for (const name of otherPackages(snippets.map((snippet) => snippet.code).join('\n'))) {
      const link = join(project, 'node_modules', name);
      if (existsSync(link)) continue;
      mkdirSync(join(link, '..'), { recursive: true });
      symlinkSync(join(repoModules, name), link);
    }
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          allowJs: true,
          checkJs: true,
          skipLibCheck: true,
          outDir: 'out',
          types: ['node'],
          typeRoots: [join(repoModules, '@types')],
        },
        files: names,
      }),
    );
    const check = spawnSync(process.execPath, [TSC, '-p', project, '--pretty', 'false'], {
      encoding: 'utf8',
    });
    assert.equal(check.status, 0, check.stdout + check.stderr);
    const subteeFromTarball = readFileSync(join(project, 'node_modules', 'subtee', 'package.json'), 'utf8');
    assert.match(subteeFromTarball, /"name": "subtee"/);
    // The projection snippet, compiled from docs/library.md, runs from the installed package.
    const projection = names.findIndex((_, i) => snippets[i].code.includes('node projection.js'));
    assert.ok(projection >= 0, 'docs/library.md shows the projection program');
    const run = spawnSync(
      process.execPath,
      [
        join(project, 'out', names[projection].replace(/\.ts$/, '.js')),
        join(FIXTURES, 'nested-depth-3.jsonl'),
      ],
      { cwd: project, encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /Worker leaf report: done\./);
    assert.match(run.stdout, /▶ general-purpose/);
    // The front page's open() program, run the same way: one line per subagent, then the count.
    const front = names.findIndex((_, i) => snippets[i].code.includes('run.allSubagents'));
    assert.ok(front >= 0, 'the README shows open() in a few lines');
    const runFront = (fixture: string) =>
      spawnSync(
        process.execPath,
        [join(project, 'out', names[front].replace(/\.ts$/, '.js')), join(FIXTURES, fixture)],
        { cwd: project, encoding: 'utf8', timeout: 60_000 },
      );
    const short = runFront('nested-depth-3.jsonl');
    assert.equal(short.status, 0, short.stderr);
    const lines = short.stdout.trim().split('\n');
    assert.deepEqual(lines.slice(0, -1).sort(), [
      'general-purpose "level 0": completed, 6 lines',
      'general-purpose "level 1": completed, 5 lines',
      'general-purpose "level 2": completed, 5 lines',
    ]);
    assert.equal(lines.at(-1), '3 subagents, $0.00292');
    // A failed subagent is one more line, not a crash.
    const failing = runFront('failing-beside-healthy.jsonl');
    assert.equal(failing.status, 0, failing.stderr);
    assert.match(failing.stdout, /: failed, \d+ lines\n/);
  },
);
