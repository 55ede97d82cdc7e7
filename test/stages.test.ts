import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { builtinRegistry } from '../src/chain/builtins.js';
import { runChain } from '../src/chain/chain.js';
import { Session } from '../src/model/session.js';
import { checkTransportTargets, createPinoSink } from '../src/chain/sinks/pino.js';
import { batchLines, pinoLine } from '../src/chain/sinks/pino-batch.js';
import { createStdoutSink } from '../src/chain/sinks/stdout.js';
import { PassThrough, Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { once } from 'node:events';
import { createThinkingTruncator, truncateMiddle } from '../src/chain/stages/thinking-truncator.js';
import { createLineParser } from '../src/chain/stages/line-parser.js';
import { createChannelRouter } from '../src/chain/stages/channel-router.js';
import { createFilesSink } from '../src/chain/sinks/files.js';
import { UsageError } from '../src/errors.js';
import { BIN, ROOT, chunked, linesOf, readTree, tmpDir } from './helpers/helpers.js';

const thinkingLine = (parent: string | null, text: string, type = 'assistant') =>
  JSON.stringify({
    type,
    parent_tool_use_id: parent,
    message: {
      id: `m${Math.random()}`,
      content: [
        { type: 'thinking', thinking: text, signature: 's' },
        { type: 'text', text: 'after' },
      ],
    },
  });
const long = 'A'.repeat(3000) + 'MIDDLE' + 'Z'.repeat(3000);
const inputOf = (type: string) =>
  Buffer.from([thinkingLine(null, long, type), thinkingLine(null, 'short one', type)].join('\n') + '\n');

async function withThinking(mode: string, maxChars = 100, input = inputOf('assistant')) {
  const out = join(tmpDir(), 'out');
  const run = await runChain(chunked([input]), {
    stages: [
      { use: 'line-parser' },
      { use: 'channel-router' },
      { use: 'thinking-truncator', mode, maxChars },
    ],
    sinks: [{ use: 'files', out }],
  });
  return { run, files: readTree(out), index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) };
}

test('truncateMiddle keeps head and tail and says how much was cut', () => {
  const t = truncateMiddle(long, 100);
  assert.equal(t.cut, long.length - 100);
  assert.ok(t.text.startsWith('A'.repeat(70)) && t.text.endsWith('Z'.repeat(30)));
  assert.match(t.text, new RegExp(`\\[…${long.length - 100} chars cut…\\]`));
  assert.deepEqual(truncateMiddle('abc', 100), { text: 'abc', cut: 0 });
});

// A producer may echo thinking on a user line: the policy is the same for it.
for (const [mode, type] of ['keep', 'truncate', 'drop', 'file'].flatMap((m) => [
  [m, 'assistant'],
  [m, 'user'],
])) {
  test(`--thinking ${mode} on ${type} lines: transcript, counts, raw .jsonl untouched`, async () => {
    const input = inputOf(type);
    const { files, index } = await withThinking(mode, 100, input);
    const log = files.get('main.log')!.toString();
    assert.deepEqual(linesOf(files.get('main.jsonl')), linesOf(input), 'raw lines unchanged');
    const main = index.channels[0];
    if (mode === 'keep') {
      assert.ok(log.includes(long));
      assert.deepEqual(main.thinking, { kept_chars: long.length + 9, cut_chars: 0 });
    } else if (mode === 'truncate') {
      assert.ok(!log.includes('MIDDLE') && log.includes('chars cut'));
      assert.ok(log.includes('[thinking] short one'));
      assert.deepEqual(main.thinking, { kept_chars: 100 + 9, cut_chars: long.length - 100 });
    } else if (mode === 'drop') {
      assert.ok(!log.includes('[thinking]'));
      assert.deepEqual(main.thinking, { kept_chars: 0, cut_chars: long.length + 9 });
    } else {
      assert.match(log, /\[thinking\] \(6006 chars, in the \.thinking\.log beside this transcript\)/);
      // Moved out of the transcript: none of it is kept there.
      assert.deepEqual(main.thinking, { kept_chars: 0, cut_chars: long.length + 9 });
      assert.equal(main.thinking_log, 'main.thinking.log');
      assert.ok(files.get('main.thinking.log')!.toString().includes(long));
    }
    assert.ok(log.includes('after'));
  });
}

