import assert from 'node:assert/strict';
import { test } from 'node:test';
import { lineTypeOf, systemSubtypeOf } from '../src/entry/model.js';

test('lineTypeOf: the kinds subtee reads, null for any other type, without reading the shape', () => {
  for (const type of ['assistant', 'user', 'system', 'result', 'stream_event'] as const)
    assert.equal(lineTypeOf({ type }), type);
  // No `message`: still an assistant line by its kind (asStreamLine would refuse it).
  assert.equal(lineTypeOf({ type: 'assistant' }), 'assistant');
  for (const type of ['rate_limit_event', 'Assistant', '', 7, null, undefined])
    assert.equal(lineTypeOf({ type }), null, String(type));
  assert.equal(lineTypeOf({}), null);
});

test('systemSubtypeOf: a system line whose subtype subtee reads; null for other lines and subtypes', () => {
  assert.equal(systemSubtypeOf({ type: 'system', subtype: 'init' }), 'init');
  assert.equal(systemSubtypeOf({ type: 'system', subtype: 'task_notification' }), 'task_notification');
  assert.equal(systemSubtypeOf({ type: 'system', subtype: 'compact_boundary' }), null);
  assert.equal(systemSubtypeOf({ type: 'result', subtype: 'init' }), null);
  assert.equal(systemSubtypeOf({ type: 'system' }), null);
});
