// CostLedger (src/model/cost.ts) on hand-made lines and a price table with round rates, so
// every expected token count and dollar figure below is worked out by hand from the lines.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apportion, CostLedger, priceTokens, roundUsd } from '../src/model/cost.js';
import type { PriceTable } from '../src/model/prices.js';
import { LazyText } from '../src/model/scan.js';
import { Session } from '../src/model/session.js';

/** USD per million tokens: input 1, output 2, cache read 3, 5-minute write 4, 1-hour write 5. */
const TABLE: PriceTable = {
  date: '2020-02-02',
  sources: [],
  models: { 'm-a': { input: 1, output: 2, cache_read: 3, cache_write_5m: 4, cache_write_1h: 5 } },
};
const M = 1_000_000;
/** Claude Sonnet's rates per million tokens (cache read 0.3: not a binary fraction). */
const SONNET = { input: 3, output: 15, cache_read: 0.3, cache_write_5m: 3.75, cache_write_1h: 6 };

type Text = string | undefined;
const line = (id: Text, model: Text, usage: unknown, content: unknown[] = []) => ({
  type: 'assistant',
  message: { id, model, usage, content },
});
const delta = (output: unknown, apiMessageId?: string) => ({
  type: 'stream_event',
  ...(apiMessageId === undefined ? {} : { api_message_id: apiMessageId }),
  event: { type: 'message_delta', usage: { output_tokens: output } },
});
const tokens = (input: number, output: number, read = 0, w5m = 0, w1h = 0) => ({
  input_tokens: input,
  output_tokens: output,
  cache_read_input_tokens: read,
  cache_creation_5m_input_tokens: w5m,
  cache_creation_1h_input_tokens: w1h,
});
const close = (actual: number | null, expected: number) =>
  assert.ok(actual !== null && Math.abs(actual - expected) < 1e-12, `${actual} ≈ ${expected}`);

test('without a result: each kind of token at its table rate; 1-hour writes split off the writes', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(
    line('m1', 'm-a', {
      input_tokens: 1000,
      output_tokens: 10,
      cache_read_input_tokens: 200,
      cache_creation_input_tokens: 300,
      cache_creation: { ephemeral_1h_input_tokens: 100 },
    }),
    null,
  );
  const usd = (1000 * 1 + 10 * 2 + 200 * 3 + 200 * 4 + 100 * 5) / M;
  const report = ledger.report();
  const seen = tokens(1000, 10, 200, 200, 100);
  const shown = { basis: 'stream', reason: null, transcriptOnly: false };
  assert.deepEqual(report.channels.get(null), { models: ['m-a'], usd, tokens: seen, ...shown });
  assert.deepEqual({ ...report.models['m-a'] }, { ...seen, usd, result_usd: null, basis: 'stream' });
  assert.deepEqual(
    [report.usd, report.channels_usd, report.unattributed_usd, report.result_usd],
    [usd, usd, null, null],
  );
  assert.deepEqual(
    [report.basis, report.prices_date, report.output_tokens],
    ['table', '2020-02-02', 'stream'],
  );
  assert.deepEqual(report.unpriced, []);
  assert.deepEqual(ledger.channelCost(null), report.channels.get(null));
  assert.equal(ledger.channelCost('nobody'), null);
  assert.deepEqual([ledger.hasResult, ledger.report().output_tokens], [false, 'stream']);
});

test('1-hour writes capped by the writes; odd figures count as zero; lines of a message count once', () => {
  const ledger = new CostLedger(TABLE);
  const usage = (output: number) => ({
    input_tokens: 40,
    output_tokens: output,
    cache_read_input_tokens: -5,
    cache_creation_input_tokens: 50,
    cache_creation: { ephemeral_1h_input_tokens: 80 },
    server_tool_use: { web_search_requests: 3 },
  });
  ledger.observe(line('m1', 'm-a', usage(1)), 'c');
  ledger.observe(line('m1', 'm-a', usage(30)), 'c');
  ledger.observe(line('m1', 'm-a', { ...usage(30), input_tokens: 'many' }), 'c');
  // The latest line of the message stands: its input is no number, so none.
  const expected = tokens(0, 30, 0, 0, 50);
  const usd = (30 * 2 + 50 * 5) / M;
  const shown = { basis: 'stream', reason: null, transcriptOnly: false };
  assert.deepEqual(ledger.channelCost('c'), { models: ['m-a'], usd, tokens: expected, ...shown });
  assert.deepEqual(ledger.report().channels.get('c')!.tokens, expected);
});

test('not counted: no message id, no usage, the synthetic model; a line naming no model is "unknown"', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line(undefined, 'm-a', { input_tokens: 5 }), null);
  ledger.observe(line('', 'm-a', { input_tokens: 5 }), null);
  ledger.observe(line('m1', 'm-a', 'no usage'), null);
  ledger.observe(line('m2', '<synthetic>', { input_tokens: 5 }), null);
  ledger.observe({ type: 'assistant', message: 'text' }, null);
  ledger.observe({ type: 'user', message: { id: 'u', model: 'm-a', usage: { input_tokens: 5 } } }, null);
  assert.equal(ledger.channelCost(null), null);
  assert.deepEqual(ledger.report().channels.size, 0);
  ledger.observe(line('m3', undefined, { input_tokens: 7 }), null);
  const report = ledger.report();
  assert.deepEqual(report.channels.get(null), {
    models: ['unknown'],
    usd: null,
    tokens: tokens(7, 0),
    basis: 'stream',
    reason: null,
    transcriptOnly: false,
  });
  assert.deepEqual(report.unpriced, ['unknown']);
  assert.deepEqual([report.usd, report.channels_usd, report.models.unknown.usd], [null, null, null]);
  assert.equal(ledger.channelCost(null)!.usd, null);
});

test('a model nothing prices is free while it used no tokens, and unpriced once it used some', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('m1', 'no-price', { input_tokens: 0, output_tokens: 0 }), null);
  ledger.observe(line('m2', 'm-a', { input_tokens: 100 }), null);
  assert.equal(ledger.channelCost(null)!.usd, 100 / M);
  let report = ledger.report();
  assert.deepEqual([report.usd, report.unpriced, report.models['no-price'].usd], [100 / M, [], 0]);
  ledger.observe(line('m3', 'no-price', { input_tokens: 0, output_tokens: 1 }), null);
  report = ledger.report();
  assert.deepEqual([report.usd, report.channels_usd, report.unpriced], [null, null, ['no-price']]);
  assert.equal(report.models['no-price'].usd, null);
  assert.equal(report.models['m-a'].usd, 100 / M);
  assert.equal(ledger.channelCost(null)!.usd, null);
});

