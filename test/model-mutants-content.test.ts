// lineContent (src/model/content.ts): what each kind of line and block becomes, the display
// overrides an earlier stage sets, and the lines that carry no content at all.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lineContent } from '../src/model/content.js';
import { LazyText } from '../src/model/scan.js';

const assistant = (content: unknown[]) => ({ type: 'assistant', message: { content } });
const user = (content: unknown) => ({ type: 'user', message: { content } });

test('lines without content: other kinds, a system line, an assistant line with no message', () => {
  for (const line of [
    { type: 'system', subtype: 'init', message: { content: [{ type: 'text', text: 'x' }] } },
    { type: 'stream_event', event: {}, message: { content: [{ type: 'text', text: 'x' }] } },
    { type: 'rate_limit_event' },
    { type: 'assistant' },
    { type: 'user', message: 'hello' },
    {},
  ]) {
    const items = lineContent(line);
    assert.equal(items.length, 0, JSON.stringify(line));
    assert.ok(Object.isFrozen(items), 'the shared empty answer cannot be changed by a caller');
  }
});

test('a result line is one run item: its subtype, its text, is_error true only when true', () => {
  assert.deepEqual(lineContent({ type: 'result', subtype: 'success', result: 'all done', is_error: false }), [
    { kind: 'run', subtype: 'success', text: 'all done', isError: false },
  ]);
  assert.deepEqual(lineContent({ type: 'result', subtype: 'error_max_turns', is_error: true }), [
    { kind: 'run', subtype: 'error_max_turns', text: null, isError: true },
  ]);
  assert.deepEqual(lineContent({ type: 'result', subtype: 4, result: 9, is_error: 'true' }), [
    { kind: 'run', subtype: 'result', text: null, isError: false },
  ]);
  assert.deepEqual(lineContent({ type: 'result', result: '' }), [
    { kind: 'run', subtype: 'result', text: '', isError: false },
  ]);
});

test('assistant blocks in order: text, thinking, redacted thinking, tool_use; unknown blocks skipped', () => {
  const input = { command: 'ls' };
  assert.deepEqual(
    lineContent(
      assistant([
        { type: 'text', text: 'hello' },
        { type: 'image', source: {} },
        { type: 'thinking', thinking: 'hmm', signature: 's' },
        { type: 'thinking', signature: 'only' },
        { type: 'redacted_thinking', data: 'zz' },
        { type: 'tool_use', id: 'toolu_1', name: 'Bash', input },
        { type: 'text', text: 7 },
      ]),
    ),
    [
      { kind: 'text', text: 'hello' },
      { kind: 'thinking', text: 'hmm', redacted: false },
      { kind: 'thinking', text: '', redacted: false },
      { kind: 'thinking', text: '', redacted: true },
      { kind: 'tool_use', id: 'toolu_1', name: 'Bash', input },
    ],
  );
});

test('user lines: text blocks are prompts, tool results keep text and error flag, a string is one', () => {
  assert.deepEqual(
    lineContent(
      user([
        { type: 'text', text: 'do it' },
        {
          type: 'tool_result',
          tool_use_id: 'a',
          content: [
            { type: 'text', text: 'x' },
            { type: 'text', text: 'y' },
          ],
        },
        { type: 'tool_result', tool_use_id: 'b', content: 'boom', is_error: true },
        { type: 'tool_result', tool_use_id: 'c', content: 'soft', is_error: 'yes' },
      ]),
    ),
    [
      { kind: 'prompt', text: 'do it' },
      { kind: 'tool_result', id: 'a', text: 'x\ny', isError: false },
      { kind: 'tool_result', id: 'b', text: 'boom', isError: true },
      { kind: 'tool_result', id: 'c', text: 'soft', isError: false },
    ],
  );
  assert.deepEqual(lineContent(user('a plain prompt')), [{ kind: 'prompt', text: 'a plain prompt' }]);
  // A string content on an assistant line is not a prompt.
  assert.deepEqual(lineContent({ type: 'assistant', message: { content: 'stray' } }), []);
  assert.deepEqual(lineContent(user(5)), []);
});

test('a long tool result left lazy stays the same lazy object', () => {
  const bytes = Buffer.from('lazy result') as unknown as ConstructorParameters<typeof LazyText>[0];
  const text = new LazyText(bytes, 0, 11, 11, false);
  const [item] = lineContent(user([{ type: 'tool_result', tool_use_id: 'a', content: text }]));
  assert.equal(item.kind, 'tool_result');
  assert.equal(item.kind === 'tool_result' && item.text, text);
});

test('display overrides: by raw block index, a string replaces thinking text, null hides any block', () => {
  const line = assistant([
    { type: 'thinking', thinking: 'long thoughts' },
    'not an object',
    { type: 'text', text: 'visible' },
    { type: 'thinking', thinking: 'hidden thoughts' },
    { type: 'tool_use', id: 'u', name: 'Read', input: {} },
  ]);
  // Index 2 is the second thinking block: the raw list counts objects only.
  const display = new Map<number, string | null>([
    [0, 'long…'],
    [2, null],
    [1, 'a text block keeps its own text'],
  ]);
  assert.deepEqual(lineContent(line, display), [
    { kind: 'thinking', text: 'long…', redacted: false },
    { kind: 'text', text: 'visible' },
    { kind: 'tool_use', id: 'u', name: 'Read', input: {} },
  ]);
  assert.deepEqual(lineContent(line, new Map([[5, null]])), [
    { kind: 'thinking', text: 'long thoughts', redacted: false },
    { kind: 'text', text: 'visible' },
    { kind: 'thinking', text: 'hidden thoughts', redacted: false },
    { kind: 'tool_use', id: 'u', name: 'Read', input: {} },
  ]);
  // An empty override is shown as empty, not replaced by the block's text.
  assert.deepEqual(lineContent(assistant([{ type: 'thinking', thinking: 't' }]), new Map([[0, '']])), [
    { kind: 'thinking', text: '', redacted: false },
  ]);
});
