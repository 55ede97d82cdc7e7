import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, tmpDir } from './helpers/helpers.js';

const MiB = 1024 * 1024;

/** A small tmpfs (4 MiB unless told): a real disk that fills. Null where this user may not mount one. */
function smallDisk(size = '4m'): string | null {
  const dir = join(tmpDir(), 'disk');
  mkdirSync(dir);
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { encoding: 'utf8' });
  return r.status === 0 ? dir : null;
}

/** Whether a tmpfs can be mounted here: one is mounted and let go at once (a test mounts its own). */
const canMount = ((probe) => probe !== null && spawnSync('umount', [probe]).status === 0)(smallDisk());

test(
  'a disk that fills while a spooled line is copied still gets its index.json, and no index.json.tmp',
  {
    skip: !canMount && 'mounting a tmpfs is not permitted here',
  },
  () => {
    const disk = smallDisk();
    try {
      // A 3 MiB line, spooled (limit 1 MiB) into the 4 MiB disk: the copy into main.jsonl runs out of room.
      const lines = [
        { type: 'system', subtype: 'init', session_id: 's', uuid: 'u' },
        {
          type: 'user',
          message: {
            role: 'user',
            content: [{ type: 'tool_result', tool_use_id: 't', content: 'x'.repeat(3 * MiB) }],
          },
          parent_tool_use_id: null,
        },
        { type: 'result', subtype: 'success', session_id: 's' },
      ];
      const input = join(tmpDir(), 'in.jsonl');
      writeFileSync(input, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
      const out = join(disk!, 'out');
      const r = spawnSync(
        process.execPath,
        [BIN, '--out', out, '--stdout', 'none', '-q', '--max-line-bytes', String(MiB), input],
        {
          encoding: 'utf8',
        },
      );
      assert.equal(r.status, 3, r.stderr);
      assert.match(r.stderr, /cannot write .*main\.jsonl: no space left on device; \d of 3 input lines not written/);
      assert.equal(existsSync(join(out, 'index.json.tmp')), false, 'no temporary index left');
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.equal(index.input.lines, lines.length);
      // index.json says why the run failed, as the exit code and stderr do.
      const failed = index.warnings.filter((w: { code: string }) => w.code === 'OUTPUT_FAILED');
      assert.equal(failed.length, 1, JSON.stringify(index.warnings));
      assert.match(failed[0].message, /cannot write .*main\.jsonl: no space left on device/);
      assert.deepEqual(
        readdirSync(out).filter((n) => n.startsWith('.subtee-spool-')),
        [],
      );
    } finally {
      spawnSync('umount', [disk!]);
    }
  },
);

/** Every complete line of the run's `.jsonl` files and `quarantine.log`, read back from the disk. */
function linesOnDisk(out: string): string[] {
  const files = ['quarantine.log', ...readdirSync(out).filter((n) => n.endsWith('.jsonl'))];
  if (existsSync(join(out, 'agents')))
    for (const n of readdirSync(join(out, 'agents'))) if (n.endsWith('.jsonl')) files.push(`agents/${n}`);
  const found: string[] = [];
  for (const rel of files.filter((f) => existsSync(join(out, f)) && statSync(join(out, f)).isFile())) {
    const text = readFileSync(join(out, rel), 'utf8');
    // A line the full disk cut short has no newline: it is not written.
    found.push(...text.split('\n').slice(0, -1));
  }
  return found;
}

const spawnOf = (id: string) => ({
  type: 'assistant',
  parent_tool_use_id: null,
  message: { id: `m_${id}`, content: [{ type: 'tool_use', id, name: 'Agent', input: { description: id } }] },
});
const said = (channel: string | null, i: number) => ({
  type: 'assistant',
  parent_tool_use_id: channel,
  message: {
    id: `s_${channel}_${i}`,
    content: [{ type: 'text', text: `line ${i} of ${channel ?? 'main'}` }],
  },
});
const huge = (channel: string | null, bytes: number) => ({
  type: 'user',
  parent_tool_use_id: channel,
  message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'x'.repeat(bytes) }] },
});

