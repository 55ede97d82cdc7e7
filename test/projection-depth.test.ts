import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { open, type SubagentHandle } from '../src/index.js';
import { ChannelTree, type ReadonlyChannel } from '../src/model/tree.js';
import { ChannelPaths } from '../src/views/projection/paths.js';
import { SubtreeSums, type ChannelFigures } from '../src/views/projection/subtree.js';
import { chunked, tmpDir } from './helpers/helpers.js';

const line = (v: Record<string, unknown>) => JSON.stringify(v);
const idOf = (i: number) => `toolu_c${i}`;
const parentOf = (i: number) => (i === 0 ? null : idOf(i - 1));
/** A spawn of `id` by channel `parent`; its line carries usage. */
const spawnAs = (id: string, parent: string | null, inputTokens = 10) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: {
    id: `m-${id}`,
    model: 'claude-sonnet-4-5',
    content: [{ type: 'tool_use', id, name: 'Agent', input: { description: `spawn of ${id}` } }],
    usage: { input_tokens: inputTokens, output_tokens: 1 },
  },
});
/** Channel `i` of a chain spawns `i + 1`. */
const spawn = (i: number, inputTokens = 10) => spawnAs(idOf(i), parentOf(i), inputTokens);
/** The tool result, on its parent's channel, that ends channel `i`. */
const end = (i: number) => ({
  type: 'user',
  parent_tool_use_id: parentOf(i),
  message: { content: [{ type: 'tool_result', tool_use_id: idOf(i), content: 'ok' }] },
});
/** Claude Code's word, on main, that background subagent `i` ended. */
const notify = (i: number) => ({
  type: 'system',
  subtype: 'task_notification',
  tool_use_id: idOf(i),
  status: 'completed',
  summary: 'done',
});
const said = (id: string, inputTokens: number) => ({
  type: 'assistant',
  parent_tool_use_id: id,
  message: {
    id: `s-${id}-${inputTokens}`,
    model: 'claude-sonnet-4-5',
    content: [{ type: 'text', text: 'hi' }],
    usage: { input_tokens: inputTokens, output_tokens: 1 },
  },
});

/**
 * A tree fed lines, and subtree sums over it as the projection keeps them: each line forgets
 * the sums over its channel, a status over the channel ended, a spawn over its parent; a
 * channel's figures are its tree usage, frozen at its end (no ledger).
 */
function sumsOver() {
  const tree = new ChannelTree();
  const ended = new Set<string>();
  const sums = new SubtreeSums({
    tree,
    figuresOf: (ch): ChannelFigures => ({ channel: ch, cost: null, basis: 'table' }),
    settled: (id) => ended.has(id),
  });
  const ends: string[] = [];
  const feed = (value: Record<string, unknown>) => {
    const { channel, events } = tree.route(value);
    sums.changed(channel.id);
    for (const ev of events) {
      if (ev.type === 'status') {
        sums.changed(ev.channel.id);
        ended.add(ev.channel.id!);
        ends.push(ev.channel.id!);
      } else if (!ev.channel.orphan) sums.changed(ev.channel.parent);
    }
  };
  return { tree, sums, feed, ends };
}

/** An independent count: input tokens and channels under `root`, by a plain walk of the tree. */
function plainCount(tree: ChannelTree, root: ReadonlyChannel): { tokens: number; channels: number } {
  let tokens = 0;
  let channels = 0;
  const stack = [root];
  while (stack.length > 0) {
    const ch = stack.pop()!;
    channels++;
    tokens += ch.usage.input_tokens ?? 0;
    for (const id of ch.children) stack.push(tree.get(id)!);
  }
  return { tokens, channels };
}

test('a chain ending deepest first adds each end up from its own figures and its child\'s kept sum: ' +
  'work linear in the depth', () => {
  const n = 3_000;
  const { tree, sums, feed } = sumsOver();
  for (let i = 0; i < n; i++) feed(spawn(i, i + 1));
  for (let i = n - 1; i >= 0; i--) {
    feed(end(i));
    const before = sums.visits;
    const sum = sums.atEnd(tree.get(idOf(i))!);
    // Its own channel, and its one child's kept sum.
    assert.ok(sums.visits - before <= 2, `end of ${i} read ${sums.visits - before} channels`);
    if (i % 500 === 0) {
      const count = plainCount(tree, tree.get(idOf(i))!);
      assert.equal(sum.usage.input_tokens, count.tokens);
      assert.equal(sum.channels, count.channels);
    }
  }
  assert.ok(sums.visits <= 2 * n, `${sums.visits} reads for ${n} ends`);
});