test('message_delta gives a message its exact output, before or after its lines, matched by id', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('m1', 'm-a', { input_tokens: 1, output_tokens: 1 }), null);
  assert.equal(ledger.report().output_tokens, 'stream');
  ledger.observe(delta(77, 'm1'), null);
  assert.equal(ledger.channelCost(null)!.tokens.output_tokens, 77);
  assert.equal(ledger.report().output_tokens, 'exact');
  // A delta for a message not yet seen waits for it; one without an id is the current message's.
  ledger.observe(delta(40, 'm2'), null);
  assert.equal(ledger.channelCost(null)!.tokens.output_tokens, 77);
  ledger.observe(line('m2', 'm-a', { input_tokens: 1, output_tokens: 2 }), null);
  assert.equal(ledger.channelCost(null)!.tokens.output_tokens, 77 + 40);
  assert.equal(ledger.report().output_tokens, 'exact');
  ledger.observe(line('m3', 'm-a', { input_tokens: 1, output_tokens: 3 }), null);
  assert.equal(ledger.report().output_tokens, 'stream');
  ledger.observe(delta(9), null);
  assert.equal(ledger.channelCost(null)!.tokens.output_tokens, 77 + 40 + 9);
  assert.equal(ledger.report().output_tokens, 'exact');
  // Deltas with no usable count change nothing, a negative one included (refused, with a warning).
  for (const odd of ['12', Number.NaN, Number.POSITIVE_INFINITY, null]) ledger.observe(delta(odd), null);
  const start = { type: 'message_start', usage: { output_tokens: 500 } };
  ledger.observe({ type: 'stream_event', event: start }, null);
  ledger.observe({ type: 'stream_event', event: { type: 'message_delta' } }, null);
  assert.equal(ledger.channelCost(null)!.tokens.output_tokens, 77 + 40 + 9);
  ledger.observe(delta(-4), null);
  assert.equal(ledger.channelCost(null)!.tokens.output_tokens, 77 + 40 + 9);
  // A delta on a channel with no message yet, or for another id, is kept for that message only.
  ledger.observe(delta(5, 'x9'), 'other');
  ledger.observe(line('y1', 'm-a', { input_tokens: 1, output_tokens: 6 }), 'other');
  assert.equal(ledger.channelCost('other')!.tokens.output_tokens, 6);
  // A delta with no id and no message to belong to is dropped, not kept for a later one.
  ledger.observe(delta(8), 'fresh');
  ledger.observe(line('f1', 'm-a', { input_tokens: 1, output_tokens: 2 }), 'fresh');
  assert.equal(ledger.channelCost('fresh')!.tokens.output_tokens, 2);
});

test("with a result, every token seen: the output is the result's, the dollars Claude Code's", () => {
  const ledger = new CostLedger(TABLE);
  const usage = {
    input_tokens: 1000,
    output_tokens: 10,
    cache_read_input_tokens: 200,
    cache_creation_input_tokens: 300,
    cache_creation: { ephemeral_1h_input_tokens: 100 },
  };
  ledger.observe(line('m1', 'm-a', usage), null);
  ledger.observe(
    {
      type: 'result',
      total_cost_usd: 0.01,
      modelUsage: {
        'm-a': {
          inputTokens: 1000,
          outputTokens: 500,
          cacheReadInputTokens: 200,
          cacheCreationInputTokens: 300,
          cacheCreationEphemeral1hInputTokens: 100,
          costUSD: 0.01,
        },
      },
    },
    null,
  );
  assert.deepEqual([ledger.hasResult, ledger.report().output_tokens], [true, 'estimated']);
  const report = ledger.report();
  const main = report.channels.get(null)!;
  assert.deepEqual(main.tokens, tokens(1000, 500, 200, 200, 100));
  close(main.usd, 0.01);
  close(report.usd, 0.01);
  close(report.channels_usd, 0.01);
  assert.equal(report.unattributed_usd, 0);
  assert.deepEqual([report.basis, report.prices_date, report.result_usd], ['result', '2020-02-02', 0.01]);
  assert.equal(report.models['m-a'].result_usd, 0.01);
  close(report.models['m-a'].usd, 0.01);
  assert.deepEqual(ledger.channelCost(null), main);
  assert.equal(ledger.channelCost('none'), null);
});

test("the cache-write split stated on one side only: the channels add up to the result's costUSD", () => {
  // TABLE: input 1, output 2, 5-minute write 4, 1-hour write 5 per million tokens. Main writes
  // 3,000 cache tokens, a subagent 1,000; both sides count 4,000 writes and 500 output tokens.
  const run = (mainUsage: object, subUsage: object, split: object) => {
    const ledger = new CostLedger(TABLE);
    const words = [{ type: 'text', text: 'x'.repeat(400) }];
    ledger.observe(line('m1', 'm-a', { input_tokens: 10, output_tokens: 1, ...mainUsage }, words), null);
    ledger.observe(line('s1', 'm-a', { input_tokens: 30, output_tokens: 1, ...subUsage }, words), 'sub');
    const figures = { inputTokens: 40, outputTokens: 500, cacheCreationInputTokens: 4000, costUSD: 0.05 };
    const modelUsage = { 'm-a': { ...figures, ...split } };
    ledger.observe({ type: 'result', total_cost_usd: 0.05, modelUsage }, null);
    return ledger.report();
  };
  const writes = (n: number, oneHour?: number) => ({
    cache_creation_input_tokens: n,
    ...(oneHour === undefined ? {} : { cache_creation: { ephemeral_1h_input_tokens: oneHour } }),
  });
  // (a) The lines split their writes (main 1,000 of 3,000 one-hour, the subagent all 1,000),
  // the result states only the total: its writes weigh as the lines split theirs.
  const a = run(writes(3000, 1000), writes(1000, 1000), {});
  // (b) The lines state no split; the result says 3,000 of the 4,000 are one-hour writes.
  const b = run(writes(3000), writes(1000), {
    cacheCreationEphemeral1hInputTokens: 3000,
    cacheCreationEphemeral5mInputTokens: 1000,
  });
  for (const [name, report] of [['lines split', a], ['result split', b]] as const) {
    close(report.channels_usd, 0.05);
    close(report.models['m-a'].usd, 0.05);
    assert.deepEqual([report.unattributed_usd, report.usd], [0, 0.05], name);
    // Every token of the result is on a channel: all its output is shared, 250 each (equal estimates).
    assert.equal(report.models['m-a'].output_tokens, 500, name);
    assert.equal(report.channels.get('sub')!.tokens.output_tokens, 250, name);
  }
  // (a) Weighted tokens: 40×1 + 500×2 + 2,000×4 + 2,000×5 = 19,040 for $0.05; the subagent
  // has 30 input, 250 output and 1,000 one-hour writes.
  close(a.channels.get('sub')!.usd, ((30 + 250 * 2 + 1000 * 5) * 0.05) / 19_040);
  // (b) 40 + 1,000 + 1,000×4 + 3,000×5 = 20,040; the lines' unsplit writes weigh as the
  // result splits them (4.75 a token), the subagent's 1,000 among them.
  close(b.channels.get('sub')!.usd, ((30 + 250 * 2 + 1000 * 4.75) * 0.05) / 20_040);
  // The lines' token figures stay as stated: writes without a split count as 5-minute ones.
  assert.deepEqual(b.channels.get('sub')!.tokens, tokens(30, 250, 0, 1000, 0));
});

