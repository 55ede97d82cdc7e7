import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync, appendFileSync, existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import {
  addColumnsDdl,
  foreignShape,
  keyLosesParts,
  RowBuilder,
  tableColumns,
  tableDdl,
  TOOL_NAMES_REMEMBERED,
  type ChannelRow,
  type Entry,
  type EventRow,
} from '../src/chain/sinks/clickhouse-rows.js';
import { quoteTableName } from '../src/chain/sinks/clickhouse-options.js';
import { claimFile, findSpoolFiles, readSpool, Spool } from '../src/chain/sinks/clickhouse-spool.js';
import { fixtureFiles, linesOf, sampleFiles, tmpDir } from './helpers/helpers.js';
import { routeThrough } from './helpers/otlp-tree.js';
import { CUT_LENGTHS, displayPolicy, storedText } from '../src/model/display.js';
import type { LineRecord } from '../src/model/record.js';

async function rowsOf(
  input: Buffer,
  options: ConstructorParameters<typeof RowBuilder>[0] = {},
  chunkBytes?: number,
  maxLineBytes?: number,
) {
  let made: RowBuilder | null = null;
  const entries: Entry[] = [];
  const { run, index } = await routeThrough(
    input,
    (batch, session) => {
      made ??= new RowBuilder({ costs: session.cost, ...options });
      for (const rec of batch) entries.push(...made.rows(rec));
    },
    chunkBytes,
    maxLineBytes,
  );
  const builder: RowBuilder = made!;
  entries.push(...builder.releaseUntimed());
  const final = run.tree
    .channels()
    .map((ch) => builder.channelRow(ch, { final: true, stalled: run.stalled, interrupted: run.interrupted }));
  return {
    builder,
    index,
    events: entries.filter((e) => e.t === 'events').map((e) => e.r as EventRow),
    midRun: entries.filter((e) => e.t === 'channels').map((e) => e.r as ChannelRow),
    final,
  };
}

for (const file of fixtureFiles()) {
  test(`rows of ${basename(file)}: one event per line, tokens and channels as in index.json`, async () => {
    const input = readFileSync(file);
    const { events, midRun, final, index, builder } = await rowsOf(input);
    const nonBlank = linesOf(input)
      .map((l, i) => [l, i + 1] as const)
      .filter(([l]) => l.trim() !== '')
      .map(([, n]) => n);
    assert.deepEqual(
      events.map((e) => e.line),
      nonBlank,
      'one row per non-blank line, keyed by its line number',
    );
    assert.equal(events.length, index.input.lines);
    const runId = JSON.parse(linesOf(input)[0]).uuid;
    assert.ok(
      events.every((e) => e.run === runId) && final.every((c) => c.run === runId),
      "run = the first line's uuid",
    );
    assert.ok(
      events.every((e) => e.session === index.session_id || e.session === ''),
      'session',
    );
    assert.ok(
      events.every((e) => e.ts_ms > 0 && e.ts === Math.floor(e.ts_ms / 1000)),
      'every row has a stream time',
    );
    for (const c of index.channels) {
      const mine = events.filter((e) => e.channel === (c.id ?? ''));
      assert.equal(mine.length, c.lines, `lines of ${c.id}`);
      assert.equal(
        mine.reduce((n, e) => n + e.input_tokens, 0),
        c.usage.input_tokens ?? 0,
        `input_tokens of ${c.id}`,
      );
      // Event rows carry the lines' own output tokens; index.json's are true or estimated.
      if (index.cost.output_tokens === 'stream')
        assert.equal(
          mine.reduce((n, e) => n + e.output_tokens, 0),
          c.usage.output_tokens ?? 0,
          `output_tokens of ${c.id}`,
        );
      const row = final.find((r) => r.channel === (c.id ?? ''))!;
      assert.deepEqual(
        [
          row.parent,
          row.depth,
          row.agent,
          row.status,
          row.lines,
          row.tool_uses,
          row.input_tokens,
          row.output_tokens,
          row.model,
          row.cost_usd,
        ],
        [
          c.parent ?? '',
          c.depth ?? -1,
          c.id === null ? 'main' : (c.agent ?? ''),
          c.status,
          c.lines,
          c.counts.tool_use,
          c.usage.input_tokens ?? 0,
          c.usage.output_tokens ?? 0,
          c.models[0] ?? '',
          c.cost.usd,
        ],
        `channel row of ${c.id}`,
      );
      assert.equal(row.first_seen_ms, Date.parse(c.first_seen));
      assert.ok(
        midRun.filter((r) => r.channel === (c.id ?? '')).every((r) => r.ver < row.ver),
        'the final row outranks every earlier one',
      );
      assert.ok(row.ver > builder.lines, 'even one taken at the last line');
    }
  });
}

