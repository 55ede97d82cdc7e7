import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { runChain } from '../src/chain/chain.js';
import { Session } from '../src/model/session.js';
import { BIN, chunked, FIXTURES, tmpDir } from './helpers/helpers.js';

/** The fixture's lines as objects, each edited (null drops it), written to a new file. */
function variant(edit: (line: any) => any | null): { path: string; lines: any[] } {
  const text = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8');
  const lines = text
    .split('\n')
    .filter((line) => line !== '')
    .flatMap((line) => {
      const edited = edit(JSON.parse(line));
      return edited === null ? [] : [edited];
    });
  const path = join(tmpDir(), 'in.jsonl');
  writeFileSync(path, lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
  return { path, lines };
}

function runCli(input: string, ...flags: string[]): { out: string; index: any; stderr: string } {
  const out = join(tmpDir(), 'out');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', ...flags, input], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return { out, index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')), stderr: r.stderr };
}

/** Subagent ids in the order the fixture first names them as a parent. */
function parentIds(lines: any[]): string[] {
  const ids: string[] = [];
  for (const line of lines) {
    const parent = line.parent_tool_use_id;
    if (typeof parent === 'string' && parent !== '' && !ids.includes(parent)) ids.push(parent);
  }
  return ids;
}

test('an unpriced channel shows $? in its # cost: line and on the stderr summary, never $0', () => {
  const ids = parentIds(variant((line) => line).lines);
  const unpriced = ids[0];
  const { path } = variant((line) => {
    if (line.type === 'result') return null;
    if (line.type === 'assistant' && line.parent_tool_use_id === unpriced)
      line.message.model = 'claude-imaginary-9';
    return line;
  });
  const { out, index, stderr } = runCli(path);
  const costLine = (log: string) =>
    readFileSync(join(out, log), 'utf8')
      .split('\n')
      .find((line) => line.startsWith('# cost: '))!;
  // The unpriced subagent: its own dollars and its subtree's are unknown.
  assert.match(costLine(`agents/${unpriced}.log`), /^# cost: \$\? · subtree \$\? · claude-imaginary-9 · /);
  // Main spent priced tokens, but its subtree holds the unpriced one.
  assert.match(costLine('main.log'), /^# cost: \$0\.\d+ · subtree \$\? · /);
  // The deepest subagent is priced all through.
  assert.match(costLine(`agents/${ids[2]}.log`), /^# cost: \$0\.\d+ · subtree \$0\.\d+ · /);

  const depthOf = new Map<string, number>(index.channels.map((c: any) => [c.id, c.depth]));
  const row = (depth: number) => stderr.split('\n').find((line) => line.includes(`  depth ${depth}  `))!;
  assert.match(row(depthOf.get(unpriced)!), /  \$\?$/);
  // Without a result line the output tokens are the stream's own: the figure carries the `~` mark.
  assert.match(row(depthOf.get(ids[1])!), /  ~\$0\.\d+$/);
});

test('a model named __proto__ is a model like any other: its own cost entry, priced by a price file', () => {
  const { path, lines } = variant((line) => {
    if (line.type === 'result') return null;
    if (line.type === 'assistant') line.message.model = '__proto__';
    return line;
  });
  // An independent count: each API message's usage once, by message id.
  const usage = new Map<string, any>();
  for (const line of lines)
    if (line.type === 'assistant' && typeof line.message?.id === 'string')
      usage.set(line.message.id, line.message.usage ?? {});
  let input = 0;
  let output = 0;
  for (const u of usage.values()) {
    input += u.input_tokens ?? 0;
    output += u.output_tokens ?? 0;
  }

  const unpriced = runCli(path).index;
  assert.ok(Object.hasOwn(unpriced.cost.models, '__proto__'), JSON.stringify(unpriced.cost.models));
  assert.equal(unpriced.cost.models['__proto__'].usd, null);
  assert.equal(unpriced.cost.models['__proto__'].input_tokens, input);
  assert.equal(unpriced.cost.models['__proto__'].output_tokens, output);

  const prices = join(tmpDir(), 'prices.json');
  // A computed key: an own `__proto__` member, as JSON.parse makes it from the file.
  const models = { ['__proto__']: { input: 7, output: 11 } };
  writeFileSync(prices, JSON.stringify({ date: '2026-01-02', models }));
  assert.match(readFileSync(prices, 'utf8'), /"__proto__":\{"input":7/);
  const priced = runCli(path, '--prices', prices).index;
  const want = (input * 7 + output * 11) / 1e6;
  const usd = priced.cost.models['__proto__'].usd;
  assert.ok(usd !== null && Math.abs(usd - want) < 1e-9, `${usd} vs ${want}`);
  assert.ok(Math.abs(priced.cost.usd - want) < 1e-9, `${priced.cost.usd} vs ${want}`);
});

test('a line the cost ledger fails on stays routed to its channel: failed, not quarantined', async () => {
  const text = readFileSync(join(FIXTURES, 'nested-depth-3.jsonl'), 'utf8');
  const lines = text.split('\n').filter((line) => line !== '');
  const expectedPerChannel = new Map<string, number>();
  for (const line of lines) {
    const parent = JSON.parse(line).parent_tool_use_id;
    const key = typeof parent === 'string' && parent !== '' ? `agents/${parent}.jsonl` : 'main.jsonl';
    expectedPerChannel.set(key, (expectedPerChannel.get(key) ?? 0) + 1);
  }
  const session = new Session();
  let thrown = 0;
  // The fault injected: the ledger throws on every assistant line.
  session.cost.observe = (value) => {
    if (value.type === 'assistant') {
      thrown++;
      throw new Error('ledger broken');
    }
    return null;
  };
  const out = join(tmpDir(), 'out');
  await runChain(
    chunked([Buffer.from(text)]),
    {
      stages: [{ use: 'line-parser' }, { use: 'channel-router' }],
      sinks: [{ use: 'files', out }],
    },
    { session, stderr: new PassThrough().resume() },
  );
  assert.ok(thrown > 0);
  assert.equal(session.input.failed, thrown);
  assert.equal(session.input.quarantined, 0);
  const written = new Map<string, number>();
  const count = (file: string) =>
    readFileSync(join(out, file), 'utf8')
      .split('\n')
      .filter((line) => line !== '').length;
  written.set('main.jsonl', count('main.jsonl'));
  for (const name of readdirSync(join(out, 'agents')).filter((name) => name.endsWith('.jsonl')))
    written.set(`agents/${name}`, count(`agents/${name}`));
  assert.deepEqual(written, expectedPerChannel);
});