test('with a result: the output shared by what each channel produced, at the standard ratios', () => {
  const ledger = new CostLedger(TABLE);
  // Estimates: 400 characters are 100 tokens, 1200 are 300 (4 per token), above the lines' 1.
  const text = [{ type: 'text', text: 'x'.repeat(400) }];
  ledger.observe(line('a1', 'm-b', { input_tokens: 100, output_tokens: 1 }, text), null);
  const thinking = [{ type: 'thinking', thinking: 'y'.repeat(1199) }];
  ledger.observe(line('b1', 'm-b', { input_tokens: 300, output_tokens: 1 }, thinking), 'c1');
  ledger.observe(
    { type: 'result', modelUsage: { 'm-b': { inputTokens: 400, outputTokens: 800, costUSD: 0.02 } } },
    null,
  );
  const report = ledger.report();
  assert.equal(report.channels.get(null)!.tokens.output_tokens, 200);
  assert.equal(report.channels.get('c1')!.tokens.output_tokens, 600);
  // Standard ratios (output 5× input): the run's 400 + 5 × 800 weighted tokens cost 0.02.
  const perWeighted = 0.02 / (400 + 5 * 800);
  close(report.channels.get(null)!.usd, (100 + 5 * 200) * perWeighted);
  close(report.channels.get('c1')!.usd, (300 + 5 * 600) * perWeighted);
  // No total_cost_usd: the run's dollars are the models' sum; no table rate was used.
  close(report.usd, 0.02);
  assert.equal(report.result_usd, null);
  assert.equal(report.unattributed_usd, 0);
  assert.equal(report.prices_date, null);
  assert.deepEqual(report.unpriced, []);
});

test('a result with per-model dollars and no total: the ' +
  'run costs their sum, what no channel shows included', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-b', { input_tokens: 100, output_tokens: 0 }), null);
  // Claude Code counted 1,000 input tokens of m-b for $0.01; the stream shows 100 of them.
  ledger.observe(
    { type: 'result', modelUsage: { 'm-b': { inputTokens: 1000, outputTokens: 0, costUSD: 0.01 } } },
    null,
  );
  const report = ledger.report();
  close(report.channels.get(null)!.usd, 100 * (0.01 / 1000));
  close(report.unattributed_usd, 0.01 - 100 * (0.01 / 1000));
  close(report.usd, 0.01);
  assert.equal(report.result_usd, null);
  // One model without dollars: the models' sum is not the run's, the channels' figure stands.
  const partial = new CostLedger(TABLE);
  partial.observe(line('a1', 'm-a', { input_tokens: M, output_tokens: 0 }), null);
  partial.observe(
    {
      type: 'result',
      modelUsage: { 'm-a': { inputTokens: M, outputTokens: 0 }, 'm-b': { inputTokens: 5, costUSD: 0.5 } },
    },
    null,
  );
  close(partial.report().usd, partial.report().channels_usd!);
});

test('with a result: what the channels do not show is unattributed, not spread over them', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-b', { input_tokens: 100, output_tokens: 1 }), null);
  ledger.observe(
    {
      type: 'result',
      total_cost_usd: 0.006,
      modelUsage: { 'm-b': { inputTokens: 200, outputTokens: 60, costUSD: 0.005 }, junk: 'x' },
    },
    null,
  );
  const report = ledger.report();
  // Half the result's input is seen, so half its output: 30 tokens. 0.005 buys 200 + 5 × 60
  // weighted tokens; the channel's 100 + 5 × 30 of them cost half of it.
  assert.equal(report.channels.get(null)!.tokens.output_tokens, 30);
  const channelUsd = ((100 + 5 * 30) * 0.005) / (200 + 5 * 60);
  close(report.channels.get(null)!.usd, channelUsd);
  close(report.channels_usd, channelUsd);
  close(report.unattributed_usd, 0.006 - channelUsd);
  assert.deepEqual([report.usd, report.result_usd], [0.006, 0.006]);
  assert.deepEqual(Object.keys(report.models), ['m-b']);
});

test('a result names a model no channel used: its dollars are unattributed, its tokens listed', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe({ type: 'result', modelUsage: { 'm-a': { inputTokens: 10, costUSD: 0.5 } } }, null);
  const report = ledger.report();
  // No channel's usage is known: the channels' dollars are unknown, the run's the result's.
  assert.deepEqual(
    [report.channels.size, report.usd, report.channels_usd, report.unattributed_usd],
    [0, 0.5, null, 0.5],
  );
  const { result_usd, usd, basis } = report.models['m-a'];
  assert.deepEqual([result_usd, usd, basis], [0.5, null, 'unknown']);
  // A result without usable dollars or model usage is no result.
  const none = new CostLedger(TABLE);
  none.observe({ type: 'result', total_cost_usd: '1', modelUsage: [] }, null);
  assert.equal(none.hasResult, false);
  none.observe({ type: 'result', total_cost_usd: Number.POSITIVE_INFINITY }, null);
  assert.equal(none.hasResult, false);
  none.observe({ type: 'result', total_cost_usd: 2 }, null);
  assert.equal(none.hasResult, true);
  assert.deepEqual([none.report().usd, none.report().unattributed_usd], [2, 2]);
});

