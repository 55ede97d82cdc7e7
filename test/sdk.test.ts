import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { finished } from 'node:stream/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { open } from '../src/index.js';
import { teeJsonl } from '../src/entry/adapters.js';
import { describeWithClaude } from './e2e/claude.js';
import { pipeClaudeIntoSubtee } from './e2e/pipe.js';
import { SCENARIOS } from './e2e/scenarios.js';
import { sdkQuery } from './e2e/sdk.js';
import { BIN, tmpDir } from './helpers/helpers.js';

interface IndexChannel {
  id: string | null;
  parent: string | null;
  description: string | null;
  [field: string]: unknown;
}

/**
 * The main conversation's follow-up turns: when background subagents finish, Claude Code
 * starts a new turn on the main channel (one `system/init`, one short assistant text, one
 * `result`), and how many it starts depends on how their completions batch up in time: two
 * CLI runs of the same scenario differ there as well. Counted from the raw lines, with the
 * main channel's stream events, so they can be taken out of its figures before comparing.
 */
export function followUpTurns(jsonl: string) {
  const main = jsonl
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l))
    .filter((v) => !v.parent_tool_use_id);
  let inits = 0;
  let results = 0;
  const out = { turns: 0, lines: 0, conversation: 0, text: 0, usage: {} as Record<string, number> };
  const lastUsage = new Map<string, Record<string, number>>();
  for (const v of main) {
    if (v.type === 'system' && v.subtype === 'init' && ++inits > 1) out.lines++;
    if (v.type === 'result' && ++results > 1) out.lines++;
    // Partial output (--include-partial-messages): how many stream events the main channel
    // gets varies with timing as well (follow-up turns and batching), so none are compared.
    if (v.type === 'stream_event') out.lines++;
    if ((v.type === 'assistant' && inits <= 1) || v.type === 'user') out.conversation++;
    if (v.type === 'assistant' && inits > 1) {
      out.lines++;
      out.text += (v.message.content as Array<{ type: string }>).filter((b) => b.type === 'text').length;
      const usage = Object.fromEntries(
        Object.entries(v.message.usage ?? {}).filter(([, n]) => typeof n === 'number'),
      ) as Record<string, number>;
      if (v.message.id) lastUsage.set(v.message.id, usage);
    }
  }
  for (const usage of lastUsage.values())
    for (const [k, n] of Object.entries(usage)) out.usage[k] = (out.usage[k] ?? 0) + n;
  out.turns = Math.max(0, inits - 1);
  return out;
}

/**
 * What two runs of one scenario share, whatever ids and clocks they got: each channel keyed
 * by its description (unique within every scenario; the main conversation has none), with
 * its parent's description, depth, agent, status, background, report, line count, block
 * counts and usage; for the main channel, its assistant and user lines and its counts and
 * usage without the follow-up turns (above). Ids,
 * session ids, timestamps and byte counts differ between any two runs and are not compared.
 */
export function structureOf(index: Record<string, unknown>, jsonl: string) {
  const channels = index.channels as IndexChannel[];
  const byId = new Map(channels.map((c) => [c.id, c]));
  const name = (c: IndexChannel | undefined) =>
    c === undefined ? '?' : c.id === null ? '(main)' : String(c.description);
  const extra = followUpTurns(jsonl);
  const shape = channels.map((c) => {
    const fields = pick(c, [
      'orphan',
      'depth',
      'agent',
      'status',
      'background',
      'summary',
      'lines',
      'counts',
      'usage',
    ]);
    if (c.id === null) {
      // Its bookkeeping lines (task progress, background task lists, stream events) come in
      // numbers that vary with timing too: of the main channel, its conversation is compared.
      fields.lines = extra.conversation;
      fields.counts = { ...(c.counts as object), text: (c.counts as { text: number }).text - extra.text };
      const usage = { ...(c.usage as Record<string, number>) };
      for (const [k, n] of Object.entries(extra.usage)) usage[k] -= n;
      fields.usage = usage;
    }
    // Estimated output tokens share the result's total, which counts the follow-up turns
    // (their number varies with timing): compared only when they are the stream's own.
    if ((index.cost as { output_tokens?: string } | undefined)?.output_tokens !== 'stream') {
      const { output_tokens: _estimated, ...rest } = fields.usage as Record<string, number>;
      fields.usage = rest;
    }
    return { channel: name(c), parent: c.id === null ? null : name(byId.get(c.parent)), ...fields };
  });
  return {
    producer: index.producer,
    claude_code_version: index.claude_code_version,
    quarantined: (index.input as { quarantined: number }).quarantined,
    warnings: (index.warnings as Array<{ code: string }>).map((w) => w.code).sort(),
    channels: shape.sort((a, b) => a.channel.localeCompare(b.channel)),
  };
}

function pick(c: IndexChannel, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.map((k) => [k, c[k]]));
}

describeWithClaude('Claude Agent SDK objects through open() against the CLI pipe', (apiUrl) => {
  for (const s of SCENARIOS) {
    test(`${s.name}: query() objects give the CLI pipe's tree, statuses, usage and counts; replayed, ` +
      `its index`, async () => {
      const dir = tmpDir();
      const recording = join(dir, 'sdk.jsonl');
      const { messages, cleanup } = sdkQuery(s, apiUrl());
      const file = createWriteStream(recording);
      let sdkIndex: Record<string, unknown>;
      try {
        sdkIndex = await open(teeJsonl(messages, file), { out: join(dir, 'sdk') }).done;
      } finally {
        file.end();
        cleanup();
      }
      await finished(file);
      assert.equal(sdkIndex.producer, 'claude');

      const cli = await pipeClaudeIntoSubtee(
        BIN,
        { prompt: s.prompt, apiUrl: apiUrl(), forward: s.forward, partial: s.partial },
        join(dir, 'cli'),
      );
      assert.equal(cli.subteeCode, 0, cli.subteeStderr);
      const cliIndex = JSON.parse(readFileSync(join(dir, 'cli', 'index.json'), 'utf8'));
      const recorded = readFileSync(recording, 'utf8');
      assert.deepEqual(structureOf(sdkIndex, recorded), structureOf(cliIndex, cli.raw.toString('utf8')));
      const subagents = (sdkIndex.channels as IndexChannel[]).filter((c) => c.id !== null);
      assert.equal(subagents.length, s.expect.subagents);

      // The recording, replayed later through the CLI, gives the live run's index.json exactly.
      const replay = spawnSync(
        process.execPath,
        [BIN, '--out', join(dir, 'replay'), '-q', '--stdout', 'none', recording],
        { encoding: 'utf8' },
      );
      assert.equal(replay.status, 0, replay.stderr);
      assert.deepEqual(JSON.parse(readFileSync(join(dir, 'replay', 'index.json'), 'utf8')), sdkIndex);
    });
  }
});
