import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { AppendFiles } from '../src/chain/sinks/append-files.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';

/** A folder outside the output folder, with one precious file, and what it holds. */
function victim() {
  const dir = tmpDir('subtee-victim-');
  writeFileSync(join(dir, 'b.jsonl'), 'precious\n');
  const held = () => readdirSync(dir).map((name) => `${name}: ${readFileSync(join(dir, name), 'utf8')}`);
  return { dir, file: join(dir, 'b.jsonl'), before: held(), held };
}

/** An output folder with its `agents/`, and files over it as the files sink makes them. */
function outFolder(maxOpenFiles: number, overwrite = false) {
  const out = tmpDir();
  mkdirSync(join(out, 'agents'));
  return { out, files: new AppendFiles(out, maxOpenFiles, overwrite, ['agents']) };
}

/** `agents/` moved aside and a link to `target` put under its name. */
function swapAgents(out: string, target: string): void {
  renameSync(join(out, 'agents'), join(out, 'agents.old'));
  symlinkSync(target, join(out, 'agents'));
}

test('agents/ replaced by a link during the run: a new file fails naming it, nothing lands there', () => {
  const v = victim();
  const { out, files } = outFolder(4);
  const a = files.file('agents/a', '.jsonl');
  files.write(a, 'one\n');
  files.flush();
  swapAgents(out, v.dir);
  files.write(files.file('agents/c', '.jsonl'), 'two\n');
  assert.throws(() => files.flush(), {
    code: 'ERR_WRITE',
    message: /agents: it is a symbolic link, and subtee does not write through links$/,
  });
  assert.deepEqual(v.held(), v.before);
  assert.throws(() => files.closeAll(), { code: 'ERR_WRITE', message: /agents: it is a symbolic link/ });
});

test('agents/ replaced by a link, with overwrite: a file of its name in the target is not removed', () => {
  const v = victim();
  const { out, files } = outFolder(4, true);
  files.write(files.file('agents/a', '.jsonl'), 'one\n');
  files.flush();
  swapAgents(out, v.dir);
  files.write(files.file('agents/b', '.jsonl'), 'two\n');
  assert.throws(() => files.flush(), { code: 'ERR_WRITE', message: /agents: it is a symbolic link/ });
  assert.deepEqual(v.held(), v.before);
});

test('agents/ replaced by another folder: the next open fails naming it, the file there untouched', () => {
  const { out, files } = outFolder(1);
  const a = files.file('agents/a', '.jsonl');
  files.write(a, 'one\n');
  files.write(files.file('agents/b', '.jsonl'), 'two\n');
  files.flush(); // one descriptor: a is closed when b is opened
  const elsewhere = tmpDir();
  writeFileSync(join(elsewhere, 'a.jsonl'), 'not ours\n');
  swapAgents(out, elsewhere);
  unlinkSync(join(out, 'agents'));
  renameSync(elsewhere, join(out, 'agents'));
  files.write(a, 'three\n');
  assert.throws(() => files.flush(), {
    code: 'ERR_WRITE',
    message: /agents: it was replaced by something else during the run$/,
  });
  assert.equal(readFileSync(join(out, 'agents', 'a.jsonl'), 'utf8'), 'not ours\n');
  assert.throws(() => files.closeAll(), { code: 'ERR_WRITE', message: /agents: it was replaced/ });
});

test('a file replaced by a link while open: closeAll fails naming it, the target untouched', () => {
  const v = victim();
  const { out, files } = outFolder(4);
  const b = files.file('agents/b', '.jsonl');
  files.write(b, 'one\n');
  files.flush();
  unlinkSync(join(out, 'agents', 'b.jsonl'));
  symlinkSync(v.file, join(out, 'agents', 'b.jsonl'));
  files.write(b, 'two\n');
  files.flush(); // to the open descriptor, whose file no name leads to now: no error on write
  assert.throws(() => files.closeAll(), {
    code: 'ERR_WRITE',
    message: /agents\/b\.jsonl: it was replaced by something else during the run$/,
  });
  assert.deepEqual(v.held(), v.before);
});

test('a file closed by the LRU and replaced afterwards, never written again, is found at the end', () => {
  const { out, files } = outFolder(1);
  files.write(files.file('agents/a', '.jsonl'), 'one\n');
  files.write(files.file('agents/c', '.jsonl'), 'two\n');
  files.flush();
  // Moved aside, not removed: a new file could be given the inode number freed.
  renameSync(join(out, 'agents', 'a.jsonl'), join(out, 'agents', 'a.old'));
  writeFileSync(join(out, 'agents', 'a.jsonl'), 'planted\n');
  assert.throws(() => files.closeAll(), { code: 'ERR_WRITE', message: /agents\/a\.jsonl: it was replaced/ });
});