test(
  'after a failed write, index.json, the warning and the error line count the input lines not written',
  { skip: !canMount && 'mounting a tmpfs is not permitted here' },
  () => {
    const own = smallDisk()!;
    const variants: Array<[string, object[], string[]]> = [
      ['a long line of main', [{ type: 'system', subtype: 'init' }, huge(null, 3 * MiB), said(null, 1)], []],
      [
        "a subagent's long line among three channels, lines after it",
        [
          spawnOf('toolu_a'),
          spawnOf('toolu_b'),
          ...[0, 1, 2].flatMap((i) => [said(null, i), said('toolu_a', i), said('toolu_b', i)]),
          huge('toolu_a', 3 * MiB),
          ...[3, 4, 5, 6].flatMap((i) => [said('toolu_b', i), said(null, i)]),
        ],
        [],
      ],
      [
        'junk lines quarantined before a long line of main',
        [said(null, 0), huge(null, 2 * MiB + 512 * 1024), said(null, 1)],
        ['not json', '{"cut": '],
      ],
    ];
    try {
      for (const [name, values, junk] of variants) {
        const lines = [...junk, ...values.map((v) => JSON.stringify(v))];
        const input = join(tmpDir(), 'in.jsonl');
        writeFileSync(input, lines.join('\n') + '\n');
        const out = join(own, 'out');
        const args = [BIN, '--out', out, '--stdout', 'none', '-q', '--max-line-bytes', String(MiB), input];
        const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
        assert.equal(r.status, 3, `${name}: ${r.stderr}`);
        const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
        assert.equal(index.input.lines, lines.length, name);
        // Counted here from the disk: each line found is an input line, found once.
        const found = linesOnDisk(out);
        const left = new Map<string, number>();
        for (const l of lines) left.set(l, (left.get(l) ?? 0) + 1);
        for (const l of found) {
          assert.ok((left.get(l) ?? 0) > 0, `${name}: a line on disk that is no input line, or twice`);
          left.set(l, left.get(l)! - 1);
        }
        const unwritten = lines.length - found.length;
        assert.ok(unwritten > 0, `${name}: the full disk left lines out`);
        assert.equal(index.input.unwritten, unwritten, name);
        const said = `${unwritten} of ${lines.length} input lines not written`;
        assert.match(r.stderr, new RegExp(`no space left on device; ${said} \\[ERR_WRITE\\]\\n$`), name);
        const failed = index.warnings.filter((w: { code: string }) => w.code === 'OUTPUT_FAILED');
        assert.match(failed[0]?.message ?? '', new RegExp(`: no space left on device; ${said}$`), name);
        rmSync(out, { recursive: true, force: true });
      }
    } finally {
      spawnSync('umount', [own]);
    }
  },
);

/**
 * The input lines in `bytes` as a reader of the bytes counts them, independently of subtee:
 * split at newlines, a CR before one dropped, blank lines (spaces, tabs) left out, and a last
 * line without its newline counted.
 */
function inputLines(bytes: Buffer): string[] {
  return bytes
    .toString('utf8')
    .split('\n')
    .map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l))
    .filter((l) => /[^ \t\r]/.test(l));
}

/**
 * A run a full disk cut short: index.json's lines read are the lines in the bytes it says were
 * read (counted here), each found at most once on disk, and those not found are `unwritten`.
 */
function checkCutShort(out: string, text: string, name: string): { index: any; read: string[] } {
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const read = inputLines(Buffer.from(text).subarray(0, index.input.bytes));
  assert.equal(index.input.lines, read.length, `${name}: lines read`);
  const found = linesOnDisk(out);
  assertFoundOnce(read, found, name);
  assert.ok(found.length < read.length, `${name}: the full disk left lines out`);
  assert.equal(index.input.unwritten, read.length - found.length, `${name}: unwritten`);
  return { index, read };
}

/** Each line found on disk is an input line, found once: the check fails on any other. */
function assertFoundOnce(lines: string[], found: string[], name: string): void {
  const left = new Map<string, number>();
  for (const l of lines) left.set(l, (left.get(l) ?? 0) + 1);
  for (const l of found) {
    assert.ok((left.get(l) ?? 0) > 0, `${name}: a line on disk that is no input line, or twice`);
    left.set(l, left.get(l)! - 1);
  }
}

/** The highest `line-N` a file shows (-1 when none, or no file). */
function lastShown(path: string): number {
  if (!existsSync(path)) return -1;
  const numbers = [...readFileSync(path, 'utf8').matchAll(/line-(\d+) x/g)].map((m) => Number(m[1]));
  return Math.max(-1, ...numbers);
}

/** The error line's two figures, or a failed match. */
function saidUnwritten(stderr: string): { unwritten: number; lines: number } {
  const m = /^subtee: cannot write \S+: [^;\n]+; (\d+) of (\d+) input lines not written \[ERR_WRITE\]\n$/.exec(stderr);
  assert.ok(m, `one error line with the figures: ${JSON.stringify(stderr)}`);
  return { unwritten: Number(m[1]), lines: Number(m[2]) };
}