// A program composing the factories itself: the truncator's options are the run's one policy,
// which every view reads from the run, even a sink made before the truncator.
for (const mode of ['keep', 'truncate', 'drop', 'file'] as const) {
  test(`factories composed by hand, --thinking ${mode}: .log, pino, index.json display and ` +
    'counts all show the truncator\'s policy', async () => {
    const out = join(tmpDir(), 'out');
    const pinoFile = join(tmpDir(), 'events.log');
    const session = new Session();
    const files = createFilesSink({ session, out });
    const pino = createPinoSink({ session, destination: pinoFile });
    const truncator = createThinkingTruncator({ session, mode, maxChars: 100 });
    await pipeline(
      chunked([inputOf('assistant')]),
      createLineParser({ session }),
      createChannelRouter({ session }),
      truncator,
      files,
      pino,
    );
    const tree = readTree(out);
    const log = tree.get('main.log')!.toString();
    const index = JSON.parse(tree.get('index.json')!.toString());
    assert.deepEqual(index.display, { thinking: mode, thinking_chars: 100 });
    assert.deepEqual(session.display, { thinking: mode, thinkingChars: 100 });
    const shown = readFileSync(pinoFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((e) => e.kind === 'thinking')
      .map((e) => e.content as string);
    const whole = long.length + 'short one'.length;
    const counts = index.channels[0].thinking;
    assert.equal(counts.kept_chars + counts.cut_chars, whole);
    if (mode === 'keep') {
      assert.ok(log.includes(long));
      assert.deepEqual(shown, [long, 'short one']);
      assert.equal(counts.cut_chars, 0);
    } else if (mode === 'truncate') {
      assert.ok(!log.includes('MIDDLE') && log.includes(`[…${long.length - 100} chars cut…]`));
      assert.deepEqual(shown, [truncateMiddle(long, 100).text, 'short one']);
      assert.equal(counts.cut_chars, long.length - 100);
    } else if (mode === 'drop') {
      assert.ok(!log.includes('[thinking]'));
      assert.deepEqual(shown, []);
      assert.equal(counts.kept_chars, 0);
    } else {
      assert.ok(!log.includes('MIDDLE') && log.includes('in the .thinking.log beside this transcript'));
      assert.ok(tree.get('main.thinking.log')!.toString().includes(long));
      assert.ok(shown.every((text) => !text.includes('MIDDLE')));
      assert.equal(counts.kept_chars, 0);
    }
  });
}

test('a chain with no thinking truncator shows thinking as its session\'s stated policy says, ' +
  'and counts none', async () => {
  const out = join(tmpDir(), 'out');
  const session = new Session();
  session.stateDisplay({ thinking: 'drop', thinkingChars: 2000 });
  await runChain(
    chunked([inputOf('assistant')]),
    { stages: [{ use: 'line-parser' }, { use: 'channel-router' }], sinks: [{ use: 'files', out }] },
    { session },
  );
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  assert.deepEqual(index.display, { thinking: 'drop', thinking_chars: 2000 });
  assert.ok(!readFileSync(join(out, 'main.log'), 'utf8').includes('[thinking]'));
  assert.equal(index.channels[0].thinking, undefined);
});

test('a second truncator stating another policy for the same run is refused: ERR_DISPLAY_POLICY', () => {
  const session = new Session();
  createThinkingTruncator({ session, mode: 'drop' });
  // The same policy again changes nothing.
  createThinkingTruncator({ session, mode: 'drop' });
  assert.throws(
    () => createThinkingTruncator({ session, mode: 'truncate', maxChars: 50 }),
    (err: UsageError) =>
      err.code === 'ERR_DISPLAY_POLICY' && /drop already, not truncate to 50/.test(err.message),
  );
  assert.deepEqual(session.display, { thinking: 'drop', thinkingChars: 2000 });
});

test('pino sink: one line per event with channel fields and levels; pino-pretty reads it', async () => {
  const out = join(tmpDir(), 'out');
  const pinoFile = join(tmpDir(), 'events.log');
  const lines = [
    {
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id: 'm1',
        content: [
          { type: 'text', text: 'hello' },
          { type: 'tool_use', id: 'toolu_k', name: 'Agent', input: { subagent_type: 'Explore' } },
        ],
      },
    },
    {
      type: 'assistant',
      parent_tool_use_id: 'toolu_k',
      message: { id: 'm2', content: [{ type: 'thinking', thinking: 'hmm', signature: 's' }] },
    },
    {
      type: 'user',
      parent_tool_use_id: null,
      message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_k', content: 'bad', is_error: true }] },
    },
  ].map((l) => JSON.stringify(l));
  await runChain(chunked([Buffer.from(lines.join('\n') + '\nnoise\n')]), {
    stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
    sinks: [
      { use: 'files', out },
      { use: 'pino', destination: pinoFile },
    ],
  });
  const events = readFileSync(pinoFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  const kinds = events.map((e) => `${e.kind}:${e.channel}:${e.level}`);
  assert.deepEqual(kinds, [
    'text:main:30',
    'tool_use:main:30',
    'thinking:toolu_k:30',
    'tool_result:main:40',
    'status:toolu_k:50',
    'quarantine:null:40',
  ]);
  const thinking = events[2];
  assert.deepEqual(
    [thinking.parent, thinking.depth, thinking.agent, thinking.content],
    [null, 1, 'Explore', 'hmm'],
  );
  const pretty = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'pino-pretty', 'bin.js')], {
    input: readFileSync(pinoFile),
    encoding: 'utf8',
  });
  assert.equal(pretty.status, 0);
  assert.match(pretty.stdout, /ERROR.*\n(.*\n)*.*status/);
});

