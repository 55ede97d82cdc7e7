// The Gemini CLI mapper event by event: each recorded event is fed to the mapper and the lines it
// makes are compared whole with the lines an independent reading of the same event expects.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createGeminiMapper, GEMINI_DEFAULTS, isGeminiEvent } from '../src/adapters/gemini.js';
import type { MappedEvent } from '../src/adapters/stream-lines.js';
import {
  args,
  assistant,
  Expect,
  init,
  type Json,
  prompt,
  recordings,
  replay,
  result,
  shown,
  str,
  text,
  toolResult,
} from './helpers/expected-lines.js';


/** Gemini's stream read by its documented fields. */
function geminiReader(spawnTools: readonly string[] = ['invoke_agent']) {
  let open: { words: string; ts: string | null } | null = null;
  let session: string | null = null;
  let lastText: string | null = null;
  let counter = 0;
  const spawns = new Set<string>();
  const str = (v: unknown) => (typeof v === 'string' && v.length > 0 ? v : null);
  const shown = (v: unknown) =>
    typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
  const message = (words: string, ts: string | null) => {
    lastText = words;
    return text(null, `gemini-message-${++counter}`, words, ts);
  };
  const flush = (out: Expect) => {
    if (open) out.add(message(open.words, open.ts), false);
    open = null;
  };
  return {
    event(ev: Json): MappedEvent {
      const out = new Expect();
      const ts = str(ev.timestamp);
      const piece = ev.type === 'message' && ev.role === 'assistant';
      if (!piece) flush(out);
      if (ev.type === 'init') {
        session = str(ev.session_id);
        out.add(init('gemini', null, session, str(ev.model), ts));
      } else if (piece && ev.delta === true) {
        if (open) open.words += shown(ev.content);
        else open = { words: shown(ev.content), ts };
      } else if (piece) {
        out.add(message(shown(ev.content), ts));
      } else if (ev.type === 'message' && ev.role === 'user') {
        out.add(prompt(null, shown(ev.content), ts));
      } else if (ev.type === 'tool_use' && str(ev.tool_id)) {
        const args =
          ev.parameters && typeof ev.parameters === 'object' && !Array.isArray(ev.parameters)
            ? ev.parameters
            : {};
        const name = str(ev.tool_name) ?? 'tool';
        const spawn = spawnTools.includes(name);
        const input = spawn
          ? {
              ...args,
              subagent_type: str(args.agent_name) ?? str(args.name),
              description: str(args.description),
              tool: name,
            }
          : args;
        out.add(
          assistant(
            null,
            `gemini-call-${ev.tool_id}`,
            [{ type: 'tool_use', id: ev.tool_id, name: spawn ? 'Task' : name, input }],
            null,
            ts,
          ),
        );
        if (spawn) {
          spawns.add(ev.tool_id);
          const words = str(args.prompt) ?? str(args.task);
          if (words !== null) out.add(prompt(ev.tool_id, words, ts), false);
        }
      } else if (ev.type === 'tool_result' && str(ev.tool_id)) {
        const failed = ev.status !== 'success';
        const output = failed ? (str(ev.error?.message) ?? shown(ev.output)) : shown(ev.output);
        out.add(toolResult(ev.tool_id, output, failed, ts));
        if (spawns.delete(ev.tool_id) && output !== '') {
          out.add(text(ev.tool_id, `gemini-result-${ev.tool_id}`, output, ts), false);
        }
      } else if (ev.type === 'error') {
        out.add(
          text(
            null,
            `gemini-error-${++counter}`,
            `[${shown(ev.severity) || 'error'}] ${shown(ev.message)}`,
            ts,
          ),
        );
      } else if (ev.type === 'result') {
        const stats = ev.stats ?? {};
        const usage: Json = {};
        for (const [ours, theirs] of [
          ['input_tokens', 'input_tokens'],
          ['output_tokens', 'output_tokens'],
          ['cache_read_input_tokens', 'cached'],
        ]) {
          if (typeof stats[theirs] === 'number' && Number.isFinite(stats[theirs]))
            usage[ours] = stats[theirs];
        }
        const hasUsage = Object.keys(usage).length > 0;
        if (hasUsage) out.add(assistant(null, 'gemini-run-usage', [], usage, ts), false);
        const failed = ev.status !== 'success';
        const duration = Number.isFinite(stats.duration_ms) ? stats.duration_ms : null;
        out.add(
          result(
            failed,
            failed ? str(ev.error?.message) : lastText,
            session,
            hasUsage ? usage : null,
            duration,
            ts,
          ),
        );
      }
      return out.event();
    },
    end(): Json[] {
      const out = new Expect();
      flush(out);
      return out.lines;
    },
  };
}

