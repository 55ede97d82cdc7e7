import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { open, type SubagentOutput } from '../src/index.js';
import { apportion } from '../src/model/cost.js';
import { overridePrices, PRICE_TABLE } from '../src/model/prices.js';
import * as page from '../src/views/report/client.js';
import { runCostView } from '../src/views/report/model.js';
import * as costViews from '../src/views/cost.js';
import { launchBrowser, openReport } from './helpers/browser.js';
import { BIN, fixtureFiles, FIXTURES, ROOT, runToFiles, splitEvery, tmpDir } from './helpers/helpers.js';
import { startOtlpReceiver, type OtlpReceiver } from './servers/otlp-receiver.js';

/** claude-opus-5-5 list prices, USD per million tokens (platform.claude.com, models/opus-5-5). */
const OPUS_5_5 = { input: 4, output: 20 };
const TOLERANCE_USD = 0.00001;

interface Reading {
  /** Per channel: input tokens and the lines' output tokens, each API message once. */
  channels: Map<string | null, { input: number; lineOutput: number; models: string[] }>;
  /** Per channel: the output of its messages' message_delta events. */
  deltaOutput: Map<string | null, number>;
  /** The last result line, or null. */
  result: any;
}

/** An independent reading of a recording: usage grouped by message id, once per message. */
function readRecording(text: string): Reading {
  const values = text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .flatMap((l) => {
      try {
        return [JSON.parse(l)];
      } catch {
        return [];
      }
    });
  const messages = new Map<string, { channel: string | null; model: string; usage: any }>();
  const deltaOutput = new Map<string | null, number>();
  let result: any = null;
  for (const v of values) {
    const channel =
      typeof v.parent_tool_use_id === 'string' && v.parent_tool_use_id !== '' ? v.parent_tool_use_id : null;
    if (v.type === 'assistant' && typeof v.message?.id === 'string' && v.message.model !== '<synthetic>')
      messages.set(v.message.id, { channel, model: v.message.model, usage: v.message.usage ?? {} });
    if (v.type === 'stream_event' && v.event?.type === 'message_delta')
      deltaOutput.set(channel, (deltaOutput.get(channel) ?? 0) + v.event.usage.output_tokens);
    if (v.type === 'result') result = v;
  }
  const channels: Reading['channels'] = new Map();
  for (const m of messages.values()) {
    const c = channels.get(m.channel) ?? { input: 0, lineOutput: 0, models: [] };
    c.input += m.usage.input_tokens ?? 0;
    c.lineOutput += m.usage.output_tokens ?? 0;
    if (!c.models.includes(m.model)) c.models.push(m.model);
    channels.set(m.channel, c);
  }
  return { channels, deltaOutput, result };
}

function runCli(input: string, ...flags: string[]): { index: any; stderr: string } {
  const out = join(tmpDir(), 'out');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', ...flags, input], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return { index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')), stderr: r.stderr };
}

