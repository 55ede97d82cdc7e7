import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  channelTimes,
  ChannelTree,
  MAX_CALLS_REMEMBERED,
  MAX_END_CHARS_BEFORE_SPAWN,
  MAX_ENDS_BEFORE_SPAWN,
} from '../src/model/tree.js';

const spawn = (id: string, parent: string | null, name = 'Agent', input: Record<string, unknown> = {}) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: {
    id: `m_${id}`,
    content: [
      { type: 'tool_use', id, name, input: { subagent_type: 'Explore', description: `d ${id}`, ...input } },
    ],
  },
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
const started = (id: string, bg: boolean) => ({
  type: 'system',
  subtype: 'task_started',
  tool_use_id: id,
  is_backgrounded: bg,
  task_id: `t_${id}`,
});
const notified = (id: string, status: string, summary = 'done') => ({
  type: 'system',
  subtype: 'task_notification',
  tool_use_id: id,
  status,
  summary,
});

test('Agent and Task both spawn children; depth is parent depth + 1', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null, 'Task'));
  t.route(spawn('b', 'a', 'Agent'));
  t.route(spawn('c', 'b', 'Task'));
  t.route(spawn('x', null, 'Bash'));
  assert.deepEqual(
    t.channels().map((c) => [c.id, c.parent, c.depth, c.agent]),
    [
      [null, null, 0, null],
      ['a', null, 1, 'Explore'],
      ['b', 'a', 2, 'Explore'],
      ['c', 'b', 3, 'Explore'],
    ],
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
  assert.deepEqual(
    r.events.map((e) => e.type),
    ['status'],
  );
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

// Each rule of the tree is guarded by at least two tests: the one above and one below.

test('a replayed spawn line changes nothing: no second child entry, parent and depth kept', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(spawn('b', 'a'));
  const again = t.route(spawn('b', null));
  assert.deepEqual(again.events, []);
  t.route(spawn('b', 'z'));
  assert.deepEqual([t.get('b')!.parent, t.get('b')!.depth], ['a', 2]);
  assert.deepEqual(t.get('z')!.children, []);
  assert.equal(t.spawnCycles, 0, 'a replay is not a cycle');
  assert.deepEqual(t.get('a')!.children, ['b']);
  assert.deepEqual(t.main.children, ['a']);
});

test('depth: thousands deep in order and tens of thousands ' +
  'children-first give the same depths, in linear time', () => {
  const n = 30_000;
  const inOrder = new ChannelTree();
  for (let i = 0; i < n; i++) inOrder.route(spawn(`d${i}`, i === 0 ? null : `d${i - 1}`));
  const reversed = new ChannelTree();
  for (let i = n - 1; i >= 0; i--) reversed.route(spawn(`d${i}`, i === 0 ? null : `d${i - 1}`));
  for (const t of [inOrder, reversed]) {
    assert.equal(t.get(`d${n - 1}`)!.depth, n);
    assert.equal(t.get('d0')!.depth, 1);
    assert.ok(t.channels().every((c) => c.orphan === false && c.depth !== null));
  }
  // Until the chain reaches main, a children-first chain has no depth (and no crash).
  const partial = new ChannelTree();
  for (let i = n - 1; i >= 1; i--) partial.route(spawn(`d${i}`, `d${i - 1}`));
  assert.equal(partial.get(`d${n - 1}`)!.depth, null);
  assert.equal(partial.get('d0')!.orphan, true);
});

test('orphans: a spawn_depth guess fills an unknown depth, ' +
  'the real chain replaces it, descendants included', () => {
  const t = new ChannelTree();
  t.route(spawn('c', 'b'));
  t.route({ type: 'system', subtype: 'task_started', tool_use_id: 'b', spawn_depth: 5 });
  assert.deepEqual([t.get('b')!.depth, t.get('c')!.depth], [5, 6]);
  // Spawned under a parent whose own depth is unknown: the guess stays.
  t.route(spawn('b', 'a'));
  assert.deepEqual([t.get('b')!.depth, t.get('b')!.parent, t.get('b')!.orphan], [5, 'a', false]);
  t.route({ type: 'system', subtype: 'task_started', tool_use_id: 'b', spawn_depth: 9 });
  assert.equal(t.get('b')!.depth, 5, 'a guess does not replace a known depth');
  t.route(spawn('a', null));
  assert.deepEqual(
    ['a', 'b', 'c'].map((id) => t.get(id)!.depth),
    [1, 2, 3],
  );
  // A guess that happens to equal the real depth does not hide a wrong guess below it.
  const u = new ChannelTree();
  u.route(spawn('q', 'p'));
  u.route({ type: 'system', subtype: 'task_started', tool_use_id: 'q', spawn_depth: 7 });
  u.route(text('p'));
  u.route({ type: 'system', subtype: 'task_started', tool_use_id: 'p', spawn_depth: 1 });
  assert.deepEqual([u.get('p')!.depth, u.get('q')!.depth], [1, 7]);
  u.route(spawn('p', null));
  assert.deepEqual([u.get('p')!.depth, u.get('q')!.depth], [1, 2]);
  // Nonsense guesses are ignored.
  t.route(text('z'));
  for (const bad of [0, -3, 1.5, 1e300, '4'])
    t.route({ type: 'system', subtype: 'task_started', tool_use_id: 'z', spawn_depth: bad });
  assert.equal(t.get('z')!.depth, null);
});

