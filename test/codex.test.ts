// The Codex mapper event by event: each recorded event is fed to the mapper and the lines it
// makes are compared whole with the lines an independent reading of the same event expects.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { createCodexMapper, isCodexEvent, itemResult } from '../src/adapters/codex.js';
import type { MappedEvent } from '../src/adapters/stream-lines.js';
import {
  assistant,
  Expect,
  init,
  isObj,
  type Json,
  num,
  obj,
  prompt,
  recordings,
  replay,
  result,
  shown,
  str,
  text,
  toolResult,
  withExit,
} from './helpers/expected-lines.js';
import { BIN, FIXTURES, tmpDir } from './helpers/helpers.js';


const CODEX_DONE: Json = {
  completed: 'completed',
  errored: 'failed',
  failed: 'failed',
  shutdown: 'stopped',
  not_found: 'failed',
  interrupted: 'stopped',
};

/** The first 80 UTF-16 units of a prompt, one fewer when the cut would split a surrogate pair. */
function head80(words: string): string {
  if (words.length <= 80) return words;
  const cut = words.slice(0, 80);
  const last = cut.charCodeAt(79);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, 79) : cut;
}

/** Codex's events read by their documented fields. */
function codexReader() {
  let thread: string | null = null;
  const started = new Set<string>();
  const running = new Set<string>();
  const spawned = new Set<string>();
  let lastText: string | null = null;
  let turns = 0;
  let errors = 0;
  const endThreads = (item: Json, out: Expect) => {
    const blocks: Json[] = [];
    for (const [t, state] of Object.entries(obj(item.agents_states))) {
      if (!running.has(t) || !isObj(state) || !(String(state.status) in CODEX_DONE)) continue;
      running.delete(t);
      const message = str(state.message);
      if (message !== null) out.add(text(t, `codex-final-${t}`, message, null), false);
      if (CODEX_DONE[state.status] === 'stopped') {
        const notice = { type: 'system', subtype: 'task_notification', tool_use_id: t, status: 'stopped' };
        out.add({ ...notice, summary: message, parent_tool_use_id: t }, false);
      }
      blocks.push({
        type: 'tool_result',
        tool_use_id: t,
        content: message ?? `agent ${state.status}`,
        ...(CODEX_DONE[state.status] === 'failed' ? { is_error: true } : {}),
      });
    }
    if (blocks.length > 0)
      out.add({ type: 'user', message: { role: 'user', content: blocks }, parent_tool_use_id: null }, false);
  };
  const block = (id: string, content: string, isError: boolean): Json => ({
    type: 'tool_result',
    tool_use_id: id,
    content,
    ...(isError ? { is_error: true } : {}),
  });
  const resultOf = (id: string, item: Json): Json => {
    const failed = item.status === 'failed' || item.status === 'declined';
    if (item.type === 'command_execution') {
      const code = num(item.exit_code);
      return block(
        id,
        withExit(shown(item.aggregated_output), code),
        failed || (code !== undefined && code !== 0),
      );
    }
    if (item.type === 'mcp_tool_call') {
      const error = str(obj(item.error).message);
      return block(id, error ?? shown(item.result), failed || error !== null);
    }
    return block(id, shown(item.status ?? ''), failed);
  };
  const shownAs = (item: Json): [string, Json] => {
    if (item.type === 'command_execution') return ['Bash', { command: shown(item.command) }];
    if (item.type === 'file_change')
      return ['Edit', { changes: Array.isArray(item.changes) ? item.changes : [] }];
    if (item.type === 'mcp_tool_call') {
      return [
        `mcp__${shown(item.server)}__${shown(item.tool)}`,
        isObj(item.arguments) ? item.arguments : { arguments: item.arguments ?? null },
      ];
    }
    if (item.type === 'web_search') return ['WebSearch', { query: shown(item.query) }];
    return [typeof item.type === 'string' ? item.type.slice(0, 100) : 'item', {}];
  };
  const item = (phase: string, it: Json, out: Expect) => {
    const id = str(it.id);
    if (!id) return;
    const done = phase === 'item.completed';
    if (['agent_message', 'reasoning', 'error', 'todo_list'].includes(it.type)) {
      if (!done || it.type === 'todo_list') return;
      if (it.type === 'agent_message') {
        lastText = shown(it.text);
        out.add(text(null, id, lastText, null));
      } else if (it.type === 'reasoning') {
        out.add(assistant(null, id, [{ type: 'thinking', thinking: shown(it.text) }], null, null));
      } else {
        out.add(text(null, id, `[error] ${shown(it.message)}`, null));
      }
      return;
    }
    if (it.type === 'collab_tool_call') {
      const tool = str(it.tool) ?? 'collab';
      const threads = Array.isArray(it.receiver_thread_ids)
        ? it.receiver_thread_ids.filter((t: unknown) => typeof t === 'string' && t !== '')
        : [];
      const words = str(it.prompt);
      if (tool === 'spawn_agent') {
        if (!done) return;
        const fresh = threads.filter((t: string) => !spawned.has(t));
        if (fresh.length > 0) {
          out.add(
            assistant(
              null,
              id,
              fresh.map((t: string) => ({
                type: 'tool_use',
                id: t,
                name: 'Task',
                input: {
                  prompt: words,
                  description: words === null ? null : head80(words),
                  subagent_type: 'codex',
                  tool,
                },
              })),
              null,
              null,
            ),
          );
          for (const t of fresh) {
            spawned.add(t);
            running.add(t);
            if (words !== null) out.add(prompt(t, words, null), false);
          }
        } else if (it.status === 'failed') {
          out.add(
            assistant(null, id, [{ type: 'tool_use', id, name: tool, input: { prompt: words } }], null, null),
          );
          out.add(toolResult(id, 'the agent could not be spawned', true, null), false);
        }
        endThreads(it, out);
        return;
      }
      const call = {
        type: 'tool_use',
        id,
        name: tool,
        input: { receiver_thread_ids: threads, prompt: words },
      };
      if (!done) {
        if (!started.has(id)) out.add(assistant(null, id, [call], null, null));
        started.add(id);
        return;
      }
      if (!started.has(id)) out.add(assistant(null, id, [call], null, null));
      started.delete(id);
      const states = isObj(it.agents_states)
        ? Object.entries(it.agents_states as Json)
            .map(([t, s]) => `${t}: ${isObj(s) ? shown(s.status) : shown(s)}`)
            .join('\n')
        : '';
      out.add(toolResult(id, states, it.status === 'failed', null));
      endThreads(it, out);
      return;
    }
    if (phase === 'item.updated') return;
    if (!started.has(id)) {
      started.add(id);
      const [name, input] = shownAs(it);
      out.add(assistant(null, id, [{ type: 'tool_use', id, name, input }], null, null), !done);
    }
    if (!done) return;
    started.delete(id);
    out.add({
      type: 'user',
      message: { role: 'user', content: [resultOf(id, it)] },
      parent_tool_use_id: null,
    });
  };
  return {
    spawned,
    resultOf,
    event(ev: Json): MappedEvent {
      const out = new Expect();
      if (ev.type === 'thread.started') {
        thread ??= str(ev.thread_id);
        out.add(init('codex', null, str(ev.thread_id), null, null));
      } else if (['item.started', 'item.updated', 'item.completed'].includes(ev.type) && isObj(ev.item)) {
        item(ev.type, ev.item, out);
      } else if (ev.type === 'error') {
        errors++;
        out.add(text(null, `codex-error-${errors}`, `[error] ${shown(ev.message)}`, null));
      } else if (ev.type === 'turn.completed' || ev.type === 'turn.failed') {
        turns++;
        const usage: Json = {};
        for (const [ours, theirs] of [
          ['input_tokens', 'input_tokens'],
          ['cache_read_input_tokens', 'cached_input_tokens'],
          ['cache_creation_input_tokens', 'cache_write_input_tokens'],
          ['output_tokens', 'output_tokens'],
          ['reasoning_output_tokens', 'reasoning_output_tokens'],
        ]) {
          if (num(obj(ev.usage)[theirs]) !== undefined) usage[ours] = ev.usage[theirs];
        }
        const has = Object.keys(usage).length > 0;
        if (has) out.add(assistant(null, `codex-turn-${turns}`, [], usage, null));
        const failed = ev.type === 'turn.failed';
        out.add(
          result(
            failed,
            failed ? str(obj(ev.error).message) : lastText,
            thread,
            has ? usage : null,
            null,
            null,
          ),
        );
      }
      return out.event();
    },
  };
}

