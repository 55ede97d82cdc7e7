import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, FIXTURES, ROOT, tmpDir } from './helpers/helpers.js';
import { readDoc } from './helpers/docs.js';

/** The `sh` block that follows a heading of a page, one command a line (comments dropped). */
function commandsUnder(page: string, heading: string): string[] {
  const readme = readDoc(page);
  const at = readme.indexOf(heading);
  assert.ok(at >= 0, heading);
  const block = /```sh\n([\s\S]*?)\n```/.exec(readme.slice(at));
  assert.ok(block, `a sh block under ${heading}`);
  return block[1]
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter(Boolean);
}

/** A folder `logs/` holding two runs, and a PATH where `subtee` is this build. */
function workspace(): { cwd: string; env: NodeJS.ProcessEnv } {
  const cwd = tmpDir();
  const inputs = ['nested-depth-3', 'failing-beside-healthy'].map((f) => join(FIXTURES, `${f}.jsonl`));
  const r = spawnSync(
    process.execPath,
    [BIN, '--out', join(cwd, 'logs'), '--stdout', 'none', '-q', ...inputs],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  const bin = join(cwd, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'subtee'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
  chmodSync(join(bin, 'subtee'), 0o755);
  return { cwd, env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } };
}

function run(command: string, w: { cwd: string; env: NodeJS.ProcessEnv }) {
  const r = spawnSync('sh', ['-c', command], { cwd: w.cwd, env: w.env, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `${command}\n${r.stderr}`);
  return r.stdout;
}

test("the Stats page's subtee stats commands run as shown", () => {
  const w = workspace();
  const commands = commandsUnder('docs/stats.md', '# Stats over many runs');
  assert.equal(commands.length, 4);
  const outputs = commands.map((c) => run(c, w));
  assert.match(outputs[0], /^2 runs from run folders\n\nagent /);
  assert.match(outputs[1], /^2 runs from run folders since 2026-11-01\n\nday +runs/);
  const json = JSON.parse(readFileSync(join(w.cwd, 'stats.json'), 'utf8'));
  assert.equal(json.runs, 2);
  assert.equal(json.failed_total, 1);
  assert.match(outputs[3], /^by,key,runs,/);
});

test("the Report page's index page command runs as shown", () => {
  const w = workspace();
  const [command] = commandsUnder('docs/report.md', '## Many runs: the index page');
  run(command, w);
  const page = readFileSync(join(w.cwd, 'logs', 'index.html'), 'utf8');
  assert.ok(page.includes('href="nested-depth-3/report.html"'));
  assert.ok(existsSync(join(w.cwd, 'logs', 'failing-beside-healthy', 'report.html')));
});
