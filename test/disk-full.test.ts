import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, tmpDir } from './helpers/helpers.js';

const MiB = 1024 * 1024;

/** A 4 MiB tmpfs: a real disk that fills. Null where this user may not mount one. */
function smallDisk(): string | null {
  const dir = join(tmpDir(), 'disk');
  mkdirSync(dir);
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir], { encoding: 'utf8' });
  return r.status === 0 ? dir : null;
}

const disk = smallDisk();

test(
  'a disk that fills while a spooled line is copied still gets its index.json, and no index.json.tmp',
  {
    skip: disk === null && 'mounting a tmpfs is not permitted here',
  },
  () => {
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
    files.push(...readdirSync(join(out, 'agents')).filter((n) => n.endsWith('.jsonl')).map((n) => `agents/${n}`));
  const found: string[] = [];
  for (const rel of files.filter((f) => existsSync(join(out, f)))) {
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
  message: { id: `s_${channel}_${i}`, content: [{ type: 'text', text: `line ${i} of ${channel ?? 'main'}` }] },
});
const huge = (channel: string | null, bytes: number) => ({
  type: 'user',
  parent_tool_use_id: channel,
  message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 'x'.repeat(bytes) }] },
});

test(
  'after a failed write, index.json, the warning and the error line count the input lines not written',
  { skip: disk === null && 'mounting a tmpfs is not permitted here' },
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