test("event rows' token columns are the run model's usage events, line by line: " +
  "with message_delta events a channel's rows add up to index.json's exact output tokens", async () => {
  for (const file of fixtureFiles()) {
    const usage = new Map<number, NonNullable<LineRecord['usage']>>();
    const input = readFileSync(file);
    let made: RowBuilder | null = null;
    const rows: EventRow[] = [];
    const { index } = await routeThrough(input, (batch, session) => {
      made ??= new RowBuilder({ costs: session.cost });
      for (const rec of batch) {
        if (rec.kind === 'line' && rec.usage) usage.set(rec.lineNo, rec.usage);
        rows.push(...made.rows(rec).flatMap((e) => (e.t === 'events' ? [e.r as EventRow] : [])));
      }
    });
    for (const row of rows) {
      const t = usage.get(row.line)?.tokens;
      assert.deepEqual(
        [row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_creation_tokens],
        t
          ? [
              t.input_tokens,
              t.output_tokens,
              t.cache_read_input_tokens,
              t.cache_creation_5m_input_tokens + t.cache_creation_1h_input_tokens,
            ]
          : [0, 0, 0, 0],
        `${basename(file)} line ${row.line}`,
      );
    }
    for (const c of index.channels) {
      if (c.cost.basis !== 'exact' && c.cost.basis !== 'stream') continue;
      const mine = rows.filter((e) => e.channel === (c.id ?? ''));
      const output = mine.reduce((n, e) => n + e.output_tokens, 0);
      assert.equal(output, c.usage.output_tokens ?? 0, `${basename(file)}: output_tokens of ${c.id}`);
    }
  }
});

/**
 * An independent reading of a stream's tool columns, line by line: the first tool_use's name
 * or the name of the call the first tool_result answers, the first id, any is_error.
 */
function toolColumnsRead(input: Buffer): Map<number, Pick<EventRow, 'tool' | 'tool_use_id' | 'is_error'>> {
  const names = new Map<string, string>();
  const out = new Map<number, Pick<EventRow, 'tool' | 'tool_use_id' | 'is_error'>>();
  linesOf(input).forEach((text, i) => {
    if (text.trim() === '') return;
    const v = JSON.parse(text);
    let [tool, id, isError] = ['', '', v.type === 'result' && v.is_error === true];
    for (const b of v.type === 'assistant' || v.type === 'user' ? (v.message?.content ?? []) : []) {
      if (b.type === 'tool_use' && v.type === 'assistant') {
        names.set(b.id, b.name);
        tool ||= b.name;
        id ||= b.id;
      } else if (b.type === 'tool_result') {
        tool ||= names.get(b.tool_use_id) ?? '';
        id ||= b.tool_use_id;
        isError ||= b.is_error === true;
      }
    }
    out.set(i + 1, { tool, tool_use_id: id, is_error: isError ? 1 : 0 });
  });
  return out;
}

test("event rows' tool columns are the run model's tool events: a channel's tool_uses and tool_results " +
  "add up to index.json's counts, a result's row names the call it answers", async () => {
  for (const file of [...fixtureFiles(), ...sampleFiles()]) {
    const input = readFileSync(file);
    const { events, index } = await rowsOf(input);
    for (const c of index.channels) {
      const mine = events.filter((e) => e.channel === (c.id ?? ''));
      assert.deepEqual(
        [mine.reduce((n, e) => n + e.tool_uses, 0), mine.reduce((n, e) => n + e.tool_results, 0)],
        [c.counts.tool_use, c.counts.tool_result],
        `${basename(file)}: tool_uses and tool_results of ${c.id}`,
      );
    }
    const read = toolColumnsRead(input);
    for (const row of events)
      assert.deepEqual(
        { tool: row.tool, tool_use_id: row.tool_use_id, is_error: row.is_error },
        read.get(row.line),
        `${basename(file)} line ${row.line}`,
      );
    assert.ok(
      events.some((e) => e.tool_results > 0 && e.tool !== ''),
      `${basename(file)}: sanity: a result row named its call`,
    );
  }
});

