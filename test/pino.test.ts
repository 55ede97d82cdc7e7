import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pinoLine } from '../src/chain/sinks/pino-batch.js';
import { createPinoSink, pinoEvents } from '../src/chain/sinks/pino.js';
import { ChannelTree } from '../src/model/tree.js';
import { createStdoutSink } from '../src/chain/sinks/stdout.js';
import { feedThrough, ORPHAN_FIRST, orphanFirstLines } from './helpers/feed.js';
import { BIN, linesOf, tmpDir } from './helpers/helpers.js';

/** What a terminal or a viewer acts on: DEL, every C1 and bidi control, U+2028 and U+2029. */
const TERMINAL_UNSAFE = [
  ...Array.from({ length: 0x9f - 0x7f + 1 }, (_, k) => String.fromCharCode(0x7f + k)),
  '\u061c',
  '\u200e',
  '\u200f',
  ...['\u202a', '\u202b', '\u202c', '\u202d', '\u202e'],
  ...['\u2066', '\u2067', '\u2068', '\u2069'],
  '\u2028',
  '\u2029',
];

/** A run whose text, tool name, tool input and tool result carry every TERMINAL_UNSAFE character. */
function unsafeRun(): { input: string; text: string; tool: string } {
  const session = '55555555-2222-3333-4444-555555555555';
  const text = `safe ${TERMINAL_UNSAFE.join('x')} \u009b2J\u009b31mC1 \u202eevil ESC \u001b]0;T\u0007 end`;
  const tool = `Bash\u202e\u009b`;
  const lines = [
    { type: 'system', subtype: 'init', session_id: session, model: 'claude-opus-4-5', uuid: 'i' },
    {
      type: 'assistant',
      message: {
        id: 'm1',
        role: 'assistant',
        model: 'claude-opus-4-5',
        content: [
          { type: 'text', text },
          { type: 'tool_use', id: 'toolu_1', name: tool, input: { command: text } },
        ],
        usage: { input_tokens: 1, output_tokens: 1 },
      },
      parent_tool_use_id: null,
      session_id: session,
      uuid: 'a',
      timestamp: '2026-11-30T11:49:20.000Z',
    },
    {
      type: 'user',
      message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: text }] },
      parent_tool_use_id: null,
      session_id: session,
      uuid: 'u',
    },
  ];
  return { input: lines.map((l) => JSON.stringify(l)).join('\n') + '\n', text, tool };
}

/** Checks pino's bytes: no raw TERMINAL_UNSAFE character, and every field the text the stream gave. */
function assertEscaped(bytes: string, text: string, tool: string): void {
  for (const c of TERMINAL_UNSAFE)
    assert.ok(!bytes.includes(c), `U+${c.charCodeAt(0).toString(16).padStart(4, '0')} is raw in the log`);
  assert.ok(!bytes.includes('\u001b') && !bytes.includes('\u0007'), 'ESC and BEL are escaped too');
  const events = bytes.trim().split('\n').map((l) => JSON.parse(l));
  const byKind = (kind: string) => events.filter((e) => e.kind === kind);
  assert.deepEqual(byKind('text').map((e) => e.content), [text]);
  assert.deepEqual(byKind('tool_result').map((e) => e.content), [text]);
  assert.deepEqual(byKind('tool_use').map((e) => [e.tool, JSON.parse(e.content).command]), [[tool, text]]);
  // The headline is escaped for reading (as stderr is): visible escapes, not the characters.
  for (const e of events) assert.ok(!/[\u0080-\u009f\u2028\u2029\u202a-\u202e]/.test(e.msg), e.msg);
}

test('pino lines on stdout write C1 and bidi controls, U+2028 and U+2029 as \\u escapes: ' +
  'no raw one in the bytes, every field parses to the text the stream gave', () => {
  const { input, text, tool } = unsafeRun();
  const r = spawnSync(process.execPath, [BIN, '--out', join(tmpDir(), 'out'), '--stdout', 'none', '-q',
    '--pino', '-'], { input, timeout: 30_000, killSignal: 'SIGKILL' });
  assert.equal(r.status, 0, String(r.stderr));
  assertEscaped(r.stdout.toString('utf8'), text, tool);
});