test('Codex: every recorded event maps to the lines its ' +
  'fields call for; spawned threads end by their state', () => {
  for (const { name, events } of recordings('codex')) {
    const reader = codexReader();
    const mapper = createCodexMapper();
    replay(
      mapper,
      events,
      (ev) => reader.event(ev),
      () => [],
      name,
    );
    for (const t of reader.spawned) assert.equal(mapper.transcriptOf(t), 'spawn-and-result', name);
    assert.equal(mapper.transcriptOf(null), 'stream');
    assert.equal(mapper.version, null);
  }
});

test('Codex: crafted items: every tool kind, failed spawns and waits, turns failed and without usage', () => {
  const long = 'x'.repeat(79) + '\u{1F600}' + 'tail';
  const events: Json[] = [
    { type: 'thread.started', thread_id: 'th1' },
    { type: 'thread.started', thread_id: 'th2' },
    { type: 'turn.started' },
    { type: 'item.completed', item: { type: 'agent_message', text: 'no id' } },
    { type: 'item.started', item: { id: 'a1', type: 'agent_message', text: 'early' } },
    { type: 'item.started', item: { id: 'r0', type: 'reasoning', text: 'early' } },
    { type: 'item.started', item: { id: 'e0', type: 'error', message: 'early' } },
    { type: 'item.completed', item: { id: 'r1', type: 'reasoning', text: { t: 1 } } },
    { type: 'item.completed', item: { id: 'e1', type: 'error', message: 'broke' } },
    { type: 'item.completed', item: { id: 'td', type: 'todo_list', items: [] } },
    {
      type: 'item.started',
      item: { id: 'c1', type: 'command_execution', command: 'ls', status: 'in_progress' },
    },
    { type: 'item.updated', item: { id: 'c1', type: 'command_execution', command: 'ls' } },
    {
      type: 'item.completed',
      item: {
        id: 'c1',
        type: 'command_execution',
        command: 'ls',
        aggregated_output: 'a\n',
        exit_code: 0,
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 'c2',
        type: 'command_execution',
        command: ['x'],
        aggregated_output: 'b',
        exit_code: 2,
        status: 'completed',
      },
    },
    { type: 'item.completed', item: { id: 'c3', type: 'command_execution', status: 'declined' } },
    {
      type: 'item.completed',
      item: { id: 'f1', type: 'file_change', changes: [{ path: 'a' }], status: 'completed' },
    },
    { type: 'item.completed', item: { id: 'f2', type: 'file_change', changes: 'x', status: 'failed' } },
    {
      type: 'item.completed',
      item: {
        id: 'm1',
        type: 'mcp_tool_call',
        server: 's',
        tool: 't',
        arguments: { q: 1 },
        result: { content: 'r' },
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 'm2',
        type: 'mcp_tool_call',
        server: 's',
        tool: 't',
        arguments: 'raw',
        error: { message: 'mcp down' },
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: { id: 'm3', type: 'mcp_tool_call', error: { message: '' }, result: 'ok' },
    },
    { type: 'item.completed', item: { id: 'w1', type: 'web_search', query: 'q' } },
    { type: 'item.completed', item: { id: 'u1', type: 'unknown_kind', status: 'completed' } },
    { type: 'item.completed', item: { id: 'u2', type: 7 } },
    {
      type: 'item.completed',
      item: {
        id: 's0',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        status: 'failed',
        prompt: 'refused',
        receiver_thread_ids: [],
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's9',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        status: 'completed',
        receiver_thread_ids: 'x',
      },
    },
    { type: 'item.started', item: { id: 's1', type: 'collab_tool_call', tool: 'spawn_agent', prompt: long } },
    {
      type: 'item.completed',
      item: {
        id: 's1',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        prompt: long,
        receiver_thread_ids: ['t1', '', 5, 't2'],
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's2',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        receiver_thread_ids: ['t1', 't3'],
        status: 'completed',
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's3',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        status: 'failed',
        receiver_thread_ids: ['t3'],
      },
    },
    {
      type: 'item.started',
      item: { id: 'wt', type: 'collab_tool_call', tool: 'wait', receiver_thread_ids: ['t1'] },
    },
    {
      type: 'item.started',
      item: { id: 'wt', type: 'collab_tool_call', tool: 'wait', receiver_thread_ids: ['t1'] },
    },
    {
      type: 'item.completed',
      item: {
        id: 'wt',
        type: 'collab_tool_call',
        tool: 'wait',
        status: 'completed',
        receiver_thread_ids: ['t1'],
        agents_states: { t1: { status: 'running' }, t9: { status: 'completed' }, t2: 'completed' },
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 'w2',
        type: 'collab_tool_call',
        status: 'failed',
        agents_states: {
          t1: { status: 'completed', message: 'done one' },
          t2: { status: 'shutdown' },
          t3: { status: 'not_found', message: '' },
        },
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 'w3',
        type: 'collab_tool_call',
        tool: 'wait',
        agents_states: { t1: { status: 'failed', message: 'again' } },
      },
    },
    { type: 'item.completed', item: 'not an object' },
    {
      type: 'turn.completed',
      usage: {
        input_tokens: 10,
        cached_input_tokens: 2,
        cache_write_input_tokens: 1,
        output_tokens: 3,
        reasoning_output_tokens: 4,
      },
    },
    { type: 'turn.failed', error: { message: 'limit' } },
    { type: 'turn.failed', usage: { input_tokens: 1 }, error: 'x' },
  ];
  const reader = codexReader();
  const mapper = createCodexMapper();
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => [],
    'crafted',
  );
  for (const t of ['t1', 't2', 't3']) assert.equal(mapper.transcriptOf(t), 'spawn-and-result');
  assert.equal(mapper.transcriptOf('s1'), 'stream');
  // Spelled out where the reading above could share a slip with the mapper.
  const fresh = createCodexMapper();
  const spawn = fresh.map(events.find((ev) => ev.item?.id === 's1' && ev.type === 'item.completed')!);
  const spawnCall: Json = spawn.lines[0];
  assert.equal(spawnCall.message.content[0].input.description, 'x'.repeat(79));
  assert.equal(spawnCall.message.content[0].input.subagent_type, 'codex');
  assert.deepEqual(
    spawn.lines.map((l: Json) => l.parent_tool_use_id),
    [null, 't1', 't2'],
  );
  const failedTurn = fresh.map({ type: 'turn.failed', error: { message: 'limit' } });
  assert.deepEqual(failedTurn, {
    channel: null,
    own: 0,
    lines: [result(true, 'limit', null, null, null, null)],
  });
  const counted = fresh.map({ type: 'turn.completed', usage: { output_tokens: 3 } });
  assert.equal(counted.own, 0);
  assert.equal((counted.lines[0] as Json).message.id, 'codex-turn-2');
  assert.deepEqual(fresh.end(), []);
  assert.deepEqual(itemResult('c', { type: 'command_execution', aggregated_output: 'o', exit_code: 1 }), {
    type: 'tool_result',
    tool_use_id: 'c',
    content: 'o\n[exit code 1]',
    is_error: true,
  });
});

