import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { linesOf, type Reading } from './other-reader.js';
import type { OtherScenario } from './other-scenarios.js';

/** The stream itself shows what the scenario scripted (a check on the CLI and the stand-in API). */
export function checkScenario(reading: Reading, s: OtherScenario): void {
  const agents = [...reading.subagents.values()];
  assert.equal(agents.length, s.expect.subagents, `${s.name}: subagents in the stream`);
  assert.equal(
    agents.filter((a) => a.status === 'failed').length,
    s.expect.failedSubagents,
    `${s.name}: failed subagents`,
  );
  assert.ok(
    agents.every((a) => a.status !== 'running'),
    `${s.name}: every subagent ended`,
  );
  assert.equal(reading.commands.length, s.expect.commands, `${s.name}: commands`);
  assert.equal(
    reading.commands.filter((c) => c.failed).length,
    s.expect.failedCommands,
    `${s.name}: failed commands`,
  );
  assert.equal(reading.mainStatus, 'completed', `${s.name}: the run ended`);
  assert.ok(reading.usage.input_tokens > 0, `${s.name}: usage in the stream`);
}

/** Every line of the stream exactly once, byte for byte, in a channel's .jsonl or the quarantine. */
export function checkConservation(reading: Reading, out: string, name: string): any {
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const written: string[] = [];
  for (const channel of index.channels) {
    if (channel.jsonl && existsSync(join(out, channel.jsonl)))
      written.push(...linesOf(readFileSync(join(out, channel.jsonl))));
  }
  if (index.quarantine) written.push(...linesOf(readFileSync(join(out, index.quarantine))));
  assert.equal(written.length, reading.lines.length, `${name}: as many lines written as read`);
  assert.deepEqual([...written].sort(), [...reading.lines].sort(), `${name}: the same lines, byte for byte`);
  assert.equal(index.input.lines, reading.lines.length, `${name}: input lines`);
  return index;
}

/** index.json against the independent reading: channels, nesting, statuses, tool calls, usage. */
export function checkIndex(index: any, reading: Reading, producer: string, name: string): void {
  assert.equal(index.producer, producer, `${name}: producer`);
  const [main, ...subs] = index.channels;
  assert.equal(main.id, null, `${name}: main first`);
  assert.equal(main.status, reading.mainStatus, `${name}: main status`);
  assert.deepEqual(
    subs.map((c: any) => c.id).sort(),
    [...reading.subagents.keys()].sort(),
    `${name}: one channel per subagent`,
  );
  for (const channel of subs) {
    const agent = reading.subagents.get(channel.id)!;
    assert.equal(channel.parent, null, `${name}: ${channel.id} started by the main agent`);
    assert.equal(channel.depth, 1, `${name}: ${channel.id} depth`);
    assert.equal(channel.orphan, false, `${name}: ${channel.id} placed`);
    assert.equal(channel.status, agent.status, `${name}: ${channel.id} status`);
    // The stream has the spawn and the result only; the child's own events are on disk.
    assert.equal(channel.transcript, 'spawn-and-result', `${name}: ${channel.id} transcript`);
  }
  assert.equal(main.counts.tool_use, reading.toolUses, `${name}: tool calls`);
  assert.equal(main.counts.tool_result, reading.toolResults, `${name}: tool results`);
  assert.equal(main.usage.input_tokens, reading.usage.input_tokens, `${name}: input tokens`);
  assert.equal(main.usage.output_tokens, reading.usage.output_tokens, `${name}: output tokens`);
}
