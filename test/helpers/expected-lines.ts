// The lines a coding-agent mapper should make, written out independently of the mappers
// (Claude Code's stream-json shapes), and a way to replay recorded events through a mapper.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MappedEvent, StreamMapper } from '../../src/adapters/stream-lines.js';
import { FIXTURES } from './helpers.js';

export type Json = Record<string, any>;

export const OTHER = join(FIXTURES, 'other-agents');

/** Every recording of a producer: `<producer>-*.jsonl` and `<producer>/*.jsonl`. */
export function recordings(producer: string): { name: string; events: Json[] }[] {
  const top = readdirSync(OTHER)
    .filter((f) => f.startsWith(`${producer}-`) && f.endsWith('.jsonl'))
    .map((f) => join(OTHER, f));
  const inner = readdirSync(join(OTHER, producer))
    .filter((f) => f.endsWith('.jsonl'))
    .map((f) => join(OTHER, producer, f));
  return [...top, ...inner].map((file) => ({
    name: file.slice(OTHER.length + 1),
    events: readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line.length > 0)
      .map((line) => JSON.parse(line)),
  }));
}

/** Lines an event should make; `own` marks the one standing for the event. */
export class Expect {
  lines: Json[] = [];
  own = -1;
  add(line: Json, own = true): void {
    if (own && this.own === -1) this.own = this.lines.length;
    this.lines.push(line);
  }
  event(channel: string | null = null): MappedEvent {
    return { channel, lines: this.lines, own: this.own };
  }
}

export const timed = (line: Json, ts: string | null): Json => (ts === null ? line : { ...line, timestamp: ts });

export const assistant = (
  channel: string | null,
  id: string | null,
  content: Json[],
  usage: Json | null,
  ts: string | null,
  model: string | null = null,
): Json =>
  timed(
    {
      type: 'assistant',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        content,
        ...(model !== null ? { model } : {}),
        ...(usage ? { usage } : {}),
      },
      parent_tool_use_id: channel,
    },
    ts,
  );

export const text = (channel: string | null, id: string | null, words: string, ts: string | null): Json =>
  assistant(channel, id, [{ type: 'text', text: words }], null, ts);

export const prompt = (channel: string | null, words: string, ts: string | null): Json =>
  timed(
    {
      type: 'user',
      message: { role: 'user', content: [{ type: 'text', text: words }] },
      parent_tool_use_id: channel,
    },
    ts,
  );

export const toolResult = (
  id: string,
  content: string,
  isError: boolean,
  ts: string | null,
  channel: string | null = null,
): Json =>
  timed(
    {
      type: 'user',
      message: {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: id, content, ...(isError ? { is_error: true } : {}) }],
      },
      parent_tool_use_id: channel,
    },
    ts,
  );

export const init = (
  producer: string,
  version: string | null,
  session: string | null,
  model: string | null,
  ts: string | null,
): Json =>
  timed(
    {
      type: 'system',
      subtype: 'init',
      session_id: session,
      model,
      producer,
      producer_version: version,
      parent_tool_use_id: null,
    },
    ts,
  );

export const result = (
  isError: boolean,
  words: string | null,
  session: string | null,
  usage: Json | null,
  durationMs: number | null,
  ts: string | null,
): Json =>
  timed(
    {
      type: 'result',
      subtype: isError ? 'error_during_execution' : 'success',
      is_error: isError,
      result: words,
      session_id: session,
      parent_tool_use_id: null,
      ...(usage ? { usage } : {}),
      ...(durationMs !== null ? { duration_ms: durationMs } : {}),
    },
    ts,
  );

/** Feeds every event, then end(), checking each against what `expected` says of it. */
export function replay(
  mapper: StreamMapper,
  events: Json[],
  expected: (event: Json) => MappedEvent,
  ending: () => Json[],
  label: string,
): void {
  events.forEach((event, n) => {
    assert.deepEqual(mapper.map(event), expected(event), `${label}: event ${n + 1} (${event.type})`);
  });
  assert.deepEqual(mapper.end(), ending(), `${label}: end`);
}


export const str = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);

export const shown = (v: unknown): string =>
  typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);

export const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

export const obj = (v: unknown): Json =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {};

export const isObj = (v: unknown): boolean => v !== null && typeof v === 'object' && !Array.isArray(v);

export const args = (v: unknown): Json => {
  if (isObj(v)) return v as Json;
  if (typeof v === 'string') {
    try {
      const parsed = JSON.parse(v);
      if (isObj(parsed)) return parsed;
    } catch {
      // text
    }
    return { input: v };
  }
  return v === undefined || v === null ? {} : { input: v };
};

export const withExit = (output: string, code: number | undefined): string =>
  code === undefined
    ? output
    : `${output}${output === '' || output.endsWith('\n') ? '' : '\n'}[exit code ${code}]`;