test('Codex: updates, spawns in progress, threads ended by a later spawn, every failed state', () => {
  const events: Json[] = [
    { type: 'item.completed', item: null },
    { type: 'item.updated', item: { id: 'c9', type: 'command_execution', command: 'ls' } },
    {
      type: 'item.updated',
      item: { id: 'wu', type: 'collab_tool_call', tool: 'wait', receiver_thread_ids: [] },
    },
    {
      type: 'item.started',
      item: {
        id: 's7',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        receiver_thread_ids: ['t7'],
        agents_states: { t7: { status: 'completed' } },
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's8',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        prompt: 'p',
        receiver_thread_ids: ['ta', 'tb', 'tc', ['td']],
        status: 'completed',
      },
    },
    // A spawn naming only threads already known still ends those its states say are done.
    {
      type: 'item.completed',
      item: {
        id: 's9',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        receiver_thread_ids: ['ta'],
        status: 'completed',
        agents_states: { ta: { status: 'failed', message: 'ta died' } },
      },
    },
    {
      type: 'item.completed',
      item: {
        id: 's10',
        type: 'collab_tool_call',
        tool: 'spawn_agent',
        receiver_thread_ids: [],
        status: 'completed',
        agents_states: { tb: { status: 'interrupted' } },
      },
    },
    {
      type: 'item.completed',
      item: { id: 'wz', type: 'collab_tool_call', tool: 'wait', status: 'completed', agents_states: 'ab' },
    },
    {
      type: 'item.completed',
      item: {
        id: 'wy',
        type: 'collab_tool_call',
        tool: 'wait',
        status: 'completed',
        agents_states: { tc: { status: 'errored' } },
      },
    },
    {
      type: 'item.completed',
      item: { id: 'c8', type: 'command_execution', command: 'true', status: 'completed' },
    },
    { type: 'item.completed', item: { id: 'u3', type: 'y'.repeat(150) } },
  ];
  const reader = codexReader();
  const mapper = createCodexMapper();
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => [],
    'more',
  );
  // Spelled out where the reading above could share a slip with the mapper.
  const fresh = createCodexMapper();
  const [, updated, wait, started, spawn, ended, interrupted, odd, errored, bare, long] = events.map((ev) =>
    fresh.map(ev),
  );
  assert.deepEqual(updated.lines, []);
  assert.equal(wait.lines.length, 1);
  assert.deepEqual(started.lines, []);
  assert.deepEqual(
    spawn.lines.map((l: Json) => l.parent_tool_use_id),
    [null, 'ta', 'tb', 'tc'],
  );
  assert.deepEqual(ended, {
    channel: null,
    own: -1,
    lines: [text('ta', 'codex-final-ta', 'ta died', null), toolResult('ta', 'ta died', true, null)],
  });
  assert.deepEqual(interrupted.lines, [
    { type: 'system', subtype: 'task_notification', tool_use_id: 'tb', status: 'stopped', summary: null,
      parent_tool_use_id: 'tb' },
    toolResult('tb', 'agent interrupted', false, null),
  ]);
  assert.equal(
    (odd.lines[1] as Json).message.content[0].content,
    '',
    'states that are no object say nothing',
  );
  assert.deepEqual(errored.lines.slice(1), [
    toolResult('wy', 'tc: errored', false, null),
    toolResult('tc', 'agent errored', true, null),
  ]);
  assert.deepEqual(bare.lines.at(-1), toolResult('c8', '', false, null));
  assert.equal((long.lines[0] as Json).message.content[0].name, 'y'.repeat(100));
});

