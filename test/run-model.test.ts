import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  endFigures,
  RunModel,
  type ChannelEvent,
  type ModelEvent,
  type RoutedEvent,
  type RunView,
} from '../src/entry/model.js';
import { WARNINGS_TOLD_PER_CODE } from '../src/model/run-model.js';
import type { Stall } from '../src/model/in-flight.js';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { UsageEvent, ToolEvent } from '../src/entry/model.js';
import { fixtureFiles, sampleFiles } from './helpers/helpers.js';
import { readStream } from './helpers/oracle.js';
import { routeThrough } from './helpers/otlp-tree.js';

const spawn = {
  type: 'assistant',
  parent_tool_use_id: null,
  message: {
    id: 'm1',
    model: 'claude-sonnet-4-5',
    usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    content: [
      { type: 'tool_use', id: 'toolu_a', name: 'Agent', input: { subagent_type: 'Explore', prompt: 'go' } },
    ],
  },
};
const inside = {
  type: 'assistant',
  parent_tool_use_id: 'toolu_a',
  message: {
    id: 'm2',
    model: 'claude-sonnet-4-5',
    usage: { input_tokens: 7, output_tokens: 3, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    content: [{ type: 'text', text: 'looking' }],
  },
};
const report = {
  type: 'user',
  parent_tool_use_id: null,
  message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: 'found it' }] },
};

const brief = (e: RoutedEvent | ChannelEvent) =>
  e.type === 'routed'
    ? `routed ${e.lineNo} on ${e.channel.id ?? 'main'}`
    : e.type === 'status'
      ? `status ${e.channel.id} ${e.channel.status} ${e.summary}`
      : `${e.type} ${e.channel.id} under ${e.channel.parent ?? 'main'} at depth ${e.channel.depth}`;

test("the model's events for a spawn, a subagent's line and its result: routed, opened, ended", () => {
  const model = new RunModel();
  const told: string[] = [];
  [spawn, inside, report].forEach((value, i) => {
    const routed = model.take(value, i + 1);
    told.push(brief(routed), ...routed.changes.map(brief));
  });
  assert.deepEqual(told, [
    'routed 1 on main',
    'open toolu_a under main at depth 1',
    'routed 2 on toolu_a',
    'routed 3 on main',
    'status toolu_a completed found it',
  ]);
  assert.equal(model.tree.get('toolu_a')?.status, 'completed');
});

test('every event the model says is frozen, and a stall is recorded as a frozen warning', () => {
  const model = new RunModel();
  const routed = model.take(spawn, 1);
  assert.ok(Object.isFrozen(routed));
  assert.ok(Object.isFrozen(routed.changes));
  assert.ok(routed.changes.every((c) => Object.isFrozen(c) && Object.isFrozen(c.channel)));
  // A line that changes nothing shares one empty, frozen list.
  const plain = model.take({ type: 'system', subtype: 'hook_response' }, 2);
  assert.deepEqual(plain.changes, []);
  assert.ok(Object.isFrozen(plain.changes));
  const stall = { silentMs: 5, allowedMs: 1, waitingOn: [] } as unknown as Stall;
  model.recordStall(stall, 'silent');
  assert.equal(model.stalled, true);
  assert.equal(model.stall, stall);
  assert.deepEqual(model.warnings, [{ code: 'STALL', message: 'silent' }]);
  assert.ok(Object.isFrozen(model.warnings[0]));
});

test('past WARNINGS_TOLD_PER_CODE warnings of one code the rest are counted, not listed: one ' +
  'WARNINGS_OMITTED says so, each code capped on its own, the counts exact', () => {
  const model = new RunModel();
  const listed: boolean[] = [];
  for (let i = 0; i < WARNINGS_TOLD_PER_CODE + 25; i++) {
    listed.push(model.warn('MANY', `subject ${i}`, `s${i}`));
    model.warn('MANY', `subject ${i} again`, `s${i}`); // once per subject, told or counted
  }
  for (let i = 0; i < 3; i++) model.warn('FEW', `few ${i}`, `f${i}`);
  assert.deepEqual(
    listed,
    Array.from({ length: WARNINGS_TOLD_PER_CODE + 25 }, (_, i) => i < WARNINGS_TOLD_PER_CODE),
  );
  assert.deepEqual(model.warnings, [
    ...Array.from({ length: WARNINGS_TOLD_PER_CODE }, (_, i) => ({ code: 'MANY', message: `subject ${i}` })),
    {
      code: 'WARNINGS_OMITTED',
      message: `more than ${WARNINGS_TOLD_PER_CODE} MANY warnings: the rest are not told one by one; ` +
        "index.json's warnings_omitted counts them",
    },
    ...Array.from({ length: 3 }, (_, i) => ({ code: 'FEW', message: `few ${i}` })),
  ]);
  assert.deepEqual(model.warningsOmitted, { MANY: 25 });
  assert.ok(Object.isFrozen(model.warningsOmitted));
});