/** Runs lines through parser → router → pino (and whatever `pino` options say); returns the events. */
async function pinoRun(lines: string[], pinoOptions: Record<string, unknown> = {}) {
  const pinoFile = join(tmpDir(), 'events.log');
  await runChain(chunked([Buffer.from(lines.join('\n') + '\n')]), {
    stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
    sinks: [
      { use: 'files', out: join(tmpDir(), 'out') },
      { use: 'pino', destination: pinoFile, ...pinoOptions },
    ],
  });
  return {
    pinoFile,
    events: readFileSync(pinoFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l)),
  };
}

const spawnAndReport = (text: string, report: string) =>
  [
    {
      type: 'assistant',
      parent_tool_use_id: null,
      timestamp: '2026-11-30T10:00:01.000Z',
      message: {
        id: 'm1',
        content: [
          { type: 'text', text },
          {
            type: 'tool_use',
            id: 'toolu_k',
            name: 'Agent',
            input: { subagent_type: 'Explore', prompt: text },
          },
        ],
      },
    },
    {
      type: 'assistant',
      parent_tool_use_id: 'toolu_k',
      timestamp: '2026-11-30T10:00:02.500Z',
      message: { id: 'm2', content: [{ type: 'thinking', thinking: text, signature: 's' }] },
    },
    {
      type: 'user',
      parent_tool_use_id: null,
      message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_k', content: report }] },
    },
  ].map((l) => JSON.stringify(l));

test("pino events: a one-line msg for each, and the line's own timestamp as time", async () => {
  const before = Date.now();
  const { events, pinoFile } = await pinoRun([
    ...spawnAndReport('hello \x1b[31mred\x1b[0m\nsecond line', 'all done'),
    'noise',
  ]);
  assert.deepEqual(
    events.map((e) => e.msg),
    [
      '[main] hello \\x1b[31mred\\x1b[0m\\nsecond line',
      '[main] tool Agent {"subagent_type":"Explore","prompt":"hello \\u001b[31mred\\u001b[0m\\nsecond line"}',
      '[Explore·k] thinking: hello \\x1b[31mred\\x1b[0m\\nsecond line',
      '[main] result: all done',
      '[Explore·k] completed — all done',
      'quarantined line 4 (not-object): noise',
    ],
  );
  assert.deepEqual(
    events.slice(0, 3).map((e) => e.time),
    ['2026-11-30T10:00:01.000Z', '2026-11-30T10:00:01.000Z', '2026-11-30T10:00:02.500Z'],
  );
  // Lines without a timestamp are logged at processing time.
  for (const e of events.slice(3))
    assert.ok(Date.parse(e.time) >= before - 1000 && Date.parse(e.time) <= Date.now() + 1000, e.time);
  const pretty = spawnSync(
    process.execPath,
    [join(ROOT, 'node_modules', 'pino-pretty', 'bin.js'), '--colorize', 'false'],
    { input: readFileSync(pinoFile), encoding: 'utf8' },
  );
  const headlines = pretty.stdout.split('\n').filter((l) => /^\[[^\]]+\] (INFO|WARN|ERROR)/.test(l));
  assert.equal(headlines.length, events.length);
  for (const [i, h] of headlines.entries()) assert.ok(h.endsWith(`: ${events[i].msg}`), h);
  assert.doesNotMatch(pretty.stdout, /\x1b/, 'no raw control characters reach the terminal');
});

test('pino content is capped by maxContentChars for ' +
  'every kind of event, and msg stays one short line', async () => {
  const long = 'A'.repeat(300) + 'TAIL';
  const { events } = await pinoRun(
    [
      ...spawnAndReport(long, long),
      long,
      JSON.stringify({
        type: 'user',
        parent_tool_use_id: null,
        message: { content: [{ type: 'tool_result', tool_use_id: 'x', content: long, is_error: true }] },
      }),
    ],
    { maxContentChars: 50 },
  );
  assert.deepEqual(
    events.map((e) => e.kind),
    ['text', 'tool_use', 'thinking', 'tool_result', 'status', 'quarantine', 'tool_result'],
  );
  for (const e of events) {
    // What is kept besides the one marker fits the limit; the marker says what was cut.
    const kept = e.content.replace(/ \[…(\d+ chars )?cut…\] ?/, '');
    assert.ok(kept.length <= 50, `${e.kind} content: ${kept.length} chars kept`);
    assert.match(e.content, / \[…(\d+ chars )?cut…\]/, e.kind);
    assert.ok(e.msg.length <= 200 && !e.msg.includes('\n'), `${e.kind} msg: ${e.msg.length} chars`);
  }
});