test('spawn cycles of any length are ignored: the tree stays a tree, depths stay unknown', () => {
  for (const n of [1, 2, 3, 10_000]) {
    const t = new ChannelTree();
    // c0 is spawned on c1's channel, c1 on c2's … and the last on c0's: a cycle of length n.
    for (let i = 0; i < n; i++) t.route(spawn(`c${i}`, `c${(i + 1) % n}`));
    assert.equal(t.spawnCycles, 1, `length ${n}`);
    assert.deepEqual(t.firstCycle, { id: `c${n - 1}`, on: 'c0' });
    const closing = t.get(`c${n - 1}`)!;
    assert.deepEqual([closing.orphan, closing.parent, closing.depth], [true, null, null]);
    // Walking up from any member ends at the orphan, never loops.
    for (let i = 0; i < n; i += Math.max(1, Math.floor(n / 7))) {
      let at = t.get(`c${i}`)!;
      let steps = 0;
      while (at.parent !== null) {
        at = t.get(at.parent)!;
        assert.ok(++steps <= n);
      }
      assert.equal(at, closing);
      assert.equal(t.get(`c${i}`)!.depth, null);
    }
    // The cycle stays closed off even when main later spawns a member.
    t.route(spawn('c0', null));
    assert.equal(t.get('c0')!.parent, n === 1 ? null : 'c1');
  }
});

test('a subagent already placed, spawned again on its own channel or below it, is a spawn ' +
  'cycle: counted, its place kept; spawned again by an ancestor or a sibling, it is not', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(spawn('b', 'a'));
  t.route(spawn('x', null));
  t.route(spawn('b', null)); // by an ancestor
  t.route(spawn('a', 'x')); // by a sibling
  assert.equal(t.spawnCycles, 0);
  t.route(spawn('a', 'b'));
  assert.equal(t.spawnCycles, 1);
  assert.deepEqual(t.firstCycle, { id: 'a', on: 'b' });
  t.route(spawn('s', null));
  t.route(spawn('s', 's'));
  assert.equal(t.spawnCycles, 2);
  assert.deepEqual(
    ['a', 'b', 's'].map((id) => [t.get(id)!.parent, t.get(id)!.depth]),
    [[null, 1], ['a', 2], [null, 1]],
  );
  assert.deepEqual(t.get('b')!.children, []);
  // In a tree main has not spawned yet: o (an orphan) spawned p, p spawned q, q spawns p.
  const u = new ChannelTree();
  u.route(spawn('p', 'o'));
  u.route(spawn('q', 'p'));
  u.route(spawn('r', 'o'));
  u.route(spawn('p', 'r')); // a sibling
  assert.equal(u.spawnCycles, 0);
  u.route(spawn('p', 'q'));
  assert.equal(u.spawnCycles, 1);
  assert.deepEqual([u.get('p')!.parent, u.get('q')!.parent], ['o', 'p']);
});

test('a spawn cycle closed from the bottom of a chain tens of thousands deep is found in ' +
  'steps of log depth, each time', () => {
  const n = 30_000;
  const t = new ChannelTree();
  const timed = (fn: () => void) => {
    const started = process.hrtime.bigint();
    fn();
    return Number(process.hrtime.bigint() - started) / 1e6;
  };
  const built = timed(() => {
    for (let i = 0; i < n; i++) t.route(spawn(`d${i}`, i === 0 ? null : `d${i - 1}`));
  });
  // Every channel of the chain spawned again from its bottom: n cycles, none walks the chain.
  const cycles = timed(() => {
    for (let i = 0; i < n; i++) t.route(spawn(`d${i}`, `d${n - 1}`));
  });
  assert.equal(t.spawnCycles, n);
  assert.equal(t.get(`d${n - 1}`)!.depth, n);
  // A walk up the chain per spawn is 450 million steps, hundreds of times the building's cost.
  assert.ok(cycles < 10 * built + 100, `${cycles} ms to find the cycles, ${built} ms to build`);
});

test('a spawn_depth guess on a channel of an ignored cycle flows down the tree, not around it', () => {
  const t = new ChannelTree();
  t.route(spawn('a', 'b'));
  t.route(spawn('b', 'a'));
  t.route({ type: 'system', subtype: 'task_started', tool_use_id: 'b', spawn_depth: 2 });
  assert.deepEqual([t.get('b')!.depth, t.get('a')!.depth], [2, 3]);
});

