// The shared pieces of the coding-agent mappers (src/adapters/stream-lines.ts): the line builders
// and the field readers, each line compared whole with the stream-json shape it should have.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  argumentsOf,
  assistantLine,
  eventLine,
  finite,
  initLine,
  isoFromMs,
  MappedLines,
  promptLine,
  resultLine,
  shellResultText,
  taskNotificationLine,
  taskStartedLine,
  textLine,
  textOf,
  timestampOf,
  toolResultBlock,
  toolResultLine,
  toolUseBlock,
  transcriptOfSpawned,
  usageOf,
} from '../src/adapters/stream-lines.js';
import { init, prompt, result, text } from './helpers/expected-lines.js';


test('stream lines: placeholders, arguments, times, shell results and usage by dotted field names', () => {
  assert.deepEqual(eventLine('codex', { type: 'item.completed' }, 'ch'), {
    type: 'producer_event',
    producer: 'codex',
    event: 'item.completed',
    parent_tool_use_id: 'ch',
  });
  assert.deepEqual(eventLine('gemini', { type: 'x'.repeat(150) }, null), {
    type: 'producer_event',
    producer: 'gemini',
    event: 'x'.repeat(100),
    parent_tool_use_id: null,
  });
  assert.equal(eventLine('gemini', { type: 5 }, null).event, null);
  assert.equal(eventLine('gemini', {}, null).event, null);

  assert.deepEqual(argumentsOf({ a: 1 }), { a: 1 });
  assert.deepEqual(argumentsOf('{"a":1}'), { a: 1 });
  assert.deepEqual(argumentsOf('[1]'), { input: '[1]' });
  assert.deepEqual(argumentsOf('not json'), { input: 'not json' });
  assert.deepEqual(argumentsOf(''), { input: '' });
  assert.deepEqual(argumentsOf(4), { input: 4 });
  assert.deepEqual(argumentsOf([1]), { input: [1] });
  assert.deepEqual(argumentsOf(null), {});
  assert.deepEqual(argumentsOf(undefined), {});

  assert.equal(isoFromMs(0), '1970-01-01T00:00:00.000Z');
  assert.equal(isoFromMs(8.64e15), '+275760-09-13T00:00:00.000Z');
  assert.equal(isoFromMs(-8.64e15), '-271821-04-20T00:00:00.000Z');
  assert.equal(isoFromMs(8.64e15 + 1), null);
  assert.equal(isoFromMs(-8.64e15 - 1), null);
  assert.equal(isoFromMs('1000'), null);
  assert.equal(isoFromMs(Infinity), null);
  assert.equal(finite(NaN), undefined);
  assert.equal(finite(-Infinity), undefined);
  assert.equal(finite('1'), undefined);
  assert.equal(finite(-2.5), -2.5);

  assert.equal(shellResultText('out', undefined), 'out');
  assert.equal(shellResultText('out', 0), 'out\n[exit code 0]');
  assert.equal(shellResultText('out\n', 2), 'out\n[exit code 2]');
  assert.equal(shellResultText('', -1), '[exit code -1]');

  assert.equal(textOf('t'), 't');
  assert.equal(textOf(''), '');
  assert.equal(textOf(null), '');
  assert.equal(textOf(undefined), '');
  assert.equal(textOf(0), '0');
  assert.equal(textOf(false), 'false');
  assert.equal(textOf({ a: [1] }), '{"a":[1]}');

  const names = { input_tokens: 'in', cache_read_input_tokens: 'cache.read', deep: 'a.b.c' };
  assert.deepEqual(usageOf({ in: 1, cache: { read: 2 }, a: { b: { c: 3 } } }, names), {
    input_tokens: 1,
    cache_read_input_tokens: 2,
    deep: 3,
  });
  assert.deepEqual(usageOf({ in: 0, cache: 5, a: { b: 'x' } }, names), { input_tokens: 0 });
  assert.equal(usageOf({ in: '1', cache: null }, names), null);
  assert.equal(usageOf({}, names), null);
  assert.equal(usageOf('x', names), null);
  assert.equal(usageOf([1], names), null);
  assert.equal(timestampOf({ timestamp: '' }), null);
  assert.equal(timestampOf({ timestamp: 5 }), null);
  assert.equal(timestampOf({ timestamp: 'T' }), 'T');
});

test('stream lines: each line builder makes the ' +
  'stream-json shape, with a time only when there is one', () => {
  const ts = '2026-12-01T00:00:00.000Z';
  assert.deepEqual(taskStartedLine('t', 'agent', 'desc', ts), {
    type: 'system',
    subtype: 'task_started',
    tool_use_id: 't',
    subagent_type: 'agent',
    description: 'desc',
    parent_tool_use_id: 't',
    timestamp: ts,
  });
  assert.deepEqual(taskStartedLine('t', null, null, null), {
    type: 'system',
    subtype: 'task_started',
    tool_use_id: 't',
    subagent_type: null,
    description: null,
    parent_tool_use_id: 't',
  });
  assert.deepEqual(taskNotificationLine('t', 'failed', 'why', ts), {
    type: 'system',
    subtype: 'task_notification',
    tool_use_id: 't',
    status: 'failed',
    summary: 'why',
    parent_tool_use_id: 't',
    timestamp: ts,
  });
  assert.deepEqual(initLine('p', '1.0', 's', 'm', null), init('p', '1.0', 's', 'm', null));
  assert.deepEqual(resultLine(false, 'r', null, { a: 1 }, 0, ts), result(false, 'r', null, { a: 1 }, 0, ts));
  assert.equal('duration_ms' in resultLine(true, null, null, null, null, null), false);
  assert.equal('usage' in resultLine(true, null, null, null, null, null), false);
  assert.deepEqual(toolResultBlock('u', 'c', false), { type: 'tool_result', tool_use_id: 'u', content: 'c' });
  assert.deepEqual(toolResultLine('ch', [], null), {
    type: 'user',
    message: { role: 'user', content: [] },
    parent_tool_use_id: 'ch',
  });
  assert.deepEqual(promptLine(null, 'p', ts), prompt(null, 'p', ts));
  assert.deepEqual(textLine('c', 'i', 'w', null), text('c', 'i', 'w', null));
  assert.deepEqual(assistantLine(null, null, [], null, null), {
    type: 'assistant',
    message: { id: null, type: 'message', role: 'assistant', content: [] },
    parent_tool_use_id: null,
  });
  assert.deepEqual(toolUseBlock('i', 'n', { a: 1 }), {
    type: 'tool_use',
    id: 'i',
    name: 'n',
    input: { a: 1 },
  });
  assert.equal(transcriptOfSpawned(new Set(['a']), 'a'), 'spawn-and-result');
  assert.equal(transcriptOfSpawned(new Set(['a']), 'b'), 'stream');
  assert.equal(transcriptOfSpawned(new Set(['null']), null), 'stream');

  const mapped = new MappedLines();
  mapped.push({ n: 1 }, false);
  assert.equal(mapped.of(null).own, -1);
  mapped.push({ n: 2 });
  mapped.push({ n: 3 });
  mapped.push({ n: 4 }, true);
  assert.deepEqual(mapped.of('c'), { channel: 'c', own: 1, lines: [{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }] });
});
