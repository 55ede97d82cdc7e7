import assert from 'node:assert/strict';
import { test } from 'node:test';
import { open, type SubagentHandle } from '../src/index.js';

// A spawn id carrying OSC 0 (set the window title) and CSI 2J (clear the screen).
const SEQUENCES = '\x1b]0;X\x07\x1b[2J';
const ID = `A${SEQUENCES}`;
const ESCAPED_ID = 'A\\x1b]0;X\\x07\\x1b[2J';

/** A run whose one subagent, spawned under ID, writes `texts` lines. */
async function* hostileRun(texts: number): AsyncGenerator<string> {
  yield JSON.stringify({ type: 'system', subtype: 'init', claude_code_version: '2.1.328' }) + '\n';
  const spawn = { type: 'tool_use', id: ID, name: 'Agent', input: { description: 'd' } };
  yield JSON.stringify({
    type: 'assistant',
    message: { id: 'm', content: [spawn] },
    parent_tool_use_id: null,
  }) + '\n';
  for (let i = 0; i < texts; i++) {
    yield JSON.stringify({
      type: 'assistant',
      message: { id: `m${i}`, content: [{ type: 'text', text: `t${i}` }] },
      parent_tool_use_id: ID,
    }) + '\n';
  }
}

const RAW_CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

test("READER_STALLED's process warning shows a channel id's terminal sequences escaped", async () => {
  const run = open(hostileRun(50), { readerStallMs: 1, readerHighWaterLines: 1 });
  const processWarned = new Promise<Error & { code?: string }>((resolve) => {
    const onWarning = (warning: Error & { code?: string }) => {
      if (warning.code !== 'READER_STALLED') return;
      process.off('warning', onWarning);
      resolve(warning);
    };
    process.on('warning', onWarning);
  });
  const subagents = run.subagents[Symbol.asyncIterator]();
  const handle = (await subagents.next()).value as SubagentHandle;
  assert.equal(handle.id, ID);
  const messages = handle.messages[Symbol.asyncIterator]();
  await messages.next(); // held: the input waits for this reader
  const warning = await processWarned;
  assert.ok(!RAW_CONTROL.test(warning.message), JSON.stringify(warning.message));
  assert.ok(warning.message.includes(`messages of ${ESCAPED_ID}:`), warning.message);
  await messages.return!();
  await subagents.return!();
  const index = await run.done;
  // index.json keeps the id as it was (JSON escapes it there).
  const stalled = index.warnings.find((w) => w.code === 'READER_STALLED');
  assert.ok(stalled?.message.includes(`messages of ${ID}:`));
});

test('ERR_PROJECTION_BUFFER names a channel with its terminal sequences escaped', async () => {
  const run = open(hostileRun(50), { maxBufferedBytes: 0 });
  await run.done;
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  assert.equal(handles.length, 1);
  await assert.rejects(
    async () => {
      for await (const _m of handles[0].messages);
    },
    (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_PROJECTION_BUFFER');
      assert.ok(!RAW_CONTROL.test(err.message), JSON.stringify(err.message));
      assert.ok(err.message.includes(`channel ${ESCAPED_ID} from its start`), err.message);
      return true;
    },
  );
});

test("a failed subagent's ERR_SUBAGENT_FAILED message escapes its label and reason, its fields " +
  'keep them raw', async () => {
  async function* failing(): AsyncGenerator<string> {
    yield* hostileRun(1);
    const result = { type: 'tool_result', tool_use_id: ID, is_error: true, content: `bad${SEQUENCES}` };
    yield JSON.stringify({ type: 'user', message: { content: [result] }, parent_tool_use_id: null }) + '\n';
  }
  const run = open(failing());
  const handles: SubagentHandle[] = [];
  for await (const handle of run.allSubagents) handles.push(handle);
  await run.done;
  await assert.rejects(handles[0].output, (err: Error & { code?: string; id?: string; error?: string }) => {
    assert.equal(err.code, 'ERR_SUBAGENT_FAILED');
    assert.ok(!RAW_CONTROL.test(err.message), JSON.stringify(err.message));
    assert.equal(err.id, ID);
    assert.ok(err.error?.includes(SEQUENCES), JSON.stringify(err.error));
    return true;
  });
});