test('label tags are unique, short, and cheap even when thousands of ids share a long prefix', () => {
  const t = new ChannelTree();
  const ids = [
    ...Array.from({ length: 3000 }, (_, i) => `toolu_01${'x'.repeat(4000)}${i}`),
    ...Array.from({ length: 50 }, (_, i) => `toolu_01abcdef~${i}`),
    'toolu_01abc',
    'abc',
    'toolu_01',
    'toolu_',
    'x',
    'toolu_01abcdef',
    'toolu_01abcdefg',
  ];
  for (const id of ids) t.route(text(id));
  const tags = t.channels().map((c) => c.tag);
  assert.equal(new Set(tags).size, tags.length, 'every tag is unique');
  assert.ok(
    tags.every((tag) => tag.length > 0 && tag.length <= 20),
    'tags stay short',
  );
  assert.equal(t.get('toolu_01abc')!.tag, 'abc');
});

test('foreground end, again: is_error on a result fails it, the result text is its summary', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(spawn('b', 'a'));
  const r = t.route(
    result(
      'a',
      'b',
      [
        { type: 'text', text: 'line 1' },
        { type: 'text', text: 'line 2' },
      ],
      true,
    ),
  );
  assert.equal(r.events.length, 1);
  const ev = r.events[0];
  assert.ok(ev.type === 'status');
  assert.deepEqual([ev.channel.id, ev.channel.status, ev.summary], ['b', 'failed', 'line 1\nline 2']);
  assert.equal(t.get('a')!.status, 'running', 'the parent is untouched');
  // A second result for an ended channel, or one for an unknown id, changes nothing.
  assert.deepEqual(t.route(result('a', 'b', 'again')).events, []);
  assert.deepEqual(t.route(result(null, 'nobody', 'x')).events, []);
  assert.equal(t.get('b')!.status, 'failed');
});

test('background, again: from the spawn input or task_started waits for task_notification', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null, 'Agent', { run_in_background: true }));
  assert.equal(t.get('a')!.background, true);
  t.route(result(null, 'a', 'some early text'));
  assert.equal(t.get('a')!.status, 'running', 'a background spawn is not ended by its tool_result');
  t.route(spawn('b', null));
  t.route(started('b', false));
  t.route(result(null, 'b', 'report'));
  assert.equal(t.get('b')!.status, 'completed', 'a foreground one is');
  t.route(notified('a', 'failed', 'gave up'));
  assert.deepEqual([t.get('a')!.status, t.get('a')!.summary], ['failed', 'gave up']);
  t.route(notified('a', 'completed', 'retried'));
  assert.deepEqual(
    [t.get('a')!.status, t.get('a')!.summary],
    ['completed', 'retried'],
    'the notification is final',
  );
});

test('usage, again: per channel, messages interleaved, a key dropped by a later line of a message', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(text('a', 'x', 'ma', { input_tokens: 5, cache_creation_input_tokens: 4 }));
  t.route(text(null, 'y', 'mm', { input_tokens: 100, output_tokens: 1 }));
  t.route(text('a', 'x', 'ma', { input_tokens: 5, output_tokens: 8 }));
  t.route(text(null, 'y', 'mm', { input_tokens: 100, output_tokens: 3 }));
  assert.deepEqual(t.get('a')!.usage, { input_tokens: 5, output_tokens: 8, cache_creation_input_tokens: 0 });
  assert.deepEqual(t.main.usage, { input_tokens: 100, output_tokens: 3 });
});

test('main channel, again: a parent_tool_use_id that is not a non-empty string is the main channel', () => {
  const t = new ChannelTree();
  for (const parent of [null, '', 0, 7, false, {}, ['x']])
    assert.equal(t.route({ ...text(null), parent_tool_use_id: parent }).channel, t.main);
  assert.equal(t.size, 1);
});

const bash = (id: string, parent: string | null) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: {
    id: `m_${id}`,
    content: [{ type: 'tool_use', id, name: 'Bash', input: { command: 'npm test' } }],
  },
});
// As Claude Code 2.1.328 prints it once a tool has run 30 s.
const heartbeat = (callId: string) => ({
  type: 'tool_progress',
  tool_use_id: `${callId}-heartbeat-0`,
  tool_name: 'Bash',
  parent_tool_use_id: callId,
  elapsed_time_seconds: 30,
  heartbeat: true,
});

test("a heartbeat naming main's Bash call is main's line: no channel opens, nothing ends", () => {
  const t = new ChannelTree();
  t.route(bash('toolu_bash', null));
  const routed = t.route(heartbeat('toolu_bash'));
  assert.equal(routed.channel, t.main);
  assert.deepEqual(routed.events, []);
  assert.equal(t.size, 1);
  assert.equal(t.route(result(null, 'toolu_bash', 'ok')).channel, t.main);
  assert.equal(t.size, 1);
});