test("createPinoSink({ logger }): events go through the host's own pino logger or child", async () => {
  const { default: pino } = await import('pino');
  const file = join(tmpDir(), 'host.log');
  const dest = pino.destination({ dest: file, sync: true });
  const host = pino({ base: { app: 'host' } }, dest);
  const child = host.child({ job: 42 });
  const lines = spawnAndReport('hi', 'ok');
  const run = new Session();
  const registry = builtinRegistry();
  const sink = createPinoSink({ logger: child, session: run, maxContentChars: 100 });
  const { pipeline } = await import('node:stream/promises');
  const { buildChain, createDiscard } = await import('../src/chain/chain.js');
  const { streams } = buildChain(
    { stages: [{ use: 'line-parser' }, { use: 'channel-router' }], sinks: [] },
    { registry, session: run },
  );
  await pipeline([
    chunked([Buffer.from(lines.join('\n') + '\n')]),
    ...streams,
    sink,
    createDiscard(),
  ] as unknown as NodeJS.ReadableStream[]);
  child.info('the host goes on logging');
  dest.flushSync();
  const events = readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.equal(events.length, 6);
  for (const e of events) assert.deepEqual([e.app, e.job], ['host', 42]);
  assert.deepEqual(
    events.slice(0, 5).map((e) => e.kind),
    ['text', 'tool_use', 'thinking', 'tool_result', 'status'],
  );
  assert.equal(events[0].msg, '[main] hi');
  assert.equal(typeof events[0].time, 'number', "the host's time format is kept");
  assert.equal(events[0].timestamp, '2026-11-30T10:00:01.000Z', "the line's timestamp is a field");
  assert.equal(events[5].msg, 'the host goes on logging', 'the host logger is not ended');
});

