// The shape readers of src/model/message.ts, one rule per assertion: each input is chosen so
// that a reader loosened or tightened by one condition gives a different answer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ASYNC_LAUNCH,
  asBlock,
  asStreamLine,
  blockType,
  channelIdOf,
  contentBlocks,
  isObject,
  lineTypeOf,
  nonEmpty,
  rawBlocks,
  resultText,
  resultTextLazy,
  SPAWN_TOOLS,
  systemSubtypeOf,
  usageNumbers,
  type ToolResultBlock,
} from '../src/model/message.js';
import { LazyText } from '../src/model/scan.js';

/** A lazy string over plain ASCII bytes, as the line scanner leaves a long string. */
type Bytes = ConstructorParameters<typeof LazyText>[0];
const lazy = (text: string) =>
  new LazyText(Buffer.from(text) as unknown as Bytes, 0, text.length, text.length, false);
const toolResult = (content: unknown): ToolResultBlock => ({
  type: 'tool_result',
  tool_use_id: 't',
  content,
});

test('isObject: a plain object only; null, arrays and scalars are not', () => {
  assert.equal(isObject({}), true);
  assert.equal(isObject({ a: 1 }), true);
  for (const value of [null, undefined, [], [1], 'x', 1, true])
    assert.equal(isObject(value), false, String(value));
});

test('nonEmpty: a string with at least one character, else null', () => {
  assert.equal(nonEmpty('a'), 'a');
  assert.equal(nonEmpty(' '), ' ');
  for (const value of ['', null, undefined, 0, 1, ['a'], { length: 1 }]) assert.equal(nonEmpty(value), null);
});

test('blockType: each kind with its fields typed; a field of the wrong type refuses the block', () => {
  assert.equal(blockType({ type: 'text', text: '' }), 'text');
  assert.equal(blockType({ type: 'text', text: 3 }), null);
  assert.equal(blockType({ type: 'text' }), null);
  assert.equal(blockType({ type: 'thinking' }), 'thinking', 'thinking text omitted (signature only)');
  assert.equal(blockType({ type: 'thinking', thinking: 'hm' }), 'thinking');
  assert.equal(blockType({ type: 'thinking', thinking: lazy('long') }), 'thinking');
  assert.equal(blockType({ type: 'thinking', thinking: 7 }), null);
  assert.equal(blockType({ type: 'thinking', thinking: null }), null);
  assert.equal(blockType({ type: 'redacted_thinking' }), 'redacted_thinking');
  assert.equal(blockType({ type: 'tool_use', id: 'i', name: 'Bash' }), 'tool_use');
  assert.equal(blockType({ type: 'tool_use', id: 'i' }), null);
  assert.equal(blockType({ type: 'tool_use', name: 'Bash' }), null);
  assert.equal(blockType({ type: 'tool_use', id: 1, name: 'Bash' }), null);
  assert.equal(blockType({ type: 'tool_result', tool_use_id: 'i' }), 'tool_result');
  assert.equal(blockType({ type: 'tool_result', tool_use_id: 5 }), null);
  assert.equal(blockType({ type: 'tool_result' }), null);
  for (const type of ['image', 'Text', '', undefined]) assert.equal(blockType({ type, text: 'x' }), null);
});

test('rawBlocks: the objects of message.content in order, the very objects; nothing without a list', () => {
  const first = { type: 'text', text: 'a' };
  const second = { type: 'mystery' };
  const blocks = rawBlocks({ message: { content: [1, first, null, ['x'], 'y', second] } });
  assert.equal(blocks.length, 2);
  assert.equal(blocks[0], first);
  assert.equal(blocks[1], second);
  assert.deepEqual(rawBlocks({ message: { content: 'a prompt' } }), []);
  assert.deepEqual(rawBlocks({ message: { content: { 0: first, length: 1 } } }), []);
  assert.deepEqual(rawBlocks({ message: [first] }), []);
  assert.deepEqual(rawBlocks({ message: null }), []);
  assert.deepEqual(rawBlocks({ content: [first] }), []);
});

test('asBlock and contentBlocks: understood blocks as they are, the others left out', () => {
  const text = { type: 'text', text: 'a' };
  const use = { type: 'tool_use', id: 'u', name: 'Read', input: {} };
  assert.equal(asBlock(text), text);
  assert.equal(asBlock({ type: 'text' }), null);
  const line = { message: { content: [{ type: 'image' }, text, { type: 'tool_use', id: 'u' }, 'z', use] } };
  const blocks = contentBlocks(line);
  assert.equal(blocks.length, 2);
  assert.equal(blocks[0], text);
  assert.equal(blocks[1], use);
  assert.deepEqual(contentBlocks({ message: { content: [{ type: 'other' }] } }), []);
  assert.deepEqual(contentBlocks({}), []);
});