test("a spooled line's row has its tool and token columns as a held line's: with every line over " +
  "1 KiB spooled, a channel's rows still add up to index.json's counts and usage", async () => {
  let spooledTools = 0;
  for (const file of [...fixtureFiles(), ...sampleFiles()]) {
    const input = readFileSync(file);
    const held = await rowsOf(input);
    const spooled = await rowsOf(input, {}, undefined, 1024);
    const columns = (events: EventRow[], id: string | null) => {
      const mine = events.filter((e) => e.channel === (id ?? ''));
      const sum = (k: keyof EventRow) => mine.reduce((n, e) => n + (e[k] as number), 0);
      return [sum('tool_uses'), sum('tool_results'), sum('input_tokens'), sum('cache_read_tokens')];
    };
    for (const c of spooled.index.channels) {
      const name = `${basename(file)}: ${c.id}`;
      const counted = [c.counts.tool_use, c.counts.tool_result, c.usage.input_tokens ?? 0,
        c.usage.cache_read_input_tokens ?? 0];
      assert.deepEqual(columns(spooled.events, c.id), counted, name);
      assert.deepEqual(columns(spooled.events, c.id), columns(held.events, c.id), `${name}, held`);
    }
    const withTools = spooled.events.filter((e) => e.kind === 'spooled' && e.tool_uses + e.tool_results > 0);
    spooledTools += withTools.length;
  }
  assert.ok(spooledTools > 0, 'sanity: some spooled line had a tool call or result');
  const big = 'x'.repeat(3000);
  const call = { type: 'tool_use', id: 'tu1', name: 'Bash', input: { command: 'ls' } };
  const message = { id: 'm1', role: 'assistant', content: [{ type: 'text', text: big }, call],
    usage: { input_tokens: 7, output_tokens: 3 } };
  const lines = [
    JSON.stringify({ type: 'assistant', timestamp: '2026-01-01T00:00:00Z', message }),
    JSON.stringify({ type: 'user', timestamp: '2026-01-01T00:00:01Z',
      message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'tu1', content: big }] } }),
  ];
  const { events, index } = await rowsOf(Buffer.from(lines.join('\n') + '\n'), {}, undefined, 1024);
  assert.deepEqual(
    events.map((e) => [e.kind, e.tool, e.tool_use_id, e.tool_uses, e.tool_results]),
    [['spooled', 'Bash', 'tu1', 1, 0], ['spooled', 'Bash', 'tu1', 0, 1]],
  );
  // A spooled line's value keeps no `message.usage`: the ledger counts none, and no row shows any.
  assert.equal(events[0].input_tokens, index.channels[0].usage.input_tokens ?? 0);
});

const line = (v: Record<string, unknown>) => JSON.stringify(v);
const ts = '2026-11-30T09:00:00.000Z';

/** An assistant (or user) line on main with these content blocks. */
const blocksLine = (type: 'assistant' | 'user', id: string, content: unknown[]) =>
  line({ type, message: { id, role: type, content }, parent_tool_use_id: null, uuid: id, timestamp: ts });

async function eventRows(lines: string[], options: ConstructorParameters<typeof RowBuilder>[0] = {}) {
  const { events, index } = await rowsOf(Buffer.from(lines.join('\n') + '\n'), options, 1 << 20);
  return { events, index };
}

test('tool columns of a line with several calls or results: counted each, the first named, ' +
  'is_error from any result; a block the tree does not count gives no column', async () => {
  const use = (id: unknown, name: unknown) => ({ type: 'tool_use', id, name, input: {} });
  const result = (id: string, isError?: boolean) =>
    ({ type: 'tool_result', tool_use_id: id, content: 'ok', is_error: isError });
  const { events, index } = await eventRows([
    blocksLine('assistant', 'a1', [use('t1', 'Read'), use('t2', 'Grep')]),
    blocksLine('user', 'u1', [result('t2'), result('t1', true)]),
    // No string name or id: the tree counts no tool_use, the row names none.
    blocksLine('assistant', 'a2', [use('t3', 7), use(8, 'Bash')]),
    blocksLine('user', 'u2', [result('t3')]),
  ]);
  assert.deepEqual(
    events.map((e) => [e.tool, e.tool_use_id, e.is_error, e.tool_uses, e.tool_results]),
    [
      ['Read', 't1', 0, 2, 0],
      ['Grep', 't2', 1, 0, 2],
      ['', '', 0, 0, 0],
      ['', 't3', 0, 0, 1],
    ],
  );
  assert.deepEqual([index.channels[0].counts.tool_use, index.channels[0].counts.tool_result], [2, 3]);
});