test('Gemini: every recorded event maps to the lines ' +
  'its fields call for; pieces join at the next event', () => {
  for (const { name, events } of recordings('gemini')) {
    const reader = geminiReader();
    const mapper = createGeminiMapper();
    replay(
      mapper,
      events,
      (ev) => reader.event(ev),
      () => reader.end(),
      name,
    );
    // A spawned call's channel carries only its spawn and result; main and the rest carry the stream.
    for (const ev of events.filter((e) => e.type === 'tool_use')) {
      const spawned = ev.tool_name === 'invoke_agent';
      assert.equal(mapper.transcriptOf(ev.tool_id), spawned ? 'spawn-and-result' : 'stream', name);
    }
    assert.equal(mapper.transcriptOf(null), 'stream');
    assert.equal(mapper.version, null);
  }
});

test('Gemini: text left open at the end comes out of end(); a piece after an event starts anew', () => {
  const ts = '2026-12-01T00:00:00.000Z';
  const events = [
    { type: 'message', timestamp: ts, role: 'assistant', content: 'one ', delta: true },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'two', delta: true },
    { type: 'message', timestamp: ts, role: 'user', content: 'more' },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'whole' },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'open ', delta: true },
    // A whole message while pieces are open is shown at once; the pieces stay open.
    { type: 'message', timestamp: ts, role: 'assistant', content: 'whole too' },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'still', delta: true },
    { type: 'message', timestamp: ts, role: 'system', content: 'not a prompt' },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'a', delta: true },
    { type: 'tool_use', timestamp: ts, role: 'assistant', tool_id: 'r', tool_name: 'ls', parameters: {} },
    { type: 'message', timestamp: ts, role: 'assistant', content: { a: 1 }, delta: true },
  ];
  const reader = geminiReader();
  replay(
    createGeminiMapper(),
    events,
    (ev) => reader.event(ev),
    () => reader.end(),
    'pieces',
  );
  const mapper = createGeminiMapper();
  for (const ev of events) mapper.map(ev);
  assert.deepEqual(mapper.end(), [text(null, 'gemini-message-6', '{"a":1}', ts)]);
  assert.deepEqual(mapper.end(), [], 'end() gives the open text once');
});

