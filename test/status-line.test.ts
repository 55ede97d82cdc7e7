import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fitToWidth } from '../src/cli/status-line.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';

const recording = join(FIXTURES, 'nested-depth-3.jsonl');
const noScript = spawnSync('script', ['--version']).status !== 0 && 'script(1) is not installed';

/** A shell word in double quotes (the paths of a test run hold no quote or dollar). */
const q = (s: string) => `"${s}"`;

/**
 * The rows a terminal shows for bytes written to it: CR, LF, erase-line (ESC [2K) and
 * printable characters, no wrapping. Enough for what subtee writes to a terminal.
 */
function screen(bytes: string): string[] {
  const rows: string[][] = [[]];
  let r = 0;
  let c = 0;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes.startsWith('\x1b[2K', i)) {
      rows[r] = [];
      i += 3;
    } else if (bytes[i] === '\r') c = 0;
    else if (bytes[i] === '\n') {
      r++;
      c = 0;
      rows[r] ??= [];
    } else {
      while (rows[r].length < c) rows[r].push(' ');
      rows[r][c++] = bytes[i];
    }
  }
  return rows.map((row) => row.join(''));
}

/** Runs a shell command line on a pseudo-terminal; `onOutput` sees what it has shown so far. */
function onTerminal(line: string, onOutput: (shown: string) => void = () => {}) {
  const child = spawn('script', ['-qec', line, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let shown = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => {
    shown += d;
    onOutput(shown);
  });
  return new Promise<{ code: number | null; shown: string }>((resolve) =>
    child.on('close', (code) => resolve({ code, shown })),
  );
}

test(
  "on one terminal, stdout's text never shares a screen line with the status line",
  { skip: noScript },
  async () => {
    const dir = tmpDir();
    const expected = spawnSync(process.execPath, [BIN, '--out', join(dir, 'piped'), '-q', recording], {
      encoding: 'utf8',
    });
    assert.equal(expected.status, 0, expected.stderr);
    const line = `${q(process.execPath)} ${q(BIN)} --out ${q(join(dir, 'tty'))} ${q(recording)}`;
    const { code, shown } = await onTerminal(line);
    assert.equal(code, 0, shown);
    const rows = screen(shown.replaceAll('\r\n', '\n'));
    const text = expected.stdout.split('\n').slice(0, -1);
    assert.ok(text.length > 3, expected.stdout);
    // Stdout's text, row for row, then the summary: no row holds status text.
    assert.deepEqual(rows.slice(0, text.length), text);
    assert.match(rows[text.length], /^subtee: \d+ subagents/);
    assert.ok(!rows.some((row) => / lines \(\d+\/s\) · /.test(row)), rows.join('\n'));
  },
);

test(
  'with stdout elsewhere the status line shows on the terminal, cut to its width, and is cleared at the end',
  { skip: noScript, timeout: 30_000 },
  async () => {
    const dir = tmpDir();
    const gate = join(dir, 'gate');
    spawnSync('mkfifo', [gate]);
    // Five lines, then the rest once the terminal has shown the status line of five.
    const feed = `{ head -5 ${q(recording)}; read go < ${q(gate)}; tail -n +6 ${q(recording)}; }`;
    const run = `${q(process.execPath)} ${q(BIN)} --out ${q(join(dir, 'o'))} --stdout none`;
    const line = `stty cols 40; ${feed} | ${run}`;
    let released = false;
    const { code, shown } = await onTerminal(line, (sofar) => {
      if (!released && /subtee: 5 lines/.test(sofar)) {
        released = true;
        writeFileSync(gate, 'go\n');
      }
    });
    assert.equal(code, 0, shown);
    assert.ok(released, shown);
    const draws = shown.split('\r\x1b[2K').slice(1);
    const statuses = draws.filter((d) => /^subtee: \d+ lines/.test(d));
    assert.ok(statuses.length >= 2, shown);
    for (const d of statuses) assert.ok([...d].length <= 39, `${[...d].length} columns: ${d}`);
    assert.ok(
      statuses.some((d) => /^subtee: 5 lines \(\d+\/s\) · 1 running · .*…$/.test(d)),
      statuses.join('\n'),
    );
    // The last draw was erased before the summary: the screen's first row is the summary's.
    const rows = screen(shown.replaceAll('\r\n', '\n'));
    assert.match(rows[0], /^subtee: \d+ subagents .* → /);
  },
);

test('a status line is cut one column short of the terminal, with a mark where it was cut', () => {
  assert.equal(fitToWidth('abcdef', 10), 'abcdef');
  assert.equal(fitToWidth('abcdef', 6), 'abcd…');
  assert.equal(fitToWidth('abcdef', 7), 'abcdef');
  assert.equal(fitToWidth('ab·cdef', 5), 'ab·…');
  assert.equal(fitToWidth('abcdef', 0), 'abcdef', 'a width the terminal does not tell');
  assert.equal(fitToWidth('abcdef', undefined), 'abcdef');
});

test('an error line on a terminal starts a row of its own, not at the end of the status line', {
  skip: noScript,
}, async () => {
  const dir = tmpDir();
  const empty = join(dir, 'empty.jsonl');
  writeFileSync(empty, '');
  const line = `${q(process.execPath)} ${q(BIN)} --out ${q(join(dir, 'o'))} --stdout none ${q(empty)}`;
  const { code, shown } = await onTerminal(line);
  assert.equal(code, 3, shown);
  assert.match(shown, /\r\x1b\[2Ksubtee: 0 lines/, 'the status line was drawn');
  const rows = screen(shown.replaceAll('\r\n', '\n')).filter((row) => row !== '');
  assert.equal(rows.length, 1, rows.join('\n'));
  assert.match(rows[0], /^subtee: the input held no lines: .* \[INPUT_EMPTY\]$/);
});