test('tool names wait for their results among the latest TOOL_NAMES_REMEMBERED calls only; ' +
  'ids and names are cut as stored', async () => {
  const calls = Array.from({ length: TOOL_NAMES_REMEMBERED + 1 }, (_, k) =>
    blocksLine('assistant', `a${k}`, [{ type: 'tool_use', id: `t${k}`, name: `Tool${k}`, input: {} }]),
  );
  const last = TOOL_NAMES_REMEMBERED;
  const longId = 'i'.repeat(CUT_LENGTHS.stored.chars + 1);
  const longName = 'N'.repeat(1000);
  const result = (id: string) => ({ type: 'tool_result', tool_use_id: id, content: 'ok' });
  const { events } = await eventRows([
    ...calls,
    blocksLine('user', 'r0', [result('t0')]),
    blocksLine('user', 'r1', [result(`t${last}`)]),
    blocksLine('user', 'r2', [result(`t${last}`)]),
    blocksLine('assistant', 'a-long', [{ type: 'tool_use', id: longId, name: longName, input: {} }]),
    blocksLine('user', 'r3', [result(longId)]),
  ]);
  const rows = events.slice(calls.length);
  assert.equal(rows[0].tool, '', 'the oldest call was forgotten');
  assert.equal(rows[1].tool, `Tool${last}`, 'the latest is named');
  assert.equal(rows[2].tool, '', 'a name is given to one result');
  assert.equal(rows[3].tool, storedText(longName, 'stored'));
  assert.equal(rows[3].tool_use_id, storedText(longId, 'stored'));
  const cap = CUT_LENGTHS.stored.chars;
  assert.ok(rows[3].tool.length <= cap && rows[3].tool_use_id.length <= cap && rows[3].tool !== longName);
  assert.equal(rows[4].tool, '', 'an id longer than real ones is not kept');
  assert.equal(rows[4].tool_results, 1);
});

test('a stopped subagent: its status row and its final row say stopped, ' +
  'ended at its notification', async () => {
  const at = (v: Record<string, unknown>, second: number) =>
    JSON.stringify({ ...v, session_id: 's1', timestamp: `2026-12-06T11:00:0${second}.000Z` });
  const input = Buffer.from(
    [
      at({ type: 'system', subtype: 'init', claude_code_version: '2.1.328' }, 0),
      at({
        type: 'assistant',
        parent_tool_use_id: null,
        message: { id: 'm1', content: [{ type: 'tool_use', id: 'toolu_s', name: 'Agent', input: {} }] },
      }, 1),
      at({ type: 'system', subtype: 'task_notification', tool_use_id: 'toolu_s', status: 'stopped' }, 4),
      at({ type: 'result', subtype: 'success', is_error: false, result: 'ok' }, 7),
    ].join('\n') + '\n',
  );
  const { midRun, final } = await rowsOf(input);
  const row = (r: ChannelRow) => [r.status, r.started_at_ms, r.ended_at_ms];
  const ended = Date.parse('2026-12-06T11:00:04.000Z');
  const started = Date.parse('2026-12-06T11:00:01.000Z');
  assert.deepEqual(midRun.filter((r) => r.channel === 'toolu_s').map(row), [
    ['running', started, started],
    ['stopped', started, ended],
  ]);
  assert.deepEqual(final.filter((r) => r.channel === 'toolu_s').map(row), [['stopped', started, ended]]);
});