test("the model's usage per line: each channel's tokens from its own lines, the run's their sum", () => {
  const model = new RunModel();
  [spawn, inside, report].forEach((value, i) => model.take(value, i + 1));
  const view: RunView = model;
  const main = view.cost.channelCost(null);
  const sub = view.cost.channelCost('toolu_a');
  assert.equal(main?.tokens.input_tokens, 10);
  assert.equal(sub?.tokens.input_tokens, 7);
  assert.equal(main?.tokens.output_tokens, 5);
  assert.equal(sub?.tokens.output_tokens, 3);
  const all = [...view.cost.report().channels.values()];
  assert.equal(
    all.reduce((sum, c) => sum + c.tokens.input_tokens, 0),
    17,
  );
});

test('the model counts its own input: lines, blanks, bytes, quarantine, dropped, unwritten', () => {
  const model = new RunModel();
  model.countLines();
  model.countLines(4);
  model.countBlankLine();
  model.countBytes(120);
  model.countQuarantined(2);
  model.countQuarantined(7, 3);
  assert.deepEqual(
    { ...model.input },
    { lines: 5, blankLines: 1, bytes: 120, quarantined: 4, failed: 0, unwritten: 0, dropped: 0 },
  );
  assert.deepEqual(model.quarantineLines.listed, [2, 7, 8, 9]);
  // After a failed output: what the folder holds is written, the rest of the lines read is not.
  assert.equal(model.recordUnwritten(3), 2);
  assert.equal(model.input.unwritten, 2);
  assert.equal(model.recordUnwritten(9), 0);
  // A line a plugin dropped is in no file by design: not unwritten.
  model.countDropped();
  assert.equal(model.recordUnwritten(3), 1);
  assert.equal(model.input.dropped, 1);
});

test('after a failed output, the quarantined lines are those the quarantine file holds: one that ' +
  'never reached it is unwritten, not quarantined, and its number is not listed', () => {
  const model = new RunModel();
  model.countLines(9);
  model.countQuarantined(2);
  model.countQuarantined(5, 3);
  model.countQuarantined(9);
  // The folder holds 6 lines, 3 of them in the quarantine file: lines 2, 5 and 6.
  assert.equal(model.recordUnwritten(6, 3), 3);
  assert.equal(model.input.quarantined, 3);
  assert.deepEqual(model.quarantineLines.listed, [2, 5, 6]);
  assert.equal(model.quarantineLines.omitted, 0);
  // A file holding all of them changes nothing.
  assert.equal(model.recordUnwritten(9, 3), 0);
  assert.equal(model.input.quarantined, 3);

  // Past the listed limit: the ones not listed are counted down first.
  const junk = new RunModel();
  const limit = junk.quarantineLines.limit;
  junk.countLines(limit + 500);
  junk.countQuarantined(1, limit + 500);
  junk.recordUnwritten(limit + 200, limit + 200);
  assert.equal(junk.input.quarantined, limit + 200);
  assert.equal(junk.quarantineLines.listed.length, limit);
  assert.equal(junk.quarantineLines.omitted, 200);
  junk.recordUnwritten(0, 0);
  assert.equal(junk.input.quarantined, 0);
  assert.deepEqual([junk.quarantineLines.listed, junk.quarantineLines.omitted], [[], 0]);

  // Counted out of input order (a line the router could not place, after the parser's junk
  // lines of its batch): the file holds the first lines in input order.
  const late = new RunModel();
  late.countLines(9);
  late.countQuarantined(5);
  late.countQuarantined(9);
  late.countQuarantined(7);
  late.recordUnwritten(2, 2);
  assert.deepEqual(late.quarantineLines.listed, [5, 7]);
});

