import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { test } from 'node:test';
import { BIN, FIXTURES, ROOT, tmpDir } from './helpers/helpers.js';
import { anchorsOf, codeBlocks, docPages, linksOf, readDoc, section } from './helpers/docs.js';

test('the README is a front page: at most 300 lines, every reference page linked from it', () => {
  const readme = readDoc('README.md');
  const lines = readme.split('\n').length;
  assert.ok(lines <= 300, `README.md has ${lines} lines`);
  const linked = new Set(linksOf(readme).map((l) => l.split('#')[0]));
  const unlinked = docPages().filter((p) => p !== 'README.md' && !linked.has(p));
  assert.deepEqual(unlinked, [], 'reference pages the README does not link');
});

test("the README's first commands are what a fresh clone runs: set up and run on a recording, then the " +
  "tests", () => {
  const [first] = codeBlocks(readDoc('README.md'), 'sh');
  const commands = first.split('\n');
  assert.equal(commands.length, 2, first);
  assert.match(commands[0], /^npm ci && .*\bsubtee --out (\S+) (test\/fixtures\/\S+\.jsonl)$/);
  assert.ok(existsSync(join(ROOT, commands[0].split(' ').pop()!)), 'the recording it names is bundled');
  assert.equal(commands[1], 'npm test');
});

test("the README's sample output is what subtee prints on the bundled recording", () => {
  const intro = section('README.md', '## The command line');
  const named = /`subtee (--out (\S+) (test\/fixtures\/\S+\.jsonl))`/.exec(intro);
  assert.ok(named, 'the section names the command its output comes from');
  const [shown] = codeBlocks(intro, 'text');
  assert.ok(shown, 'a text block holds the output');
  const cwd = tmpDir();
  const input = join(FIXTURES, named[3].split('/').pop()!);
  const r = spawnSync(process.execPath, [BIN, '--out', named[2], input], { cwd, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(shown, `${r.stdout}${r.stderr}`.replace(/\n$/, ''), 'stdout, then the summary on stderr');
});

/**
 * Documents whose links are checked: the front page, the reference pages, and the others the
 * package ships.
 */
function linkedDocuments(): string[] {
  return [...docPages(), 'ARCHITECTURE.md', 'bench/README.md', ...historyPages()];
}

function historyPages(): string[] {
  return existsSync(join(ROOT, 'bench', 'HISTORY.md')) ? ['bench/HISTORY.md'] : [];
}

test('every link in the documents leads to a file of the repository and a heading that exists', () => {
  const broken: string[] = [];
  let checked = 0;
  for (const doc of linkedDocuments()) {
    for (const link of linksOf(readDoc(doc))) {
      if (/^[a-z]+:/.test(link)) continue; // a web address: not checked offline
      checked++;
      const [path, anchor] = link.split('#');
      const target = path === '' ? doc : posix.normalize(posix.join(dirname(doc), path));
      const file = join(ROOT, target);
      if (target.startsWith('..') || !existsSync(file)) {
        broken.push(`${doc}: ${link} (no ${target})`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!statSync(file).isFile() || !target.endsWith('.md')) broken.push(`${doc}: ${link} (no headings)`);
      else if (!anchorsOf(readDoc(target)).has(anchor))
        broken.push(`${doc}: ${link} (no heading #${anchor})`);
    }
  }
  assert.ok(checked >= 40, `${checked} links checked`);
  assert.deepEqual(broken, []);
});