test('content: a bounded prefix, control characters escaped; ' +
  'thinking hidden by the truncator stays hidden', async () => {
  const input = Buffer.from(
    [
      line({
        type: 'assistant',
        message: { id: 'm1', content: [{ type: 'text', text: `\x1b[31mred\x1b[0m ${'y'.repeat(300)}` }] },
        parent_tool_use_id: null,
        uuid: 'u1',
        timestamp: ts,
      }),
      line({
        type: 'assistant',
        message: { id: 'm2', content: [{ type: 'thinking', thinking: 'secret plan' }] },
        parent_tool_use_id: null,
        uuid: 'u2',
        timestamp: ts,
      }),
    ].join('\n') + '\n',
  );
  const builder = new RowBuilder({ maxContentChars: 50, display: displayPolicy({ thinking: 'drop' }) });
  const rows: EventRow[] = [];
  await routeThrough(input, (batch) => {
    for (const rec of batch) {
      rows.push(...builder.rows(rec).map((e) => e.r as EventRow));
    }
  });
  const text = `\x1b[31mred\x1b[0m ${'y'.repeat(300)}`;
  // Cut as `stored`: its head and the marker within the 50 characters, then escaped.
  const head = text.slice(0, 50 - 1 - `[…${text.length} chars cut…]`.length);
  const cut = `${head} […${text.length - head.length} chars cut…]`;
  assert.ok(cut.length <= 50);
  assert.equal(rows[0].content, cut.replace(/\x1b/g, '\\x1b'));
  assert.doesNotMatch(rows[0].content, /\x1b/);
  assert.equal(rows[1].kind, 'thinking');
  assert.equal(rows[1].content, '');
});

test('content is what every view reads of a line (lineContent): thinking on a user line follows ' +
  "the display policy, a user's plain-string prompt is stored", async () => {
  const thinking = { type: 'thinking', thinking: 'SECRET THOUGHT' };
  const lines = [
    blocksLine('user', 'u1', [thinking, { type: 'text', text: 'and some text' }]),
    line({ type: 'user', message: { role: 'user', content: 'Please build the thing' },
      uuid: 'u2', timestamp: ts }),
    blocksLine('assistant', 'a1', [thinking, { type: 'tool_use', id: 't1', name: 'Bash', input: { c: 1 } }]),
    blocksLine('user', 'u3',
      [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'ok' }] }]),
  ];
  const dropped = await eventRows(lines, { display: displayPolicy({ thinking: 'drop' }) });
  assert.deepEqual(
    dropped.events.map((e) => [e.kind, e.content]),
    [
      ['thinking,text', 'and some text'],
      ['', 'Please build the thing'],
      ['thinking,tool_use', 'Bash {"c":1}'],
      ['tool_result', 'ok'],
    ],
  );
  const kept = await eventRows(lines, { display: displayPolicy({ thinking: 'keep' }) });
  assert.equal(kept.events[0].content, 'SECRET THOUGHT\nand some text');
  assert.equal(kept.events[2].content, 'SECRET THOUGHT\nBash {"c":1}');
});

test('quarantined lines are rows too: one per line, a spooled one counted whole', async () => {
  const long = 'z'.repeat(5000);
  const input = Buffer.from(
    [
      'not json',
      line({
        type: 'assistant',
        message: { id: 'm1', content: [{ type: 'text', text: 'hi' }] },
        parent_tool_use_id: null,
        uuid: 'u1',
        timestamp: ts,
      }),
      long,
      '',
    ].join('\n'),
  );
  const builder = new RowBuilder();
  const events: EventRow[] = [];
  let spooled = 0;
  const { index } = await routeThrough(
    input,
    (batch) => {
      for (const rec of batch) {
        if (rec.kind === 'spooled') spooled++;
        events.push(...builder.rows(rec).map((e) => e.r as EventRow));
      }
    },
    1000,
    1024,
  );
  assert.equal(index.input.quarantined, 2);
  assert.equal(spooled, 1, 'the long line was spooled');
  assert.deepEqual(
    events.map((e) => [e.line, e.kind]),
    [
      [1, 'quarantine'],
      [2, 'text'],
      [3, 'quarantine'],
    ],
  );
  assert.equal(events[2].bytes, 5000);
  assert.equal(events[0].ts_ms, Date.parse(ts), 'held until the first timestamp');
  assert.equal(events[0].run, 'u1');
});

test('maxContentChars 0 keeps no content at all', async () => {
  const { events, final } = await rowsOf(readFileSync(fixtureFiles()[0]), { maxContentChars: 0 });
  assert.ok(
    events.every((e) => e.content === '') && final.every((c) => c.summary === '' && c.description === ''),
  );
  assert.ok(
    events.some((e) => e.kind === 'text'),
    'sanity: there was text',
  );
});

