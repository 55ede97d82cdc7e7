// The projection's tool-call pairing, its growing lists and record log, and how a reader starts
// (replayed, then live): inputs a plain reading of the fixtures does not reach.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { open, type ToolCall } from '../src/index.js';
import { chunked, FIXTURES, splitEvery, tmpDir } from './helpers/helpers.js';

/** Lines of a recorded fixture. */
function fixtureLines(name: string): string[] {
  return readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
}

const input = (lines: string[]) => Buffer.from(lines.join('\n') + '\n');

/** The main channel's tool calls of a run, each settled, with its streamed input deltas. */
async function mainCalls(run: ReturnType<typeof open>) {
  const calls: ToolCall[] = [];
  for await (const call of run.toolCalls) calls.push(call);
  await run.done;
  return Promise.all(
    calls.map(async (call) => {
      const deltas: string[] = [];
      for await (const delta of call.inputDeltas) deltas.push(delta);
      return { id: call.id, deltas, status: await call.status, output: await call.output };
    }),
  );
}

/** A plain reading: the `partial_json` strings streamed for the tool_use block that opened as `id`. */
function streamedParts(lines: string[], id: string): string[] {
  let index: unknown;
  const parts: string[] = [];
  for (const line of lines) {
    const value = JSON.parse(line);
    if (value.type !== 'stream_event') continue;
    const event = value.event;
    if (event.type === 'content_block_start' && event.content_block.id === id) index = event.index;
    if (event.type === 'content_block_delta' && event.index === index) parts.push(event.delta.partial_json);
  }
  return parts;
}

/** The main channel's two streamed Agent calls in partial-messages: line numbers of their events. */
function partialMessagesShape(lines: string[]) {
  const values = lines.map((line) => JSON.parse(line));
  const starts = values.flatMap((value, at) =>
    value.type === 'stream_event' && value.event.type === 'content_block_start' &&
    value.event.content_block.type === 'tool_use' ? [at] : [],
  );
  const [first, second] = starts.map((at) => values[at].event.content_block.id as string);
  const deltasOf = (at: number) =>
    values.flatMap((value, line) =>
      value.type === 'stream_event' && value.event.type === 'content_block_delta' &&
      value.event.index === values[at].event.index ? [line] : [],
    );
  const [firstDeltas, secondDeltas] = [deltasOf(starts[0]), deltasOf(starts[1])];
  return { values, starts, first, second, firstDeltas, secondDeltas };
}

test('tool-call input deltas follow their block index when two blocks stream interleaved', async () => {
  const lines = fixtureLines('partial-messages');
  const { starts, first, second, firstDeltas, secondDeltas } = partialMessagesShape(lines);
  assert.equal(firstDeltas.length, secondDeltas.length);
  // Both blocks start, then their deltas alternate, all before the first call's assistant line.
  const moved = new Set([starts[1], ...secondDeltas]);
  const interleaved = firstDeltas.flatMap((at, k) => [lines[at], lines[secondDeltas[k]]]);
  const reordered: string[] = [];
  for (let at = 0; at < lines.length; at++) {
    if (moved.has(at) || firstDeltas.includes(at)) continue;
    reordered.push(lines[at]);
    if (at === starts[0]) reordered.push(lines[starts[1]], ...interleaved);
  }
  assert.equal(reordered.length, lines.length);
  const expected = { [first]: streamedParts(lines, first), [second]: streamedParts(lines, second) };
  assert.equal(expected[first].length, 6);
  assert.notDeepEqual(expected[first], expected[second]);
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const calls = await mainCalls(open(chunked([input(reordered)]), { out }));
    assert.deepEqual(
      Object.fromEntries(calls.filter((call) => call.id in expected).map((call) => [call.id, call.deltas])),
      expected,
    );
  }
});

test('malformed stream events beside a streamed tool call are skipped: its deltas stay whole', async () => {
  const lines = fixtureLines('partial-messages');
  const { values, starts, first, firstDeltas } = partialMessagesShape(lines);
  const sample = values[firstDeltas[0]];
  const index = sample.event.index;
  const eventLine = (event: unknown) => JSON.stringify({ ...sample, event });
  const serverTool = { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} };
  const noted = { type: 'tool_use', id: 'toolu_noted', name: 'Bash', input: {} };
  const jsonDelta = (partial: unknown) => ({ type: 'input_json_delta', partial_json: partial });
  const malformed = [
    eventLine(null),
    eventLine([1, 2]),
    eventLine({ type: 'content_block_start', index, content_block: null }),
    eventLine({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: '' } }),
    eventLine({ type: 'content_block_delta', index, delta: null }),
    eventLine({ type: 'content_block_delta', index, delta: jsonDelta(42) }),
    eventLine({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: 'not json' } }),
    // Only a tool_use block re-points its index; an event of another type carries no input delta.
    eventLine({ type: 'content_block_start', index, content_block: serverTool }),
    eventLine({ type: 'content_block_note', index, content_block: noted, delta: jsonDelta('"x"') }),
  ];
  // A delta that comes after its call's assistant line is not the call's: the call opened without it.
  const opened = values.findIndex(
    (value) => value.type === 'assistant' && JSON.stringify(value).includes(first),
  );
  const late = eventLine({ type: 'content_block_delta', index, delta: jsonDelta('}') });
  const broken = [
    ...lines.slice(0, firstDeltas[1]),
    ...malformed,
    ...lines.slice(firstDeltas[1], opened + 1),
    late,
    ...lines.slice(opened + 1),
  ];
  assert.ok(starts.length >= 2 && opened > firstDeltas.at(-1)!);
  for (const out of [undefined, join(tmpDir(), 'out')]) {
    const calls = await mainCalls(open(chunked(splitEvery(input(broken), 997)), { out }));
    const call = calls.find((each) => each.id === first)!;
    assert.deepEqual(call.deltas, streamedParts(lines, first));
    assert.equal(call.status, 'finished');
  }
});

test('only assistant lines open tool calls, whatever other fields a line carries', async () => {
  const lines = fixtureLines('partial-messages');
  const values = lines.map((line) => JSON.parse(line));
  const calling = values.findIndex((value) =>
    value.type === 'assistant' && value.parent_tool_use_id == null &&
    value.message.content.some((block: { type: string }) => block.type === 'tool_use'),
  );
  // A user line holding a tool_use block (as a resent prompt might) is no call; an assistant
  // line with a field named `event` is still an assistant line.
  const use = { type: 'tool_use', id: 'toolu_in_user_line', name: 'Bash', input: { command: 'ls' } };
  const user = { ...values[calling], type: 'user', message: { role: 'user', content: [use] } };
  const marked = { ...values[calling], event: { type: 'message_start', index: 0 } };
  const changed = [
    ...lines.slice(0, calling),
    JSON.stringify(user),
    JSON.stringify(marked),
    ...lines.slice(calling + 1),
  ];
  // A plain reading: the ids of tool_use blocks in main assistant lines, each once.
  const expected = new Set<string>();
  for (const value of changed.map((line) => JSON.parse(line))) {
    if (value.type !== 'assistant' || value.parent_tool_use_id != null) continue;
    for (const block of value.message.content) if (block.type === 'tool_use') expected.add(block.id);
  }
  assert.ok(expected.size >= 2 && !expected.has(use.id));
  const calls = await mainCalls(open(chunked([input(changed)])));
  assert.deepEqual(calls.map((call) => call.id).sort(), [...expected].sort());
  assert.ok(calls.every((call) => call.status === 'finished'));
});