test("usage events: a message's repeated usage adds nothing, a message_delta settles its output; " +
  'tool calls and results are events; a line without either allocates none', () => {
  const model = new RunModel();
  const usage = {
    input_tokens: 10,
    output_tokens: 2,
    cache_read_input_tokens: 3,
    cache_creation_input_tokens: 4,
  };
  const message = (content: unknown[]) => ({
    type: 'assistant',
    parent_tool_use_id: null,
    message: { id: 'm1', model: 'claude-opus-5-5', usage, content },
  });
  const first = model.take(message([{ type: 'text', text: 'hi' }]), 1);
  // claude-opus-5-5 at $4 input, $20 output, $0.20 cache read, $5 a 5-minute cache write, per million.
  const want = (10 * 4 + 2 * 20 + 3 * 0.2 + 4 * 5) / 1e6;
  assert.deepEqual(
    { ...first.usage, tokens: { ...first.usage!.tokens }, usd: undefined },
    {
      type: 'usage',
      lineNo: 1,
      channel: null,
      model: 'claude-opus-5-5',
      messageId: 'm1',
      tokens: {
        input_tokens: 10,
        output_tokens: 2,
        cache_read_input_tokens: 3,
        cache_creation_5m_input_tokens: 4,
        cache_creation_1h_input_tokens: 0,
      },
      usd: undefined,
    },
  );
  assert.ok(Math.abs(first.usage!.usd! - want) < 1e-15, `${first.usage!.usd} vs ${want}`);
  assert.ok(Object.isFrozen(first.usage) && Object.isFrozen(first.usage!.tokens));
  // The same message's next block repeats its usage: nothing more is counted.
  const second = model.take(message([{ type: 'tool_use', id: 'toolu_x', name: 'Bash', input: {} }]), 2);
  assert.equal(second.usage, null);
  assert.deepEqual(second.tools, [
    { type: 'toolCall', lineNo: 2, channel: null, id: 'toolu_x', name: 'Bash' },
  ]);
  assert.ok(Object.isFrozen(second.tools) && Object.isFrozen(second.tools[0]));
  const delta = (event: object) => ({ type: 'stream_event', parent_tool_use_id: null, event });
  const text = model.take(delta({ type: 'content_block_delta', index: 0, delta: { text: 'x' } }), 3);
  assert.equal(text.usage, null);
  assert.equal(text.tools, first.tools, 'lines without tools share one frozen empty list');
  assert.deepEqual(text.tools, []);
  // The message's true output is 7: the delta adds the 5 the lines did not state.
  const settled = delta({ type: 'message_delta', usage: { output_tokens: 7 } });
  const end = model.take({ ...settled, api_message_id: 'm1' }, 4);
  assert.equal(end.usage?.tokens.output_tokens, 5);
  assert.equal(end.usage?.tokens.input_tokens, 0);
  const result = {
    type: 'user',
    parent_tool_use_id: null,
    message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_x', is_error: true, content: 'no' }] },
  };
  assert.deepEqual(model.take(result, 5).tools, [
    { type: 'toolResult', lineNo: 5, channel: null, id: 'toolu_x', isError: true },
  ]);
  assert.equal(model.cost.channelCost(null)?.tokens.output_tokens, 7);
});

test("a message whose lines resume after another message's on its channel (A, B, A) is counted " +
  'again, by the tree and the ledger alike: only the current message is remembered', () => {
  const line = (id: string, input: number) => ({
    type: 'assistant',
    parent_tool_use_id: null,
    message: { id, model: 'claude-opus-5-5', usage: { input_tokens: input, output_tokens: 1 }, content: [] },
  });
  const model = new RunModel();
  // A's second line repeats its usage (counted once); B's comes between; A's lines resume.
  [line('A', 100), line('A', 100), line('B', 10), line('A', 100)].forEach((v, i) => model.take(v, i + 1));
  assert.equal(model.tree.main.usage.input_tokens, 210, 'the tree');
  assert.equal(model.cost.channelCost(null)?.tokens.input_tokens, 210, 'the ledger');
  assert.equal(model.cost.reportSoFar().models['claude-opus-5-5']?.input_tokens, 210, 'cost.models');
});

