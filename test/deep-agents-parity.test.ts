import assert from 'node:assert/strict';
import { test } from 'node:test';
import { open } from '../src/index.js';
import { startRun } from './e2e/deep-agents.js';

/** What a Deep Agents program reads of a subagent handle; subtee's handles have the same shape. */
interface HandleLike {
  readonly name: string | null;
  readonly cause: { readonly tool_call_id: string };
  readonly subagents: AsyncIterable<HandleLike>;
}

/**
 * A Deep Agents program, written for Deep Agents' own run stream: the top level from
 * `run.subagents`, the nested ones from each handle's `subagents`.
 */
async function printTree(run: { subagents: AsyncIterable<HandleLike> }): Promise<string[]> {
  const printed: string[] = [];
  async function visit(sub: HandleLike, depth: number): Promise<void> {
    printed.push(`${'  '.repeat(depth)}${sub.name} (${sub.cause.tool_call_id})`);
    for await (const nested of sub.subagents) await visit(nested, depth + 1);
  }
  for await (const sub of run.subagents) await visit(sub, 0);
  return printed;
}

test("a Deep Agents program prints the same tree on subtee's projection as on Deep Agents", async () => {
  const onDeepAgents = await printTree(
    (await startRun()) as unknown as { subagents: AsyncIterable<HandleLike> },
  );
  const run = open(await startRun());
  const onSubtee = await printTree(run);
  await run.done;
  assert.ok(onDeepAgents.length >= 5, onDeepAgents.join('\n'));
  assert.deepEqual(onSubtee, onDeepAgents);
});
