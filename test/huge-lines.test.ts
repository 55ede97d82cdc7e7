import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, existsSync, readdirSync, readFileSync, statfsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { builtinRegistry } from '../src/chain/builtins.js';
import { runChain, type ComponentSpec } from '../src/chain/chain.js';
import redactSecrets, { MASK } from '../plugins/redact-secrets/index.js';
import { open, type SubagentHandle } from '../src/index.js';
import { forEachLine } from '../src/views/report/build.js';
import { BIN, chunked, readTree, splitEvery, tmpDir } from './helpers/helpers.js';

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
  const child = spawn(
    '/usr/bin/time',
    ['-f', '%M', process.execPath, BIN, '--out', out, '--stdout', 'none', '-q'],
    { stdio: ['pipe', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const closed = once(child, 'close');
  const write = async (b: Buffer | string) => {
    if (!child.stdin.write(b)) await once(child.stdin, 'drain');
  };
  await write('{"type":"system","subtype":"init","session_id":"s","claude_code_version":"2.1.220"}\n');
  await write(
    '{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"toolu_01huge",' +
      '"name":"Agent","input":{"subagent_type":"Explore"}}]},"parent_tool_use_id":null}\n',
  );
  const piece = bodyPiece();
  const routed = sha256();
  const head = Buffer.from(
    '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"',
  );
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
  return {
    code,
    rssKb: Number(stderr.trim().split('\n').pop()),
    stderr,
    routed: routed.digest(),
    quarantined,
  };
}

test(
  'a 200 MB line is routed byte for byte with peak RSS under 150 MB; a huge non-JSON line is quarantined',
  { skip: noTime },
  async () => {
    const out = join(tmpDir(), 'o');
    const r = await runHuge(out, 200, true);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.rssKb < RSS_LIMIT_KB, `peak RSS ${Math.round(r.rssKb / 1024)} MB for a 200 MB line`);
    assert.equal(
      await hashFile(join(out, 'agents', 'toolu_01huge.jsonl')),
      r.routed,
      'the channel holds the line byte for byte',
    );
    assert.equal(
      await hashFile(join(out, 'quarantine.log')),
      r.quarantined,
      'the quarantine holds the bad line byte for byte',
    );
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    assert.deepEqual(index.quarantine_lines, [4]);
    assert.deepEqual(index.input, {
      lines: 5,
      bytes: index.input.bytes,
      quarantined: 1,
      blank_lines: 0,
      failed: 0,
      unwritten: 0,
      dropped: 0,
    });
    const agent = index.channels.find((c: any) => c.id === 'toolu_01huge');
    assert.deepEqual(
      { lines: agent.lines, parent: agent.parent, agent: agent.agent },
      { lines: 1, parent: null, agent: 'Explore' },
    );
    assert.match(
      readFileSync(join(out, 'agents', 'toolu_01huge.log'), 'utf8'),
      /\[long line\] user line of 20971\d+ bytes, whole in agents\/toolu_01huge\.jsonl: \{"type":"user"/,
    );
    assert.match(
      r.stderr,
      /warning LINE_TOO_LONG: line 3 is longer than 16777216 bytes: it was routed byte for byte/,
    );
    assert.deepEqual(
      readdirSync(out).filter((f) => f.startsWith('.subtee-spool')),
      [],
      'no spool file is left behind',
    );
  },
);

test(
  'a 2 GB line is routed to its channel byte for byte with peak RSS under 150 MB',
  {
    skip:
      noTime ||
      (() => {
        const fs = statfsSync(tmpDir());
        return (
          fs.bavail * fs.bsize < 6 * 1024 * MiB &&
          'less than 6 GB free in the temp folder (the line, its spool and its copy)'
        );
      })(),
  },
  async () => {
    const out = join(tmpDir(), 'o');
    const r = await runHuge(out, 2048, false);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.rssKb < RSS_LIMIT_KB, `peak RSS ${Math.round(r.rssKb / 1024)} MB for a 2 GB line`);
    assert.equal(
      await hashFile(join(out, 'agents', 'toolu_01huge.jsonl')),
      r.routed,
      'the channel holds the line byte for byte',
    );
    assert.deepEqual(
      readdirSync(out).filter((f) => f.startsWith('.subtee-spool')),
      [],
    );
  },
);

// In process, with a small limit: the stages and sinks that meet a spooled line.

async function runSpooled(lines: string[], stages: ComponentSpec[], sinks: ComponentSpec[] = []) {
  const out = join(tmpDir(), 'o');
  const registry = builtinRegistry();
  registry.add(redactSecrets);
  const input = Buffer.from(lines.join('\n') + '\n');
  const run = await runChain(
    chunked(splitEvery(input, 64 * 1024)),
    {
      stages: [{ use: 'line-parser', maxLineBytes: 4096 }, ...stages],
      sinks: [{ use: 'files', out }, ...sinks],
    },
    { registry },
  );
  return { run, out, files: readTree(out) };
}

test('redact-secrets masks a spooled line as it copies it, secrets across each MiB mark too', async () => {
  const secret = 'sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789';
  // Fields of ~1,000 characters; a secret straddles each MiB mark, where a fixed window would cut.
  const fields = Array.from({ length: 3500 }, (_, k) => `"f${k}":"${'x'.repeat(1000)} token ${k}"`);
  let line = `{"type":"user","parent_tool_use_id":null,${fields.join(',')},"tail":"${secret}"}`;
  for (const mark of [1, 2, 3].map((m) => m * 1024 * 1024)) {
    const at = mark - 20;
    assert.match(line.slice(at - 1, at + secret.length + 1), /^x+$/, 'the secret goes inside a field');
    line = `${line.slice(0, at - 1)} ${secret} ${line.slice(at + secret.length + 1)}`;
  }
  const { out, files, run } = await runSpooled(
    [line],
    [{ use: 'redact-secrets' }, { use: 'channel-router' }],
  );
  const jsonl = files.get('main.jsonl')!.toString('utf8');
  assert.ok(!jsonl.includes(secret.slice(8)), 'no secret is left in the channel');
  assert.equal(jsonl, line.split(secret).join(MASK) + '\n', 'everything else byte for byte');
  assert.equal(run.input.quarantined, 0);
  assert.deepEqual(
    readdirSync(out).filter((f) => f.startsWith('.subtee-spool')),
    [],
  );
});

test('a spooled line counts on its channel; a spooled non-object goes to quarantine and pino', async () => {
  const long = 'y'.repeat(10_000);
  const lines = [
    '{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"toolu_01sp",' +
      '"name":"Agent","input":{"subagent_type":"Plan"}}]},"parent_tool_use_id":null}',
    '{"type":"assistant","parent_tool_use_id":"toolu_01sp","timestamp":"2026-11-30T12:00:01Z",' +
      `"message":{"id":"m2","content":[{"type":"text","text":"${long}"}]}}`,
    `npm WARN ${long}`,
  ];
  const pinoFile = join(tmpDir(), 'events.pino.log');
  const { files, run } = await runSpooled(
    lines,
    [{ use: 'channel-router' }],
    [{ use: 'pino', destination: pinoFile }],
  );
  assert.equal(files.get('agents/toolu_01sp.jsonl')!.toString('utf8'), lines[1] + '\n');
  assert.equal(files.get('quarantine.log')!.toString('utf8'), lines[2] + '\n');
  const ch = run.tree.get('toolu_01sp')!;
  assert.deepEqual([ch.lines, ch.lastSeen, ch.agent], [1, '2026-11-30T12:00:01Z', 'Plan']);
  assert.deepEqual(run.quarantineLines.listed, [3]);
  const events = readFileSync(pinoFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    events.filter((e) => e.kind === 'quarantine').map((e) => [e.line, e.reason, e.content.slice(0, 9)]),
    [[3, 'not-object', 'npm WARN ']],
  );
});

// Readers that go back to a .jsonl file skip past a line too long to hold.

const LATE_LINES = (big: string) => [
  '{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"toolu_01late",' +
    '"name":"Agent","input":{"subagent_type":"Plan"}}]},"parent_tool_use_id":null}',
  '{"type":"assistant","parent_tool_use_id":"toolu_01late","timestamp":"2026-11-30T12:00:02Z",' +
    `"message":{"id":"m2","content":[{"type":"text","text":"${big}"}]}}`,
  '{"type":"assistant","parent_tool_use_id":"toolu_01late",' +
    '"message":{"id":"m3","content":[{"type":"text","text":"done"}]}}',
  '{"type":"result","subtype":"success"}',
];

test('a late projection reader replays a spooled line as a live one saw it: top-level fields', async () => {
  const input = Buffer.from(LATE_LINES('z'.repeat(17 * MiB)).join('\n') + '\n');
  const run = open(chunked(splitEvery(input, MiB)), { out: join(tmpDir(), 'o') });
  const handles: SubagentHandle[] = [];
  for await (const h of run.subagents) handles.push(h);
  await run.done;
  const late: unknown[][] = [];
  for await (const m of handles[0].messages) {
    late.push([m.index, m.role, (await m.blocks).length, await m.text, m.timestamp]);
  }
  assert.deepEqual(late, [
    [0, 'assistant', 0, '', '2026-11-30T12:00:02Z'],
    [1, 'assistant', 1, 'done', null],
  ]);
});

test('the report reads past a spooled line: later lines are read, the long one counted as left out', () => {
  const dir = tmpDir();
  const path = join(dir, 'a.jsonl');
  // The last line has no newline; the long one is over the limit only with the chunks together.
  writeFileSync(path, ['{"a":1}', 'x'.repeat(5000), '{"b":2}', 'y'.repeat(3000), '{"c":3}'].join('\n'));
  for (const chunkAt of [1, 7, 4096]) {
    const seen: string[] = [];
    const long: number[] = [];
    forEachLine(
      path,
      (line) => seen.push(line.toString()),
      (bytes) => long.push(bytes),
      4000,
      chunkAt,
    );
    assert.deepEqual(seen, ['{"a":1}', '{"b":2}', 'y'.repeat(3000), '{"c":3}'], `chunks of ${chunkAt}`);
    assert.deepEqual(long, [5000], `chunks of ${chunkAt}`);
  }
});

test("the report's line reader uses its read buffer again without changing a line", () => {
  const dir = tmpDir();
  // Lines of many lengths, so that lines straddle reads wherever the chunks end.
  const linesOf = (tag: string) => Array.from({ length: 40 }, (_, k) => `{"${tag}":"${'v'.repeat(k * 7)}"}`);
  const files = ['a', 'b', 'c'].map((tag) => {
    const path = join(dir, `${tag}.jsonl`);
    writeFileSync(path, `${linesOf(tag).join('\n')}\n`);
    return path;
  });
  const read = (path: string, chunkBytes: number, inner?: string) => {
    const seen: string[] = [];
    forEachLine(
      path,
      (line) => {
        // A reader inside a reader: the outer one's buffer must not be the inner one's.
        if (inner !== undefined && seen.length === 3) read(inner, chunkBytes);
        seen.push(line.toString());
      },
      () => assert.fail('no line is long'),
      4000,
      chunkBytes,
    );
    return seen;
  };
  for (const chunkBytes of [5, 64, 333, 4096])
    for (let round = 0; round < 2; round++)
      for (const [k, path] of files.entries()) {
        const inner = files[(k + 1) % files.length];
        assert.deepEqual(read(path, chunkBytes, inner), linesOf('abc'[k]), `chunks of ${chunkBytes}`);
      }
});

test('an oversized last line cut off mid-JSON is quarantined as truncated, its final CR kept', async () => {
  const cut = `{"type":"assistant","message":{"content":[{"type":"text","text":"${'z'.repeat(10_000)}\r`;
  const first = '{"type":"system","subtype":"init","session_id":"s"}';
  const input = Buffer.from(`${first}\n${cut}`);
  // Chunk edges swept around the end, the CR alone in the last chunk included.
  for (const size of [64 * 1024, input.length - 1, input.length - 2, 4096, 1000]) {
    const out = join(tmpDir(), 'o');
    const pinoFile = join(tmpDir(), 'events.pino.log');
    await runChain(
      chunked(splitEvery(input, size)),
      {
        stages: [{ use: 'line-parser', maxLineBytes: 4096 }, { use: 'channel-router' }],
        sinks: [
          { use: 'files', out },
          { use: 'pino', destination: pinoFile },
        ],
      },
      { registry: builtinRegistry() },
    );
    assert.equal(readTree(out).get('quarantine.log')!.toString('utf8'), cut + '\n', `chunks of ${size}`);
    const events = readFileSync(pinoFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      events.filter((e) => e.kind === 'quarantine').map((e) => [e.line, e.reason]),
      [[2, 'truncated']],
      `chunks of ${size}`,
    );
  }
});

// However a line nests, what subtee builds of it is bounded by its size: a line that would
// make more objects and arrays than that is read by its top-level members, as a spooled line.

/** A Claude Code user line whose `x` member is `shape`, `count` times over. */
function denseLine(shape: 'arrays' | 'objects' | 'siblings', count: number): string {
  const head = '{"type":"user","parent_tool_use_id":null,"session_id":"s","x":';
  if (shape === 'arrays') return `${head}${'['.repeat(count)}${']'.repeat(count)}}`;
  if (shape === 'objects') return `${head}${'{"a":'.repeat(count)}1${'}'.repeat(count)}}`;
  return `${head}[${'{},'.repeat(count - 1)}{}]}`;
}

test(
  'a line nested millions deep or of millions of objects costs memory bounded by its size, ' +
    'in a run and a report',
  { skip: noTime },
  () => {
    const timed = (args: string[], input?: string) => {
      const r = spawnSync('/usr/bin/time', ['-f', '%M', process.execPath, BIN, ...args], {
        input,
        encoding: 'utf8',
        timeout: 120_000,
        killSignal: 'SIGKILL',
        maxBuffer: 64 * MiB,
      });
      return { ...r, rssKb: Number(r.stderr.trim().split('\n').pop()) };
    };
    for (const [shape, count, maxLineBytes] of [
      ['arrays', 8_300_000, null],
      ['arrays', 2_000_000, null],
      ['objects', 2_700_000, null],
      ['siblings', 5_000_000, null],
      // Longer than --max-line-bytes: spooled, checked by the streaming checker.
      ['arrays', 20_000_000, 4 * MiB],
    ] as const) {
      const line = denseLine(shape, count);
      const name = `${shape} x ${count} (${line.length} bytes)`;
      const out = join(tmpDir(), 'o');
      const input = `${line}\n{"type":"result","subtype":"success","result":"done"}\n`;
      const limit = maxLineBytes === null ? [] : ['--max-line-bytes', String(maxLineBytes)];
      const r = timed(['--out', out, '-q', '--stdout', 'none', ...limit], input);
      assert.equal(r.status, 0, `${name}: ${r.stderr.slice(-400)}`);
      assert.ok(r.rssKb < 200 * 1024, `${name}: peak RSS ${Math.round(r.rssKb / 1024)} MB`);
      assert.equal(readFileSync(join(out, 'main.jsonl'), 'utf8'), input, `${name}: kept byte for byte`);
      const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
      assert.deepEqual([index.input.lines, index.input.quarantined], [2, 0], name);
      const code = maxLineBytes === null ? 'LINE_TOO_DENSE' : 'LINE_TOO_LONG';
      assert.ok(
        index.warnings.some((w: { code: string }) => w.code === code),
        `${name}: ${JSON.stringify(index.warnings)}`,
      );
      assert.equal(index.channels[0].status, 'completed', name);
      const report = timed(['report', out]);
      assert.equal(report.status, 0, `${name}: report: ${report.stderr.slice(-400)}`);
      assert.ok(report.rssKb < 200 * 1024, `${name}: report peak RSS ${Math.round(report.rssKb / 1024)} MB`);
    }
  },
);