test("a given run id wins over the stream's", async () => {
  const { events, final } = await rowsOf(readFileSync(fixtureFiles()[0]), { runId: 'ci-job-42' });
  assert.ok([...events, ...final].every((r) => r.run === 'ci-job-42'));
});

test("an events table's key: one an older version made on (run, line) replaces a line's parts", () => {
  assert.equal(keyLosesParts(tableDdl('events', '`e`')), false);
  const older = tableDdl('events', '`e`').replace('ORDER BY (run, line, part)', 'ORDER BY (run, line)');
  assert.equal(keyLosesParts(older), true);
  // As SHOW CREATE TABLE prints it, one clause a line.
  const table = 'CREATE TABLE e (…)\nENGINE = ReplacingMergeTree\n';
  assert.equal(keyLosesParts(`${table}ORDER BY (run, line)\nSETTINGS x = 1`), true);
  assert.equal(keyLosesParts(`${table}ORDER BY (run, line, part)`), false);
  // A plain MergeTree keeps every row whatever its key.
  assert.equal(keyLosesParts('CREATE TABLE e (…) ENGINE = MergeTree ORDER BY (run, line)'), false);
  assert.deepEqual(addColumnsDdl('events', '`e`', ['run', 'line']), [
    'ALTER TABLE `e` ADD COLUMN part UInt32',
    'ALTER TABLE `e` ADD COLUMN tool_uses UInt32',
    'ALTER TABLE `e` ADD COLUMN tool_results UInt32',
  ]);
});

test('table names: plain identifiers only, quoted; both tables keyed for replacement', () => {
  assert.equal(quoteTableName('subtee_events'), '`subtee_events`');
  assert.equal(quoteTableName('fleet.events'), '`fleet`.`events`');
  for (const bad of ['x; DROP TABLE y', 'a.b.c', '`x`', '1abc', '', 'a-b'])
    assert.equal(quoteTableName(bad), null, bad);
  assert.match(
    tableDdl('events', '`e`'),
    /ReplacingMergeTree PARTITION BY toYYYYMM\(ts\) ORDER BY \(run, line, part\)$/,
  );
  assert.match(tableDdl('channels', '`c`'), /ReplacingMergeTree\(ver\) ORDER BY \(run, channel\)$/);
  assert.doesNotMatch(tableDdl('events', '`e`') + tableDdl('channels', '`c`'), /DateTime64|JSON/);
  // Nullable only where null means something (an unpriced model, no dollars to tell), never in a key.
  assert.deepEqual((tableDdl('events', '`e`') + tableDdl('channels', '`c`')).match(/\w+ Nullable/g), [
    'cost_usd Nullable',
    'unattributed_usd Nullable',
  ]);
  assert.deepEqual(addColumnsDdl('channels', '`c`', ['run', 'model']), [
    'ALTER TABLE `c` ADD COLUMN cost_usd Nullable(Float64)',
    'ALTER TABLE `c` ADD COLUMN started_at_ms UInt64',
    'ALTER TABLE `c` ADD COLUMN ended_at_ms UInt64',
    'ALTER TABLE `c` ADD COLUMN cost_basis String',
    'ALTER TABLE `c` ADD COLUMN unattributed_usd Nullable(Float64)',
  ]);
  const all = ['model', 'cost_usd', 'started_at_ms', 'ended_at_ms', 'cost_basis', 'unattributed_usd'];
  assert.deepEqual(addColumnsDdl('channels', '`c`', all), []);
  assert.deepEqual(addColumnsDdl('events', '`e`', ['run', 'part', 'tool_uses', 'tool_results']), []);
});

