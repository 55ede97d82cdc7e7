import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RunModel, type ModelEvent, type RunView } from '../src/entry/model.js';
import type { Stall } from '../src/model/in-flight.js';

const spawn = {
  type: 'assistant',
  parent_tool_use_id: null,
  message: {
    id: 'm1',
    model: 'claude-sonnet-4-5',
    usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    content: [
      { type: 'tool_use', id: 'toolu_a', name: 'Agent', input: { subagent_type: 'Explore', prompt: 'go' } },
    ],
  },
};
const inside = {
  type: 'assistant',
  parent_tool_use_id: 'toolu_a',
  message: {
    id: 'm2',
    model: 'claude-sonnet-4-5',
    usage: { input_tokens: 7, output_tokens: 3, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    content: [{ type: 'text', text: 'looking' }],
  },
};
const report = {
  type: 'user',
  parent_tool_use_id: null,
  message: { content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: 'found it' }] },
};

const brief = (e: ModelEvent) =>
  e.type === 'routed'
    ? `routed ${e.lineNo} on ${e.channel.id ?? 'main'}`
    : e.type === 'status'
      ? `status ${e.channel.id} ${e.channel.status} ${e.summary}`
      : `${e.type} ${e.channel.id} under ${e.channel.parent ?? 'main'} at depth ${e.channel.depth}`;

test("the model's events for a spawn, a subagent's line and its result: routed, opened, ended", () => {
  const model = new RunModel();
  const told: string[] = [];
  [spawn, inside, report].forEach((value, i) => {
    const routed = model.take(value, i + 1);
    told.push(brief(routed), ...routed.changes.map(brief));
  });
  assert.deepEqual(told, [
    'routed 1 on main',
    'open toolu_a under main at depth 1',
    'routed 2 on toolu_a',
    'routed 3 on main',
    'status toolu_a completed found it',
  ]);
  assert.equal(model.tree.get('toolu_a')?.status, 'completed');
});

test('every event the model says is frozen, and a stall is recorded as a frozen warning', () => {
  const model = new RunModel();
  const routed = model.take(spawn, 1);
  assert.ok(Object.isFrozen(routed));
  assert.ok(Object.isFrozen(routed.changes));
  assert.ok(routed.changes.every((c) => Object.isFrozen(c) && Object.isFrozen(c.channel)));
  // A line that changes nothing shares one empty, frozen list.
  const plain = model.take({ type: 'system', subtype: 'hook_response' }, 2);
  assert.deepEqual(plain.changes, []);
  assert.ok(Object.isFrozen(plain.changes));
  const stall = { silentMs: 5, allowedMs: 1, waitingOn: [] } as unknown as Stall;
  model.recordStall(stall, 'silent');
  assert.equal(model.stalled, true);
  assert.equal(model.stall, stall);
  assert.deepEqual(model.warnings, [{ code: 'STALL', message: 'silent' }]);
  assert.ok(Object.isFrozen(model.warnings[0]));
});

test("the model's usage per line: each channel's tokens from its own lines, the run's their sum", () => {
  const model = new RunModel();
  [spawn, inside, report].forEach((value, i) => model.take(value, i + 1));
  const view: RunView = model;
  const main = view.cost.channelCost(null);
  const sub = view.cost.channelCost('toolu_a');
  assert.equal(main?.tokens.input_tokens, 10);
  assert.equal(sub?.tokens.input_tokens, 7);
  assert.equal(main?.tokens.output_tokens, 5);
  assert.equal(sub?.tokens.output_tokens, 3);
  const all = [...view.cost.report().channels.values()];
  assert.equal(
    all.reduce((sum, c) => sum + c.tokens.input_tokens, 0),
    17,
  );
});

test('the model counts its own input: lines, blanks, bytes, quarantine, unwritten', () => {
  const model = new RunModel();
  model.countLines();
  model.countLines(4);
  model.countBlankLine();
  model.countBytes(120);
  model.countQuarantined(2);
  model.countQuarantined(7, 3);
  assert.deepEqual(
    { ...model.input },
    { lines: 5, blankLines: 1, bytes: 120, quarantined: 4, failed: 0, unwritten: 0 },
  );
  assert.deepEqual(model.quarantineLines.listed, [2, 7, 8, 9]);
  // After a failed output: what the folder holds is written, the rest of the lines read is not.
  assert.equal(model.recordUnwritten(3), 2);
  assert.equal(model.input.unwritten, 2);
  assert.equal(model.recordUnwritten(9), 0);
});