test('Gemini: errors, failed results, calls without ids, other spawn tools and argument names', () => {
  const ts = '2026-12-01T00:00:00.000Z';
  const events: Json[] = [
    { type: 'init', timestamp: ts, session_id: '', model: '' },
    { type: 'error', timestamp: ts, severity: 'warning', message: 'slow' },
    { type: 'error', timestamp: ts, message: { code: 7 } },
    { type: 'error', message: 'no time' },
    { type: 'tool_use', timestamp: ts, tool_name: 'x', parameters: {} },
    { type: 'tool_use', timestamp: ts, tool_id: 'a', parameters: ['not', 'object'] },
    {
      type: 'tool_use',
      timestamp: ts,
      tool_id: 'b',
      tool_name: 'delegate',
      parameters: { name: 'helper', task: 'do it', description: 'the job' },
    },
    { type: 'tool_use', timestamp: ts, tool_id: 'c', tool_name: 'delegate', parameters: { agent_name: 'x' } },
    { type: 'tool_result', timestamp: ts, status: 'success', output: 'no id' },
    { type: 'tool_result', timestamp: ts, tool_id: 'b', status: 'error', output: { why: 'broken' } },
    { type: 'tool_result', timestamp: ts, tool_id: 'b', status: 'success', output: 'again' },
    { type: 'tool_result', timestamp: ts, tool_id: 'c', status: 'success' },
    {
      type: 'tool_result',
      timestamp: ts,
      tool_id: 'a',
      status: 'error',
      output: 'out',
      error: { message: 'the error' },
    },
    {
      type: 'tool_result',
      timestamp: ts,
      tool_id: 'a',
      status: 'error',
      output: 'out',
      error: { message: '' },
    },
    { type: 'message', timestamp: ts, role: 'assistant', content: 'last words' },
    {
      type: 'result',
      timestamp: ts,
      status: 'error',
      error: { message: 'quota' },
      stats: { input_tokens: 5, cached: 2, duration_ms: 9 },
    },
    { type: 'result', timestamp: ts, status: 'error', stats: 'none' },
    {
      type: 'result',
      timestamp: ts,
      status: 'success',
      stats: { output_tokens: Infinity, duration_ms: NaN },
    },
    { type: 'something', timestamp: ts },
  ];
  const reader = geminiReader(['delegate']);
  const mapper = createGeminiMapper({ spawnTools: ['delegate'] });
  replay(
    mapper,
    events,
    (ev) => reader.event(ev),
    () => reader.end(),
    'crafted',
  );
  assert.equal(mapper.transcriptOf('b'), 'spawn-and-result');
  assert.equal(mapper.transcriptOf('a'), 'stream');
  // Spelled out where the reading above could share a slip with the mapper.
  const fresh = createGeminiMapper({ spawnTools: ['delegate'] });
  assert.deepEqual(fresh.map(events[1]).lines, [text(null, 'gemini-error-1', '[warning] slow', ts)]);
  assert.deepEqual(fresh.map(events[2]).lines, [text(null, 'gemini-error-2', '[error] {"code":7}', ts)]);
  const err = fresh.map(events[15]);
  assert.deepEqual(err.lines, [
    assistant(null, 'gemini-run-usage', [], { input_tokens: 5, cache_read_input_tokens: 2 }, ts),
    result(true, 'quota', null, { input_tokens: 5, cache_read_input_tokens: 2 }, 9, ts),
  ]);
  assert.equal(err.own, 1);
  assert.deepEqual(GEMINI_DEFAULTS.spawnTools, ['invoke_agent']);
  assert.ok(Object.isFrozen(GEMINI_DEFAULTS) && Object.isFrozen(GEMINI_DEFAULTS.spawnTools));
});

test('Gemini: an event is recognised by its type and the field that type always has', () => {
  for (const { events } of recordings('gemini'))
    for (const ev of events) assert.equal(isGeminiEvent(ev), true);
  const t = '2026-12-01T00:00:00.000Z';
  const yes: Json[] = [
    { type: 'init', timestamp: t, session_id: 's' },
    { type: 'message', timestamp: t, role: 'user' },
    { type: 'tool_use', timestamp: t, tool_id: 'a' },
    { type: 'tool_result', timestamp: t, tool_id: 'a' },
    { type: 'result', timestamp: t, stats: {} },
    { type: 'result', timestamp: t, status: 'success' },
    { type: 'error', timestamp: t, message: 'm' },
  ];
  const no: Json[] = [
    { type: 'other', timestamp: t, message: 'm' },
    { type: 7, timestamp: t },
    { type: 'error', message: 'm' },
    { type: 'error', timestamp: t, message: 'm', parent_tool_use_id: null },
    { type: 'error', timestamp: t, message: 'm', subtype: 'x' },
    { type: 'init', timestamp: t },
    { type: 'message', timestamp: t },
    { type: 'tool_use', timestamp: t },
    { type: 'tool_result', timestamp: t, tool_id: 1 },
    { type: 'result', timestamp: t },
    { type: 'error', timestamp: t },
  ];
  for (const ev of yes) assert.equal(isGeminiEvent(ev), true, JSON.stringify(ev));
  for (const ev of no) assert.equal(isGeminiEvent(ev), false, JSON.stringify(ev));
});