test('a file removed while open is found at the end, named as removed', () => {
  const { out, files } = outFolder(4);
  files.write(files.file('agents/a', '.jsonl'), 'one\n');
  files.flush();
  unlinkSync(join(out, 'agents', 'a.jsonl'));
  assert.throws(() => files.closeAll(), {
    code: 'ERR_WRITE',
    message: /agents\/a\.jsonl: it was removed during the run$/,
  });
});

test('files untouched during the run close without an error', () => {
  const { out, files } = outFolder(1);
  const [main, a, b] = ['main', 'agents/a', 'agents/b'].map((name) => files.file(name, '.jsonl'));
  for (const f of [main, a, b, a, main]) {
    files.write(f, 'line\n');
    files.flush();
  }
  files.closeAll();
  assert.equal(readFileSync(join(out, 'agents', 'a.jsonl'), 'utf8'), 'line\nline\n');
});

const recording = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8').split('\n').filter(Boolean);
/** The first subagent's channel: its first line is the recording's fifth. */
const FIRST = join('agents', 'toolu_01002xri0fox8bsameTail.jsonl');

/** Resolves once `ready()` holds, looking again every few milliseconds. */
async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((done) => setTimeout(done, 5));
}

/**
 * Runs the CLI on the recording: its first `lines` lines, then `swap` once the last of them is
 * on disk (in the first subagent's file and its `.log` after it, or with fewer than five in
 * main.jsonl), then the rest. The exit code, stderr and index.json.
 */
async function swappedRun(out: string, swap: () => void, lines = 5) {
  const child = spawn(process.execPath, [BIN, '-q', '--stdout', 'none', '--out', out], {
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const closed = new Promise<number | null>((done) => child.on('close', done));
  child.stdin.write(recording.slice(0, lines).join('\n') + '\n');
  const seen = lines < 5 ? join(out, 'main.jsonl') : join(out, FIRST);
  const last = recording[lines - 1] + '\n';
  // The `.log` is opened after the `.jsonl`, in the same write: the swap waits for it, as a swap
  // made while it is opened is caught only once the file is made (see AppendFiles).
  const log = seen.replace(/\.jsonl$/, '.log');
  await until(() => existsSync(seen) && readFileSync(seen, 'utf8').endsWith(last) && existsSync(log));
  swap();
  child.stdin.end(recording.slice(lines).join('\n') + '\n');
  const code = await closed;
  return { code, stderr, index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) };
}

test('CLI: agents/ replaced by a link mid-run: exit 3, later subagents not written there', async () => {
  const v = victim();
  const out = join(tmpDir(), 'o');
  const r = await swappedRun(out, () => swapAgents(out, v.dir));
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /\/agents: it is a symbolic link.* lines not written \[ERR_WRITE\]\n$/);
  assert.deepEqual(v.held(), v.before);
  const failed = r.index.warnings.filter((w: { code: string }) => w.code === 'OUTPUT_FAILED');
  assert.equal(failed.length, 1);
  // The first subagent's line is in agents.old, not where index.json says: not written.
  assert.ok(r.index.input.unwritten >= 1, JSON.stringify(r.index.input));
});

test('CLI: agents/ replaced before any subagent (a link, a folder): exit 3, nothing made there', async () => {
  for (const kind of ['link', 'folder']) {
    const v = victim();
    const out = join(tmpDir(), 'o');
    const r = await swappedRun(
      out,
      () => {
        if (kind === 'link') return swapAgents(out, v.dir);
        renameSync(join(out, 'agents'), join(out, 'agents.old'));
        mkdirSync(join(out, 'agents'));
      },
      2,
    );
    assert.equal(r.code, 3, `${kind}: ${r.stderr}`);
    const why = kind === 'link' ? 'it is a symbolic link' : 'it was replaced by something else';
    assert.match(r.stderr, new RegExp(`cannot write \\S+/agents: ${why}`));
    assert.deepEqual(v.held(), v.before);
    assert.equal(r.index.warnings.filter((w: { code: string }) => w.code === 'OUTPUT_FAILED').length, 1);
  }
});

test('CLI: a channel file replaced by a link while open: exit 3, its lines counted unwritten', async () => {
  const v = victim();
  const out = join(tmpDir(), 'o');
  const r = await swappedRun(out, () => {
    unlinkSync(join(out, FIRST));
    symlinkSync(v.file, join(out, FIRST));
  });
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /sameTail\.jsonl: it was replaced by something else during the run/);
  assert.deepEqual(v.held(), v.before);
  assert.equal(r.index.warnings.filter((w: { code: string }) => w.code === 'OUTPUT_FAILED').length, 1);
  const channel = r.index.channels.find((c: { id: string }) => c.id === 'toolu_01002xri0fox8bsameTail');
  assert.equal(r.index.input.unwritten, channel.lines, JSON.stringify(r.index.input));
});
