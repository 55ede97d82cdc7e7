import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createDiscard } from '../../src/chain/chain.js';
import type { RecordBatch } from '../../src/model/record.js';
import { Session } from '../../src/model/session.js';
import { createFilesSink } from '../../src/chain/sinks/files.js';
import { createChannelRouter } from '../../src/chain/stages/channel-router.js';
import { createLineParser } from '../../src/chain/stages/line-parser.js';
import { chunked, tmpDir } from './helpers.js';

/** The fields of a span the tree check reads, whether received over OTLP or built in memory. */
export interface SpanLike {
  id: string;
  parent: string;
  name: string;
  startMs: number;
  endMs: number;
  attributes: Record<string, string | number | boolean>;
  error: boolean;
}

/**
 * Runs bytes through the real parser, router and files sink, handing every routed batch to
 * `tap` on its way to the files; returns the run and the index.json it wrote.
 */
export async function routeThrough(
  input: Buffer,
  tap: (batch: RecordBatch, run: Session) => void,
  chunkBytes = 4096,
  maxLineBytes?: number,
): Promise<{ run: Session; index: any; out: string }> {
  const run = new Session();
  const out = join(tmpDir(), 'out');
  const chunks: Buffer[] = [];
  for (let i = 0; i < input.length; i += chunkBytes) chunks.push(input.subarray(i, i + chunkBytes));
  const tapStream = new Transform({
    objectMode: true,
    transform(batch: RecordBatch, _enc, cb) {
      tap(batch, run);
      cb(null, batch);
    },
  });
  await pipeline(
    chunked(chunks),
    createLineParser({ session: run, maxLineBytes }),
    createChannelRouter({ session: run }),
    tapStream,
    createFilesSink({ out, session: run }),
    createDiscard(),
  );
  return { run, out, index: JSON.parse(readFileSync(join(out, 'index.json'), 'utf8')) };
}

const ms = (iso: string | null) => (iso === null ? NaN : Date.parse(iso));

/**
 * The span tree must be index.json's tree: one root `invoke_agent main`; one `invoke_agent`
 * per subagent, under the `execute_tool` span of its spawning call, which sits under its
 * parent's agent span (orphans directly under main); ERROR exactly for failed channels; one
 * `execute_tool` span per tool call; usage and times from the stream.
 */
export function assertSpanTree(spans: SpanLike[], index: any, label: string): void {
  const byId = new Map(spans.map((s) => [s.id, s]));
  assert.equal(byId.size, spans.length, `${label}: span ids are unique`);
  const agents = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'invoke_agent');
  const tools = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool');
  assert.equal(
    agents.length + tools.length,
    spans.length,
    `${label}: only invoke_agent and execute_tool spans`,
  );
  const roots = spans.filter((s) => s.parent === '');
  assert.equal(roots.length, 1, `${label}: one root`);
  const root = roots[0];
  assert.equal(root.name, 'invoke_agent main', label);
  const agentOf = new Map<string | null, SpanLike>([[null, root]]);
  for (const a of agents) if (a !== root) agentOf.set(String(a.attributes['gen_ai.agent.id']), a);
  assert.equal(agentOf.size, index.channels.length, `${label}: one agent span per channel`);

  const toolUses = index.channels.reduce((n: number, c: any) => n + c.counts.tool_use, 0);
  assert.equal(tools.length, toolUses, `${label}: one execute_tool span per tool call`);
  for (const t of tools) {
    assert.equal(t.name, `execute_tool ${t.attributes['gen_ai.tool.name']}`, label);
    assert.equal(
      byId.get(t.parent)?.attributes['gen_ai.operation.name'],
      'invoke_agent',
      `${label}: tool ${t.attributes['gen_ai.tool.call.id']} runs in an agent`,
    );
  }

  const firstSeen = Math.min(...index.channels.map((c: any) => ms(c.first_seen)).filter(Number.isFinite));
  const lastSeen = Math.max(...index.channels.map((c: any) => ms(c.last_seen)).filter(Number.isFinite));
  assert.equal(root.startMs, firstSeen, `${label}: the trace starts at the stream's first timestamp`);
  assert.equal(root.endMs, lastSeen, `${label}: and ends at its last`);

  for (const c of index.channels) {
    const span = agentOf.get(c.id)!;
    const what = `${label}: channel ${c.id ?? 'main'}`;
    assert.ok(span, what);
    assert.equal(span.error, c.status === 'failed', `${what}: ERROR exactly when failed`);
    assert.equal(span.attributes['subtee.status'], c.status, what);
    assert.equal(span.attributes['gen_ai.usage.input_tokens'], c.usage.input_tokens, `${what}: input tokens`);
    // index.json's output tokens are true or estimated once the run is over; a span that ended
    // before that carries the stream's own (the cost tests check the true figures).
    if (index.cost?.output_tokens === 'stream')
      assert.equal(
        span.attributes['gen_ai.usage.output_tokens'],
        c.usage.output_tokens,
        `${what}: output tokens`,
      );
    else {
      // A channel that stated no usage (only <synthetic> messages, say) has none in either.
      const stated = c.usage.output_tokens === undefined ? 'undefined' : 'number';
      assert.equal(typeof span.attributes['gen_ai.usage.output_tokens'], stated, `${what}: output tokens`);
    }
    assert.ok(
      span.startMs >= firstSeen && span.endMs <= lastSeen && span.startMs <= span.endMs,
      `${what}: times within the run`,
    );
    if (c.last_seen) assert.ok(span.endMs >= ms(c.last_seen), `${what}: ends after its last line`);
    if (c.id === null) continue;
    assert.equal(span.attributes['gen_ai.agent.name'], c.agent ?? 'subagent', what);
    assert.equal(span.name, `invoke_agent ${c.agent ?? 'subagent'}`, what);
    const up = byId.get(span.parent);
    assert.ok(up, `${what}: has a parent span`);
    if (c.orphan) {
      assert.equal(up, root, `${what}: an orphan hangs under main`);
      continue;
    }
    assert.equal(up.attributes['gen_ai.operation.name'], 'execute_tool', `${what}: spawned by a tool call`);
    assert.equal(up.attributes['gen_ai.tool.call.id'], c.id, `${what}: by its own spawn call`);
    assert.ok(['Agent', 'Task'].includes(String(up.attributes['gen_ai.tool.name'])), what);
    assert.equal(
      byId.get(up.parent),
      agentOf.get(c.parent),
      `${what}: the spawn call runs in its parent ${c.parent ?? 'main'}`,
    );
  }
}