test(
  'a disk filled by ordinary lines: the .jsonl lines go before the transcripts, index.json is still ' +
    'written, and every line read is on disk or counted unwritten, an unterminated last line too',
  { skip: !canMount && 'mounting a tmpfs is not permitted here' },
  () => {
    const cases: Array<[string, string, number]> = [
      // 256 KiB: the disk is full before the first subagent's file is written.
      ['256k', '256k', 2000],
      ['1m', '1m', 2000],
      // The input fits but for its end: the unterminated last line is read and not written.
      ['100k', '100k', 150],
    ];
    for (const [name, size, count] of cases) {
      const own = smallDisk(size)!;
      try {
        const values = [
          { type: 'system', subtype: 'init', session_id: 's', claude_code_version: '2.1.328' },
          ...Array.from({ length: count }, (_, i) => ({
            type: 'assistant',
            parent_tool_use_id: i % 2 ? null : 'toolu_T',
            message: { content: [{ type: 'text', text: `line-${i} ${'x'.repeat(300)}` }] },
          })),
        ];
        const text = values.map((v) => JSON.stringify(v)).join('\n') + '\n{"type":"assistant","cut';
        const input = join(tmpDir(), 'in.jsonl');
        writeFileSync(input, text);
        const out = join(own, 'out');
        const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '-q', input], {
          encoding: 'utf8',
        });
        assert.equal(r.status, 3, `${name}: ${r.stderr}`);
        assert.equal(existsSync(join(out, 'index.json.tmp')), false, `${name}: no temporary index left`);
        const { index, read } = checkCutShort(out, text, name);
        const figures = { unwritten: index.input.unwritten, lines: read.length };
        assert.deepEqual(saidUnwritten(r.stderr), figures, name);
        // No transcript shows a line its channel's .jsonl lacks: the raw lines took the room first.
        for (const c of index.channels) {
          const shown = lastShown(join(out, c.log));
          const kept = lastShown(join(out, c.jsonl));
          assert.ok(shown <= kept, `${name}: ${c.log} shows line-${shown}, not kept`);
        }
      } finally {
        spawnSync('umount', [own]);
      }
    }
  },
);

