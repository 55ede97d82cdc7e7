import assert from 'node:assert/strict';
import { test } from 'node:test';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { open } from '../src/index.js';
import { startRun } from './e2e/deep-agents.js';
import { FAILURES, type compare, type Told } from './e2e/deep-agents-failures.js';
import { ROOT } from './helpers/helpers.js';

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


for (const what of Object.keys(FAILURES)) {
  test(`failures read as on Deep Agents' own projection of the same run: ${what}`, () => {
    const script = join(ROOT, 'dist', 'test', 'e2e', 'deep-agents-failures.js');
    const child = spawnSync(process.execPath, [script, what], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(child.status, 0, child.stderr);
    const { own, ours, ownRunError, output, done, loopsRejected } = JSON.parse(child.stdout) as Awaited<
      ReturnType<typeof compare>
    >;
    // The run failed: Deep Agents rejects its output; subtee's says failed with the same error,
    // and done resolves (the index), as for a failed Claude Code run.
    assert.ok(ownRunError);
    assert.deepEqual(output, { status: 'failed', error: ownRunError, result: null });
    assert.equal(done.resolved, true, done.code);
    // Deep Agents' loops (subagents, toolCalls) reject with the run's error; subtee's end.
    assert.ok(loopsRejected.own > 0);
    assert.equal(loopsRejected.ours, 0);
    // The same subagents, names and spawning calls; each call ends as Deep Agents says.
    const calls = (told: Told[]) => told.map(({ name, id, call, callError }) => ({ name, id, call, callError }));
    assert.deepEqual(calls(ours), calls(own));
    assert.ok(ours.some((t) => t.call === 'error') && own.length > 1);
    for (const [at, mine] of ours.entries()) {
      // What Deep Agents rejects subtee rejects; a subagent whose spawning call failed failed.
      if (own[at].rejected) assert.ok(mine.rejected, mine.id);
      assert.equal(mine.rejected !== null, mine.call === 'error', mine.id);
      assert.equal(done.statuses?.[mine.id], mine.call === 'error' ? 'failed' : 'completed', mine.id);
      if (!mine.rejected) continue;
      assert.deepEqual(
        { ...mine.rejected, message: mine.rejected.message.startsWith(`Subagent ${mine.name} failed`) },
        {
          message: true,
          subagentError: true,
          code: 'ERR_SUBAGENT_FAILED',
          status: 'failed',
          error: mine.callError,
          summary: mine.callError,
          outputStatus: 'failed',
        },
      );
    }
    if (what.includes('depth 2')) {
      // Deep Agents resolves the output of a subagent whose model threw (its own lifecycle
      // says completed) while its spawning call says error; subtee reports it failed.
      const thrower = own.find((t) => t.id === 'call_a1_0')!;
      assert.deepEqual([thrower.rejected, thrower.call], [null, 'error']);
    }
  });
}