/** A copy of a fixture with some lines dropped or rewritten. */
function variant(name: string, edit: (line: any) => any | null): string {
  const text = readFileSync(join(FIXTURES, name), 'utf8');
  const lines = text
    .split('\n')
    .filter((l) => l !== '')
    .flatMap((l) => {
      const edited = edit(JSON.parse(l));
      return edited === null ? [] : [JSON.stringify(edited)];
    });
  const path = join(tmpDir(), name);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

const near = (got: number | null, want: number, what: string) =>
  assert.ok(got !== null && Math.abs(got - want) <= TOLERANCE_USD, `${what}: ${got} vs ${want}`);

test("on every fixture the channels' dollars add up to the result's costUSD per model", () => {
  for (const file of fixtureFiles()) {
    const name = basename(file);
    const reading = readRecording(readFileSync(file, 'utf8'));
    const { index } = runCli(file);
    assert.equal(index.cost.basis, 'result', name);
    near(index.cost.result_usd, reading.result.total_cost_usd, `${name}: result_usd`);
    for (const [model, usage] of Object.entries<any>(reading.result.modelUsage)) {
      const channels = index.channels.filter((c: any) => c.models.includes(model));
      const dollars = channels.reduce((sum: number, c: any) => sum + c.cost.usd, 0);
      near(dollars, usage.costUSD, `${name}: channels' dollars for ${model}`);
      near(index.cost.models[model].usd, usage.costUSD, `${name}: cost.models.${model}.usd`);
      const output = channels.reduce((sum: number, c: any) => sum + c.usage.output_tokens, 0);
      assert.equal(output, usage.outputTokens, `${name}: channels' output tokens for ${model}`);
    }
    near(index.cost.unattributed_usd, 0, `${name}: unattributed`);
    for (const c of index.channels) {
      const seen = reading.channels.get(c.id);
      assert.deepEqual(c.models, seen?.models ?? [], `${name}: models of ${c.id}`);
      if (!seen) continue;
      assert.equal(c.usage.input_tokens, seen.input, `${name}: input of ${c.id}`);
      const listPrice = (seen.input * OPUS_5_5.input + c.usage.output_tokens * OPUS_5_5.output) / 1e6;
      near(c.cost.usd, listPrice, `${name}: dollars of ${c.id}`);
    }
    // A subtree is its channel and every channel under it whose usage is known; none: unknown.
    const byId = new Map(index.channels.map((c: any) => [c.id, c]));
    for (const c of index.channels) {
      let sum: number | null = null;
      for (const d of index.channels) {
        let at: any = d;
        while (at && at.id !== c.id) at = at.id === null ? null : byId.get(at.parent);
        if (at && d.cost.basis !== 'unknown') sum = (sum ?? 0) + d.cost.usd;
      }
      if (sum === null) assert.equal(c.cost.subtree_usd, null, `${name}: subtree of ${c.id}`);
      else near(c.cost.subtree_usd, sum, `${name}: subtree of ${c.id}`);
    }
  }
});

test("partial messages: a channel's output tokens are its message_delta events', any chunking", async () => {
  const input = readFileSync(join(FIXTURES, 'partial-messages.jsonl'));
  const reading = readRecording(input.toString('utf8'));
  assert.ok(reading.deltaOutput.size > 0);
  for (const size of [1, 7, 100, 1024, input.length]) {
    const { index } = await runToFiles(splitEvery(input, size));
    for (const [channel, output] of reading.deltaOutput) {
      const c = index.channels.find((x: any) => x.id === channel);
      assert.equal(c.usage.output_tokens, output, `chunks of ${size}: output of ${channel}`);
    }
  }
  // Only messages with partial-message events: every output is exact.
  const mainOnly = variant('partial-messages.jsonl', (v) => (v.parent_tool_use_id ? null : v));
  const { index } = runCli(mainOnly);
  assert.equal(index.cost.output_tokens, 'exact');
  assert.equal(index.channels[0].usage.output_tokens, reading.deltaOutput.get(null));
});

test('a result line without dollars leaves nothing unattributed; stderr says what it lacks', () => {
  // modelUsage without costUSD and no total_cost_usd: the result counts tokens, not dollars.
  const noDollars = variant('nested-depth-3.jsonl', (v) => {
    if (v.type !== 'result') return v;
    const { total_cost_usd: _total, modelUsage, ...rest } = v;
    const models = Object.fromEntries(
      Object.entries(modelUsage ?? {}).map(([m, u]) => {
        const { costUSD: _usd, ...tokens } = u as Record<string, unknown>;
        return [m, tokens];
      }),
    );
    return { ...rest, modelUsage: models };
  });
  const { index, stderr } = runCli(noDollars);
  assert.equal(index.cost.basis, 'result');
  assert.equal(index.cost.result_usd, null);
  assert.equal(index.cost.unattributed_usd, null);
  assert.ok(index.cost.channels_usd > 0);
  assert.match(stderr, /the result line states no total/);
  assert.doesNotMatch(stderr, /no result line/);
});

test('a result line that states no dollars is called so, not missing; a run cut before one has none', () => {
  // The cost line names what is missing: the result's dollars, or the result line itself.
  const tokensOnly = variant('nested-depth-3.jsonl', (v) => {
    if (v.type !== 'result') return v;
    const { total_cost_usd: _total, modelUsage: _models, ...rest } = v;
    return rest;
  });
  const cut = variant('foreground-fanout-3.jsonl', (v) => (v.type === 'result' ? null : v));
  const gemini = join(FIXTURES, 'other-agents', 'gemini-spawn.jsonl');
  const header = (index: any) =>
    page.costLine({ cost: runCostView(index.cost) } as any, 0, index.channels[0].status);
  for (const [input, words] of [
    [tokensOnly, 'the result line states no dollars'],
    [gemini, 'the result line states no dollars'],
    [cut, 'no result line'],
  ]) {
    const { index, stderr } = runCli(input);
    assert.equal(index.cost.result_usd, null);
    assert.match(stderr, new RegExp(`\\ncost .* \\(${words}; basis table `), input);
    assert.match(header(index), new RegExp(`^cost .* \\(${words}\\) · `), input);
  }
});

test("a run with no subagent states main's output tokens, not a count of agents", () => {
  const { stderr } = runCli(join(FIXTURES, 'other-agents', 'copilot-shell.jsonl'));
  assert.match(stderr, /; main's output tokens unknown \(\$\?\)\)\n/);
  const { stderr: fanout } = runCli(join(FIXTURES, 'foreground-fanout-3.jsonl'));
  assert.match(fanout, /; agents' output tokens 4 estimated \(~\)\)\n/);
});

test("a run with no subagent states main's dollars on its cost line, not a subagent tree's (as " +
  'docs/cost.md shows)', () => {
  const { index, stderr } = runCli(join(FIXTURES, 'long-bash-heartbeat.jsonl'));
  assert.equal(index.channels.length, 1);
  const [run, main] = [index.cost.usd, index.cost.channels_usd].map((usd) => costViews.formatUsd(usd));
  const line = stderr.split('\n').find((l) => l.startsWith('cost '));
  assert.ok(line?.startsWith(`cost ${run}: main ${main}, unattributed `), line);
  // docs/cost.md shows this line.
  const doc = readFileSync(join(ROOT, 'docs', 'cost.md'), 'utf8').replace(/\s+/g, ' ');
  assert.ok(doc.includes(`\`${line}\``), line);
  // Unknown usage: main's dollars are unknown, still no tree.
  const { stderr: copilot } = runCli(join(FIXTURES, 'other-agents', 'copilot-shell.jsonl'));
  assert.match(copilot, /\ncost \$\?: main \$\? \(the result line states no dollars; /);
  for (const text of [stderr, copilot]) assert.doesNotMatch(text, /subagent tree/);
  const { stderr: fanout } = runCli(join(FIXTURES, 'foreground-fanout-3.jsonl'));
  assert.match(fanout, /\ncost \$[\d.]+: subagent tree \$[\d.]+, unattributed /);
});

test('a token count past the bound is refused, its line named: sums and dollars never reach Infinity', () => {
  const line = (id: string) =>
    JSON.stringify({
      type: 'assistant',
      parent_tool_use_id: null,
      message: {
        id,
        model: 'claude-opus-5-5',
        role: 'assistant',
        content: [{ type: 'text', text: 'hi' }],
        usage: { input_tokens: 1e308, output_tokens: 1 },
      },
    });
  const input = join(tmpDir(), 'huge-usage.jsonl');
  writeFileSync(input, `${line('m1')}\n${line('m2')}\n`);
  const { index, stderr } = runCli(input);
  assert.equal(index.channels[0].usage.input_tokens, undefined);
  assert.equal(index.channels[0].usage.output_tokens, 2);
  assert.equal(typeof index.cost.usd, 'number');
  assert.ok(Number.isFinite(index.cost.usd));
  assert.doesNotMatch(stderr, /Infinity/);
  const refused = index.warnings.find((w: any) => w.code === 'COST_FIGURE_REFUSED');
  assert.match(refused.message, /^input line 1: usage\.input_tokens 1e\+308 refused/);
});

test('a cut run (no result line) is priced from the dated table, output tokens as the stream says', () => {
  const cut = variant('nested-depth-3.jsonl', (v) => (v.type === 'result' ? null : v));
  const reading = readRecording(readFileSync(cut, 'utf8'));
  const { index } = runCli(cut);
  assert.equal(index.cost.basis, 'table');
  assert.match(index.cost.prices_date, /^\d{4}-\d{2}-\d{2}$/);
  assert.equal(index.cost.output_tokens, 'stream');
  assert.equal(index.cost.result_usd, null);
  assert.equal(index.cost.unattributed_usd, null);
  let total = 0;
  for (const c of index.channels) {
    const seen = reading.channels.get(c.id)!;
    assert.equal(c.usage.output_tokens, seen.lineOutput);
    const want = (seen.input * OPUS_5_5.input + seen.lineOutput * OPUS_5_5.output) / 1e6;
    near(c.cost.usd, want, `dollars of ${c.id}`);
    total += want;
  }
  near(index.cost.usd, total, 'run total');
  near(index.cost.channels_usd, total, 'channels total');
});

const LONG_MODEL = `claude-imaginary-10${'x'.repeat(5000)}`;

test('a model no one prices costs null, with one UNKNOWN_MODEL_PRICE warning per model', () => {
  const index0 = runCli(join(FIXTURES, 'nested-depth-3.jsonl')).index;
  const [, first, second] = index0.channels.map((c: any) => c.id);
  const rename = (v: any) => {
    if (v.type === 'result') return null;
    if (v.type === 'assistant' && v.parent_tool_use_id === first) v.message.model = 'claude-imaginary-9';
    if (v.type === 'assistant' && v.parent_tool_use_id === second) v.message.model = LONG_MODEL;
    return v;
  };
  const { index } = runCli(variant('nested-depth-3.jsonl', rename));
  const warned = index.warnings.filter((w: any) => w.code === 'UNKNOWN_MODEL_PRICE');
  assert.equal(warned.length, 2);
  assert.ok(warned.some((w: any) => w.message.includes('claude-imaginary-9')));
  // A model name from the stream is shown cut, however long.
  const long = warned.find((w: any) => w.message.includes('claude-imaginary-10'));
  assert.ok(long && long.message.length < 400 && !long.message.includes(LONG_MODEL), long?.message);
  const byId = new Map<string | null, any>(index.channels.map((c: any) => [c.id, c]));
  assert.equal(byId.get(first).cost.usd, null);
  assert.equal(byId.get(first).cost.subtree_usd, null);
  assert.equal(byId.get(null).cost.subtree_usd, null);
  assert.ok((byId.get(null).cost.usd as number) > 0, 'main is still priced');
  assert.equal(index.cost.usd, null);
  assert.equal(index.cost.models['claude-imaginary-9'].usd, null);

  // With a result line that lists the model, Claude Code's own dollars price it: no warning.
  const renameAll = (v: any) => {
    if (v.type === 'assistant') v.message.model = 'claude-imaginary-9';
    if (v.type === 'result') v.modelUsage = { 'claude-imaginary-9': v.modelUsage['claude-opus-5-5'] };
    return v;
  };
  const priced = runCli(variant('nested-depth-3.jsonl', renameAll)).index;
  assert.equal(priced.warnings.filter((w: any) => w.code === 'UNKNOWN_MODEL_PRICE').length, 0);
  near(priced.cost.channels_usd, index0.cost.result_usd, 'priced by the result');
});

test('--prices FILE and the config price a model the table lacks; a bad file is ERR_PRICES', () => {
  const unknown = variant('nested-depth-3.jsonl', (v) => {
    if (v.type === 'result') return null;
    if (v.type === 'assistant') v.message.model = 'claude-imaginary-9';
    return v;
  });
  const reading = readRecording(readFileSync(unknown, 'utf8'));
  const dir = tmpDir();
  const prices = join(dir, 'prices.json');
  writeFileSync(
    prices,
    JSON.stringify({ date: '2026-01-02', models: { 'claude-imaginary-9': { input: 7, output: 11 } } }),
  );
  const want = [...reading.channels.values()].reduce(
    (s, c) => s + (c.input * 7 + c.lineOutput * 11) / 1e6,
    0,
  );

  const flagged = runCli(unknown, '--prices', prices).index;
  assert.equal(flagged.cost.prices_date, '2026-01-02');
  near(flagged.cost.usd, want, 'priced by --prices');
  assert.equal(flagged.warnings.length, 0);

  const config = join(dir, 'config.json');
  const stages = ['line-parser', 'input-format', 'version-guard', 'channel-router'].map((use) =>
    use === 'channel-router' ? { use, prices } : { use },
  );
  writeFileSync(config, JSON.stringify({ stages, sinks: [{ use: 'files', out: join(dir, 'from-config') }] }));
  const r = spawnSync(process.execPath, [BIN, '--config', config, '-q', unknown], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const configured = JSON.parse(readFileSync(join(dir, 'from-config', 'index.json'), 'utf8'));
  near(configured.cost.usd, want, 'priced by the config');

  writeFileSync(prices, JSON.stringify({ date: '2026-01-02', models: { x: { input: -1, output: 1 } } }));
  const bad = spawnSync(process.execPath, [BIN, '--prices', prices, '-o', join(dir, 'bad'), unknown], {
    encoding: 'utf8',
  });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /\[ERR_PRICES\]/);
});

test('what the result counts and no channel shows is unattributed, not spread', () => {
  const extra = { input: 100, output: 200 };
  const extraUsd = (extra.input * OPUS_5_5.input + extra.output * OPUS_5_5.output) / 1e6;
  const path = variant('nested-depth-3.jsonl', (v) => {
    if (v.type !== 'result') return v;
    const m = v.modelUsage['claude-opus-5-5'];
    m.inputTokens += extra.input;
    m.outputTokens += extra.output;
    m.costUSD += extraUsd;
    v.total_cost_usd += extraUsd;
    return v;
  });
  const reading = readRecording(readFileSync(path, 'utf8'));
  const { index } = runCli(path);
  const channelsUsd = index.channels.reduce((s: number, c: any) => s + c.cost.usd, 0);
  near(index.cost.channels_usd, channelsUsd, 'channels_usd');
  near(index.cost.unattributed_usd, reading.result.total_cost_usd - channelsUsd, 'unattributed');
  assert.ok(index.cost.unattributed_usd >= extraUsd * 0.5, `unattributed ${index.cost.unattributed_usd}`);
  for (const c of index.channels) assert.equal(c.usage.input_tokens, reading.channels.get(c.id)!.input);
  near(index.cost.usd, reading.result.total_cost_usd, 'run total is the result');
});

test("the projection: each subagent's output and subtree cost, the run's beside Claude Code's", async () => {
  const file = join(FIXTURES, 'nested-depth-3.jsonl');
  const reading = readRecording(readFileSync(file, 'utf8'));
  const run = open(file);
  const outputs = new Map<string, Promise<SubagentOutput>>();
  for await (const sub of run.allSubagents) outputs.set(sub.id, sub.output);
  const output = await run.output;
  await run.done;
  // A subagent's output settles when the projection sees it end: before the result line its
  // dollars come from the table, after it (the result was in the same input chunk) from the result.
  const { index } = runCli(file);
  const byId = new Map<string | null, any>(index.channels.map((c: any) => [c.id, c]));
  for (const [id, pending] of outputs) {
    const out = await pending;
    const seen = reading.channels.get(id)!;
    if (out.cost.basis === 'table') {
      assert.equal(out.cost.outputTokens, 'stream');
      near(
        out.cost.usd,
        (seen.input * OPUS_5_5.input + seen.lineOutput * OPUS_5_5.output) / 1e6,
        `output.cost of ${id}`,
      );
    } else {
      assert.equal(out.cost.outputTokens, 'estimated');
      near(out.cost.usd, byId.get(id).cost.usd, `output.cost of ${id}`);
      near(out.subtree.cost.usd, byId.get(id).cost.subtree_usd, `subtree.cost of ${id}`);
    }
    assert.ok(out.subtree.cost.usd! >= out.cost.usd!, `subtree.cost of ${id}`);
  }
  assert.equal(output.cost.basis, 'result');
  assert.equal(output.cost.outputTokens, 'estimated');
  near(output.cost.resultUsd, reading.result.total_cost_usd, 'resultUsd');
  near(output.cost.channelsUsd, reading.result.modelUsage['claude-opus-5-5'].costUSD, 'channelsUsd');
  near(output.subtree.cost.usd, reading.result.total_cost_usd, 'the run subtree');
  assert.equal(output.cost.unattributedUsd, 0);
});

/**
 * Claude Code's background fan-out: main spawns `fanout` subagents in the background (one
 * message each, `main` its usage), each writes one message of `usage`, then the result
 * (`result`: its line's own fields, none to leave it out).
 */
function backgroundFanout(fanout: number, main: object, usage: object, result: object | null): string {
  const model = 'claude-sonnet-4-5';
  const lines: unknown[] = [{ type: 'system', subtype: 'init', cwd: '/w', model, session_id: 's' }];
  const message = (id: string, content: unknown[], u: object) =>
    ({ id, type: 'message', role: 'assistant', model, content, usage: u });
  for (let i = 0; i < fanout; i++) {
    const input = { description: `task ${i}`, prompt: 'look into it', run_in_background: true };
    const spawn = [{ type: 'tool_use', id: `toolu_${i}`, name: 'Agent', input }];
    lines.push({ type: 'assistant', parent_tool_use_id: null, message: message(`msg_m${i}`, spawn, main) });
    const launched = [{ tool_use_id: `toolu_${i}`, type: 'tool_result', content: 'Async agent launched' }];
    lines.push({ type: 'user', parent_tool_use_id: null, message: { role: 'user', content: launched } });
  }
  for (let i = 0; i < fanout; i++) {
    const found = message(`msg_s${i}`, [{ type: 'text', text: 'found it' }], usage);
    lines.push({ type: 'assistant', parent_tool_use_id: `toolu_${i}`, message: found });
    const end = { type: 'system', subtype: 'task_notification', tool_use_id: `toolu_${i}` };
    lines.push({ ...end, status: 'completed' });
  }
  if (result) lines.push({ type: 'result', subtype: 'success', is_error: false, ...result });
  const path = join(tmpDir(), 'fanout.jsonl');
  writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  return path;
}

test("12,000 subagents: index.json's subtree_usd and channels_usd and the projection's run subtree " +
  "add up free of float dust, at the table's rates and at the result's", async () => {
  const fanout = 12_000;
  const main = { input_tokens: 10, output_tokens: 1 };
  const usage = { input_tokens: 15, output_tokens: 40, cache_read_input_tokens: 1000 };
  // At the table's rates (Claude Sonnet 4.5: 3, 15 and 0.3 per million), counted apart in whole
  // tenths of a microdollar: a plain sum of the channels' dollars reads 11.879999999998.
  const sonnet = PRICE_TABLE.models['claude-sonnet-4-5'];
  assert.deepEqual([sonnet.input, sonnet.output, sonnet.cache_read], [3, 15, 0.3]);
  const tenths = fanout * (10 * 30 + 1 * 150) + fanout * (15 * 30 + 40 * 150 + 1000 * 3);
  const byTable = tenths / 1e7;
  assert.equal(byTable, 11.88);
  // At the result's: 12,000 like channels whose rates come from its $12.34 (a sum of their figures
  // as rounded to 12 decimals reads 12.339999999192).
  const figures = { inputTokens: 25 * fanout, outputTokens: 41 * fanout, cacheReadInputTokens: 1e3 * fanout };
  const modelUsage = { 'claude-sonnet-4-5': { ...figures, costUSD: 12.34 } };
  const stated = { total_cost_usd: 12.34, modelUsage };
  for (const [result, usd] of [[null, byTable], [stated, 12.34]] as const) {
    const file = backgroundFanout(fanout, main, usage, result);
    const { index } = runCli(file);
    assert.equal(index.channels.length, fanout + 1);
    const top = index.channels.find((c: any) => c.id === null);
    assert.deepEqual(
      [index.cost.usd, index.cost.channels_usd, top.cost.subtree_usd],
      [usd, usd, usd],
      result ? 'result' : 'table',
    );
    const run = open(file);
    const output = await run.output;
    await run.done;
    assert.deepEqual([output.subtree.cost.usd, output.cost.channelsUsd], [usd, usd]);
  }
});

test("MODEL_MISMATCH in index.json judges the run's final result line: a subagent ending after an " +
  'earlier result naming another model leaves no warning once the final result agrees', () => {
  const model = 'claude-sonnet-4-5';
  const usage = { input_tokens: 100, output_tokens: 10 };
  const message = (id: string, content: unknown[]) => ({ id, role: 'assistant', model, content, usage });
  const result = (named: string, messages: number, usd: number) => ({
    type: 'result',
    subtype: 'success',
    total_cost_usd: usd,
    modelUsage: { [named]: { inputTokens: 100 * messages, outputTokens: 10 * messages, costUSD: usd } },
  });
  const input = { description: 'task', prompt: 'look', run_in_background: true };
  const launched = [{ tool_use_id: 'toolu_1', type: 'tool_result', content: 'Async agent launched' }];
  const spawn = message('m1', [{ type: 'tool_use', id: 'toolu_1', name: 'Agent', input }]);
  const found = message('s1', [{ type: 'text', text: 'found it' }]);
  const stream = (first: string, final: string) => {
    const lines = [
      { type: 'system', subtype: 'init', cwd: '/w', model, session_id: 's' },
      { type: 'assistant', message: spawn },
      { type: 'user', message: { role: 'user', content: launched } },
      result(first, 1, 0.002),
      { type: 'assistant', parent_tool_use_id: 'toolu_1', message: found },
      { type: 'system', subtype: 'task_notification', tool_use_id: 'toolu_1', status: 'completed' },
      { type: 'assistant', message: message('m2', [{ type: 'text', text: 'done' }]) },
      result(final, 3, 0.006),
    ];
    const path = join(tmpDir(), 'turns.jsonl');
    writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    return path;
  };
  const mismatches = (r: ReturnType<typeof runCli>) => [
    r.index.warnings.filter((w: any) => w.code === 'MODEL_MISMATCH').length,
    r.stderr.split('\n').filter((l) => l.includes('MODEL_MISMATCH')).length,
    r.index.cost.channels_usd,
  ];
  assert.deepEqual(mismatches(runCli(stream(`gateway/${model}`, model))), [0, 0, 0.006]);
  assert.deepEqual(mismatches(runCli(stream(model, `gateway/${model}`))), [1, 1, 0.006]);
});

test("pino: each status event carries its channel's dollars (cost_usd)", () => {
  const file = join(FIXTURES, 'nested-depth-3.jsonl');
  const reading = readRecording(readFileSync(file, 'utf8'));
  const out = join(tmpDir(), 'out');
  const log = join(tmpDir(), 'events.log');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '--pino', log, '-q', file], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const statuses = readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((e) => e.kind === 'status');
  assert.ok(statuses.length >= 3);
  for (const e of statuses) {
    const seen = reading.channels.get(e.channel === 'main' ? null : e.channel)!;
    const table = (seen.input * OPUS_5_5.input + seen.lineOutput * OPUS_5_5.output) / 1e6;
    const final = index.channels.find((c: any) => (c.id ?? 'main') === e.channel).cost.usd;
    // Priced when the event is logged: from the table, or from the result when it was read first.
    assert.ok(
      Math.abs(e.cost_usd - table) <= TOLERANCE_USD || Math.abs(e.cost_usd - final) <= TOLERANCE_USD,
      `${e.channel}: ${e.cost_usd}`,
    );
  }
});

test('cache reads and 5-minute and 1-hour cache writes are priced at their own rates', () => {
  // claude-opus-5-5: cache read $0.20, 5-minute write $5, 1-hour write $8 per million tokens.
  const cache = { read: 1000, write5m: 100, write1h: 200 };
  const withCache = (v: any) => {
    if (v.type === 'assistant' && v.message.usage) {
      v.message.usage.cache_read_input_tokens = cache.read;
      v.message.usage.cache_creation_input_tokens = cache.write5m + cache.write1h;
      v.message.usage.cache_creation = {
        ephemeral_5m_input_tokens: cache.write5m,
        ephemeral_1h_input_tokens: cache.write1h,
      };
    }
    return v;
  };
  const cut = variant('nested-depth-3.jsonl', (v) => (v.type === 'result' ? null : withCache(v)));
  const text = readFileSync(cut, 'utf8');
  const reading = readRecording(text);
  const messages = new Map<string | null, Set<string>>();
  for (const v of text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l)))
    if (v.type === 'assistant')
      messages.set(
        v.parent_tool_use_id ?? null,
        (messages.get(v.parent_tool_use_id ?? null) ?? new Set()).add(v.message.id),
      );
  const { index } = runCli(cut);
  let total = 0;
  for (const c of index.channels) {
    const seen = reading.channels.get(c.id)!;
    const n = messages.get(c.id)!.size;
    const want =
      (seen.input * 4 +
        seen.lineOutput * 20 +
        n * (cache.read * 0.2 + cache.write5m * 5 + cache.write1h * 8)) /
      1e6;
    near(c.cost.usd, want, `dollars of ${c.id}`);
    total += want;
  }
  const m = index.cost.models['claude-opus-5-5'];
  const count = [...messages.values()].reduce((s, ids) => s + ids.size, 0);
  assert.deepEqual(
    [m.cache_read_input_tokens, m.cache_creation_5m_input_tokens, m.cache_creation_1h_input_tokens],
    [count * cache.read, count * cache.write5m, count * cache.write1h],
  );
  near(index.cost.usd, total, 'run total');
});

test('estimated output tokens: shares add up exactly; equal remainders go by channel, not arrival', () => {
  assert.deepEqual(apportion(10, [1, 1, 1], 3, ['b', 'a', 'c']), [3, 4, 3]);
  assert.deepEqual(apportion(10, [1, 1, 1], 3, ['a', 'c', 'b']), [4, 3, 3]);
  assert.deepEqual(apportion(7, [5, 0, 2], 7, ['x', 'y', 'z']), [5, 0, 2]);
  assert.deepEqual(apportion(5, [0, 0], 0, ['x', 'y']), [0, 0]);
  for (const total of [1, 13, 640]) {
    const shares = apportion(total, [3, 1, 4, 1, 5], 14, ['e', 'd', 'c', 'b', 'a']);
    assert.equal(
      shares.reduce((a, b) => a + b, 0),
      total,
    );
  }
});

/** subtee with `--prices FILE` on a fixture: its exit, stderr and how long it took. */
function withPrices(prices: string, timeoutMs = 20_000) {
  const out = join(tmpDir(), 'priced');
  const started = Date.now();
  const r = spawnSync(
    process.execPath,
    [BIN, '--prices', prices, '-o', out, '--stdout', 'none', '-q', join(FIXTURES, 'nested-depth-3.jsonl')],
    { encoding: 'utf8', timeout: timeoutMs },
  );
  return { status: r.status, stderr: r.stderr, ms: Date.now() - started, out };
}

test('--prices from a device or an endless pipe is refused at once (ERR_PRICES), never read whole', () => {
  const endless = [
    '/dev/zero',
    '/dev/urandom',
    // An endless pipe by name, as <(yes …) gives it.
    '<(yes \'{"date":"2026-01-01"}\')',
  ];
  for (const source of endless) {
    const r = source.startsWith('<(')
      ? spawnSync(
          'bash',
          ['-c', `exec "$0" "$1" --prices ${source} -o "$2" --stdout none -q "$3"`, process.execPath, BIN,
            join(tmpDir(), 'o'), join(FIXTURES, 'nested-depth-3.jsonl')],
          { encoding: 'utf8', timeout: 20_000 },
        )
      : withPrices(source);
    assert.equal(r.status, 2, `${source}: ${r.stderr}`);
    // A device is refused without a read, an endless pipe once it passes the limit.
    const why = source.startsWith('/dev/')
      ? 'a device, not a file'
      : 'larger than 1048576 bytes, not a price file';
    assert.match(r.stderr, new RegExp(`: ${why} \\[ERR_PRICES\\]`), source);
  }
  // A file of that size is refused the same way; one just under it is read (and then judged).
  const big = join(tmpDir(), 'big.json');
  writeFileSync(big, `{"date":"2026-01-01","models":{},"sources":["${'x'.repeat(1024 * 1024)}"]}`);
  assert.match(withPrices(big).stderr, /larger than 1048576 bytes/);
});

test('a price file: a day that is no calendar day is ' +
  'refused; a UTF-8 BOM is read; errors show no raw bytes', () => {
  const dir = tmpDir();
  const file = join(dir, 'p.json');
  const table = (date: string) =>
    JSON.stringify({ date, models: { 'claude-opus-5-5': { input: 4, output: 20 } } });
  for (const date of ['2026-13-45', '2026-02-30', '2026-00-10', '0000-01-01', '2026-1-01']) {
    writeFileSync(file, table(date));
    const r = withPrices(file);
    assert.equal(r.status, 2, date);
    assert.match(r.stderr, /: date: must be a day written YYYY-MM-DD .*\[ERR_PRICES\]/, date);
  }
  writeFileSync(file, `\uFEFF${table('2024-02-29')}`);
  const bom = withPrices(file);
  assert.equal(bom.status, 0, bom.stderr);
  assert.equal(JSON.parse(readFileSync(join(bom.out, 'index.json'), 'utf8')).cost.prices_date, '2024-02-29');
  // Not JSON: the error names a position, never the file's bytes (a BOM, controls, escapes).
  const twoBoms = Buffer.from([0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf]);
  writeFileSync(file, Buffer.concat([twoBoms, Buffer.from('{\u001b[31m')]));
  const junk = withPrices(file);
  assert.equal(junk.status, 2);
  assert.match(junk.stderr, /cannot read it as JSON \(not valid JSON( at character \d+)?\) \[ERR_PRICES\]/);
  assert.doesNotMatch(junk.stderr, /\uFEFF|\u001b|\u00ef/);
});

test('a price file rate past $10,000 per million tokens, ' +
  'or not finite, is refused (1e307 destroys nothing)', () => {
  const file = join(tmpDir(), 'p.json');
  for (const rate of [1e307, 10_001, -1]) {
    writeFileSync(file, JSON.stringify({ date: '2026-01-01', models: { m: { input: 1, output: rate } } }));
    const r = withPrices(file);
    assert.equal(r.status, 2, String(rate));
    assert.match(r.stderr, /models\.m\.output: must be a number of USD per million tokens, from 0 to 10,000/);
  }
  // A cache rate written past the bound is named; one left out is not checked (below).
  const dearRead = { m: { input: 1, output: 1, cache_read: 10_001 } };
  writeFileSync(file, JSON.stringify({ date: '2026-01-01', models: dearRead }));
  assert.match(withPrices(file).stderr, /models\.m\.cache_read: must be a number/);
});

test('a price file may leave out cache rates whose usual multiple of its input rate passes $10,000', () => {
  const file = join(tmpDir(), 'p.json');
  const written = { date: '2026-10-01', models: { 'our-fine-tune-1': { input: 6000, output: 15 } } };
  writeFileSync(file, JSON.stringify(written));
  const r = withPrices(file);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(JSON.parse(readFileSync(join(r.out, 'index.json'), 'utf8')).cost.prices_date, '2026-10-01');
  const table = overridePrices(PRICE_TABLE, written);
  assert.ok(typeof table !== 'string', String(table));
  // The usual multiples of the input rate: cache read 0.1×, 5-minute write 1.25×, 1-hour write 2×.
  assert.deepEqual(table.models['our-fine-tune-1'], {
    input: 6000,
    output: 15,
    cache_read: 600,
    cache_write_5m: 7500,
    cache_write_1h: 12_000,
  });
});

/** Every view of one real CLI run: index.json, stderr, the report's header, stats, OTLP's root. */
interface Views {
  index: any;
  stderr: string;
  /** The report page's cost line, as Chromium draws it. */
  header: string;
  /** The report's Σ cost cell of each channel, by its id (`main` for main), as Chromium draws it. */
  sigma: Map<string, string>;
  /** The `# cost:` line closing each channel's `.log`, by its id (`main` for main). */
  costLines: Map<string, string>;
  stats: any;
  /** The attributes of the run's root span, as a loopback OTLP receiver got them. */
  root: Record<string, string | number | boolean>;
}

/** The token counts of each kind a recording states anywhere (`input_tokens`, `outputTokens`…). */
function kindsStated(text: string): number {
  let n = 0;
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object')
      for (const [k, x] of Object.entries(v)) {
        if (typeof x === 'number' && /^(input|output|cache)[_a-z]*tokens$/i.test(k)) n++;
        walk(x);
      }
  };
  for (const l of text.split('\n')) if (l.trim() !== '') walk(JSON.parse(l));
  return n;
}