test("a <synthetic> message (Claude Code's own, no API call) counts in neither the tree's usage " +
  'nor the ledger: channels[].usage and cost.models agree', () => {
  const line = (id: string, model: string, parent: string | null) => ({
    type: 'assistant',
    parent_tool_use_id: parent,
    message: {
      id,
      model,
      usage: { input_tokens: 500, output_tokens: 7 },
      content: [{ type: 'text', text: 'x' }],
    },
  });
  const model = new RunModel();
  [spawn, line('s1', '<synthetic>', null), inside, line('s2', '<synthetic>', 'toolu_a')].forEach((v, i) =>
    model.take(v, i + 1),
  );
  const sub = model.tree.channels().find((c) => c.id === 'toolu_a')!;
  assert.deepEqual([model.tree.main.usage.input_tokens, sub.usage.input_tokens], [10, 7], 'the tree');
  assert.deepEqual(
    [null, 'toolu_a'].map((c) => model.cost.channelCost(c)?.tokens.input_tokens),
    [10, 7],
    'the ledger',
  );
  assert.deepEqual(Object.keys(model.cost.reportSoFar().models), ['claude-sonnet-4-5'], 'cost.models');
});

/** The routed lines' usage and tool events of a run, through the chain, and its index.json. */
async function eventsOf(input: Buffer) {
  const usage: UsageEvent[] = [];
  const tools: ToolEvent[] = [];
  const { index } = await routeThrough(input, (batch) => {
    for (const rec of batch) {
      if (rec.kind !== 'line') continue;
      if (rec.usage) usage.push(rec.usage);
      tools.push(...(rec.tools ?? []));
    }
  });
  return { usage, tools, index };
}

const sumOf = (events: UsageEvent[], kind: keyof UsageEvent['tokens']) =>
  events.reduce((n, e) => n + e.tokens[kind], 0);

for (const file of [...fixtureFiles(), ...sampleFiles()]) {
  test(`${basename(file)}: each channel's usage and tool events add up to index.json and ` +
    'to an independent reading of the bytes; without the result, to its dollars too', async () => {
    const input = readFileSync(file);
    const expected = readStream(input.toString('utf8'));
    const { usage, tools, index } = await eventsOf(input);
    for (const c of index.channels) {
      const mine = usage.filter((e) => e.channel === c.id);
      const oracle = expected.channels.get(c.id)!;
      const name = `${c.id ?? 'main'}`;
      for (const [kind, key] of [
        ['input_tokens', 'input_tokens'],
        ['cache_read_input_tokens', 'cache_read_input_tokens'],
      ] as const) {
        assert.equal(sumOf(mine, kind), c.usage[key] ?? 0, `${name} ${kind} vs index.json`);
        assert.equal(sumOf(mine, kind), oracle.usage[key] ?? 0, `${name} ${kind} vs the bytes`);
      }
      const written =
        sumOf(mine, 'cache_creation_5m_input_tokens') + sumOf(mine, 'cache_creation_1h_input_tokens');
      assert.equal(written, c.usage.cache_creation_input_tokens ?? 0, `${name} cache writes`);
      assert.equal(written, oracle.usage.cache_creation_input_tokens ?? 0, `${name} cache writes (bytes)`);
      // Estimated output is the result's share, not a line's: only stated output adds up.
      if (c.cost.basis === 'exact' || c.cost.basis === 'stream')
        assert.equal(sumOf(mine, 'output_tokens'), c.usage.output_tokens ?? 0, `${name} output`);
      const calls = tools.filter((t) => t.channel === c.id && t.type === 'toolCall').length;
      const results = tools.filter((t) => t.channel === c.id && t.type === 'toolResult').length;
      assert.deepEqual([calls, results], [c.counts.tool_use, c.counts.tool_result], `${name} tools`);
      const read = [oracle.counts.tool_use, oracle.counts.tool_result];
      assert.deepEqual([calls, results], read, `${name} tools vs the bytes`);
    }
    // Cut before its result line, the run is priced from the table as the lines count it.
    const text = input.toString('utf8');
    const cut = text
      .split('\n')
      .filter((line) => {
        try {
          return JSON.parse(line).type !== 'result';
        } catch {
          return true;
        }
      })
      .join('\n');
    const run = await eventsOf(Buffer.from(cut));
    assert.equal(run.index.cost.basis, 'table');
    for (const c of run.index.channels) {
      const mine = run.usage.filter((e) => e.channel === c.id);
      const priced = mine.length > 0 && mine.every((e) => e.usd !== null);
      const usd = priced ? mine.reduce((n, e) => n + e.usd!, 0) : null;
      const name = `${c.id ?? 'main'} without the result`;
      if (c.cost.usd === null) assert.equal(usd, null, `${name}: unpriced`);
      else assert.ok(Math.abs((usd ?? 0) - c.cost.usd) < 1e-9, `${name}: $${usd} vs $${c.cost.usd}`);
      assert.equal(sumOf(mine, 'output_tokens'), c.usage.output_tokens ?? 0, `${name} output`);
    }
  });
}