test("foreignShape: subtee's columns with their types, those a newer subtee adds aside, are " +
  "subtee's table whatever else it has; a missing, retyped or computed column is not", () => {
  for (const kind of ['events', 'channels'] as const) {
    const own = tableColumns(kind).map(([name, type]) => ({ name, type, default_type: '' }));
    const typed = /\b\w+ (String|U?Int\d+|DateTime\('UTC'\)|Nullable\(Float64\))/g;
    assert.equal(own.length, tableDdl(kind, 'x').match(typed)?.length, 'every column read');
    assert.equal(foreignShape(kind, own), null, kind);
    assert.equal(foreignShape(kind, [...own, { name: 'team', type: 'String' }]), null, 'one more column');
  }
  const events = tableColumns('events').map(([name, type]) => ({ name, type, default_type: '' }));
  assert.ok(events.some((c) => c.name === 'ts' && c.type === "DateTime('UTC')"));
  const older = events.filter((c) => !['part', 'tool_uses', 'tool_results'].includes(c.name));
  assert.equal(foreignShape('events', older), null, 'an older subtee made it: the columns are added');
  assert.equal(
    foreignShape('events', [
      { name: 'run', type: 'String' },
      { name: 'line', type: 'UInt64' },
      { name: 'x', type: 'UInt8' },
    ]),
    'no column session, ts, ts_ms and 17 more',
  );
  const retyped = events.map((c) => (c.name === 'line' ? { ...c, type: 'String' } : c));
  assert.equal(foreignShape('events', retyped), 'line is String, not UInt64');
  const computed = events.map((c) => (c.name === 'content' ? { ...c, default_type: 'MATERIALIZED' } : c));
  assert.equal(foreignShape('events', computed), 'content is computed by the table');
  const both = retyped.filter((c) => c.name !== 'session');
  assert.equal(foreignShape('events', both), 'no column session; line is String, not UInt64');
});

test('spool: appended entries come back in batches; a ' +
  'torn last line is skipped; claiming moves the file', () => {
  const dir = join(tmpDir(), 'run-1');
  const spool = new Spool(() => dir);
  const entries: Entry[] = Array.from({ length: 25 }, (_, i) => ({
    t: i % 5 === 0 ? 'channels' : 'events',
    r: { run: 'r', line: i, content: 'é→🚀'.repeat(i) } as unknown as EventRow,
  }));
  spool.append(entries.slice(0, 20));
  spool.append(entries.slice(20));
  appendFileSync(spool.file, '{"t":"events","r":{"run":"r","li');
  assert.equal(spool.rows, 25);
  const claimed = spool.claimOwn()!;
  assert.ok(!existsSync(spool.file) && existsSync(claimed));
  assert.equal(spool.rows, 0);
  assert.equal(claimFile(spool.file), null, 'nothing left to claim');
  const back = [...readSpool(claimed, 10)];
  assert.deepEqual(
    back.map((b) => b.length),
    [10, 10, 5],
  );
  assert.deepEqual(back.flat(), entries);
});

test('spool files are found in a folder and its subfolders, waiting or abandoned mid-send', () => {
  const root = tmpDir();
  for (const d of ['a', 'b', 'b/deeper']) mkdirSync(join(root, d), { recursive: true });
  for (const f of [
    'clickhouse-spool.jsonl',
    'a/clickhouse-spool.jsonl',
    'b/clickhouse-spool.sending-123-x-1.jsonl',
    'b/deeper/clickhouse-spool.jsonl',
    'a/other.jsonl',
  ])
    writeFileSync(join(root, f), '');
  assert.deepEqual(
    findSpoolFiles(root)
      .map((p) => p.slice(root.length + 1))
      .sort(),
    ['a/clickhouse-spool.jsonl', 'b/clickhouse-spool.sending-123-x-1.jsonl', 'clickhouse-spool.jsonl'],
  );
});

test('content: a tool input nested 20,000 deep is its JSON text, cut as any', async () => {
  // Written as text: JSON.stringify itself overflows at this depth.
  const deep = '['.repeat(20_000) + '"end"' + ']'.repeat(20_000);
  const input = Buffer.from(
    line({
      type: 'assistant',
      message: { id: 'm1', content: [{ type: 'tool_use', id: 't1', name: 'Read', input: { x: 'DEEP' } }] },
      parent_tool_use_id: null,
      uuid: 'u1',
      timestamp: ts,
    }).replace('"DEEP"', deep) + '\n',
  );
  const builder = new RowBuilder({ maxContentChars: 50 });
  const rows: EventRow[] = [];
  await routeThrough(input, (batch) => {
    for (const rec of batch) rows.push(...builder.rows(rec).map((e) => e.r as EventRow));
  });
  assert.match(rows[0].content, /^Read \{"x":\[\[\[\[.* \[…\d+ chars cut…\]$/);
});