test('a pino transport target pino does not find (a package not installed, a path that does not ' +
  'exist, in a list too) is refused before the output folder is made, one that fails as it loads ' +
  'when the sink starts it: exit 2, ERR_CONFIG, one line', () => {
  const dir = tmpDir();
  writeFileSync(join(dir, 'throws.mjs'), 'throw new Error("transport failed to load");');
  const notFound = /cannot load \(no module is found for target "[^"]+": give pino\/file, /;
  // A transport that throws as it loads: its worker's error or its exit may reach pino first.
  for (const [transport, named, why, folderMade] of [
    [{ target: 'no-such-transport-xyz' }, 'no-such-transport-xyz', notFound, false],
    [{ target: join(dir, 'absent.mjs') }, join(dir, 'absent.mjs'), notFound, false],
    [
      { targets: [{ target: 'pino/file' }, { target: 'no-such-transport-xyz' }] },
      'pino/file, no-such-transport-xyz',
      notFound,
      false,
    ],
    [{ pipeline: [{ target: 'no-such-transport-xyz' }] }, 'no-such-transport-xyz', notFound, false],
    [
      { target: join(dir, 'throws.mjs') },
      join(dir, 'throws.mjs'),
      /cannot start \((transport failed to load|its worker exited)\)/,
      true,
    ],
  ] as const) {
    const config = join(dir, `c${Math.random()}.json`);
    const out = join(tmpDir(), 'o');
    writeFileSync(config, JSON.stringify({ sinks: [{ use: 'files', out }, { use: 'pino', transport }] }));
    const r = spawnSync(
      process.execPath,
      [BIN, '--config', config, '-q', join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl')],
      { encoding: 'utf8', timeout: 30_000 },
    );
    assert.equal(r.status, 2, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.ok(r.stderr.includes(`pino transport ${named}:`), r.stderr);
    assert.match(r.stderr, why);
    assert.match(r.stderr, /\[ERR_CONFIG\]$/m);
    assert.equal(existsSync(out), folderMade, `${named}: the output folder made: ${folderMade}`);
  }
});

/** Whether pino itself starts a transport: its worker ready before an error or its exit. */
async function pinoStarts(transport: Record<string, unknown>): Promise<boolean> {
  const { default: pino } = await import('pino');
  let stream: ReturnType<typeof pino.transport>;
  try {
    stream = pino.transport(transport as unknown as Parameters<typeof pino.transport>[0]);
  } catch {
    return false;
  }
  const started = await new Promise<boolean>((resolve) => {
    stream.once('ready', () => resolve(true));
    stream.once('error', () => resolve(false));
    stream.once('close', () => resolve(false));
  });
  stream.end();
  return started;
}

test('a transport is accepted before the chain is made when pino finds its targets (pino/file, an ' +
  'installed package, an absolute path or file:// URL that exists, a path beside its caller, in ' +
  'targets and pipeline) and refused, naming the target, when it does not', async () => {
  const dir = tmpDir();
  const mine = join(dir, 'mine.mjs');
  const make = '() => new Writable({ write(chunk, encoding, done) { done(); } })';
  writeFileSync(mine, `import { Writable } from "node:stream"; export default ${make};`);
  const plain = `const { Writable } = require("node:stream"); module.exports = ${make};`;
  writeFileSync(join(dir, 'plain.js'), plain);
  const pass = join(dir, 'pass.mjs');
  writeFileSync(pass, 'import { PassThrough } from "node:stream"; export default () => new PassThrough();');
  const log = join(dir, 'events.log');
  const pinoFile = { target: 'pino/file', options: { destination: log } };
  const found: Record<string, unknown>[] = [
    pinoFile,
    { target: 'pino-pretty', options: { destination: log } },
    { target: mine },
    // An absolute path is taken as it is, whatever the callers.
    { target: mine, caller: [] },
    { target: pathToFileURL(mine).href },
    // Without its extension, pino's worker requires it: `.js` is added.
    { target: join(dir, 'plain') },
    { target: './mine.mjs', caller: join(dir, 'program.js') },
    { targets: [pinoFile, { pipeline: [{ target: mine }] }] },
    { pipeline: [{ target: pass }, pinoFile] },
  ];
  const lost: [Record<string, unknown>, string][] = [
    [{ target: 'no-such-transport-xyz' }, 'no-such-transport-xyz'],
    [{ target: join(dir, 'absent.mjs') }, join(dir, 'absent.mjs')],
    [{ target: pathToFileURL(join(dir, 'absent.mjs')).href }, pathToFileURL(join(dir, 'absent.mjs')).href],
    // Found from the caller's file, not from the working folder: without a caller, from subtee's.
    [{ target: './mine.mjs' }, './mine.mjs'],
    [{ targets: [pinoFile, { pipeline: [{ target: 'no-such-transport-xyz' }] }] }, 'no-such-transport-xyz'],
    [{ pipeline: [{ target: pass }, { target: 'no-such-transport-xyz' }] }, 'no-such-transport-xyz'],
  ];
  for (const transport of found) {
    await checkTransportTargets(transport);
    assert.equal(await pinoStarts(transport), true, `pino starts ${JSON.stringify(transport)}`);
  }
  for (const [transport, target] of lost) {
    await assert.rejects(checkTransportTargets(transport), (err: UsageError) => {
      assert.equal(err.code, 'ERR_CONFIG');
      assert.match(err.message, /^pino transport [^\n]+: cannot load \(no module is found for target /);
      assert.ok(err.message.includes(`target ${JSON.stringify(target)}:`), err.message);
      // The headline names it among the config's targets.
      assert.ok(err.message.split(': cannot load')[0].includes(target), err.message);
      return true;
    });
    assert.equal(await pinoStarts(transport), false, `pino does not start ${JSON.stringify(transport)}`);
  }
  // A caller that is no file path is refused as such, not as a target not found.
  await assert.rejects(checkTransportTargets({ target: 'pino/file', caller: { a: 1 } }), {
    code: 'ERR_CONFIG',
    message: 'pino transport: caller must be a file path or a list of them',
  });
});

test('a line the pino sink cannot read is counted ' +
  'and reported, and the others are still logged', async () => {
  const { default: pino } = await import('pino');
  const file = join(tmpDir(), 'events.log');
  const dest = pino.destination({ dest: file, sync: true });
  const run = new Session();
  const sink = createPinoSink({ logger: pino({}, dest), session: run });
  const unreadable = {
    type: 'assistant',
    message: {
      content: [
        {
          type: 'text',
          get text(): string {
            throw new Error('unreadable');
          },
        },
      ],
    },
  };
  const readable = { type: 'assistant', message: { content: [{ type: 'text', text: 'still logged' }] } };
  const record = (lineNo: number, value: Record<string, unknown>) => ({
    kind: 'line' as const,
    lineNo,
    raw: Buffer.from('{}'),
    value,
    channel: run.tree.main,
  });
  const { pipeline } = await import('node:stream/promises');
  const { Readable } = await import('node:stream');
  const { createDiscard } = await import('../src/chain/chain.js');
  const batches = [[record(1, unreadable), record(2, readable)]];
  await pipeline([
    Readable.from(batches, { objectMode: true }),
    sink,
    createDiscard(),
  ] as unknown as NodeJS.ReadableStream[]);
  dest.flushSync();
  const events = readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    events.filter((e) => e.kind === 'text').map((e) => [e.line, e.content]),
    [[2, 'still logged']],
  );
  assert.ok(
    events.some((e) => e.kind === 'warning' && e.code === 'RECORD_FAILED'),
    'the warning is logged too',
  );
  assert.equal(run.input.failed, 1);
  assert.deepEqual(
    run.warnings.map((w) => w.code),
    ['RECORD_FAILED'],
  );
});

test('a pino line rendered by the sink is byte for byte what pino writes for the same event', async () => {
  const { default: pino } = await import('pino');
  const fields: Array<Record<string, unknown>> = [
    { kind: 'text', channel: 'main', parent: null, depth: 0, agent: null, line: 7, content: 'plain' },
    { kind: 'tool_use', tool: 'Bash', content: 'say "hi" \\ back', skipped: undefined, n: -0 },
    { kind: 'status', content: 'tab\there, bell \u0007', cost_usd: null, ok: true, big: 1e21 },
    { kind: 'text', content: `${'long '.repeat(30)}"quoted"`, lone: 'a\ud800b', inf: Infinity },
    { kind: 'quarantine', 'odd "key"': 'é — 日本語 🚀', nested: { a: [1, 'x'] }, fn: () => 1 },
  ];
  const messages = ['[main] plain', 'tool "x"', 'ctl \u001b[31m', 'a\ud800', `${'m'.repeat(150)}`];
  const levels = [['info', 30], ['warn', 40], ['error', 50]] as const;
  for (const [k, f] of fields.entries()) {
    for (const [name, number] of levels) {
      let written = '';
      const time = '2026-01-02T03:04:05.678Z';
      const logger = pino(
        { base: null, timestamp: () => `,"time":"${time}"`, messageKey: 'msg' },
        { write: (s: string) => void (written += s) },
      );
      logger[name](f, messages[k]);
      assert.equal(pinoLine(number, time, f, messages[k]), written, `${name} ${k}`);
    }
  }
});

test('a pino line whose naming fields repeat is what pino writes, each time, past 5,000 names', async () => {
  const { default: pino } = await import('pino');
  const time = '2026-01-02T03:04:05.678Z';
  const names = ['main', 'toolu_01"quoted"', 'back\\slash', 'bell \u0007', 'lone \ud800', 'é 日本'];
  // Every name twice (rendered, then remembered), then 5,000 more names, then every name again.
  const order = [...names, ...names, ...Array.from({ length: 5000 }, (_, k) => `agent-${k}`), ...names];
  for (const [k, name] of order.entries()) {
    const fields = { kind: 'text', channel: name, parent: name, agent: name, role: name, tool: name, n: k };
    let written = '';
    const logger = pino(
      { base: null, timestamp: () => `,"time":"${time}"`, messageKey: 'msg' },
      { write: (s: string) => void (written += s) },
    );
    logger.info(fields, name);
    assert.equal(pinoLine(30, time, fields, name), written, `${k}: ${name}`);
  }
});

test('pino lines gathered by batchLines reach the destination as the bytes of each line in order', () => {
  const lines = [
    '{"plain":1}\n',
    '{"text":"é — 日本語 🚀"}\n',
    '{"lone":"a\ud800b"}\n',
    `{"long":"${'x'.repeat(40_000)}"}\n`,
    `{"wide":"${'日'.repeat(20_000)}"}\n`,
    ...Array.from({ length: 3000 }, (_, k) => `{"line":${k},"pad":"${'p'.repeat(k % 97)}"}\n`),
  ];
  const handed: Buffer[] = [];
  const batch = batchLines({ write: (data) => (handed.push(data), true) });
  lines.forEach((line, k) => {
    batch.stream.write(line);
    if (k % 1000 === 999) batch.flush();
  });
  batch.flush();
  batch.flush(); // nothing held: nothing written
  // The pieces as they were handed on, read only now: none was written into again.
  assert.ok(Buffer.concat(handed).equals(Buffer.from(lines.join(''), 'utf8')));
  assert.ok(handed.length < lines.length / 100, `${handed.length} writes for ${lines.length} lines`);
});

test('the stdout sink lets go of its stream when it ends ' +
  'or is destroyed (the stream does not hold the run)', async () => {
  const listeners = (s: PassThrough) => s.listenerCount('close') + s.listenerCount('error');
  for (const end of ['ended', 'destroyed'] as const) {
    const out = new PassThrough();
    out.resume();
    const before = listeners(out);
    const sink = createStdoutSink({ stream: out, mode: 'text', session: new Session() });
    assert.ok(listeners(out) > before, 'the sink listens while it runs');
    if (end === 'ended') {
      sink.resume();
      sink.end();
      await once(sink, 'close');
    } else {
      sink.destroy();
      await once(sink, 'close');
    }
    assert.equal(listeners(out), before, end);
  }
});

test('each warning reaches pino once, in the order ' +
  'recorded; one told while no line comes is logged then', async () => {
  const { definePlugin } = await import('../src/chain/plugin.js');
  const { setImmediate: turn } = await import('node:timers/promises');
  const file = join(tmpDir(), 'events.log');
  // A plugin stage that warns on some lines: warnings recorded upstream of pino, in an order.
  const warner = definePlugin({
    name: 'warner',
    kind: 'stage',
    kit: '^0.1.0',
    options: {},
    create: (_o, ctx) => (rec) => {
      if (rec.lineNo === 1) ctx.session.warn('FIRST', 'on line 1');
      if (rec.lineNo === 3) ctx.session.warn('THIRD', 'on line 3');
      if (rec.lineNo === 3) ctx.session.warn('FIRST', 'told once only');
      return rec;
    },
  });
  const registry = builtinRegistry();
  registry.add(warner);
  const input = new PassThrough();
  const run = new Session();
  const spec = {
    stages: [
      { use: 'line-parser' },
      { use: 'warner' },
      { use: 'channel-router' },
      {
        use: 'idle-watchdog',
        ...{ idleTimeoutMs: 100, modelTimeoutMs: 100, graceMs: 0, checkIntervalMs: 20, onStall: 'warn' },
      },
    ],
    sinks: [{ use: 'pino', destination: file }],
  };
  const done = runChain(input, spec, { session: run, registry });
  const text = (t: string) =>
    JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: t }] } });
  input.write(`${text('one')}\n${text('two')}\n${text('three')}\n`);
  // Silence: the watchdog warns STALL while no line comes; pino has it as soon as it is recorded.
  const stall = await run.warningAt(2);
  assert.equal(stall.code, 'STALL');
  await turn();
  const logged = () =>
    readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { kind: string; code?: string; content?: string });
  assert.deepEqual(
    logged()
      .filter((e) => e.kind === 'warning')
      .map((e) => e.code),
    ['FIRST', 'THIRD', 'STALL'],
  );
  input.end(`${text('four')}\n`);
  await done;
  const events = logged();
  const warnings = events.filter((e) => e.kind === 'warning');
  assert.deepEqual(
    warnings.map((e) => [e.code, e.content]),
    run.warnings.map((w) => [w.code, w.message]),
  );
  assert.deepEqual(
    run.warnings.map((w) => w.code),
    ['FIRST', 'THIRD', 'STALL'],
  );
  // The stall is logged before the line that ended the silence.
  const stallAt = events.findIndex((e) => e.code === 'STALL');
  assert.ok(stallAt < events.findIndex((e) => e.kind === 'text' && e.content === 'four'));
});