test('resultText: a string as is, a lazy string decoded, text parts joined by newlines, else empty', () => {
  assert.equal(resultText(toolResult('plain')), 'plain');
  assert.equal(resultText(toolResult('')), '');
  assert.equal(resultText(toolResult(lazy('decoded'))), 'decoded');
  assert.equal(resultText(toolResult(undefined)), '');
  assert.equal(resultText(toolResult(42)), '');
  assert.equal(resultText(toolResult({ text: 'not a list' })), '');
  assert.equal(resultText(toolResult([])), '');
  assert.equal(
    resultText(
      toolResult([{ type: 'text', text: 'one' }, { type: 'image' }, 'x', null, { text: 2 }, { text: 'two' }]),
    ),
    'one\ntwo',
  );
  // An empty first part adds no separator before the next one.
  assert.equal(resultText(toolResult([{ text: '' }, { text: 'b' }])), 'b');
  assert.equal(resultText(toolResult([{ text: 'a' }, { text: '' }, { text: 'c' }])), 'a\n\nc');
});

test('resultTextLazy: a lazy string stays the same lazy object; anything else as resultText reads it', () => {
  const long = lazy('kept undecoded');
  assert.equal(resultTextLazy(toolResult(long)), long);
  assert.equal(resultTextLazy(toolResult('s')), 's');
  assert.equal(resultTextLazy(toolResult([{ text: 'x' }, { text: 'y' }])), 'x\ny');
  assert.equal(resultTextLazy(toolResult(undefined)), '');
});

test('lineTypeOf and systemSubtypeOf: every kind and subtype subtee reads, by name', () => {
  for (const type of ['assistant', 'user', 'system', 'result', 'stream_event'])
    assert.equal(lineTypeOf({ type }), type);
  assert.equal(lineTypeOf({ type: 'control_request' }), null);
  assert.equal(lineTypeOf({ type: 5 }), null);
  const subtypes = [
    'init',
    'status',
    'task_started',
    'task_progress',
    'task_updated',
    'task_notification',
    'background_tasks_changed',
  ];
  for (const subtype of subtypes) assert.equal(systemSubtypeOf({ type: 'system', subtype }), subtype);
  assert.equal(systemSubtypeOf({ type: 'system', subtype: 'hook_response' }), null);
  assert.equal(systemSubtypeOf({ type: 'system', subtype: 1 }), null);
  assert.equal(systemSubtypeOf({ type: 'user', subtype: 'init' }), null);
});

test('asStreamLine: the same object when its discriminating fields have their shape, else null', () => {
  const accepted = [
    { type: 'assistant', message: { content: [] } },
    { type: 'user', message: {} },
    { type: 'system', subtype: '' },
    { type: 'result' },
    { type: 'stream_event', event: {} },
  ];
  for (const line of accepted) assert.equal(asStreamLine(line), line, line.type);
  const refused = [
    { type: 'assistant' },
    { type: 'assistant', message: [] },
    { type: 'user', message: 'text' },
    { type: 'user', message: null },
    { type: 'system' },
    { type: 'system', subtype: 3 },
    { type: 'stream_event' },
    { type: 'stream_event', event: [] },
    { type: 'rate_limit_event', message: {} },
    {},
  ];
  for (const line of refused) assert.equal(asStreamLine(line), null, JSON.stringify(line));
});

test('channelIdOf: a non-empty parent_tool_use_id, else null for main', () => {
  assert.equal(channelIdOf({ parent_tool_use_id: 'toolu_1' }), 'toolu_1');
  for (const id of ['', null, undefined, 7]) assert.equal(channelIdOf({ parent_tool_use_id: id }), null);
  assert.equal(channelIdOf({}), null);
});

test('usageNumbers: counts kept by name (whole, zero included); ' +
  'nested, text, negative, absurd and non-finite dropped', () => {
  assert.deepEqual(
    usageNumbers({
      input_tokens: 12,
      output_tokens: 0,
      cache_read_input_tokens: 3.5,
      server_tool_use: { web_search_requests: 1 },
      service_tier: 'standard',
      bad: Number.NaN,
      huge: Number.POSITIVE_INFINITY,
      low: Number.NEGATIVE_INFINITY,
      missing: null,
      negative: -4,
      absurd: 10_000_001,
    }),
    { input_tokens: 12, output_tokens: 0, cache_read_input_tokens: 3 },
  );
  for (const usage of [null, undefined, 5, 'x', [1, 2]]) assert.deepEqual(usageNumbers(usage), {});
});

test('the spawn tools are Agent and Task; an async launch is told by its leading words', () => {
  assert.deepEqual([...SPAWN_TOOLS].sort(), ['Agent', 'Task']);
  assert.equal(SPAWN_TOOLS.has('Bash'), false);
  assert.equal(ASYNC_LAUNCH.test('Async agent launched successfully.'), true);
  assert.equal(ASYNC_LAUNCH.test('\n \tAsync agent launched successfully.'), true);
  assert.equal(ASYNC_LAUNCH.test('Report: Async agent launched'), false);
  assert.equal(ASYNC_LAUNCH.test('x\nAsync agent launched'), false);
  assert.equal(ASYNC_LAUNCH.test('Async agent finished'), false);
});
