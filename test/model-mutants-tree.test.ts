// ChannelTree (src/model/tree.ts) rules that the tree tests leave implicit: event snapshots,
// tags, what task_started and task_notification may change, and lines that change nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChannelTree } from '../src/model/tree.js';

type Input = Record<string, unknown>;
const spawn = (id: string, parent: string | null, input: Input = {}) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: { id: `m_${id}`, content: [{ type: 'tool_use', id, name: 'Agent', input }] },
});
const say = (parent: string | null, message: Input) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: { content: [{ type: 'text', text: 'hi' }], ...message },
});
const result = (toolUseId: string, content: unknown, isError = false) => ({
  type: 'user',
  message: { content: [{ type: 'tool_result', tool_use_id: toolUseId, content, is_error: isError }] },
});
const system = (subtype: string, fields: Input) => ({ type: 'system', subtype, ...fields });
const NO_COUNTS = { text: 0, thinking: 0, tool_use: 0, tool_result: 0 };

test("an event carries the channel's counts and usage as of its line; lines and order are counted", () => {
  const tree = new ChannelTree();
  const first = tree.route(say('b', { id: 'm1', usage: { input_tokens: 3 } }));
  assert.equal(first.events[0].type, 'open');
  assert.deepEqual(first.events[0].channel.counts, { ...NO_COUNTS, text: 1 });
  assert.deepEqual(first.events[0].channel.usage, { input_tokens: 3 });
  tree.route(say('b', {}));
  tree.route(say('c', {}));
  assert.equal(tree.get('b')!.lines, 2);
  assert.equal(tree.get(null), tree.main);
  assert.deepEqual(
    tree.channels().map((ch) => ch.seq),
    [0, 1, 2],
  );
  // A line of no kind subtee reads is still counted on its channel.
  tree.route({ type: 'assistant', parent_tool_use_id: 'b' });
  assert.equal(tree.get('b')!.lines, 3);
});

test('tags: the id after toolu_ (and 01), longer while taken, then numbered', () => {
  const tree = new ChannelTree();
  tree.route(say('toolu_abcdefghij', {}));
  tree.route(say('xtoolu_01zzzzzz', {}));
  const shared = Array.from({ length: 10 }, (_, i) => `toolu_01${'a'.repeat(12)}${i}`);
  for (const id of shared) tree.route(say(id, {}));
  assert.equal(tree.get('toolu_abcdefghij')!.tag, 'abcdef');
  assert.equal(tree.get('xtoolu_01zzzzzz')!.tag, 'xtoolu');
  // An id whose own tag looks numbered pushes the numbering past it.
  tree.route(say('toolu_01aaaaaa~', {}));
  tree.route(say('toolu_01aaaaaa~5', {}));
  assert.equal(tree.get('toolu_01aaaaaa~5')!.tag, 'aaaaaa~5');
  tree.route(say(`toolu_01${'a'.repeat(12)}x`, {}));
  tree.route(say(`toolu_01${'a'.repeat(12)}y`, {}));
  assert.deepEqual(
    [`toolu_01${'a'.repeat(12)}x`, `toolu_01${'a'.repeat(12)}y`].map((id) => tree.get(id)!.tag),
    ['aaaaaa~6', 'aaaaaa~7'],
  );
  assert.deepEqual(
    shared.map((id) => tree.get(id)!.tag),
    [6, 7, 8, 9, 10, 11, 12].map((n) => 'a'.repeat(n)).concat(['aaaaaa~2', 'aaaaaa~3', 'aaaaaa~4']),
  );
});

test('spawns: a new one opens its channel with description and background; an empty id is none', () => {
  const tree = new ChannelTree();
  const opened = tree.route(spawn('a', null, { description: 'look', run_in_background: true }));
  assert.deepEqual(
    opened.events.map((ev) => ev.type),
    ['open'],
  );
  assert.deepEqual([tree.get('a')!.description, tree.get('a')!.background], ['look', true]);
  tree.route(spawn('b', null, { run_in_background: 'yes' }));
  assert.deepEqual([tree.get('b')!.description, tree.get('b')!.background], [null, null]);
  tree.route(spawn('', null));
  assert.deepEqual([tree.size, tree.spawnCycles], [3, 0]);
  // Only a tool_use block spawns, whatever another block's name.
  const named = { type: 'text', text: 'x', id: 'zz', name: 'Agent', input: {} };
  tree.route({ type: 'assistant', message: { content: [named] } });
  assert.equal(tree.get('zz'), undefined);
  // An orphan told by task_started keeps what it said unless the spawn says otherwise.
  tree.route(say('c', {}));
  tree.route(system('task_started', { tool_use_id: 'c', is_backgrounded: true, description: 'early' }));
  tree.route(spawn('c', null, { description: 'late', run_in_background: false }));
  assert.deepEqual([tree.get('c')!.description, tree.get('c')!.background], ['late', true]);
});