test('a stage stops the input through the stop the ' +
  'chain hands it: what was read reaches the sinks', async () => {
  const { definePlugin } = await import('../src/chain/plugin.js');
  const { buildChain } = await import('../src/chain/chain.js');
  const seen: Array<((reason: Error) => void) | undefined> = [];
  const stopper = definePlugin({
    name: 'stopper',
    kind: 'stage',
    kit: '^0.1.0',
    options: {},
    create: (_o, ctx) => {
      seen.push(ctx.stopInput);
      return (rec) => {
        if (rec.lineNo === 2) ctx.stopInput?.(new Error('enough'));
        return rec;
      };
    },
  });
  const registry = builtinRegistry();
  registry.add(stopper);
  const out = join(tmpDir(), 'out');
  const spec = {
    stages: [{ use: 'line-parser' }, { use: 'stopper' }, { use: 'channel-router' }],
    sinks: [{ use: 'files', out }],
  };
  // A program that runs the chain itself gets no stop: nothing would read it.
  const built = { ...spec, sinks: [{ use: 'files', out: join(tmpDir(), 'built') }] };
  buildChain(built, { registry }).streams.forEach((s) => s.destroy());
  assert.equal(seen.pop(), undefined);
  const input = new PassThrough();
  const line = (t: string) => JSON.stringify({ type: 'user', message: { content: t } });
  input.write(`${line('a')}\n${line('b')}\n`);
  // The input never ends: the stop ends the run.
  // A plugin's stop is reported as its own, the reason's message kept.
  const stopped = { code: 'ERR_PLUGIN_FAILED', message: 'plugin stopper stopped the run: enough' };
  await assert.rejects(runChain(input, spec, { registry }), stopped);
  assert.equal(typeof seen.pop(), 'function');
  assert.equal(readFileSync(join(out, 'main.jsonl'), 'utf8'), `${line('a')}\n${line('b')}\n`);
  assert.equal(JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')).input.lines, 2);
});

test('the channel router hands on a new frozen envelope ' +
  'per line; what it was given is not written on', async () => {
  const { createChannelRouter } = await import('../src/chain/stages/channel-router.js');
  const { lineOf } = await import('../src/model/record.js');
  const { viewOf } = await import('../src/model/line-view.js');
  const run = new Session();
  const router = createChannelRouter({ session: run });
  // Frozen as given: a router that wrote a field on them would fail them (quarantined instead).
  const given = spawnAndReport('hi', 'ok').map((text, i) =>
    Object.freeze({ kind: 'line' as const, lineNo: i + 1, raw: Buffer.from(text), value: JSON.parse(text) }),
  );
  const batch = [...given];
  router.end(batch);
  const [out] = (await router.toArray()) as Array<Array<import('../src/model/record.js').LineRecord>>;
  assert.equal(out.length, given.length);
  assert.deepEqual(batch, given, 'the batch it was given is as it was');
  assert.deepEqual(run.input.failed, 0);
  for (const [i, rec] of out.entries()) {
    assert.equal(rec.kind, 'line');
    assert.notEqual(rec, given[i]);
    assert.ok(Object.isFrozen(rec), `line ${rec.lineNo} is frozen`);
    assert.equal(lineOf(rec), given[i]);
    // The bytes and the value are the given record's, shared, not copied.
    assert.equal(rec.raw, given[i].raw);
    assert.equal(rec.value, given[i].value);
    assert.equal(viewOf(rec), given[i].value);
    assert.equal(Object.hasOwn(given[i], 'channel'), false);
    assert.throws(() => {
      (rec as { channel: unknown }).channel = null;
    }, TypeError);
  }
  // The spawn's events ride on the line that caused them; the subagent's lines are on its channel.
  assert.deepEqual(
    out.map((r) => [r.channel?.id ?? null, (r.events ?? []).map((e) => `${e.type}:${e.channel.id}`)]),
    [
      [null, ['open:toolu_k']],
      ['toolu_k', []],
      [null, ['status:toolu_k']],
    ],
  );
  assert.ok(out.filter((r) => r.events).every((r) => Object.isFrozen(r.events)));
});

test('buildChain of subtee/chain makes the sinks whose code a run imports only ' +
  'when it names them', async () => {
  const { buildChain } = await import('../src/entry/chain.js');
  const dir = tmpDir();
  const out = join(dir, 'out');
  const events = join(dir, 'events.log');
  const sinks = [
    { use: 'files', out },
    { use: 'pino', destination: events },
    { use: 'report', out, html: true, quiet: true },
  ];
  const { streams } = buildChain({ stages: [{ use: 'line-parser' }, { use: 'channel-router' }], sinks });
  const input = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));
  await pipeline([Readable.from([input]), ...streams] as unknown as NodeJS.ReadableStream[]);
  assert.ok(linesOf(readFileSync(events)).length > 0);
  assert.match(readFileSync(join(out, 'report.html'), 'utf8'), /^<!doctype html>/i);
});