test("a heartbeat naming a subagent's Bash call, or its Agent call, is that subagent's line", () => {
  const t = new ChannelTree();
  t.route(spawn('toolu_a', null));
  t.route(bash('toolu_b', 'toolu_a'));
  assert.equal(t.route(heartbeat('toolu_b')).channel, t.get('toolu_a'));
  assert.equal(t.route(heartbeat('toolu_a')).channel, t.get('toolu_a'));
  assert.equal(t.size, 2);
  assert.equal(t.get('toolu_a')!.lines, 3);
});

test('a line naming an id no call made still opens an orphan channel', () => {
  const t = new ChannelTree();
  t.route(bash('toolu_bash', null));
  const routed = t.route(heartbeat('toolu_elsewhere'));
  assert.equal(routed.channel.id, 'toolu_elsewhere');
  assert.equal(routed.channel.orphan, true);
  assert.deepEqual(
    routed.events.map((e) => e.type),
    ['open'],
  );
});

test('task_started and task_notification of a shell command (local_bash) touch no channel', () => {
  const t = new ChannelTree();
  t.route(spawn('toolu_a', null));
  t.route({ ...started('toolu_a', false), task_type: 'local_bash', description: 'npm test' });
  assert.equal(t.get('toolu_a')!.background, null);
  t.route(bash('toolu_b', null));
  t.route({ ...started('toolu_b', false), task_type: 'local_bash' });
  const done = t.route(notified('toolu_b', 'completed', 'npm test'));
  assert.deepEqual(done.events, []);
  assert.equal(t.size, 2);
  assert.equal(t.get('toolu_a')!.status, 'running');
});

test('the calls a heartbeat can name are the latest MAX_CALLS_REMEMBERED; older ones open an orphan', () => {
  const t = new ChannelTree();
  for (let i = 0; i <= MAX_CALLS_REMEMBERED; i++) t.route(bash(`toolu_${i}`, null));
  assert.equal(t.route(heartbeat(`toolu_${MAX_CALLS_REMEMBERED}`)).channel, t.main);
  assert.equal(t.route(heartbeat('toolu_1')).channel, t.main);
  assert.equal(t.route(heartbeat('toolu_0')).channel.orphan, true);
});

test('a call is forgotten at its result, a background call is not: ' +
  'a later line naming it opens an orphan', () => {
  const t = new ChannelTree();
  t.route(bash('toolu_fg', null));
  const background = bash('toolu_bg', null);
  background.message.content[0].input = { command: 'npm run watch', run_in_background: true } as never;
  t.route(background);
  assert.equal(t.route(heartbeat('toolu_fg')).channel, t.main);
  t.route(result(null, 'toolu_fg', 'ok'));
  t.route(result(null, 'toolu_bg', 'Command running in background with ID: b1'));
  assert.equal(t.route(heartbeat('toolu_bg')).channel, t.main);
  assert.equal(t.route(heartbeat('toolu_fg')).channel.orphan, true);
});

test("an id's latest call stands, background or not: a heartbeat after its result opens an orphan", () => {
  const t = new ChannelTree();
  const background = bash('toolu_x', null);
  background.message.content[0].input = { command: 'npm run watch', run_in_background: true } as never;
  t.route(background);
  t.route(bash('toolu_x', null));
  t.route(result(null, 'toolu_x', 'ok'));
  assert.equal(t.route(heartbeat('toolu_x')).channel.orphan, true);
});

const at = (line: Record<string, unknown>, timestamp: string) => ({ ...line, timestamp });

test("a subagent's time runs from its spawn to its report, or to the run's latest line while it runs", () => {
  const t = new ChannelTree();
  t.route(at(text(null, 'go', 'm0'), '2026-12-06T10:59:05.000Z'));
  t.route(at(spawn('toolu_a', null, 'Agent', { run_in_background: true }), '2026-12-06T10:59:06.000Z'));
  t.route(at(spawn('toolu_b', null), '2026-12-06T10:59:06.500Z'));
  // The helper's first and last lines come 25 s after its spawn, 0.2 s apart.
  t.route(at(text('toolu_a', 'working', 'ma'), '2026-12-06T10:59:31.000Z'));
  t.route(at(text('toolu_a', 'done', 'ma2'), '2026-12-06T10:59:31.200Z'));
  // Claude Code's task_notification has no timestamp: the report is at the run's latest line.
  t.route(notified('toolu_a', 'completed'));
  const a = channelTimes(t, t.get('toolu_a')!);
  assert.deepEqual(a, {
    startedAt: '2026-12-06T10:59:06.000Z',
    endedAt: '2026-12-06T10:59:31.200Z',
    elapsedMs: 25_200,
  });
  t.route(at(text(null, 'later', 'm1'), '2026-12-06T10:59:40.000Z'));
  // b never wrote a line and never reported: it runs to the run's latest line.
  assert.deepEqual(channelTimes(t, t.get('toolu_b')!), {
    startedAt: '2026-12-06T10:59:06.500Z',
    endedAt: '2026-12-06T10:59:40.000Z',
    elapsedMs: 33_500,
  });
  assert.equal(channelTimes(t, t.get('toolu_a')!).elapsedMs, 25_200, 'a report stays where it was');
  assert.deepEqual(channelTimes(t, t.main), {
    startedAt: '2026-12-06T10:59:05.000Z',
    endedAt: '2026-12-06T10:59:40.000Z',
    elapsedMs: 35_000,
  });
});

