import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, existsSync, readdirSync, readFileSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, tmpDir } from './helpers.js';

// Lines longer than --max-line-bytes (16 MiB by default) are spooled to a file as they
// stream past and routed from there. These run subtee in a child with default options and
// read its peak memory from GNU time; the input is generated as it is written, never held.

const noTime = !existsSync('/usr/bin/time') && 'GNU time is not installed';
const MiB = 1024 * 1024;
const RSS_LIMIT_KB = 150 * 1024;

/** JSON string content with escapes and multi-byte characters, exactly 1 MiB. */
function bodyPiece(): Buffer {
  const unit = Buffer.from('lorem ipsum é 日本 🚀 \\n \\" \\\\ \\u00e9 \\t end. ');
  const piece = Buffer.alloc(MiB, ' ');
  for (let at = 0; at + unit.length <= MiB; at += unit.length) unit.copy(piece, at);
  return piece;
}

function sha256(): { update(b: Buffer): void; digest(): string } {
  const h = createHash('sha256');
  return { update: (b) => void h.update(b), digest: () => h.digest('hex') };
}

async function hashFile(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: MiB })) h.update(chunk as Buffer);
  return h.digest('hex');
}

interface HugeRun {
  code: number | null;
  rssKb: number;
  stderr: string;
  /** sha256 of each huge line plus its newline, as a file holding only it would hash. */
  routed: string;
  quarantined: string | null;
}

/**
 * subtee --out OUT on a stream with one routed line of `mib` MiB (a tool result on a
 * subagent's channel) and, optionally, a 20 MiB line that is not JSON.
 */
async function runHuge(out: string, mib: number, withBadLine: boolean): Promise<HugeRun> {
  const child = spawn('/usr/bin/time', ['-f', '%M', process.execPath, BIN, '--out', out, '--stdout', 'none', '-q'], { stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = once(child, 'close');
  const write = async (b: Buffer | string) => {
    if (!child.stdin.write(b)) await once(child.stdin, 'drain');
  };
  await write('{"type":"system","subtype":"init","session_id":"s","claude_code_version":"2.1.220"}\n');
  await write('{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"toolu_01huge","name":"Agent","input":{"subagent_type":"Explore"}}]},"parent_tool_use_id":null}\n');
  const piece = bodyPiece();
  const routed = sha256();
  const head = Buffer.from('{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"');
  const tail = Buffer.from('"}]},"parent_tool_use_id":"toolu_01huge","timestamp":"2026-11-30T12:00:00Z"}\n');
  for (const b of [head, ...Array.from({ length: mib }, () => piece), tail]) {
    routed.update(b);
    await write(b);
  }
  let quarantined: string | null = null;
  if (withBadLine) {
    const bad = sha256();
    const open = Buffer.from('{"type":"user","message":"');
    for (const b of [open, ...Array.from({ length: 20 }, () => piece), Buffer.from('\n')]) {
      bad.update(b);
      await write(b);
    }
    quarantined = bad.digest();
  }
  child.stdin.end('{"type":"result","subtype":"success"}\n');
  const [code] = await closed;
  return { code, rssKb: Number(stderr.trim().split('\n').pop()), stderr, routed: routed.digest(), quarantined };
}

test('a 200 MB line is routed to its channel byte for byte with peak RSS under 150 MB; a huge non-JSON line is quarantined', { skip: noTime }, async () => {
  const out = join(tmpDir(), 'o');
  const r = await runHuge(out, 200, true);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.rssKb < RSS_LIMIT_KB, `peak RSS ${Math.round(r.rssKb / 1024)} MB for a 200 MB line`);
  assert.equal(await hashFile(join(out, 'agents', 'toolu_01huge.jsonl')), r.routed, 'the channel holds the line byte for byte');
  assert.equal(await hashFile(join(out, 'quarantine.log')), r.quarantined, 'the quarantine holds the bad line byte for byte');
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual(index.quarantine_lines, [4]);
  assert.deepEqual(index.input, { lines: 5, bytes: index.input.bytes, quarantined: 1, blank_lines: 0 });
  const agent = index.channels.find((c: any) => c.id === 'toolu_01huge');
  assert.deepEqual({ lines: agent.lines, parent: agent.parent, agent: agent.agent }, { lines: 1, parent: null, agent: 'Explore' });
  assert.match(readFileSync(join(out, 'agents', 'toolu_01huge.log'), 'utf8'), /\[long line\] user line of 20971\d+ bytes, whole in agents\/toolu_01huge\.jsonl: \{"type":"user"/);
  assert.match(r.stderr, /warning LINE_TOO_LONG: line 3 is longer than 16777216 bytes: it was routed byte for byte/);
  assert.deepEqual(readdirSync(out).filter((f) => f.startsWith('.subtee-spool')), [], 'no spool file is left behind');
});

test('a 2 GB line is routed to its channel byte for byte with peak RSS under 150 MB', {
  skip: noTime || (() => {
    const fs = statfsSync(tmpDir());
    return fs.bavail * fs.bsize < 6 * 1024 * MiB && 'less than 6 GB free in the temp folder (the line, its spool and its copy)';
  })(),
}, async () => {
  const out = join(tmpDir(), 'o');
  const r = await runHuge(out, 2048, false);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.rssKb < RSS_LIMIT_KB, `peak RSS ${Math.round(r.rssKb / 1024)} MB for a 2 GB line`);
  assert.equal(await hashFile(join(out, 'agents', 'toolu_01huge.jsonl')), r.routed, 'the channel holds the line byte for byte');
  assert.deepEqual(readdirSync(out).filter((f) => f.startsWith('.subtee-spool')), []);
});