test('no usage known on any channel: the run, its channels and their model cost null, never $0', () => {
  const ledger = new CostLedger(TABLE);
  assert.deepEqual([ledger.report().usd, ledger.report().output_tokens], [null, 'unknown']);
  // Copilot's subagents state a total of tokens, not their kinds.
  ledger.observe(line('t1', 'm-a', { total_tokens: 240 }), 'a');
  ledger.observe(line('t2', 'm-a', { total_tokens: 240 }), 'b');
  let report = ledger.report();
  assert.deepEqual(
    [report.usd, report.channels_usd, report.unattributed_usd, report.output_tokens],
    [null, null, null, 'unknown'],
  );
  assert.deepEqual([report.models['m-a'].usd, report.models['m-a'].basis], [null, 'unknown']);
  assert.deepEqual([...report.channels.values()].map((c) => [c.usd, c.basis]), [
    [null, 'unknown'],
    [null, 'unknown'],
  ]);
  // A result stating dollars makes the run's known: all of it unattributed, the channels' still not.
  ledger.observe({ type: 'result', total_cost_usd: 0.25 }, null);
  report = ledger.report();
  assert.deepEqual(
    [report.usd, report.channels_usd, report.unattributed_usd, report.output_tokens],
    [0.25, null, 0.25, 'unknown'],
  );
});

test('usage known on some channels: the run costs theirs, its output tokens their least exact basis', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('t1', 'm-a', { total_tokens: 240 }), 'a');
  ledger.observe(line('m1', 'm-a', { input_tokens: 100, output_tokens: 5 }), null);
  ledger.observe(delta(50, 'm1'), null);
  const exact = (100 * 1 + 50 * 2) / M;
  let report = ledger.report();
  assert.deepEqual([report.usd, report.channels_usd, report.output_tokens], [exact, exact, 'exact']);
  assert.deepEqual([report.models['m-a'].usd, report.models['m-a'].basis], [exact, 'exact']);
  ledger.observe(line('c1', 'm-a', { input_tokens: 10, output_tokens: 3 }), 'c');
  const sum = exact + (10 * 1 + 3 * 2) / M;
  report = ledger.report();
  close(report.usd, sum);
  assert.deepEqual([report.output_tokens, report.models['m-a'].basis], ['stream', 'stream']);
  // A result with no per-model usage shares no output: the channels stay as the stream states.
  ledger.observe({ type: 'result', total_cost_usd: 0.5 }, null);
  report = ledger.report();
  assert.deepEqual([report.usd, report.output_tokens], [0.5, 'stream']);
  assert.deepEqual([...report.channels.values()].map((c) => c.basis), ['unknown', 'exact', 'stream']);
  close(report.unattributed_usd, 0.5 - sum);
});

test('a result model without dollars is priced by the table, or unpriced without a rate', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-a', { input_tokens: 100, output_tokens: 3 }), null);
  ledger.observe(line('b1', 'm-z', { input_tokens: 100, output_tokens: 3 }), 'c');
  const modelUsage = { 'm-a': { inputTokens: 100 }, 'm-z': { inputTokens: 100 } };
  ledger.observe({ type: 'result', modelUsage }, null);
  const report = ledger.report();
  assert.equal(report.channels.get(null)!.usd, (100 * 1 + 3 * 2) / M);
  assert.equal(report.channels.get('c')!.usd, null);
  assert.deepEqual(report.unpriced, ['m-z']);
  assert.deepEqual([report.usd, report.channels_usd, report.unattributed_usd], [null, null, null]);
  assert.equal(report.prices_date, '2020-02-02');
});

test("the estimate of a message's output counts tool inputs as JSON and lazy text by its length", () => {
  const ledger = new CostLedger(TABLE);
  const input = { command: 'ls -la', path: 'src' };
  const commas = 1; // the JSON of `input` has one separator between members, not counted
  const toolChars = 'Bash'.length + JSON.stringify(input).length - commas;
  const lazy = new LazyText(
    Buffer.from('z'.repeat(80)) as unknown as ConstructorParameters<typeof LazyText>[0],
    0,
    80,
    80,
    false,
  );
  ledger.observe(line('a1', 'm-b', { input_tokens: 50 }, [{ type: 'tool_use', name: 'Bash', input }]), null);
  ledger.observe(line('b1', 'm-b', { input_tokens: 50 }, [{ type: 'thinking', thinking: lazy }]), 'c');
  const modelUsage = { 'm-b': { inputTokens: 100, outputTokens: 1000, costUSD: 1 } };
  ledger.observe({ type: 'result', modelUsage }, null);
  const a = Math.ceil(toolChars / 4);
  const b = 80 / 4;
  const report = ledger.report();
  const shareA = report.channels.get(null)!.tokens.output_tokens;
  assert.equal(shareA + report.channels.get('c')!.tokens.output_tokens, 1000);
  assert.equal(shareA, Math.round((1000 * a) / (a + b)));
});

test('apportion: whole shares adding up to the total, largest remainders first, ties by key', () => {
  assert.deepEqual(apportion(10, [1, 1, 1], 3), [4, 3, 3]);
  assert.deepEqual(apportion(10, [1, 1, 1], 3, ['b', 'a', 'c']), [3, 4, 3]);
  assert.deepEqual(apportion(10, [1, 1, 1], 3, ['c', 'b', 'a']), [3, 3, 4]);
  assert.deepEqual(apportion(7, [1, 2], 3), [2, 5]);
  assert.deepEqual(apportion(7, [2, 1], 3), [5, 2]);
  assert.deepEqual(apportion(5, [2, 3], 5), [2, 3]);
  assert.deepEqual(apportion(2, [1, 1, 1], 3, ['a', 'a', 'a']), [1, 1, 0]);
  assert.deepEqual(apportion(0, [1, 2], 3), [0, 0]);
  assert.deepEqual(apportion(5, [0, 0], 0), [0, 0]);
  assert.deepEqual(apportion(-3, [1, 2], 3), [0, 0]);
  assert.deepEqual(apportion(5, [1, 2], -1), [0, 0]);
});

test('priceTokens and roundUsd: each kind at its own rate per million; float dust rounded away', () => {
  const rate = { input: 1, output: 2, cache_read: 3, cache_write_5m: 4, cache_write_1h: 5 };
  assert.equal(priceTokens(tokens(1, 0, 0, 0, 0), rate), 1 / M);
  assert.equal(priceTokens(tokens(0, 1, 0, 0, 0), rate), 2 / M);
  assert.equal(priceTokens(tokens(0, 0, 1, 0, 0), rate), 3 / M);
  assert.equal(priceTokens(tokens(0, 0, 0, 1, 0), rate), 4 / M);
  assert.equal(priceTokens(tokens(0, 0, 0, 0, 1), rate), 5 / M);
  assert.equal(roundUsd(0.0029200000000000007), 0.00292);
  assert.equal(roundUsd(1.23456789012345), 1.234567890123);
  assert.equal(roundUsd(null), null);
});

