import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { AppendFiles } from '../src/chain/sinks/append-files.js';
import { createFilesSink, prepareOutDir } from '../src/chain/sinks/files.js';
import { descriptorBudget, makeDirs, replaceFile } from '../src/safe-open.js';
import { Session } from '../src/model/session.js';
import { BIN, ROOT, checkOutput, fanoutInput, tmpDir } from './helpers/helpers.js';

const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));

function subtee(args: string[], input: Buffer | string = recording, shell?: string) {
  const argv = [BIN, ...args];
  if (shell)
    return spawnSync(
      'bash',
      ['-c', `${shell} && exec "${process.execPath}" ${argv.map((a) => `"${a}"`).join(' ')}`],
      { input, encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' },
    );
  return spawnSync(process.execPath, argv, {
    input,
    encoding: 'utf8',
    timeout: 60_000,
    killSignal: 'SIGKILL',
  });
}

/** A folder outside --out with one precious file, and what it held before the run. */
function victim() {
  const dir = tmpDir('subtee-victim-');
  writeFileSync(join(dir, 'precious'), 'precious\n');
  return { dir, file: join(dir, 'precious'), before: () => readdirSync(dir).sort() };
}

test('--force never writes through links planted in --out: each ' +
  'planted entry is replaced, the targets are untouched', () => {
  const v = victim();
  const out = tmpDir();
  symlinkSync(v.file, join(out, 'main.jsonl'));
  // A hard link: truncating it in place would empty the precious file.
  linkSync(v.file, join(out, 'main.log'));
  symlinkSync(v.dir, join(out, 'agents'));
  symlinkSync(join(v.dir, 'created-by-index'), join(out, 'index.json.tmp'));
  symlinkSync(join(v.dir, 'created-by-quarantine'), join(out, 'quarantine.log'));
  const input = Buffer.concat([recording, Buffer.from('noise\n')]);
  const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none'], input);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(readFileSync(v.file, 'utf8'), 'precious\n');
  assert.deepEqual(readdirSync(v.dir), ['precious'], 'nothing created or removed outside --out');
  for (const name of ['main.jsonl', 'main.log', 'quarantine.log', 'index.json'])
    assert.ok(lstatSync(join(out, name)).isFile(), name);
  assert.ok(lstatSync(join(out, 'agents')).isDirectory());
  checkOutput(input, out, 'planted links');
});

test('a --force run leaves only its own transcripts: files an earlier run wrote are removed, ' +
  'links among them unfollowed, other files and the ClickHouse spool kept', () => {
  const v = victim();
  const out = tmpDir();
  assert.equal(subtee(['--out', out, '-q', '--stdout', 'none', '--html'], recording).status, 0);
  assert.ok(readdirSync(join(out, 'agents')).length > 0, 'the earlier run wrote subagents');
  symlinkSync(v.file, join(out, 'agents', 'planted.log'));
  writeFileSync(join(out, 'notes.txt'), 'mine\n');
  writeFileSync(join(out, 'clickhouse-spool.jsonl'), '{"row":1}\n');
  const mainOnly = recording
    .toString('utf8')
    .split('\n')
    .filter((line) => /"parent_tool_use_id":null/.test(line))
    .join('\n') + '\n';
  const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none'], mainOnly);
  assert.equal(r.status, 0, r.stderr);
  const { index } = checkOutput(Buffer.from(mainOnly), out, 'forced rerun');
  const listed = index.channels
    .flatMap((c: { log: string; jsonl: string }) => [c.log, c.jsonl])
    .filter((path: string) => path.startsWith('agents/'));
  const written = readdirSync(join(out, 'agents')).map((name) => `agents/${name}`);
  assert.deepEqual(written.sort(), listed.sort());
  assert.deepEqual(
    readdirSync(out).sort(),
    ['agents', 'clickhouse-spool.jsonl', 'index.json', 'main.jsonl', 'main.log', 'notes.txt'],
    'no report.html of the earlier run',
  );
  assert.equal(readFileSync(v.file, 'utf8'), 'precious\n');
});

test('a FIFO planted as main.log does not block a --force run', () => {
  const out = tmpDir();
  execFileSync('mkfifo', [join(out, 'main.log'), join(out, 'main.jsonl')]);
  const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none']);
  assert.equal(r.status, 0, r.stderr || String(r.error));
  assert.ok(lstatSync(join(out, 'main.log')).isFile());
  checkOutput(recording, out, 'planted fifo');
});

test('the pino log: a planted link is refused, a FIFO with no reader fails at once; exit 3, one line', () => {
  const v = victim();
  const linked = tmpDir();
  symlinkSync(v.file, join(linked, 'events.pino.log'));
  const r1 = subtee(['--out', linked, '--force', '-q', '--stdout', 'none', '--pino']);
  assert.equal(r1.status, 3, r1.stderr);
  assert.match(
    r1.stderr,
    /events\.pino\.log: it is a symbolic link, and subtee does not write through links \[ERR_WRITE\]\n$/,
  );
  assert.equal(readFileSync(v.file, 'utf8'), 'precious\n');
  const piped = tmpDir();
  execFileSync('mkfifo', [join(piped, 'events.pino.log')]);
  const r2 = subtee(['--out', piped, '--force', '-q', '--stdout', 'none', '--pino']);
  assert.equal(r2.status, 3, r2.stderr || String(r2.error));
  assert.match(r2.stderr, /events\.pino\.log: it is a named pipe with no reader \[ERR_WRITE\]\n$/);
  assert.equal(r2.stderr.trim().split('\n').length, 1);
});

test('a file keeps no queue once written: bytes written ' +
  'are no longer held, and later writes queue afresh', () => {
  const out = tmpDir();
  const files = new AppendFiles(out, 4);
  const a = files.file('a', '.log');
  const line = Buffer.from('a line of the input\n');
  files.write(a, line);
  files.writeCopied(a, Buffer.from('junk'), true);
  files.write(a, 'text\n');
  assert.equal(a.pendingBytes, line.length + 5 + 5);
  files.flush();
  // Nothing of what was written stays reachable from the file (a kept list would hold the
  // input chunks its lines are views of).
  assert.equal(a.pending, null);
  assert.equal(a.pendingBytes, 0);
  assert.equal(files.pendingBytes, 0);
  files.flush(); // nothing queued: nothing written, nothing fails
  files.writeCopied(a, Buffer.from('more'), true);
  files.write(a, 'end\n');
  files.flush();
  assert.equal(a.pending, null);
  files.closeAll();
  assert.equal(readFileSync(join(out, 'a.log'), 'utf8'), 'a line of the input\njunk\ntext\nmore\nend\n');
});

test('short lines copied for two files in turn land in each file whole and in order', () => {
  const out = tmpDir();
  const files = new AppendFiles(out, 4);
  const a = files.file('a', '.log');
  const b = files.file('b', '.log');
  files.writeCopied(a, Buffer.from('a1'), true);
  files.writeCopied(b, Buffer.from('b1'), true);
  files.write(a, 'a2\n');
  files.writeCopied(a, Buffer.from('a3'), true);
  files.writeCopied(b, Buffer.from('b2'), false);
  files.flush();
  files.writeCopied(a, Buffer.from('a4'), true);
  files.flush();
  files.closeAll();
  assert.equal(readFileSync(join(out, 'a.log'), 'utf8'), 'a1\na2\na3\na4\n');
  assert.equal(readFileSync(join(out, 'b.log'), 'utf8'), 'b1\nb2');
});

test('a file replaced by a link during the run is not reopened: the write fails naming it', () => {
  const v = victim();
  const out = tmpDir();
  const files = new AppendFiles(out, 1);
  const a = files.file('a', '.log');
  const b = files.file('b', '.log');
  files.write(a, 'one\n');
  files.write(b, 'two\n');
  files.flush(); // one descriptor: a is closed again when b is opened
  execFileSync('mv', [join(out, 'a.log'), join(out, 'a.old')]);
  symlinkSync(v.file, join(out, 'a.log'));
  files.write(a, 'three\n');
  assert.throws(() => files.flush(), { code: 'ERR_WRITE', message: /a\.log: it is a symbolic link/ });
  execFileSync('rm', [join(out, 'a.log')]);
  linkSync(v.file, join(out, 'a.log'));
  files.write(a, 'three\n');
  assert.throws(() => files.flush(), {
    code: 'ERR_WRITE',
    message: /a\.log: it was replaced by something else during the run/,
  });
  assert.equal(readFileSync(v.file, 'utf8'), 'precious\n');
  assert.throws(() => files.closeAll(), { code: 'ERR_WRITE', message: /a\.log: it was replaced/ });
});

test(
  '--out or --pino under a path that cannot be created fails at once with exit 3',
  { skip: !existsSync('/proc/self') && 'no /proc here' },
  () => {
    for (const args of [
      ['--out', '/proc/self/no/such/o'],
      ['--out', join(tmpDir(), 'o'), '--pino=/proc/self/no/such/p.log'],
    ]) {
      const r = subtee([...args, '-q', '--stdout', 'none']);
      assert.equal(r.status, 3, `${args.join(' ')}: ${r.stderr || String(r.error)}`);
      assert.match(r.stderr, /cannot write \/proc\/self\/no.*\[ERR_WRITE\]\n$/);
    }
    assert.throws(() => makeDirs('/proc/self/no/such'), { code: 'ENOENT' });
  },
);

test('an empty out is refused; a file where agents/ goes is replaced only with --force', () => {
  assert.throws(() => prepareOutDir('', false), { code: 'ERR_OUT_NOT_DIR' });
  const out = tmpDir();
  writeFileSync(join(out, 'agents'), 'not a folder');
  assert.throws(() => createFilesSink({ out, session: new Session() }), { code: 'ERR_OUT_NOT_EMPTY' });
  createFilesSink({ out, force: true, session: new Session() }).destroy();
  assert.ok(lstatSync(join(out, 'agents')).isDirectory());
});

test('the default open-file budget comes from the real descriptor limit', () => {
  const limits = (soft: string) => {
    const p = join(tmpDir(), 'limits');
    writeFileSync(
      p,
      `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft}                 4096                 files\n`,
    );
    return p;
  };
  assert.equal(descriptorBudget(128, limits('1024')), 128);
  assert.equal(descriptorBudget(128, limits('64')), 32);
  assert.equal(descriptorBudget(128, limits('20')), 4);
  assert.equal(descriptorBudget(128, limits('unlimited')), 128);
  assert.equal(descriptorBudget(128, join(tmpDir(), 'missing')), 128);
  if (existsSync('/proc/self/limits')) {
    const help = subtee(['--help'], '', 'ulimit -n 64');
    assert.match(
      help.stdout.replace(/\n\s+/g, ' '),
      /--max-open-files N .*\(default: 32\)/,
      'the CLI shows and uses the derived default',
    );
  }
});

test(
  'a low ulimit -n never gives EMFILE: with the default budget, and with one set too high',
  { skip: !existsSync('/proc/self/limits') && 'no /proc/self/limits' },
  () => {
    const input = fanoutInput(300, 600);
    // 64: low enough that 300 channels' files cannot all be open, high enough for Node itself to
    // load subtee's modules (its module loader opens them concurrently; 48 no longer does).
    for (const extra of [[], ['--max-open-files', '500']]) {
      const out = join(tmpDir(), 'o');
      const r = subtee(['--out', out, '--stdout', 'none', '-q', ...extra], input, 'ulimit -n 64');
      assert.equal(r.status, 0, `${extra.join(' ')}: ${r.stderr}`);
      checkOutput(input, out, `ulimit 64 ${extra.join(' ')}`);
    }
  },
);

test('a page that cannot replace its file leaves no temporary file; one that can replaces it whole', () => {
  const dir = tmpDir();
  const page = join(dir, 'report.html');
  writeFileSync(page, 'old');
  replaceFile(page, 'new');
  assert.equal(readFileSync(page, 'utf8'), 'new');
  // A folder in the page's place: the rename fails after the temporary file was written.
  const blocked = join(dir, 'index.html');
  mkdirSync(join(blocked, 'inside'), { recursive: true });
  assert.throws(() => replaceFile(blocked, 'page'));
  assert.deepEqual(readdirSync(dir).sort(), ['index.html', 'report.html']);
});

test('lines queued by writeLine and text by writeText ' +
  'are written byte for byte as write() writes them', () => {
  const fixtures = readdirSync(join(ROOT, 'test', 'fixtures')).filter((n) => n.endsWith('.jsonl'));
  assert.ok(fixtures.length >= 5);
  for (const name of fixtures) {
    const input = readFileSync(join(ROOT, 'test', 'fixtures', name));
    // Lines as the parser hands them on: views of the input, one newline between them; every
    // fifth a copy (not next to the line before it), and two views whose gap is not a newline.
    const lines: Buffer[] = [];
    for (let start = 0, k = 0; start < input.length; k++) {
      const nl = input.indexOf(0x0a, start);
      const end = nl === -1 ? input.length : nl;
      const view = input.subarray(start, end);
      lines.push(k % 5 === 4 ? Buffer.from(view) : view);
      start = end + 1;
    }
    const gap = Buffer.from('{"a":1};{"b":2}');
    lines.push(gap.subarray(0, 7), gap.subarray(8), Buffer.alloc(0));
    const texts = [
      'plain\n',
      'Ωmega ☃ \ud83d\ude00\n',
      'lone \ud800 surrogate\n',
      'x'.repeat(20_000) + '\n',
    ];
    const written = (fast: boolean) => {
      const out = tmpDir();
      const files = new AppendFiles(out, 4);
      const jsonl = files.file('a', '.jsonl');
      const log = files.file('a', '.log');
      const other = files.file('b', '.jsonl');
      lines.forEach((line, k) => {
        const f = k % 7 === 3 ? other : jsonl;
        if (fast) files.writeLine(f, line);
        else {
          files.write(f, line);
          files.write(f, Buffer.from('\n'));
        }
        const text = `${k}: ${texts[k % texts.length]}`;
        if (fast) files.writeText(k % 3 === 0 ? jsonl : log, text);
        else files.write(k % 3 === 0 ? jsonl : log, text);
        if (k % 11 === 10) files.writeCopied(jsonl, Buffer.from(`junk ${k}`), true);
        if (k % 17 === 16) files.flush();
      });
      files.flush();
      // Nothing of the input is held once written.
      assert.equal(jsonl.pending, null);
      assert.equal(files.pendingBytes, 0);
      files.closeAll();
      return ['a.jsonl', 'a.log', 'b.jsonl'].map((f) => readFileSync(join(out, f)));
    };
    const [slow, fast] = [written(false), written(true)];
    for (let k = 0; k < slow.length; k++) assert.ok(slow[k].equals(fast[k]), `${name}, file ${k}`);
  }
});