test('a write that fails (main.jsonl a folder) counts the unterminated last line as read and ' +
  'not written', () => {
  const out = join(tmpDir(), 'out');
  mkdirSync(join(out, 'main.jsonl'), { recursive: true });
  const lines = [
    JSON.stringify({ type: 'system', subtype: 'init', session_id: 's' }),
    'not json',
    JSON.stringify(spawnOf('toolu_a')),
    '',
    JSON.stringify(said('toolu_a', 0)),
    '  ',
    JSON.stringify(said(null, 1)),
    '{"cut": ',
    JSON.stringify(said('toolu_a', 2)),
  ];
  const text = lines.join('\n') + '\n{"type":"assistant","parent_tool_use_id":"toolu_a"';
  const input = join(tmpDir(), 'in.jsonl');
  writeFileSync(input, text);
  const r = spawnSync(process.execPath, [BIN, '--force', '--out', out, '--stdout', 'none', '-q', input], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 3, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.equal(index.input.bytes, Buffer.byteLength(text));
  const read = inputLines(Buffer.from(text));
  assert.equal(index.input.lines, read.length);
  const found = linesOnDisk(out);
  assertFoundOnce(read, found, 'planted folder');
  assert.equal(index.input.unwritten, read.length - found.length);
  assert.ok(index.input.unwritten > 0);
  assert.deepEqual(saidUnwritten(r.stderr), { unwritten: index.input.unwritten, lines: read.length });
});

test('an index.json that cannot be written after another write failed is said on stderr ' +
  '(INDEX_UNWRITTEN) before the error line', () => {
  const out = join(tmpDir(), 'out');
  mkdirSync(join(out, 'main.jsonl'), { recursive: true });
  mkdirSync(join(out, 'index.json'));
  const input = join(tmpDir(), 'in.jsonl');
  writeFileSync(input, JSON.stringify(said(null, 0)) + '\n' + JSON.stringify(said('toolu_a', 1)) + '\n');
  const r = spawnSync(process.execPath, [BIN, '--force', '--out', out, '--stdout', 'none', '-q', input], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 3, r.stderr);
  const [warning, error, ...rest] = r.stderr.split('\n');
  assert.match(warning, /^subtee: warning INDEX_UNWRITTEN: cannot write \S+\/index\.json: .*no index\.json$/);
  assert.match(error, /^subtee: cannot write \S+\/main\.jsonl: it is a folder, not a file; /);
  assert.match(error, /; 1 of 2 input lines not written \[ERR_WRITE\]$/);
  assert.deepEqual(rest, ['']);
  assert.equal(existsSync(join(out, 'index.json.tmp')), false, 'no temporary index left');
});

/**
 * The input line numbers (1-based, blank lines counted) of the lines `quarantine.log` holds
 * whole, found by matching its lines in order against the input's: none when there is no file.
 */
function quarantinedOnDisk(out: string, text: string): number[] {
  const path = join(out, 'quarantine.log');
  if (!existsSync(path) || !statSync(path).isFile()) return [];
  const held = readFileSync(path, 'utf8').split('\n').slice(0, -1);
  const input = text.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  const numbers: number[] = [];
  let at = 0;
  for (const line of held) {
    while (at < input.length && input[at] !== line) at++;
    assert.ok(at < input.length, `quarantine.log holds a line that is no input line: ${line}`);
    numbers.push(++at);
  }
  return numbers;
}

test('after a failed write, only the lines quarantine.log holds are quarantined: a junk line that ' +
  'never reached it (the cut-off last line) is unwritten, in index.json and the summary alike', () => {
  const junkAmong = [
    JSON.stringify({ type: 'system', subtype: 'init', session_id: 's' }),
    'not json',
    JSON.stringify(spawnOf('toolu_a')),
    '',
    '{"cut": ',
    JSON.stringify(said('toolu_a', 0)),
  ];
  const cut = '{"type":"assistant","parent_tool_use_id":"toolu_a"';
  // [name, the file a folder is planted under, the input's lines]
  const cases: Array<[string, string, string[]]> = [
    ['junk lines written before the failure', 'main.jsonl', junkAmong],
    ['no junk line but the cut-off last one', 'main.jsonl', [JSON.stringify(said(null, 0))]],
    // The failed write is the quarantine file's: it holds no line, and index.json names none.
    ['quarantine.log a folder', 'quarantine.log', junkAmong],
  ];
  for (const [name, planted, lines] of cases) {
    const out = join(tmpDir(), 'out');
    mkdirSync(join(out, planted), { recursive: true });
    const text = lines.join('\n') + '\n' + cut;
    const input = join(tmpDir(), 'in.jsonl');
    writeFileSync(input, text);
    const args = [BIN, '--force', '--out', out, '--stdout', 'none', input];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
    assert.equal(r.status, 3, `${name}: ${r.stderr}`);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const held = quarantinedOnDisk(out, text);
    assert.deepEqual(index.quarantine_lines, held, name);
    assert.equal(index.input.quarantined, held.length, name);
    assert.equal(index.quarantine, held.length > 0 ? 'quarantine.log' : null, name);
    // The cut-off line is read and in no file: unwritten, and the counts still add up.
    const read = inputLines(Buffer.from(text));
    const found = linesOnDisk(out);
    assert.equal(index.input.lines, read.length, name);
    assert.equal(index.input.unwritten, read.length - found.length, name);
    const counts = `${read.length} lines, ${held.length} quarantined, ${index.input.unwritten} not written`;
    assert.ok(r.stderr.includes(`, ${counts} → `), `${name}: the summary says ${counts}\n${r.stderr}`);
  }
});

test(
  'a disk that fills while a long line is spooled: that line and those read with it are counted ' +
    'read and not written, and the error line says how many',
  { skip: !canMount && 'mounting a tmpfs is not permitted here' },
  () => {
    const long = (i: number, bytes: number) =>
      JSON.stringify(said(null, i)).replace('line', 'y'.repeat(bytes));
    const cases: Array<[string, string[]]> = [
      // The line alone is larger than the disk.
      ['one line past the disk', [JSON.stringify(spawnOf('toolu_a')), long(0, 2_000_000), 'after']],
      // Earlier long lines are copied into main.jsonl; a later, longer one's spool finds no room.
      [
        'long lines among short ones',
        [
          ...[0, 1, 2, 3].flatMap((i) => [long(i, 100_000), JSON.stringify(said('toolu_a', i)), 'junk']),
          long(4, 700_000),
          JSON.stringify(said('toolu_a', 4)),
          'junk',
        ],
      ],
    ];
    for (const [name, lines] of cases) {
      const own = smallDisk('1m')!;
      try {
        const text = lines.join('\n') + '\n';
        const input = join(tmpDir(), 'in.jsonl');
        writeFileSync(input, text);
        const out = join(own, 'out');
        const args = [BIN, '--out', out, '--stdout', 'none', '-q', '--max-line-bytes', '1024', input];
        const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
        assert.equal(r.status, 3, `${name}: ${r.stderr}`);
        const spoolFull = /^subtee: cannot write \S+\/\.subtee-spool-\S+: no space left on device; /m;
        assert.match(r.stderr, spoolFull, `${name}: the spool's write is the one that failed`);
        const { index, read } = checkCutShort(out, text, name);
        // Past the warnings (LINE_TOO_LONG), one error line.
        const error = r.stderr.replace(/^subtee: warning .*\n/gm, '');
        const figures = { unwritten: index.input.unwritten, lines: read.length };
        assert.deepEqual(saidUnwritten(error), figures, name);
        assert.deepEqual(index.quarantine_lines, quarantinedOnDisk(out, text), name);
        assert.deepEqual(readdirSync(out).filter((n) => n.startsWith('.subtee-spool-')), [], name);
      } finally {
        spawnSync('umount', [own]);
      }
    }
  },
);