/** The output the ledger gives channel `main` when `otherChars` of text are the other channel's. */
function mainShare(mainContent: unknown[], otherChars: number, total: number, mainOutput = 0): number {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-b', { input_tokens: 1, output_tokens: mainOutput }, mainContent), null);
  const other = [{ type: 'text', text: 'o'.repeat(otherChars) }];
  ledger.observe(line('b1', 'm-b', { input_tokens: 1 }, other), 'c');
  const modelUsage = { 'm-b': { inputTokens: 2, outputTokens: total, costUSD: 1 } };
  ledger.observe({ type: 'result', modelUsage }, null);
  const report = ledger.report();
  const main = report.channels.get(null)!.tokens.output_tokens;
  assert.equal(main + report.channels.get('c')!.tokens.output_tokens, total);
  return main;
}

test('the estimate measures a tool input as its JSON without separators, whatever its values', () => {
  const input = {
    command: 'ls',
    n: 12.5,
    ok: true,
    no: false,
    none: null,
    list: [1, 'ab', [true]],
    deep: { k: 'v' },
  };
  const json = JSON.stringify(input);
  const separators = json.split(',').length - 1; // no string in `input` holds a comma
  // Padding text moves the count over each remainder of 4, so a miscount by any amount shows.
  for (let pad = 0; pad < 4; pad++) {
    const chars = 'Bash'.length + json.length - separators + pad;
    const estimate = Math.ceil(chars / 4);
    const content = [
      { type: 'tool_use', id: 'u', name: 'Bash', input },
      { type: 'text', text: 'p'.repeat(pad) },
    ];
    // 400 characters are 100 tokens; a total of 10 per estimated token shares without remainder.
    assert.equal(mainShare(content, 400, 10 * (estimate + 100)), 10 * estimate, `pad ${pad}`);
  }
});

test("the estimate: blocks that produce nothing count nothing; the lines' own output when larger", () => {
  const odd = [
    null,
    'loose',
    { type: 'text', text: null },
    { type: 'text', text: 5 },
    { type: 'text', text: ['a', 'b', 'c'] },
    { type: 'text', text: { length: '9' } },
    { type: 'image', name: 'picture', input: { source: 'xxxxxxxx' } },
    { type: 'text', text: 'm'.repeat(400) },
  ];
  assert.equal(mainShare(odd, 400, 2000), 1000);
  // 40 characters are 10 tokens, fewer than the line's 30; the other channel's 400 are 100.
  assert.equal(mainShare([{ type: 'text', text: 'm'.repeat(40) }], 400, 1300, 30), 300);
  // A content that is no list is no text at all.
  const ledger = new CostLedger(TABLE);
  const message = { id: 'x', model: 'm-a', usage: { input_tokens: 1 }, content: {} };
  ledger.observe({ type: 'assistant', message }, null);
  ledger.observe({ type: 'assistant', message: null }, null);
  assert.equal(ledger.channelCost(null)!.tokens.input_tokens, 1);
});

test('the estimate of a huge tool input stops at a bounded walk', () => {
  const items = (n: number) => Array.from({ length: n }, () => 'x');
  const huge = (n: number) => [{ type: 'tool_use', id: 'u', name: 'Bash', input: items(n) }];
  // Unbounded, 40,000 items would count twice what 20,000 do; bounded, both stop at the same node.
  assert.equal(mainShare(huge(40_000), 400, 1_000_000), mainShare(huge(20_000), 400, 1_000_000));
  assert.notEqual(mainShare(huge(20_000), 400, 1_000_000), mainShare(huge(2_000), 400, 1_000_000));
});

test('odd usage figures: a numeric string and an infinite count are no tokens', () => {
  const ledger = new CostLedger(TABLE);
  const usage = { input_tokens: '7', output_tokens: Number.POSITIVE_INFINITY, cache_read_input_tokens: 2 };
  ledger.observe(line('m1', 'm-a', usage), null);
  assert.deepEqual(ledger.channelCost(null)!.tokens, tokens(0, 0, 2));
});

test('one message id under two models is two messages', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('m1', 'm-a', { input_tokens: 10 }), null);
  ledger.observe(line('m1', 'no-price', { input_tokens: 20 }), null);
  const report = ledger.report();
  assert.deepEqual(report.channels.get(null)!.models, ['m-a', 'no-price']);
  assert.deepEqual([report.models['m-a'].input_tokens, report.models['no-price'].input_tokens], [10, 20]);
  assert.deepEqual(Object.keys(report.models), ['m-a', 'no-price']);
});

test('a delta without an id, with no message open, does not replace one waiting for its message', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(delta(5, 'x9'), 'c');
  ledger.observe(delta(8), 'c');
  ledger.observe(line('x9', 'm-a', { input_tokens: 1, output_tokens: 1 }), 'c');
  assert.equal(ledger.channelCost('c')!.tokens.output_tokens, 5);
});

test("an exact message takes no share of the result's output; the estimated ones share the rest", () => {
  const ledger = new CostLedger(TABLE);
  const text = [{ type: 'text', text: 'x'.repeat(400) }];
  ledger.observe(line('a1', 'm-b', { input_tokens: 1 }, text), null);
  ledger.observe(delta(50, 'a1'), null);
  ledger.observe(line('b1', 'm-b', { input_tokens: 1 }, text), 'c');
  const modelUsage = { 'm-b': { inputTokens: 2, outputTokens: 250, costUSD: 1 } };
  ledger.observe({ type: 'result', modelUsage }, null);
  const report = ledger.report();
  assert.equal(report.channels.get(null)!.tokens.output_tokens, 50);
  assert.equal(report.channels.get('c')!.tokens.output_tokens, 200);
});

test('equal shares left over go by channel id, main first, not by which channel spoke first', () => {
  const ledger = new CostLedger(TABLE);
  const text = [{ type: 'text', text: 'x'.repeat(400) }];
  ledger.observe(line('b1', 'm-b', { input_tokens: 1 }, text), 'A');
  ledger.observe(line('a1', 'm-b', { input_tokens: 1 }, text), null);
  const modelUsage = { 'm-b': { inputTokens: 2, outputTokens: 101, costUSD: 1 } };
  ledger.observe({ type: 'result', modelUsage }, null);
  const report = ledger.report();
  const outputs = [null, 'A'].map((key) => report.channels.get(key)!.tokens.output_tokens);
  assert.deepEqual(outputs, [51, 50]);
});

