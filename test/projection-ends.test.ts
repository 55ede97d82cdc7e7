import assert from 'node:assert/strict';
import { test } from 'node:test';
import { open, type SubagentHandle, type ToolCall } from '../src/index.js';
import { chunked } from './helpers/helpers.js';

const line = (v: Record<string, unknown>) => JSON.stringify(v);
const spawnLine = line({
  type: 'assistant',
  parent_tool_use_id: null,
  message: {
    id: 'm1',
    content: [{ type: 'tool_use', id: 'toolu_sub', name: 'Agent', input: { subagent_type: 'Explore' } }],
  },
});
const toolUse = (id: string) =>
  line({
    type: 'assistant',
    parent_tool_use_id: 'toolu_sub',
    message: {
      id: `m-${id}`,
      content: [{ type: 'tool_use', id, name: 'Bash', input: { command: 'false' } }],
    },
  });
const toolResult = (id: string, content: string, isError: boolean) =>
  line({
    type: 'user',
    parent_tool_use_id: 'toolu_sub',
    message: { content: [{ type: 'tool_result', tool_use_id: id, content, is_error: isError }] },
  });

test('a subagent still running when the input ends: its output and status say interrupted', async () => {
  // The stream stops mid-run: no task_notification, no result line.
  const input = Buffer.from([spawnLine, toolUse('toolu_a')].join('\n') + '\n');
  const run = open(chunked([input]));
  const handles: SubagentHandle[] = [];
  for await (const handle of run.subagents) handles.push(handle);
  const index = await run.done;
  assert.equal(handles.length, 1);
  const output = await handles[0].output;
  assert.equal(output.status, 'interrupted');
  assert.equal(output.error, null);
  assert.equal(handles[0].status, 'interrupted');
  // index.json keeps the tree's own word: the channel was still running.
  assert.equal(index.channels.find((c) => c.id === 'toolu_sub')?.status, 'running');
});

test('a failed tool call: its error carries the text, its output none; a good one the reverse', async () => {
  const input = Buffer.from(
    [
      spawnLine,
      toolUse('toolu_bad'),
      toolResult('toolu_bad', 'exit status 1', true),
      toolUse('toolu_good'),
      toolResult('toolu_good', 'listed', false),
    ].join('\n') + '\n',
  );
  const run = open(chunked([input]));
  const calls: ToolCall[] = [];
  for await (const handle of run.subagents) for await (const call of handle.toolCalls) calls.push(call);
  await run.done;
  const settled = await Promise.all(
    calls.map(async (c) => [c.callId, await c.status, await c.output, await c.error]),
  );
  assert.deepEqual(settled, [
    ['toolu_bad', 'error', null, 'exit status 1'],
    ['toolu_good', 'finished', 'listed', null],
  ]);
});