test('depth guesses fill unknown depths only, and never stop the real depth from replacing them', () => {
  const tree = new ChannelTree();
  tree.route(say('c', {}));
  tree.route(system('task_started', { tool_use_id: 'c', spawn_depth: 3 }));
  tree.route(spawn('c', 'b'));
  tree.route(system('task_started', { tool_use_id: 'b', spawn_depth: 5 }));
  assert.deepEqual([tree.get('b')!.depth, tree.get('c')!.depth], [5, 3]);
  tree.route(spawn('b', null));
  assert.deepEqual([tree.get('b')!.depth, tree.get('c')!.depth], [1, 2]);
  tree.route(say('d', {}));
  tree.route(system('task_started', { tool_use_id: 'd', spawn_depth: 1_000_001 }));
  assert.equal(tree.get('d')!.depth, null);
  tree.route(system('task_started', { tool_use_id: 'd', spawn_depth: 1_000_000 }));
  assert.equal(tree.get('d')!.depth, 1_000_000);
});

test('counts leave redacted thinking out and count tool results only; usage needs a message id', () => {
  const tree = new ChannelTree();
  tree.route({ type: 'assistant', message: { content: [{ type: 'redacted_thinking', data: 'x' }] } });
  const content = [
    { type: 'text', text: 'p' },
    { type: 'tool_result', tool_use_id: 'q' },
  ];
  tree.route({ type: 'user', message: { content } });
  assert.deepEqual(tree.main.counts, { ...NO_COUNTS, tool_result: 1 });
  tree.route(say(null, { usage: { input_tokens: 4 } }));
  assert.deepEqual(tree.main.usage, {});
  tree.route(say(null, { id: 'm1', usage: { input_tokens: 10 } }));
  tree.route(say(null, { id: 'm2' }));
  tree.route(say(null, { id: 'm1', usage: { input_tokens: 10 } }));
  assert.deepEqual(tree.main.usage, { input_tokens: 10 });
});

test('tool results: a launch marks a running spawn background; an ended one is left as it is', () => {
  const tree = new ChannelTree();
  tree.route(spawn('a', null));
  tree.route(result('a', 'Async agent launched successfully.'));
  assert.deepEqual([tree.get('a')!.status, tree.get('a')!.background], ['running', true]);
  tree.route(spawn('b', null));
  tree.route(result('b', 'done'));
  tree.route(result('b', 'Async agent launched successfully.'));
  assert.deepEqual([tree.get('b')!.status, tree.get('b')!.background], ['completed', null]);
});

test('task_started: unknown ids ignored; it sets background, and agent and description if unknown', () => {
  const tree = new ChannelTree();
  const unknown = system('task_started', { tool_use_id: 'nobody', is_backgrounded: true });
  assert.deepEqual(tree.route(unknown).events, []);
  assert.deepEqual(tree.route(system('task_started', { is_backgrounded: true })).events, []);
  tree.route(say('a', {}));
  tree.route(system('task_started', { tool_use_id: 'a' }));
  assert.equal(tree.get('a')!.background, null);
  tree.route(system('task_started', { tool_use_id: 'a', subagent_type: 'Plan', description: 'plan it' }));
  assert.deepEqual([tree.get('a')!.agent, tree.get('a')!.description], ['Plan', 'plan it']);
  tree.route(system('task_started', { tool_use_id: 'a', subagent_type: 'Other', description: 'other' }));
  assert.deepEqual([tree.get('a')!.agent, tree.get('a')!.description], ['Plan', 'plan it']);
  tree.route(spawn('b', null, { run_in_background: true }));
  tree.route(system('task_started', { tool_use_id: 'b', is_backgrounded: false }));
  assert.equal(tree.get('b')!.background, false);
});

test('task_notification: only completed or failed end a channel, once per status and summary', () => {
  const tree = new ChannelTree();
  const unknown = system('task_notification', { tool_use_id: 'x', status: 'completed' });
  assert.deepEqual(tree.route(unknown).events, []);
  tree.route(spawn('a', null, { run_in_background: true }));
  const stopped = system('task_notification', { tool_use_id: 'a', status: 'stopped' });
  assert.deepEqual(tree.route(stopped).events, []);
  assert.equal(tree.get('a')!.status, 'running');
  const done = system('task_notification', { tool_use_id: 'a', status: 'completed', summary: 'ok' });
  assert.deepEqual(
    tree.route(done).events.map((ev) => ev.type),
    ['status'],
  );
  assert.deepEqual(tree.route(done).events, []);
  assert.deepEqual([tree.get('a')!.status, tree.get('a')!.summary], ['completed', 'ok']);
  // Without a summary: one status event, however often the notification is repeated; a later
  // one that brings a summary is news.
  tree.route(spawn('b', null, { run_in_background: true }));
  const bare = system('task_notification', { tool_use_id: 'b', status: 'failed' });
  assert.deepEqual(
    tree.route(bare).events.map((ev) => ev.type),
    ['status'],
  );
  assert.deepEqual(tree.route(bare).events, []);
  const said = system('task_notification', { tool_use_id: 'b', status: 'failed', summary: 'boom' });
  assert.deepEqual(
    tree.route(said).events.map((ev) => ev.type),
    ['status'],
  );
  assert.deepEqual([tree.get('b')!.status, tree.get('b')!.summary], ['failed', 'boom']);
});