test('a kept subtree sum is forgotten when a line reaches a channel in it after its end, ' +
  'and a subagent ending before one under it reads that one as it is then', () => {
  const { tree, sums, feed } = sumsOver();
  for (let i = 0; i < 4; i++) feed(spawn(i));
  // 3 ends, then 2 (kept: 2 and 3), then a line reaches 3 after its end: 2's sum is stale.
  feed(end(3));
  sums.atEnd(tree.get(idOf(3))!);
  feed(end(2));
  sums.atEnd(tree.get(idOf(2))!);
  feed(said(idOf(3), 1000));
  feed(end(1));
  const one = tree.get(idOf(1))!;
  assert.equal(sums.atEnd(one).usage.input_tokens, plainCount(tree, one).tokens);
  // A subagent spawned under 0 after 1's end, still running when 0 ends, with a line later.
  feed(spawnAs('toolu_late', idOf(0)));
  feed(said('toolu_late', 500));
  feed(end(0));
  const root = tree.get(idOf(0))!;
  const sum = sums.atEnd(root);
  assert.equal(sum.usage.input_tokens, plainCount(tree, root).tokens);
  assert.equal(sum.channels, 5);
  feed(said('toolu_late', 7));
  assert.equal(sums.atEnd(root).usage.input_tokens, plainCount(tree, root).tokens);
});

test('background subagents of a chain ending top-down in one batch read those still running under ' +
  'them once; after the next batch, as they are then', () => {
  const n = 3_000;
  const { tree, sums, feed } = sumsOver();
  for (let i = 0; i < n; i++) feed(spawn(i, i + 1));
  // One batch: the run model does not move on while the projection takes it.
  for (let i = 0; i < n; i++) {
    feed(notify(i));
    const sum = sums.atEnd(tree.get(idOf(i))!);
    if (i % 500 === 0) assert.equal(sum.usage.input_tokens, plainCount(tree, tree.get(idOf(i))!).tokens);
  }
  // The first end reads every channel under it (and keeps each sum); each later one, two.
  assert.ok(sums.visits <= 4 * n, `${sums.visits} reads for ${n} ends`);
  // Batch by batch, the run model a line ahead on the deepest, whose line the projection has not
  // taken yet: each end reads it as it is then, as the tree has it.
  const next = sumsOver();
  const m = 200;
  for (let i = 0; i < m; i++) next.feed(spawn(i, i + 1));
  for (let i = 0; i < m - 1; i++) {
    next.tree.route(said(idOf(m - 1), 1000 + i));
    next.sums.refresh();
    next.feed(notify(i));
    const root = next.tree.get(idOf(i))!;
    assert.equal(next.sums.atEnd(root).usage.input_tokens, plainCount(next.tree, root).tokens);
  }
});

test('paths of a chain 20,000 deep are made once per channel, shared, and laid out as the tree ' +
  'walked up says', () => {
  const n = 20_000;
  const tree = new ChannelTree();
  const paths = new ChannelPaths(tree);
  for (let i = 0; i < n; i++) {
    tree.route(spawn(i));
    // Each new channel's path is its parent's plus itself: one channel walked.
    assert.equal(paths.of(idOf(i))!.length, i + 1);
  }
  assert.ok(paths.walked <= n, `${paths.walked} channels walked for ${n} paths`);
  const deepest = paths.ids(idOf(n - 1));
  assert.equal(deepest.length, n);
  assert.ok(Object.isFrozen(deepest));
  assert.deepEqual(deepest, Array.from({ length: n }, (_, i) => idOf(i)));
  assert.deepEqual(paths.ids(null), []);
  // The parent's path is the very link its child's hangs from.
  assert.equal(paths.of(idOf(n - 1))!.up, paths.of(idOf(n - 2)));
});

test('a path through an orphan is made again once a spawn adopts it: children first, 5,000 deep', () => {
  const n = 5_000;
  const tree = new ChannelTree();
  const paths = new ChannelPaths(tree);
  // The deepest channel speaks first, each parent after its child: every spawn adopts an orphan.
  tree.route(said(idOf(n - 1), 1));
  assert.deepEqual(paths.ids(idOf(n - 1)), [idOf(n - 1)]);
  for (let i = n - 1; i >= 1; i--) {
    tree.route(spawn(i));
    assert.equal(paths.ids(idOf(i))[0], idOf(i - 1));
  }
  tree.route(spawn(0));
  assert.deepEqual(paths.ids(idOf(n - 1)), Array.from({ length: n }, (_, i) => idOf(i)));
  assert.deepEqual(paths.ids(idOf(1)), [idOf(0), idOf(1)]);
});