test('a foreground subagent ends at its tool_result; an orphan starts at its first line', () => {
  const t = new ChannelTree();
  t.route(at(spawn('toolu_f', null), '2026-12-06T11:00:00.000Z'));
  t.route(at(text('toolu_o', 'early', 'mo'), '2026-12-06T11:00:01.000Z'));
  t.route(at(result(null, 'toolu_f', 'report'), '2026-12-06T11:00:09.000Z'));
  assert.equal(channelTimes(t, t.get('toolu_f')!).elapsedMs, 9000);
  assert.equal(channelTimes(t, t.get('toolu_o')!).startedAt, '2026-12-06T11:00:01.000Z');
  const bare = new ChannelTree();
  bare.route(spawn('toolu_x', null));
  const none = { startedAt: null, endedAt: null, elapsedMs: null };
  assert.deepEqual(channelTimes(bare, bare.get('toolu_x')!), none, 'no times, no span');
});

test('a report that arrives before its spawn ends the subagent as the spawn opens it, ' +
  'with the status and summary it said', () => {
  const t = new ChannelTree();
  assert.deepEqual(t.route(notified('toolu_a', 'failed', 'API error')).events, [], 'no channel yet');
  const spawned = t.route(spawn('toolu_a', null, 'Agent', { run_in_background: true }));
  assert.deepEqual(
    spawned.events.map((e) => [e.type, e.channel.id, e.channel.status]),
    [
      ['open', 'toolu_a', 'failed'],
      ['status', 'toolu_a', 'failed'],
    ],
    'both events carry the channel as the line left it',
  );
  const status = spawned.events[1];
  assert.ok(status.type === 'status');
  assert.equal(status.summary, 'API error');
  assert.deepEqual([t.get('toolu_a')!.status, t.get('toolu_a')!.summary], ['failed', 'API error']);
  // A foreground spawn's tool_result before the spawn ends it as it would after.
  t.route(result(null, 'toolu_b', [{ type: 'text', text: 'report' }]));
  t.route(spawn('toolu_b', null));
  assert.deepEqual([t.get('toolu_b')!.status, t.get('toolu_b')!.summary], ['completed', 'report']);
  // A later notification is final, as it is after the spawn.
  t.route(notified('toolu_b', 'failed', 'gave up'));
  assert.deepEqual([t.get('toolu_b')!.status, t.get('toolu_b')!.summary], ['failed', 'gave up']);
  // An end before the first line of a subagent whose spawn never comes ends its orphan.
  t.route(notified('toolu_o', 'completed', 'orphan done'));
  const orphan = t.route(text('toolu_o'));
  assert.deepEqual(
    orphan.events.map((e) => e.type),
    ['open', 'status'],
  );
  assert.deepEqual([t.get('toolu_o')!.orphan, t.get('toolu_o')!.status], [true, 'completed']);
});

test('a subagent stopped by the user ends stopped, with its summary and end time', () => {
  const t = new ChannelTree();
  t.route(at(spawn('a', null, 'Agent', { run_in_background: true }), '2026-12-06T11:00:00.000Z'));
  t.route(result(null, 'a', 'Async agent launched successfully.'));
  const stop = t.route(at(notified('a', 'stopped', 'Task stopped by user'), '2026-12-06T11:00:09.000Z'));
  assert.deepEqual(
    stop.events.map((e) => [e.type, e.channel.id, e.channel.status, e.type === 'status' && e.summary]),
    [['status', 'a', 'stopped', 'Task stopped by user']],
  );
  assert.deepEqual(
    [t.get('a')!.status, t.get('a')!.summary, t.get('a')!.endedAt],
    ['stopped', 'Task stopped by user', '2026-12-06T11:00:09.000Z'],
  );
  assert.equal(channelTimes(t, t.get('a')!).elapsedMs, 9_000);
  // Repeated, it is no news; a later tool_result on its id ends nothing, as after any end.
  assert.deepEqual(t.route(notified('a', 'stopped', 'Task stopped by user')).events, []);
  assert.deepEqual(t.route(result(null, 'a', 'a late report')).events, []);
  assert.deepEqual([t.get('a')!.status, t.get('a')!.summary], ['stopped', 'Task stopped by user']);
});

