// lineContent (src/model/content.ts): what each kind of line and block becomes, the display
// overrides an earlier stage sets, and the lines that carry no content at all.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fullThinking, lineContent } from '../src/model/content.js';
import { displayPolicy } from '../src/model/display.js';
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

test('the display policy shows thinking: whole, cut around one marker, as a note, or not at all', () => {
  const line = assistant([
    { type: 'thinking', thinking: 'long thoughts here' },
    'not an object',
    { type: 'text', text: 'visible' },
    { type: 'thinking', thinking: 'short' },
    { type: 'tool_use', id: 'u', name: 'Read', input: {} },
  ]);
  const rest = [
    { kind: 'text', text: 'visible' },
    { kind: 'tool_use', id: 'u', name: 'Read', input: {} },
  ];
  assert.deepEqual(lineContent(line, displayPolicy({ thinking: 'drop' })), rest);
  assert.deepEqual(lineContent(line), [
    { kind: 'thinking', text: 'long thoughts here', redacted: false },
    rest[0],
    { kind: 'thinking', text: 'short', redacted: false },
    rest[1],
  ]);
  const cut = lineContent(line, displayPolicy({ thinking: 'truncate', thinkingChars: 10 }));
  assert.deepEqual(
    cut.map((i) => (i.kind === 'thinking' ? String(i.text) : i.kind)),
    ['long th […8 chars cut…] ere', 'text', 'short', 'tool_use'],
  );
  const filed = lineContent(line, displayPolicy({ thinking: 'file' }));
  assert.equal(String((filed[0] as { text: string }).text), '(18 chars, in the .thinking.log beside this transcript)');
  // A thinking block on a user line is shown through the same policy.
  const user = { type: 'user', message: { content: [{ type: 'thinking', thinking: 'long thoughts here' }] } };
  assert.deepEqual(lineContent(user, displayPolicy({ thinking: 'drop' })), []);
  assert.deepEqual(lineContent(user, displayPolicy({ thinking: 'truncate', thinkingChars: 10 })), [
    { kind: 'thinking', text: 'long th […8 chars cut…] ere', redacted: false },
  ]);
  assert.deepEqual(fullThinking(user), ['long thoughts here']);
});