test('buildChain of subtee/chain refuses a report sink with html and no out before any sink is ' +
  'made: one ERR_CONFIG line naming the sink, no folder left behind', async () => {
  const { buildChain } = await import('../src/entry/chain.js');
  const out = join(tmpDir(), 'out');
  const stages = [{ use: 'line-parser' }, { use: 'channel-router' }];
  const sinks = [{ use: 'files', out }, { use: 'report', html: true }];
  assert.throws(() => buildChain({ stages, sinks }), {
    code: 'ERR_CONFIG',
    message: /^invalid chain: sinks\[1\]: html needs out, the output folder the files sink writes$/,
  });
  assert.ok(!existsSync(out), 'the files sink before it made no folder');
});

test("require('subtee/chain') works from CommonJS, and its buildChain makes a sink loaded when named", () => {
  const dir = tmpDir();
  const events = join(dir, 'events.log');
  const program =
    "const { buildChain } = require('subtee/chain');" +
    "const { streams } = buildChain({ stages: [{ use: 'line-parser' }]," +
    ` sinks: [{ use: 'pino', destination: ${JSON.stringify(events)} }] });` +
    'console.log(streams.length);';
  const r = spawnSync(process.execPath, ['-e', program], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.stderr, '');
  assert.equal(r.stdout, '2\n');
});