describe('the run cost in every view, against what the recording states', () => {
  let receiver: OtlpReceiver;
  let browser: Browser;
  before(async () => {
    receiver = await startOtlpReceiver();
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await receiver?.close();
  });

  async function views(input: string, ...flags: string[]): Promise<Views> {
    receiver.spans.length = 0;
    const out = join(tmpDir(), 'out');
    const args = [BIN, '--out', out, '--stdout', 'none', '--html', '--otlp', receiver.url, ...flags, input];
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const [code] = await once(child, 'close');
    assert.equal(code, 0, stderr);
    const { page } = await openReport(browser, out);
    const header = (await page.textContent('#cost')) ?? '';
    // Each row: the channel's id at the end of its name's title, its Σ cost in the last cell.
    const cells = await page.$$eval('#tree tbody tr.tree-row', (rows) =>
      rows.map((r) => [r.querySelector('td')!.title, r.lastElementChild!.textContent ?? '']),
    );
    await page.close();
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const sigma = new Map<string, string>();
    const costLines = new Map<string, string>();
    const ids = index.channels.flatMap((c: any) => (c.id === null ? [] : [c.id]));
    for (const [title, text] of cells) {
      const id = ids.find((i: string) => title.endsWith(` ${i}`)) ?? 'main';
      assert.ok(!sigma.has(id), `one row for ${id}`);
      sigma.set(id, text);
    }
    for (const c of index.channels) {
      const id = c.id ?? 'main';
      const log = readFileSync(join(out, c.log), 'utf8').trimEnd().split('\n');
      costLines.set(id, log.filter((l) => l.startsWith('# cost: ')).pop()!);
    }
    const stats = spawnSync(process.execPath, [BIN, 'stats', out, '--json'], { encoding: 'utf8' });
    assert.equal(stats.status, 0, stats.stderr);
    const roots = receiver.spans.filter((s) => s.parentSpanId === '');
    assert.equal(roots.length, 1);
    return {
      index,
      stderr,
      header,
      sigma,
      costLines,
      stats: JSON.parse(stats.stdout).total,
      root: roots[0].attributes,
    };
  }

  test('a run of no known usage (GitHub Copilot CLI) costs unknown in every view, never $0', async () => {
    const file = join(FIXTURES, 'other-agents', 'copilot-spawn.jsonl');
    // The recording states a total of tokens for its subagents, never a count of a kind.
    assert.equal(kindsStated(readFileSync(file, 'utf8')), 0);
    const v = await views(file);
    const agents = v.index.channels.length;
    assert.ok(agents >= 3, `${agents} agents`);
    assert.deepEqual(
      [v.index.cost.usd, v.index.cost.channels_usd, v.index.cost.output_tokens],
      [null, null, 'unknown'],
    );
    assert.equal(v.index.cost.channels_by_basis.unknown, agents);
    for (const [model, m] of Object.entries<any>(v.index.cost.models))
      assert.deepEqual([m.usd, m.basis], [null, 'unknown'], model);
    const line = v.stderr.split('\n').find((l) => l.startsWith('cost '));
    assert.match(line ?? '', /^cost \$\?: subagent tree \$\? \(the result line states no dollars; /);
    assert.ok(line!.endsWith(`; agents' output tokens ${agents} unknown ($?))`), line);
    assert.match(
      v.header,
      /^cost \$\? \(the result line states no dollars\) · agents \$\? · .* · output tokens unknown$/,
    );
    assert.deepEqual([v.stats.cost_usd, v.stats.unknown], [null, agents]);
    assert.ok(!('subtee.run.cost.usd' in v.root), `root span: ${JSON.stringify(v.root)}`);
  });

  test('a run of partly known usage costs what is known, the unknown agents counted apart', async () => {
    const file = join(FIXTURES, 'other-agents', 'gemini-spawn.jsonl');
    const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    // Gemini CLI states the run's tokens on its result line, none per subagent.
    const [[model, stated]] = Object.entries<any>(lines.find((l) => l.type === 'result').stats.models);
    const spawned = lines.filter((l) => l.type === 'tool_use' && l.tool_name === 'invoke_agent').length;
    assert.ok(spawned > 0);
    const rate = { input: 3, output: 7 };
    const prices = join(tmpDir(), 'prices.json');
    writeFileSync(prices, JSON.stringify({ date: '2026-10-01', models: { [model]: rate } }));
    const known = (stated.input_tokens * rate.input + stated.output_tokens * rate.output) / 1e6;

    const v = await views(file, '--prices', prices);
    near(v.index.cost.usd, known, 'index.json cost.usd');
    near(v.index.cost.channels_usd, known, 'index.json cost.channels_usd');
    assert.equal(v.index.cost.output_tokens, 'stream');
    assert.deepEqual(v.index.cost.channels_by_basis, { exact: 0, estimated: 0, stream: 1, unknown: spawned });
    const usd = costViews.formatUsd(known);
    const floor = `${usd} + ${spawned} unknown`;
    const lacks = 'the result line states no dollars';
    assert.ok(v.stderr.includes(`\ncost ${floor}: subagent tree ${floor} (${lacks};`), v.stderr);
    // The page's header as the summary: what the dollars leave out, counted.
    assert.equal(
      v.header,
      `cost ${floor} (${lacks}) · agents ${floor} · basis table 2026-10-01 · output tokens stream`,
    );
    near(v.stats.cost_usd, known, 'stats cost_usd');
    assert.equal(v.stats.unknown, spawned);
    near(v.root['subtee.run.cost.usd'] as number, known, 'OTLP subtee.run.cost.usd');
  });

  test('a subtree of no known usage costs unknown in every view; a partly known one what is known ' +
    '+ N unknown, as the run does', async () => {
    // GitHub Copilot CLI: no channel's usage is known, so no subtree's is.
    const copilot = join(FIXTURES, 'other-agents', 'copilot-spawn.jsonl');
    const v = await views(copilot);
    const under = (id: string | null): number =>
      1 + v.index.channels.filter((c: any) => c.parent === id && c.id !== null).reduce(
        (n: number, c: any) => n + under(c.id), 0);
    assert.equal(under(null), v.index.channels.length, 'every channel is under main');
    for (const c of v.index.channels) {
      const id = c.id ?? 'main';
      assert.deepEqual([c.cost.subtree_usd, c.cost.subtree_unknown], [null, under(c.id)], id);
      assert.match(v.costLines.get(id)!, /^# cost: \$\? · subtree \$\? · /, id);
      assert.equal(v.sigma.get(id), '$?', `report Σ cost of ${id}`);
    }
    /** The projection's subtree figures of main and of each subagent (by id), with `options`. */
    const projected = async (file: string, options: Parameters<typeof open>[1] = {}) => {
      const run = open(file, options);
      const outputs: Array<[string, Promise<SubagentOutput>]> = [];
      for await (const sub of run.allSubagents) outputs.push([sub.id, sub.output]);
      const output = await run.output;
      await run.done;
      const subtrees = new Map([['main', output.subtree]]);
      for (const [id, out] of outputs) subtrees.set(id, (await out).subtree);
      return subtrees;
    };
    const copilotTrees = await projected(copilot);
    assert.equal(copilotTrees.size, v.index.channels.length);
    for (const c of v.index.channels) {
      const sub = copilotTrees.get(c.id ?? 'main')!;
      assert.deepEqual([sub.cost.usd, sub.cost.outputTokens, sub.unknown], [null, 'unknown', under(c.id)]);
    }

    // Gemini CLI: main's usage is known, its subagents' is not.
    const gemini = join(FIXTURES, 'other-agents', 'gemini-spawn.jsonl');
    const lines = readFileSync(gemini, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const [[model, stated]] = Object.entries<any>(lines.find((l) => l.type === 'result').stats.models);
    const spawned = lines.filter((l) => l.type === 'tool_use' && l.tool_name === 'invoke_agent').length;
    const prices = join(tmpDir(), 'prices.json');
    const rates = { [model]: { input: 3, output: 7 } };
    writeFileSync(prices, JSON.stringify({ date: '2026-10-01', models: rates }));
    const known = (stated.input_tokens * 3 + stated.output_tokens * 7) / 1e6;
    const g = await views(gemini, '--prices', prices);
    const main = g.index.channels.find((c: any) => c.id === null);
    near(main.cost.subtree_usd, known, 'main subtree_usd');
    assert.equal(main.cost.subtree_unknown, spawned);
    const floor = `${costViews.formatUsd(known)} + ${spawned} unknown`;
    assert.ok(g.costLines.get('main')!.includes(` · subtree ${floor} · `), g.costLines.get('main'));
    assert.equal(g.sigma.get('main'), floor, 'report Σ cost of main');
    const stages = ['line-parser', 'input-format', 'version-guard', 'channel-router'].map((use) =>
      use === 'channel-router' ? { use, prices } : { use },
    );
    const geminiTrees = await projected(gemini, { config: { stages } });
    near(geminiTrees.get('main')!.cost.usd, known, "the projection's subtree.cost of main");
    assert.equal(geminiTrees.get('main')!.unknown, spawned);
    for (const c of g.index.channels.filter((c: any) => c.id !== null)) {
      assert.deepEqual([c.cost.subtree_usd, c.cost.subtree_unknown], [null, 1], c.id);
      assert.equal(g.sigma.get(c.id), '$?', `report Σ cost of ${c.id}`);
      const sub = geminiTrees.get(c.id)!;
      assert.deepEqual([sub.cost.usd, sub.cost.outputTokens, sub.unknown], [null, 'unknown', 1], c.id);
    }
  });

  test("the run's output-tokens basis is its channels' least exact: a result without modelUsage " +
    'shares no output, so every figure is as the stream states', async () => {
    const file = variant('nested-depth-3.jsonl', (v) => {
      if (v.type === 'result') delete v.modelUsage;
      return v;
    });
    const reading = readRecording(readFileSync(file, 'utf8'));
    assert.equal(reading.deltaOutput.size, 0);
    const v = await views(file);
    assert.equal(v.index.cost.output_tokens, 'stream');
    for (const c of v.index.channels) {
      assert.equal(c.cost.basis, 'stream', `channel ${c.id}`);
      assert.equal(c.usage.output_tokens, reading.channels.get(c.id)!.lineOutput, `output of ${c.id}`);
    }
    const n = reading.channels.size;
    const line = v.stderr.split('\n').find((l) => l.startsWith('cost '));
    assert.ok(line?.endsWith(`agents' output tokens ${n} as the stream states (~, an undercount))`), line);
    assert.match(v.header, / · output tokens stream$/);
  });
});

test("the report page's copy of the subtree-dollars rule, of what the run's dollars leave out and of " +
  "formatUsd agree with views/cost.ts's", () => {
  const figures = [null, 0, 0.000_004, 0.0123, 1.5, 1234.5678, -1, Number.NaN, Infinity];
  for (const usd of figures) {
    assert.equal(page.formatUsd(usd), costViews.formatUsd(usd), String(usd));
    for (const unknown of [0, 1, 3])
      assert.equal(page.usdLeavingOut(usd, unknown), costViews.usdLeavingOut(usd, unknown));
  }
  // The run's dollars as the result states them, or as its channels' sum, with or without a result.
  for (const usd of [null, 0.5, 1.5])
    for (const channels of [null, 0.5, 1.5])
      for (const unattributed of [null, 0, 1]) {
        const report = { usd, channels_usd: channels, unattributed_usd: unattributed };
        const view = { usd, channelsUsd: channels, unattributedUsd: unattributed };
        const asReport = report as Parameters<typeof costViews.runUsdLeavesOut>[0];
        const leaves = costViews.runUsdLeavesOut(asReport, 2);
        assert.equal(page.runUsdLeavesOut(view, 2), leaves, JSON.stringify(report));
      }
  // Every way of adding two subtrees of one or two channels each, known, unknown or unpriced.
  const channels: Array<[number | null, boolean]> = [[0.5, false], [null, false], [0, true], [0.25, true]];
  // The figure and the counts: views/cost.ts keeps what rounding lost too (the page adds plainly).
  const sum = (parts: Array<[number | null, boolean]>) => {
    const into = costViews.usdSumOf(...parts[0]);
    for (const part of parts.slice(1)) costViews.addUsdSum(into, costViews.usdSumOf(...part));
    return [costViews.usdSumFigure(into), into.known, into.unknown];
  };
  const pageSum = (parts: Array<[number | null, boolean]>) => {
    const into = page.usdSumOf(...parts[0]);
    for (const part of parts.slice(1)) page.addUsdSum(into, page.usdSumOf(...part));
    return [page.usdSumFigure(into), into.known, into.unknown];
  };
  for (const a of channels)
    for (const b of channels)
      for (const c of [...channels, undefined]) {
        const parts = c ? [a, b, c] : [a, b];
        assert.deepEqual(pageSum(parts), sum(parts), JSON.stringify(parts));
      }
});