test('open() on a chain 20,000 deep: every outcome counts the subagents under it, the deepest ' +
  'paths are 20,000 ids, and run.output.subtree counts all of them, within a minute', async () => {
  const n = 20_000;
  const started = performance.now();
  const lines = [line({ type: 'system', subtype: 'init', session_id: 's' })];
  for (let i = 0; i < n; i++) lines.push(line(spawn(i)));
  for (let i = n - 1; i >= 0; i--) lines.push(line(end(i)));
  const run = open(chunked([Buffer.from(lines.join('\n') + '\n')]));
  let deepestEvent = 0;
  const events = (async () => {
    for await (const ev of run.events) {
      // The deepest channel's spawn and end are on its parent's: the deepest with lines.
      if (ev.kind === 'line' && ev.channel === idOf(n - 2)) deepestEvent = ev.path.length;
    }
  })();
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  await events;
  // About 5 s on a 2-core machine; a walk of every subtree at each end (n²/2 channels) took
  // minutes. Timed here: a test timeout need not fire while the run reads without a pause.
  const seconds = (performance.now() - started) / 1000;
  assert.ok(seconds < 60, `${seconds.toFixed(1)} s`);
  assert.equal(handles.length, n);
  const outcomes = await Promise.all(handles.map((h) => h.outcome));
  outcomes.forEach((outcome, i) => {
    assert.equal(outcome.subtree.subagents, n - 1 - i);
    // Each channel's one line spawns the next: the deepest has no usage.
    assert.equal(outcome.subtree.usage.input_tokens ?? 0, 10 * (n - 1 - i));
  });
  assert.equal(handles[n - 1].path.length, n);
  assert.equal(deepestEvent, n - 1);
  const output = await run.output;
  assert.equal(output.subtree.subagents, n);
  assert.equal(output.subtree.usage.input_tokens, 10 * n);
});

test('run.output.subtree covers every channel, orphans included, as index.json and the stream ' +
  'count them', async () => {
  const lines = [
    spawn(0, 10),
    said(idOf(0), 100),
    end(0),
    // A subagent whose spawn the stream never shows, and one it spawned.
    said('toolu_orphan', 1000),
    spawnAs(idOf(1), 'toolu_orphan', 20000),
    said(idOf(1), 300000),
  ];
  const text = lines.map(line).join('\n') + '\n';
  const out = join(tmpDir(), 'out');
  const run = open(chunked([Buffer.from(text)]), { out });
  const index = await run.done;
  const { subtree, cost } = await run.output;
  // The stream's own count: every assistant line's input tokens.
  let tokens = 0;
  for (const l of text.trim().split('\n')) tokens += JSON.parse(l).message?.usage?.input_tokens ?? 0;
  assert.equal(tokens, 321110);
  assert.equal(subtree.usage.input_tokens, tokens);
  const written = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) as typeof index;
  assert.equal(subtree.subagents, written.channels.length - 1);
  assert.equal(subtree.subagents, 3);
  const indexTokens = written.channels.reduce((n, c) => n + (c.usage.input_tokens ?? 0), 0);
  assert.equal(subtree.usage.input_tokens, indexTokens);
  assert.ok(subtree.cost.usd !== null && subtree.cost.usd > 0);
  assert.equal(subtree.cost.usd, written.cost.channels_usd);
  assert.equal(subtree.cost.usd, cost.usd);
  assert.equal(subtree.unknown, written.cost.channels_by_basis.unknown);
});

test('run.output.subtree costs null when no channel, orphans included, has usage known', async () => {
  const quiet = (id: string | null) => ({
    type: 'assistant',
    parent_tool_use_id: id,
    message: { id: `q-${id}`, content: [{ type: 'text', text: 'hi' }] },
  });
  const text = [quiet(null), quiet('toolu_orphan')].map(line).join('\n') + '\n';
  const run = open(chunked([Buffer.from(text)]));
  await run.done;
  const { subtree } = await run.output;
  assert.equal(subtree.subagents, 1);
  assert.equal(subtree.cost.usd, null);
  assert.equal(subtree.cost.outputTokens, 'unknown');
  assert.equal(subtree.unknown, 2);
});