test('a foreground subagent stopped after its result ends stopped: the notification is final', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(result(null, 'a', '[Request interrupted by user for tool use]', true));
  assert.equal(t.get('a')!.status, 'failed');
  const stop = t.route(notified('a', 'stopped', ''));
  assert.deepEqual(
    stop.events.map((e) => [e.type, e.channel.status]),
    [['status', 'stopped']],
  );
  assert.deepEqual(
    [t.get('a')!.status, t.get('a')!.summary],
    ['stopped', '[Request interrupted by user for tool use]'],
    "the result's summary stays when the notification brings none",
  );
});

test('a stop notified before the spawn ends the subagent stopped as the spawn opens it', () => {
  const t = new ChannelTree();
  assert.deepEqual(t.route(notified('toolu_s', 'stopped', 'stopped early')).events, []);
  const spawned = t.route(spawn('toolu_s', null, 'Agent', { run_in_background: true }));
  assert.deepEqual(
    spawned.events.map((e) => [e.type, e.channel.status]),
    [
      ['open', 'stopped'],
      ['status', 'stopped'],
    ],
  );
  assert.deepEqual([t.get('toolu_s')!.status, t.get('toolu_s')!.summary], ['stopped', 'stopped early']);
  // A foreground spawn's failed result, then its stop, both before it: it opens stopped.
  t.route(result(null, 'toolu_f', 'interrupted', true));
  t.route(notified('toolu_f', 'stopped', ''));
  t.route(spawn('toolu_f', null));
  assert.deepEqual([t.get('toolu_f')!.status, t.get('toolu_f')!.summary], ['stopped', 'interrupted']);
});

test('a result before its spawn ends only what a result after it would: ' +
  'not a background spawn, not with a launch, not after a notification', () => {
  const t = new ChannelTree();
  t.route(result(null, 'toolu_bg', 'early text'));
  t.route(spawn('toolu_bg', null, 'Agent', { run_in_background: true }));
  assert.equal(t.get('toolu_bg')!.status, 'running', 'a background spawn waits for its notification');
  t.route(result(null, 'toolu_l', 'Async agent launched successfully.'));
  t.route(spawn('toolu_l', null));
  assert.equal(t.get('toolu_l')!.status, 'running', 'a launch ends nothing');
  t.route(notified('toolu_n', 'failed', 'stopped early'));
  t.route(result(null, 'toolu_n', 'a report'));
  t.route(spawn('toolu_n', null));
  assert.deepEqual([t.get('toolu_n')!.status, t.get('toolu_n')!.summary], ['failed', 'stopped early']);
  t.route(result(null, 'toolu_r', 'report', true));
  t.route(notified('toolu_r', 'completed', ''));
  t.route(spawn('toolu_r', null));
  assert.deepEqual(
    [t.get('toolu_r')!.status, t.get('toolu_r')!.summary],
    ['completed', 'report'],
    'the notification is final; the result\'s summary stays when it brings none',
  );
  // The result of a call the tree knows (main's Bash) is that call's: kept for no subagent.
  t.route(bash('toolu_x', null));
  t.route(result(null, 'toolu_x', 'ok'));
  t.route(spawn('toolu_x', null));
  assert.equal(t.get('toolu_x')!.status, 'running');
});

test("an end before the spawn keeps the report's time; the span runs from the spawn line", () => {
  const t = new ChannelTree();
  t.route(at(text(null, 'go', 'm0'), '2026-12-06T11:00:00.000Z'));
  t.route(at(text(null, 'on', 'm1'), '2026-12-06T11:00:20.000Z'));
  t.route(notified('toolu_a', 'completed'));
  t.route(at(spawn('toolu_a', null), '2026-12-06T11:00:05.000Z'));
  t.route(at(text(null, 'later', 'm2'), '2026-12-06T11:00:30.000Z'));
  assert.deepEqual(channelTimes(t, t.get('toolu_a')!), {
    startedAt: '2026-12-06T11:00:05.000Z',
    endedAt: '2026-12-06T11:00:20.000Z',
    elapsedMs: 15_000,
  });
});

test('ends kept for ids not spawned yet are bounded: the latest MAX_ENDS_BEFORE_SPAWN, ' +
  'their summaries MAX_END_CHARS_BEFORE_SPAWN in all besides the newest', () => {
  const t = new ChannelTree();
  for (let i = 0; i <= MAX_ENDS_BEFORE_SPAWN; i++) t.route(notified(`toolu_${i}`, 'completed', 's'));
  t.route(spawn('toolu_0', null));
  t.route(spawn('toolu_1', null));
  t.route(spawn(`toolu_${MAX_ENDS_BEFORE_SPAWN}`, null));
  assert.deepEqual(
    [t.get('toolu_0')!.status, t.get('toolu_1')!.status, t.get(`toolu_${MAX_ENDS_BEFORE_SPAWN}`)!.status],
    ['running', 'completed', 'completed'],
    'the oldest is forgotten first',
  );
  const half = 'x'.repeat(MAX_END_CHARS_BEFORE_SPAWN / 2);
  const big = new ChannelTree();
  big.route(notified('toolu_a', 'completed', half));
  big.route(notified('toolu_b', 'completed', half));
  big.route(notified('toolu_c', 'failed', half + half));
  for (const id of ['toolu_a', 'toolu_b', 'toolu_c']) big.route(spawn(id, null));
  assert.deepEqual(
    ['toolu_a', 'toolu_b', 'toolu_c'].map((id) => big.get(id)!.status),
    ['running', 'running', 'failed'],
    'the newest is kept whole, past the characters, and the older ones go',
  );
  assert.equal(big.get('toolu_c')!.summary!.length, MAX_END_CHARS_BEFORE_SPAWN);
});

