import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
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
      assert.match(r.stderr, /cannot write .*main\.jsonl: no space left on device \[ERR_WRITE\]/);
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