/**
 * Claude Code's background pattern: `n` subagents spawned in the background, the main turn's
 * result, then each subagent's message and its task_notification (its end).
 */
function backgroundAfterResult(n: number): object[] {
  const sid = 'bg-session';
  const model = 'claude-opus-5-5';
  const lines: object[] = [{ type: 'system', subtype: 'init', session_id: sid, model }];
  const usage = (input: number) => ({ input_tokens: input, output_tokens: 1 });
  for (let i = 0; i < n; i++) {
    const input = { description: `d${i}`, prompt: 'p', run_in_background: true };
    const content = [{ type: 'tool_use', id: `toolu_f${i}`, name: 'Agent', input }];
    const message = { id: `m${i}`, model, usage: usage(10), content };
    lines.push({ type: 'assistant', parent_tool_use_id: null, message });
  }
  for (let i = 0; i < n; i++) {
    const content = [{ tool_use_id: `toolu_f${i}`, type: 'tool_result', content: 'Async agent launched' }];
    lines.push({ type: 'user', parent_tool_use_id: null, message: { role: 'user', content } });
  }
  const modelUsage = { [model]: { inputTokens: 15 * n, outputTokens: 7 * n, costUSD: n / 1000 } };
  lines.push({ type: 'result', subtype: 'success', session_id: sid, total_cost_usd: n / 1000, modelUsage });
  for (let i = 0; i < n; i++) {
    // Messages of different lengths: the result's output is shared unevenly.
    const content = [{ type: 'text', text: 'x'.repeat(4 * (1 + (i % 7))) }];
    const message = { id: `s${i}`, model, usage: usage(5), content };
    lines.push({ type: 'assistant', parent_tool_use_id: `toolu_f${i}`, message });
    const end = { type: 'system', subtype: 'task_notification', tool_use_id: `toolu_f${i}` };
    lines.push({ ...end, status: 'completed', summary: 'done', session_id: sid });
  }
  return lines;
}

test('subagents ending after the result line: each end prices its channel ' +
  'without working out the whole report, which the run works out once', () => {
  const n = 300;
  const model = new RunModel();
  const ends: { id: string; output: number; usd: number | null; basis: string }[] = [];
  backgroundAfterResult(n).forEach((value, at) => {
    for (const change of model.take(value as never, at + 1).changes) {
      const figures = endFigures(change);
      if (figures?.cost && change.channel.id !== null)
        ends.push({
          id: change.channel.id,
          output: figures.cost.tokens.output_tokens,
          usd: figures.cost.usd,
          basis: figures.basis,
        });
    }
  });
  assert.equal(ends.length, n);
  // No end asked for the report: the work per end does not grow with the run's channels.
  assert.equal(model.cost.reportsComputed, 0);
  const report = model.cost.report();
  model.cost.report();
  assert.equal(model.cost.reportsComputed, 1);
  // The last end came after every line with usage: its figures are its final ones, but for
  // the rounding of its share (largest remainders in the report), at most one token.
  const last = ends[n - 1];
  const final = report.channels.get(last.id)!;
  assert.equal(last.basis, 'result');
  assert.ok(Math.abs(final.tokens.output_tokens - last.output) <= 1, `${final.tokens.output_tokens}`);
  assert.ok(ends.every((e) => e.basis === 'result' && e.usd !== null && e.usd > 0));
});
