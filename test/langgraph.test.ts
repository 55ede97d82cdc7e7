import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { test } from 'node:test';
import { open, type Message, type SubagentHandle } from '../src/index.js';
import { teeJsonl } from '../src/entry/adapters.js';
import { NESTED_SCRIPT, startRun } from './e2e/deep-agents.js';
import { BIN, tmpDir } from './helpers/helpers.js';

interface Seen {
  id: string;
  name: string | null;
  parent: string | null;
  depth: number;
  status: string;
  texts: string[];
  toolCalls: Array<{ id: string; name: string }>;
}

/** Deep Agents' own view: `run.subagents`, nested handles, each handle's messages and tool calls. */
async function deepAgentsView(run: Awaited<ReturnType<typeof startRun>>) {
  const seen: Seen[] = [];
  const walk = async (handle: any, parent: string | null, depth: number): Promise<void> => {
    const id = handle.cause?.tool_call_id as string;
    const texts: string[] = [];
    const toolCalls: Seen['toolCalls'] = [];
    const children: Promise<void>[] = [];
    await Promise.all([
      (async () => {
        for await (const m of handle.messages) texts.push(await m.text);
      })(),
      (async () => {
        for await (const call of handle.toolCalls) toolCalls.push({ id: call.callId, name: call.name });
      })(),
      (async () => {
        for await (const child of handle.subagents) children.push(walk(child, id, depth + 1));
      })(),
    ]);
    await Promise.all(children);
    const status = await handle.output.then(
      () => 'completed',
      () => 'failed',
    );
    seen.push({ id, name: handle.name, parent, depth, status, texts, toolCalls });
  };
  const top: Promise<void>[] = [];
  const mainTexts: string[] = [];
  await Promise.all([
    (async () => {
      for await (const handle of run.subagents) top.push(walk(handle, null, 1));
    })(),
    (async () => {
      for await (const m of run.messages) mainTexts.push(await m.text);
    })(),
  ]);
  await Promise.all(top);
  return { subagents: seen.sort((a, b) => a.id.localeCompare(b.id)), mainTexts };
}

/** subtee's projection of the same run: handles, their model messages and tool calls. */
async function subteeView(projection: ReturnType<typeof open>) {
  const seen: Seen[] = [];
  const modelTexts = async (messages: AsyncIterable<Message>) => {
    const texts: string[] = [];
    // One message per model call, as Deep Agents yields them.
    for await (const m of messages) if (m.role === 'assistant') texts.push(await m.text);
    return texts;
  };
  const handles: SubagentHandle[] = [];
  const mainTexts = modelTexts(projection.messages);
  for await (const handle of projection.allSubagents) handles.push(handle);
  for (const handle of handles) {
    const toolCalls: Seen['toolCalls'] = [];
    for await (const call of handle.toolCalls)
      toolCalls.push({ id: call.id, name: call.name === 'Agent' ? 'task' : call.name });
    seen.push({
      id: handle.id,
      name: handle.name,
      parent: handle.path.length > 1 ? handle.path[handle.path.length - 2] : null,
      depth: handle.depth ?? -1,
      status: handle.status,
      texts: await modelTexts(handle.messages),
      toolCalls,
    });
  }
  return {
    subagents: seen.sort((a, b) => a.id.localeCompare(b.id)),
    mainTexts: await mainTexts,
    index: await projection.done,
  };
}

test('Deep Agents side by side: subtee projects the same subagents, nesting, statuses, texts and tool calls as run.subagents', async () => {
  const run = await startRun();
  const dir = tmpDir();
  const recording = createWriteStream(join(dir, 'events.jsonl'));
  const [theirs, ours] = await Promise.all([
    deepAgentsView(run),
    subteeView(open(teeJsonl(run, recording), { out: join(dir, 'live') })),
  ]);
  recording.end();
  await finished(recording);

  assert.deepEqual(ours.subagents, theirs.subagents);
  assert.deepEqual(ours.mainTexts, theirs.mainTexts);
  // The script's tree, so the comparison above cannot pass on two empty views.
  assert.deepEqual(theirs.subagents.map((s) => [s.name, s.depth]).sort(), [
    ['analyst', 1],
    ['researcher', 2],
    ['writer', 1],
    ['writer', 3],
    ['writer', 3],
  ]);
  assert.ok(
    theirs.subagents.every((s) => s.status === 'completed' && s.texts.length >= 1),
    JSON.stringify(theirs.subagents),
  );
  assert.ok(theirs.subagents.some((s) => s.toolCalls.some((c) => c.name === 'ls')));

  const index = ours.index as { producer: string; channels: Array<Record<string, any>> };
  assert.equal(index.producer, 'langgraph');
  const main = index.channels[0];
  assert.equal(main.status, 'completed');
  assert.deepEqual(main.usage, NESTED_SCRIPT.root.usage);
  assert.equal(main.counts.thinking, 1);
  const analyst = index.channels.find((c) => c.agent === 'analyst')!;
  assert.deepEqual(analyst.usage, NESTED_SCRIPT.a1.usage);
  assert.equal(analyst.summary, 'a1 report: done.');
});

test('recorded LangGraph protocol events through the CLI: detected, and the same index.json as the live run', async () => {
  const run = await startRun();
  const dir = tmpDir();
  const recording = join(dir, 'events.jsonl');
  const file = createWriteStream(recording);
  const live = await open(teeJsonl(run, file), { out: join(dir, 'live') }).done;
  file.end();
  await finished(file);

  for (const flags of [[], ['--input-format', 'langgraph']]) {
    const out = join(dir, `replay${flags.length}`);
    const r = spawnSync(
      process.execPath,
      [BIN, '--out', out, '--stdout', 'none', '-q', ...flags, recording],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(
      JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')),
      live,
      flags.join(' ') || 'auto',
    );
  }
  // Forced the other way, the events are not read as subagents: nothing is guessed.
  const forced = join(dir, 'forced');
  const r = spawnSync(
    process.execPath,
    [BIN, '--out', forced, '--stdout', 'none', '-q', '--input-format', 'claude', recording],
    { encoding: 'utf8' },
  );
  assert.equal(r.status, 0, r.stderr);
  const index = JSON.parse(readFileSync(join(forced, 'index.json'), 'utf8'));
  assert.equal(index.producer, 'claude');
  assert.equal(index.channels.length, 1);
});