test('a result with dollars but no tokens: the table rate, or nothing to spread without one', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-a', { input_tokens: 100 }), null);
  ledger.observe(line('b1', 'm-b', { input_tokens: 100 }), 'c');
  ledger.observe({ type: 'result', modelUsage: { 'm-a': { costUSD: 0.3 }, 'm-b': { costUSD: 0.3 } } }, null);
  const report = ledger.report();
  assert.equal(report.channels.get(null)!.usd, 100 / M);
  assert.equal(report.channels.get('c')!.usd, 0);
  assert.deepEqual(report.unpriced, []);
});

test("a result with output but no input: every channel's output is the result's", () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-b', { output_tokens: 1 }, [{ type: 'text', text: 'x'.repeat(40) }]), null);
  ledger.observe({ type: 'result', modelUsage: { 'm-b': { outputTokens: 90, costUSD: 0.9 } } }, null);
  const report = ledger.report();
  assert.equal(report.channels.get(null)!.tokens.output_tokens, 90);
  close(report.channels.get(null)!.usd, 0.9);
});

test('a result dollar figure that is not finite is no dollars: the table prices the model', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-a', { input_tokens: 100 }), null);
  const modelUsage = { 'm-a': { inputTokens: 100, costUSD: Number.POSITIVE_INFINITY } };
  ledger.observe({ type: 'result', modelUsage }, null);
  const report = ledger.report();
  assert.deepEqual([report.channels.get(null)!.usd, report.models['m-a'].result_usd], [100 / M, null]);
});

test("without a result, a channel's cost prices its own tokens: a model it used none of is free", () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'no-price', { input_tokens: 0 }), 'idle');
  ledger.observe(line('b1', 'no-price', { input_tokens: 5 }), 'busy');
  assert.equal(ledger.channelCost('idle')!.usd, 0);
  assert.equal(ledger.channelCost('busy')!.usd, null);
  assert.deepEqual(ledger.report().unpriced, ['no-price']);
});

test('a model with no price is unpriced as soon as any channel used any kind of its tokens', () => {
  const cases: Array<Array<[string, unknown]>> = [
    [['m1', { input_tokens: 5, cache_read_input_tokens: 5 }]],
    [['m1', { cache_read_input_tokens: 5, cache_creation_input_tokens: 5 }]],
    [['m1', { cache_creation_input_tokens: 10, cache_creation: { ephemeral_1h_input_tokens: 5 } }]],
    [
      ['m1', { cache_creation_input_tokens: 5, cache_creation: { ephemeral_1h_input_tokens: 5 } }],
      ['delta', 5],
    ],
    [
      ['m1', { output_tokens: 1 }],
      ['delta', 5],
      ['m2', { output_tokens: 5 }],
    ],
  ];
  for (const steps of cases) {
    const ledger = new CostLedger(TABLE);
    // Another channel used the model too, without a token.
    ledger.observe(line('z', 'no-price', {}), 'other');
    for (const [id, data] of steps)
      ledger.observe(id === 'delta' ? delta(data, 'm1') : line(id, 'no-price', data), null);
    const report = ledger.report();
    assert.deepEqual(report.unpriced, ['no-price'], JSON.stringify(steps));
    assert.equal(report.usd, null);
  }
  // And free while none did, on any channel.
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-a', { input_tokens: 100 }), null);
  ledger.observe(line('z', 'no-price', {}), 'other');
  assert.deepEqual([ledger.report().unpriced, ledger.report().usd], [[], 100 / M]);
});

test('with a result, a model it does not name: table-priced, listed without result dollars', () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-b', { input_tokens: 100 }), null);
  ledger.observe(line('b1', 'm-z', { input_tokens: 0 }), 'c');
  ledger.observe({ type: 'result', modelUsage: { 'm-b': { inputTokens: 100, costUSD: 0.1 } } }, null);
  const report = ledger.report();
  assert.equal(report.prices_date, null, 'no table rate was used');
  assert.equal(report.models['m-z'].result_usd, null);
  assert.equal(report.channels.get('c')!.usd, 0);
});

test("dollars: an unpriced channel makes the channels' sum unknown; sums are free of float dust", () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe(line('a1', 'm-z', { input_tokens: 5 }), null);
  ledger.observe(line('b1', 'm-a', { input_tokens: 5 }), 'c');
  assert.equal(ledger.report().channels_usd, null);
  // 0.1 + 0.2 is 0.30000000000000004 in floating point.
  const sums = new CostLedger(TABLE);
  sums.observe(line('a1', 'm-a', { input_tokens: 100_000 }), 'a');
  sums.observe(line('b1', 'm-a', { input_tokens: 200_000 }), 'b');
  assert.deepEqual([sums.report().models['m-a'].usd, sums.report().channels_usd], [0.3, 0.3]);
  // A difference below a billionth of a dollar is dust, not unattributed dollars.
  sums.observe({ type: 'result', total_cost_usd: 0.3000000001 }, null);
  assert.equal(sums.report().unattributed_usd, 0);
});

test("12,000 channels' dollars add up free of float dust: the channels' sum and a model's, " +
  "at the table's rates and at the result's", () => {
  // Rates with a decimal (0.3 is no binary fraction): a plain sum of these 12,000 figures reads
  // 271.543445999999, each addition rounding once more.
  const ledger = new CostLedger({ ...TABLE, models: { 'm-s': SONNET } });
  // The run's dollars counted apart, in whole tenths of a microdollar (rates × 10 are whole).
  let tenths = 0;
  for (let i = 0; i < 12_000; i++) {
    const [input, output, read] = [1200 + (i % 97), 350 + (i % 13), 45_000 + (i % 301)];
    const usage = { input_tokens: input, output_tokens: output, cache_read_input_tokens: read };
    ledger.observe(line(`m${i}`, 'm-s', usage), `c${i}`);
    tenths += input * 30 + output * 150 + read * 3;
  }
  const exact = tenths / 1e7;
  assert.equal(exact, 271.543446);
  const report = ledger.report();
  assert.deepEqual([report.channels_usd, report.usd, report.models['m-s'].usd], [exact, exact, exact]);
  // At the result's rates, 12,000 like channels (a fan-out of one task) add up to its dollars,
  // where a plain sum reads 12.340000000002.
  const fanout = new CostLedger({ ...TABLE, models: { 'm-s': SONNET } });
  const usage = { input_tokens: 15, output_tokens: 40, cache_read_input_tokens: 1000 };
  for (let i = 0; i < 12_000; i++) fanout.observe(line(`m${i}`, 'm-s', usage), `c${i}`);
  const stated = { inputTokens: 15 * 12_000, outputTokens: 40 * 12_000, cacheReadInputTokens: 12_000_000 };
  const modelUsage = { 'm-s': { ...stated, costUSD: 12.34 } };
  fanout.observe({ type: 'result', total_cost_usd: 12.34, modelUsage }, null);
  const priced = fanout.report();
  assert.deepEqual(
    [priced.channels_usd, priced.usd, priced.models['m-s'].usd, priced.unattributed_usd],
    [12.34, 12.34, 12.34, 0],
  );
});