test('Codex: an event is a thread, turn or item event; an item event carries its item', () => {
  for (const { events } of recordings('codex')) for (const ev of events) assert.equal(isCodexEvent(ev), true);
  const yes: Json[] = [
    { type: 'thread.started', thread_id: 't' },
    { type: 'turn.started' },
    { type: 'turn.completed' },
    { type: 'turn.failed' },
    { type: 'item.started', item: {} },
    { type: 'item.updated', item: {} },
    { type: 'item.completed', item: {} },
    { type: 'error', message: 'Reconnecting... 1/5' },
    { type: 'error', message: '' },
  ];
  const no: Json[] = [
    // Another CLI's error: Gemini's has a timestamp, opencode's a sessionID.
    { type: 'error', timestamp: '2026-12-01T00:00:00.000Z', message: 'npm warn' },
    { type: 'error', sessionID: 's', error: { name: 'APIError' } },
    { type: 'error', sessionID: 's', message: 'x' },
    { type: 'error', message: 'x', subtype: 'y' },
    { type: 'error', message: 'x', parent_tool_use_id: null },
    { type: 'error', message: { text: 'x' } },
    { type: 'error' },
    { type: 'thread.started' },
    { type: 'item.completed' },
    { type: 'item.started', item: 'x' },
    { type: 'turn.started', data: {} },
    { type: 'turn.other' },
    { type: 3 },
  ];
  for (const ev of yes) assert.equal(isCodexEvent(ev), true, JSON.stringify(ev));
  for (const ev of no) assert.equal(isCodexEvent(ev), false, JSON.stringify(ev));
});

test('Codex: an agent closed (shutdown) or interrupted ends stopped, not failed; ' +
  'one that errored failed', () => {
  const recorded = readFileSync(join(FIXTURES, 'other-agents', 'codex', 'failing-subagent.jsonl'), 'utf8');
  const input = recorded
    .replace('"status":"completed","message":"Leaf 0', '"status":"shutdown","message":"Leaf 0')
    .replace('"status":"errored"', '"status":"interrupted"');
  assert.notEqual(input, recorded);
  const run = (text: string) => {
    const out = join(tmpDir(), 'out');
    const r = spawnSync(process.execPath, [BIN, '--out', out], { input: text, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
    const told = /\d+ subagents \([^)]*\)/.exec(r.stderr)?.[0];
    return { ends: index.channels.map((c: Json) => c.status), told };
  };
  assert.deepEqual(run(input), {
    ends: ['completed', 'stopped', 'stopped'],
    told: '2 subagents (0 completed, 0 failed, 2 stopped, 0 running)',
  });
  // The recording itself: the agent that errored failed.
  assert.deepEqual(run(recorded), {
    ends: ['completed', 'completed', 'failed'],
    told: '2 subagents (1 completed, 1 failed, 0 running)',
  });
});