// ChannelTree (src/model/tree.ts) rules that the tree tests leave implicit: event snapshots,
// tags, what task_started and task_notification may change, and lines that change nothing.

type Input = Record<string, unknown>;

const agentSpawn = (id: string, parent: string | null, input: Input = {}) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: { id: `m_${id}`, content: [{ type: 'tool_use', id, name: 'Agent', input }] },
});

const say = (parent: string | null, message: Input) => ({
  type: 'assistant',
  parent_tool_use_id: parent,
  message: { content: [{ type: 'text', text: 'hi' }], ...message },
});

const mainResult = (toolUseId: string, content: unknown, isError = false) => ({
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
  assert.equal(tree.get('xtoolu_01zzzzzz')!.tag, 'zzzzzz', 'not a Claude id: its end');
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

test('tags tell apart ids that share a long start: Gemini and Codex ids by their end', () => {
  const tree = new ChannelTree();
  const ids = [
    'invoke_agent__invoke_agent_1796134953936_0',
    'invoke_agent__invoke_agent_1796134954031_1',
    '01a231f8-9442-76a3-9a1a-850231d59d44',
    '01a231f8-946e-7540-bb21-a3e90ba57bf3',
    'call_1',
    'call_10',
    'toolu_bdrk_01Xy7PqR',
    'toolu_vrtx_01Ab3dEf',
  ];
  for (const id of ids) tree.route(say(id, {}));
  assert.deepEqual(
    ids.map((id) => tree.get(id)!.tag),
    ['3936_0', '4031_1', 'd59d44', 'a57bf3', 'call_1', 'call_10', 'Xy7PqR', 'Ab3dEf'],
  );
  // Ids that share their end too get longer pieces of it, then numbers.
  const sameEnd = Array.from({ length: 9 }, (_, i) => `${i}${'_x'.repeat(20)}`);
  for (const id of sameEnd) tree.route(say(id, {}));
  assert.deepEqual(
    sameEnd.map((id) => tree.get(id)!.tag),
    ['_x_x_x', 'x_x_x_x', '_x_x_x_x', 'x_x_x_x_x', '_x_x_x_x_x', 'x_x_x_x_x_x', '_x_x_x_x_x_x']
      .concat(['_x_x_x~2', '_x_x_x~3']),
  );
});

test('spawns: a new one opens its channel with description and background; an empty id is none', () => {
  const tree = new ChannelTree();
  const opened = tree.route(agentSpawn('a', null, { description: 'look', run_in_background: true }));
  assert.deepEqual(
    opened.events.map((ev) => ev.type),
    ['open'],
  );
  assert.deepEqual([tree.get('a')!.description, tree.get('a')!.background], ['look', true]);
  tree.route(agentSpawn('b', null, { run_in_background: 'yes' }));
  assert.deepEqual([tree.get('b')!.description, tree.get('b')!.background], [null, null]);
  tree.route(agentSpawn('', null));
  assert.deepEqual([tree.size, tree.spawnCycles], [3, 0]);
  // Only a tool_use block spawns, whatever another block's name.
  const named = { type: 'text', text: 'x', id: 'zz', name: 'Agent', input: {} };
  tree.route({ type: 'assistant', message: { content: [named] } });
  assert.equal(tree.get('zz'), undefined);
  // An orphan told by task_started keeps what it said unless the spawn says otherwise.
  tree.route(say('c', {}));
  tree.route(system('task_started', { tool_use_id: 'c', is_backgrounded: true, description: 'early' }));
  tree.route(agentSpawn('c', null, { description: 'late', run_in_background: false }));
  assert.deepEqual([tree.get('c')!.description, tree.get('c')!.background], ['late', true]);
});

test('depth guesses fill unknown depths only, and never stop the real depth from replacing them', () => {
  const tree = new ChannelTree();
  tree.route(say('c', {}));
  tree.route(system('task_started', { tool_use_id: 'c', spawn_depth: 3 }));
  tree.route(agentSpawn('c', 'b'));
  tree.route(system('task_started', { tool_use_id: 'b', spawn_depth: 5 }));
  assert.deepEqual([tree.get('b')!.depth, tree.get('c')!.depth], [5, 3]);
  tree.route(agentSpawn('b', null));
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
  tree.route(agentSpawn('a', null));
  tree.route(mainResult('a', 'Async agent launched successfully.'));
  assert.deepEqual([tree.get('a')!.status, tree.get('a')!.background], ['running', true]);
  tree.route(agentSpawn('b', null));
  tree.route(mainResult('b', 'done'));
  tree.route(mainResult('b', 'Async agent launched successfully.'));
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
  tree.route(agentSpawn('b', null, { run_in_background: true }));
  tree.route(system('task_started', { tool_use_id: 'b', is_backgrounded: false }));
  assert.equal(tree.get('b')!.background, false);
});

test('task_notification: only completed, failed or stopped end a channel, ' +
  'once per status and summary', () => {
  const tree = new ChannelTree();
  const unknown = system('task_notification', { tool_use_id: 'x', status: 'completed' });
  assert.deepEqual(tree.route(unknown).events, []);
  tree.route(agentSpawn('a', null, { run_in_background: true }));
  for (const status of ['killed', 'running', '', null]) {
    const other = system('task_notification', { tool_use_id: 'a', status });
    assert.deepEqual(tree.route(other).events, [], `status ${status}`);
  }
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
  tree.route(agentSpawn('b', null, { run_in_background: true }));
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

test('a channel is read only at run time: every write throws and the tree keeps its figures', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(text('a', 'hi', 'm1', { input_tokens: 10, output_tokens: 5 }));
  const a = t.get('a')!;
  const writable = a as unknown as Record<string, unknown> & {
    counts: Record<string, number>;
    usage: Record<string, number>;
    place: Record<string, unknown>;
    children: string[];
  };
  const writes = [
    () => void (writable.status = 'failed'),
    () => void (writable.lines = 0),
    () => void (writable.parent = 'x'),
    () => void (writable.tag = 'x'),
    () => void (writable.forged = true),
    () => void (writable.counts.text = 99),
    () => void (writable.usage.output_tokens = 1e6),
    () => void (writable.place.depth = 7),
    () => void writable.children.push('x'),
    () => void Object.defineProperty(a, 'status', { value: 'failed' }),
    () => void Object.defineProperty(Object.getPrototypeOf(a), 'lines', { get: () => 0 }),
  ];
  for (const write of writes) assert.throws(write, TypeError, write.toString());
  assert.deepEqual(
    [a.status, a.lines, a.parent, a.tag, a.counts.text, a.usage.output_tokens, a.depth, a.children.length],
    ['running', 1, null, 'a', 1, 5, 1, 0],
  );
  assert.equal('forged' in a, false);
});

test('what a reader took from a channel never changes under it: the channel goes on with its own', () => {
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(text('a', 'hi', 'm1', { input_tokens: 10, output_tokens: 5 }));
  const [a, main] = [t.get('a')!, t.main];
  const [usage, counts, children, place] = [a.usage, a.counts, main.children, a.place];
  // Read twice before a change, the same objects: a read copies nothing.
  assert.equal(a.usage, usage);
  assert.equal(main.children, children);
  t.route(text('a', 'more', 'm1', { input_tokens: 10, output_tokens: 8 }));
  t.route(text('a', 'next', 'm2', { input_tokens: 3, output_tokens: 1 }));
  t.route(spawn('b', null));
  t.route(spawn('c', 'a'));
  assert.deepEqual(usage, { input_tokens: 10, output_tokens: 5 });
  assert.deepEqual(counts, { text: 1, thinking: 0, tool_use: 0, tool_result: 0 });
  assert.deepEqual(children, ['a']);
  assert.equal(place.depth, 1);
  assert.deepEqual(a.usage, { input_tokens: 13, output_tokens: 9 });
  assert.deepEqual(a.counts, { text: 3, thinking: 0, tool_use: 1, tool_result: 0 });
  assert.deepEqual([main.children, a.children], [['a', 'b'], ['c']]);
});

test("a channel written as JSON or inspected shows every field a reader sees, as they are now", async () => {
  const { inspect } = await import('node:util');
  const t = new ChannelTree();
  t.route(spawn('a', null));
  t.route(text('a', 'hi', 'm1', { input_tokens: 10, output_tokens: 5 }));
  t.route(spawn('c', 'a'));
  const a = t.get('a')!;
  const json = JSON.parse(JSON.stringify(a)) as Record<string, unknown>;
  const fields = [
    'id', 'parent', 'orphan', 'depth', 'agent', 'description', 'status', 'background', 'summary',
    'lines', 'counts', 'usage', 'firstSeen', 'lastSeen', 'startedAt', 'endedAt', 'tag', 'seq',
    'children', 'place',
  ] as const;
  assert.deepEqual(Object.keys(json).sort(), [...fields].sort());
  for (const f of fields) assert.deepEqual(json[f], JSON.parse(JSON.stringify(a[f])), f);
  assert.deepEqual(json.children, ['c']);
  assert.deepEqual(json.usage, { input_tokens: 10, output_tokens: 5 });
  assert.match(inspect(a), /status: 'running'/);
});