test('pino lines through a transport write C1 and bidi controls, U+2028 and U+2029 as \\u escapes ' +
  'too', () => {
  const { input, text, tool } = unsafeRun();
  const dir = tmpDir();
  const log = join(dir, 'events.log');
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ sinks: [
    { use: 'files', out: join(dir, 'out') },
    { use: 'pino', transport: { target: 'pino/file', options: { destination: log } } },
  ] }));
  const r = spawnSync(process.execPath, [BIN, '--config', config, '-q'],
    { input, timeout: 30_000, killSignal: 'SIGKILL' });
  assert.equal(r.status, 0, String(r.stderr));
  assertEscaped(readFileSync(log, 'utf8'), text, tool);
});

test('pinoLine escapes C1 and bidi controls, U+2028 and U+2029 in every string it writes: ' +
  'keys, naming fields, short and long values, nested values, msg', () => {
  const bad = TERMINAL_UNSAFE.join('');
  const fields = {
    kind: `text${bad}`,
    channel: `toolu_${bad}`,
    [`key${bad}`]: 'value',
    short: `a${bad}`.slice(0, 20),
    long: `${'x'.repeat(200)}${bad}"\\`,
    nested: { list: [bad, { deep: bad }] },
    n: 1,
  };
  const msg = `headline ${bad}`;
  const line = pinoLine(30, '2026-01-02T03:04:05.678Z', fields, msg);
  for (const c of TERMINAL_UNSAFE) assert.ok(!line.includes(c), `U+${c.charCodeAt(0).toString(16)} is raw`);
  const parsed = JSON.parse(line);
  assert.deepEqual(parsed, { level: 30, time: '2026-01-02T03:04:05.678Z', ...fields, msg });
});

test("pino and stdout name a line's channel as it was placed when the line arrived, " +
  'the same whether the run arrives at once or a line at a time: lines before their spawn stay unplaced',
async () => {
  const lines = orphanFirstLines();
  const run = async (lineByLine: boolean) => {
    const log = join(tmpDir(), 'events.log');
    let stdout = '';
    const stream = new Writable({ write: (chunk, _enc, cb) => ((stdout += chunk), cb()) });
    await feedThrough(lines, lineByLine, (session) => [
      createPinoSink({ destination: log, session }),
      createStdoutSink({ stream, indent: '  ' }),
    ]);
    const events = linesOf(readFileSync(log)).map((l) => JSON.parse(l)).filter((e) => e.kind === 'text')
      .map(({ line, channel, parent, depth, agent, msg }) => ({ line, channel, parent, depth, agent, msg }));
    return { events, stdout };
  };
  const atOnce = await run(false);
  assert.deepEqual(await run(true), atOnce);
  const { id, agent } = ORPHAN_FIRST;
  assert.deepEqual(atOnce.events.map((e) => [e.line, e.channel, e.depth, e.agent]), [
    [2, id, 0, null],
    [4, id, 1, agent],
  ]);
  assert.match(atOnce.stdout, /^\[agent·\S+\] before its spawn$/m);
  assert.match(atOnce.stdout, new RegExp(`^\\[${agent}·\\S+\\] after its spawn$`, 'm'));
});

test('a stopped subagent is logged at info, not as an error, with its status, summary and span', () => {
  const tree = new ChannelTree();
  const values = [
    {
      type: 'assistant',
      parent_tool_use_id: null,
      timestamp: '2026-12-06T11:00:01.000Z',
      message: { id: 'm1', content: [{ type: 'tool_use', id: 'toolu_s', name: 'Agent', input: {} }] },
    },
    {
      type: 'system',
      subtype: 'task_notification',
      tool_use_id: 'toolu_s',
      status: 'stopped',
      summary: 'Task stopped by user',
      timestamp: '2026-12-06T11:00:04.000Z',
    },
  ];
  const logged = values.flatMap((value, i) => {
    const { channel, events } = tree.route(value, i + 1);
    const raw = Buffer.from(JSON.stringify(value));
    return pinoEvents({ kind: 'line', lineNo: i + 1, raw, value, channel, events }, 1000);
  });
  const status = logged.filter((e) => e.kind === 'status');
  assert.deepEqual(
    status.map((e) => [e.level, e.fields.status, e.fields.content, e.fields.elapsed_ms]),
    [['info', 'stopped', 'Task stopped by user', 3000]],
  );
});