test('apportion: remainders ranked by their fraction; default ties go by position past ten', () => {
  assert.deepEqual(apportion(10, [62, 38], 100), [6, 4]);
  const twelve = apportion(3, Array(12).fill(1), 12);
  assert.deepEqual(twelve, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  assert.deepEqual(apportion(2, [1, 1, 1, 1], 4, ['d', 'c', 'b', 'a']), [0, 0, 1, 1]);
  assert.deepEqual(apportion(3, [1, 1, 1, 1, 1, 1], 6, ['k', 'k', 'k', 'k', 'k', 'k']), [1, 1, 1, 0, 0, 0]);
  assert.deepEqual(apportion(2, [1, 1, 1, 1, 1], 5, ['e', 'a', 'd', 'b', 'c']), [0, 1, 0, 1, 0]);
});

test('a channel with no token counts is unknown: null ' +
  'dollars with the reason, counted apart, never $0', () => {
  const warnings: string[] = [];
  const ledger = new CostLedger(TABLE, (code, message) => warnings.push(`${code}: ${message}`));
  ledger.observe(line('m1', 'm-a', { input_tokens: 100, output_tokens: 10 }), null);
  ledger.observe(line('t1', 'm-a', { total_tokens: 240 }), 'sub');
  ledger.observe(line('t2', 'm-a', {}), 'empty');
  ledger.observe(
    {
      type: 'result',
      total_cost_usd: 0.001,
      modelUsage: { 'm-a': { inputTokens: 500, outputTokens: 50, costUSD: 0.001 } },
    },
    null,
  );
  const report = ledger.report();
  const sub = report.channels.get('sub')!;
  assert.deepEqual(
    [sub.usd, sub.basis, sub.reason],
    [null, 'unknown', 'the stream states only a total of 240 tokens, not their kinds'],
  );
  const empty = report.channels.get('empty')!;
  assert.deepEqual(
    [empty.usd, empty.basis, empty.reason],
    [null, 'unknown', 'the stream states no token counts for it'],
  );
  // The run's dollars the channels do not show are unattributed; the unknown ones add nothing.
  const main = report.channels.get(null)!;
  close(report.channels_usd, main.usd!);
  close(report.unattributed_usd, 0.001 - main.usd!);
  assert.ok(report.unattributed_usd! > 0);
  assert.deepEqual(warnings, []);
});

test('figures out of bounds are refused with one warning per field naming the first line', () => {
  const session = new Session();
  const ledger = session.cost;
  ledger.prices = TABLE;
  ledger.observe(line('m1', 'm-a', { input_tokens: -3, output_tokens: 1e308 }), null, 7);
  ledger.observe(line('m2', 'm-a', { input_tokens: -9, output_tokens: 2 }), null, 8);
  ledger.observe({ type: 'result', total_cost_usd: -5, modelUsage: { 'm-a': { costUSD: 1e308 } } }, null, 9);
  const report = ledger.report();
  assert.deepEqual(report.channels.get(null)!.tokens, tokens(0, 2));
  assert.deepEqual([report.result_usd, report.models['m-a'].result_usd], [null, null]);
  assert.deepEqual(
    session.warnings.map((w) => `${w.code}: ${w.message}`.split(' refused')[0]),
    [
      'COST_FIGURE_REFUSED: input line 7: usage.input_tokens -3',
      'COST_FIGURE_REFUSED: input line 7: usage.output_tokens 1e+308',
      'COST_FIGURE_REFUSED: input line 9: total_cost_usd -5',
      'COST_FIGURE_REFUSED: input line 9: modelUsage.m-a.costUSD 1e+308',
    ],
  );
  for (const n of [report.usd, report.channels_usd, report.unattributed_usd])
    assert.ok(n === null || (Number.isFinite(n) && n >= 0));
});

test('MODEL_MISMATCH: a result naming one model and lines ' +
  'another (one each) is attributed, with a warning', () => {
  const warnings: string[] = [];
  const ledger = new CostLedger(TABLE, (code, message) => warnings.push(`${code}: ${message}`));
  const words = [{ type: 'text', text: 'x'.repeat(40) }];
  ledger.observe(line('m1', 'm-a', { input_tokens: 100, output_tokens: 1 }, words), null);
  const usage = { inputTokens: 100, outputTokens: 10, costUSD: 0.002 };
  ledger.observe({ type: 'result', total_cost_usd: 0.002, modelUsage: { 'gateway/m-a': usage } }, null);
  const report = ledger.report();
  assert.deepEqual(warnings, [
    'MODEL_MISMATCH: the result line names model gateway/m-a and the assistant lines m-a: ' +
      "the result's figures for gateway/m-a are taken as m-a's",
  ]);
  close(report.channels.get(null)!.usd, 0.002);
  assert.equal(report.unattributed_usd, 0);
  assert.equal(report.channels.get(null)!.tokens.output_tokens, 10);
  assert.equal(report.channels.get(null)!.basis, 'estimated');
});

test("MODEL_MISMATCH judges the run's final result line, told once at the run's end: an earlier " +
  'result naming another model tells nothing once a later one agrees', () => {
  const words = [{ type: 'text', text: 'x'.repeat(40) }];
  // The result's figures: those of the lines so far (100 input tokens a message, 10 output).
  const result = (model: string, messages: number, usd: number) => ({
    type: 'result',
    total_cost_usd: usd,
    modelUsage: { [model]: { inputTokens: 100 * messages, outputTokens: 10 * messages, costUSD: usd } },
  });
  const run = (first: string, final: string) => {
    const warnings: string[] = [];
    const ledger = new CostLedger(TABLE, (code, message) => warnings.push(`${code}: ${message}`));
    ledger.observe(line('m1', 'm-a', { input_tokens: 100, output_tokens: 1 }, words), null);
    ledger.observe(result(first, 1, 0.002), null);
    // Read mid-run, as a subagent ending after the result and the live views read it.
    ledger.observe(line('s1', 'm-a', { input_tokens: 100, output_tokens: 1 }, words), 'sub');
    const midRun = [ledger.endCost('sub'), ledger.channelCost(null), ledger.reportSoFar()];
    assert.ok(midRun.every((figures) => figures !== null));
    assert.deepEqual(warnings, []);
    ledger.observe(result(final, 2, 0.004), null);
    const report = ledger.report();
    ledger.report();
    return { warnings, report };
  };
  const agrees = run('gateway/m-a', 'm-a');
  assert.deepEqual(agrees.warnings, []);
  const figures = (r: typeof agrees.report) => [r.usd, r.channels_usd, r.unattributed_usd];
  assert.deepEqual(figures(agrees.report), [0.004, 0.004, 0]);
  assert.deepEqual(Object.keys(agrees.report.models), ['m-a']);
  const renamed = run('m-a', 'gateway/m-a');
  assert.deepEqual(renamed.warnings, [
    'MODEL_MISMATCH: the result line names model gateway/m-a and the assistant lines m-a: ' +
      "the result's figures for gateway/m-a are taken as m-a's",
  ]);
  assert.deepEqual(figures(renamed.report), [0.004, 0.004, 0]);
});

test("lines naming no model take the init line's (Gemini CLI's init.model)", () => {
  const ledger = new CostLedger(TABLE);
  ledger.observe({ type: 'system', subtype: 'init', model: 'm-a', cwd: '/w' }, null);
  ledger.observe(line('m1', undefined, { input_tokens: 1000 }), null);
  assert.deepEqual(ledger.report().channels.get(null)!.models, ['m-a']);
  close(ledger.report().usd, 1000 / M);
  assert.equal(ledger.runCwd, '/w');
});

test("after the result, a channel's end figures are its report figures, " +
  'but for the rounding of its share of the output', () => {
  const ledger = new CostLedger(TABLE);
  // Estimates 100, 200 and 100 tokens (4 characters a token): shares of 1,000 are whole.
  const says = (chars: number) => [{ type: 'text', text: 'x'.repeat(chars) }];
  ledger.observe(line('m1', 'm-a', { input_tokens: 100, output_tokens: 1 }, says(400)), null);
  ledger.observe(line('a1', 'm-a', { input_tokens: 200, output_tokens: 1 }, says(800)), 'a');
  ledger.observe(line('b1', 'm-a', { input_tokens: 100, output_tokens: 1 }, says(400)), 'b');
  const figures = { inputTokens: 400, outputTokens: 1000, costUSD: 0.01 };
  ledger.observe({ type: 'result', modelUsage: { 'm-a': figures } }, null);
  assert.deepEqual(
    [null, 'a', 'b'].map((c) => ledger.endCost(c)!.tokens.output_tokens),
    [250, 500, 250],
  );
  for (const c of [null, 'a', 'b']) assert.deepEqual(ledger.endCost(c), ledger.report().channels.get(c));
  // 1,001 tokens: 250.25, 500.5, 250.25. The report gives the left-over token to the largest
  // remainder ('a'); an end figure rounds its own share (500.5 to 501 as well, 250.25 to 250).
  const odd = new CostLedger(TABLE);
  odd.observe(line('m1', 'm-a', { input_tokens: 100, output_tokens: 1 }, says(400)), null);
  odd.observe(line('a1', 'm-a', { input_tokens: 200, output_tokens: 1 }, says(800)), 'a');
  odd.observe(line('b1', 'm-a', { input_tokens: 100, output_tokens: 1 }, says(400)), 'b');
  odd.observe({ type: 'result', modelUsage: { 'm-a': { ...figures, outputTokens: 1001 } } }, null);
  assert.deepEqual([null, 'a', 'b'].map((c) => odd.endCost(c)!.tokens.output_tokens), [250, 501, 250]);
  assert.deepEqual(
    [null, 'a', 'b'].map((c) => odd.report().channels.get(c)!.tokens.output_tokens),
    [250, 501, 250],
  );
  // Before a result, a channel's end figures are channelCost's.
  const live = new CostLedger(TABLE);
  live.observe(line('m1', 'm-a', { input_tokens: 100, output_tokens: 3 }), null);
  assert.deepEqual(live.endCost(null), live.channelCost(null));
  assert.equal(live.endCost('nobody'), null);
});

test("end figures follow a channel's transcript taken at its end and given back by a later line", () => {
  const ledger = new CostLedger(TABLE);
  const says = (chars: number) => [{ type: 'text', text: 'x'.repeat(chars) }];
  ledger.observe(line('m1', 'm-a', { input_tokens: 100, output_tokens: 1 }, says(400)), null);
  ledger.observe(line('c1', 'm-a', { input_tokens: 50, output_tokens: 1 }, says(400)), 'c');
  const figures = { inputTokens: 180, outputTokens: 900, costUSD: 0.01 };
  ledger.observe({ type: 'result', modelUsage: { 'm-a': figures } }, null);
  const same = (step: string) => {
    for (const c of [null, 'c'])
      assert.deepEqual(ledger.endCost(c), ledger.report().channels.get(c), `${step}: ${c ?? 'main'}`);
  };
  same('stream');
  // The transcript says 'c' wrote 200 output tokens: main's share is the rest of what the
  // result's output the stream shows (150 of 180 input tokens: 750), less those 200.
  const transcript = {
    file: 'agent-c.jsonl',
    models: new Map([['m-a', { tokens: tokens(50, 200), messages: 1 }]]),
    partial: null,
  };
  assert.equal(ledger.takeChannelTranscript('c', transcript), true);
  assert.deepEqual([ledger.endCost(null)!.tokens.output_tokens, ledger.endCost('c')!.basis], [550, 'exact']);
  same('transcript taken');
  // A later line of 'c' gives the stream's figures back: 30 more input tokens, all 180 shown.
  ledger.observe(line('c2', 'm-a', { input_tokens: 30, output_tokens: 1 }, says(400)), 'c');
  assert.equal(ledger.endCost(null)!.tokens.output_tokens, 300);
  same('transcript given back');
  ledger.takeTranscripts(
    { dir: 'config', main: null, subagents: new Map([['c', transcript]]), problems: [] },
    () => true,
  );
  same('run end');
});
