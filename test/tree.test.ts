import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChannelTree } from '../src/model/tree.js';

const spawn = (id: string, parent: string | null, name = 'Agent', input: Record<string, unknown> = {}) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: { id: `m_${id}`, content: [{ type: 'tool_use', id, name, input: { subagent_type: 'Explore', description: `d ${id}`, ...input } }] },
});
const text = (parent: string | null, t = 'hi', messageId = 'mx', usage?: Record<string, number>) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: { id: messageId, content: [{ type: 'text', text: t }], ...(usage ? { usage } : {}) },
});
const result = (parent: string | null, toolUseId: string, content: unknown, isError = false) => ({
  type: 'user',
  parent_tool_use_id: parent,
  message: { content: [{ type: 'tool_result', tool_use_id: toolUseId, content, is_error: isError }] },
});
const started = (id: string, bg: boolean) => ({ type: 'system', subtype: 'task_started', tool_use_id: id, is_backgrounded: bg, task_id: `t_${id}` });
const notified = (id: string, status: string, summary = 'done') => ({ type: 'system', subtype: 'task_notification', tool_use_id: id, status, summary });

test('Agent and Task both spawn children; depth is parent depth + 1', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null, 'Task'));
  t.route(spawn('b', 'a', 'Agent'));
  t.route(spawn('c', 'b', 'Task'));
  t.route(spawn('x', null, 'Bash'));
  assert.deepEqual(
    t.channels().map((c) => [c.id, c.parent, c.depth, c.agent]),
    [[null, null, 0, null], ['a', null, 1, 'Explore'], ['b', 'a', 2, 'Explore'], ['c', 'b', 3, 'Explore']],
  );
});

test('lines before their spawn open an orphan that is fixed up, descendants included', () => {
  const t = new ChannelTree();
  const r1 = t.route(text('b'));
  assert.equal(r1.channel.orphan, true);
  assert.equal(r1.events[0].type, 'open');
  t.route(spawn('c', 'b'));
  assert.equal(t.get('c')!.depth, null);
  t.route(text('z'));
  t.route(spawn('a', null));
  const r2 = t.route(spawn('b', 'a'));
  assert.equal(r2.events[0].type, 'spawn');
  const b = t.get('b')!;
  assert.deepEqual([b.orphan, b.parent, b.depth], [false, 'a', 2]);
  assert.equal(t.get('c')!.depth, 3);
  assert.deepEqual([t.get('z')!.orphan, t.get('z')!.depth, t.get('z')!.parent], [true, null, null]);
});

test('foreground subagents end with their tool_result; is_error means failed', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(spawn('b', null));
  t.route(started('a', false));
  t.route(result(null, 'a', [{ type: 'text', text: 'report' }]));
  const r = t.route(result(null, 'b', 'boom', true));
  assert.equal(t.get('a')!.status, 'completed');
  assert.equal(t.get('b')!.status, 'failed');
  assert.deepEqual(r.events.map((e) => e.type), ['status']);
});

test('a background spawn is not ended by its launch result, only by task_notification', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(started('a', true));
  t.route(result(null, 'a', 'Async agent launched successfully.'));
  assert.equal(t.get('a')!.status, 'running');
  // The launch text alone also marks it background, even without task_started.
  t.route(spawn('b', null));
  t.route(result(null, 'b', [{ type: 'text', text: 'Async agent launched successfully.\nagentId: x' }]));
  assert.equal(t.get('b')!.status, 'running');
  t.route(notified('a', 'completed', 'all good'));
  t.route(notified('b', 'failed', 'Agent terminated early due to an API error'));
  assert.deepEqual([t.get('a')!.status, t.get('a')!.summary], ['completed', 'all good']);
  assert.equal(t.get('b')!.status, 'failed');
});

test('usage is summed once per message.id, the latest line of a message winning', () => {
  const t = new ChannelTree();
  t.route(text(null, 'a', 'm1', { input_tokens: 10, output_tokens: 1 }));
  t.route(text(null, 'b', 'm1', { input_tokens: 10, output_tokens: 5 }));
  t.route(text(null, 'c', 'm1', { input_tokens: 10, output_tokens: 5 }));
  t.route(text(null, 'd', 'm2', { input_tokens: 3, output_tokens: 2, cache_read_input_tokens: 7 }));
  assert.deepEqual(t.main.usage, { input_tokens: 13, output_tokens: 7, cache_read_input_tokens: 7 });
});

test('counts, timestamps, several init/result pairs', () => {
  const t = new ChannelTree();
  t.route({ type: 'system', subtype: 'init', session_id: 's1', claude_code_version: '2.1.328' });
  t.route({ ...text(null), timestamp: '2026-01-01T00:00:00Z' });
  t.route({ type: 'result', subtype: 'success', is_error: false });
  assert.equal(t.main.status, 'completed');
  t.route({ type: 'system', subtype: 'init', session_id: 's1' });
  assert.equal(t.main.status, 'running');
  t.route({ ...text(null), timestamp: '2026-01-01T00:00:09Z' });
  t.route({ type: 'result', subtype: 'success', is_error: true });
  assert.deepEqual([t.main.status, t.results, t.sessionId, t.version], ['failed', 2, 's1', '2.1.328']);
  assert.deepEqual([t.main.firstSeen, t.main.lastSeen], ['2026-01-01T00:00:00Z', '2026-01-01T00:00:09Z']);
  assert.equal(t.main.counts.text, 2);
});

test('an empty parent_tool_use_id is the main channel', () => {
  const t = new ChannelTree();
  assert.equal(t.route(text('')).channel, t.main);
});
