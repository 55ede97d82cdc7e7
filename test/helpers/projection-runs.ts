// Runs and readers the projection tests share: recorded fixtures lengthened, reads of the
// channel files watched, and waits on the event loop.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES } from './helpers.js';
import type { RunEvent } from '../../src/index.js';
import { CHANGE_BYTES } from '../../src/views/projection/event-log.js';
import { CHUNK_OBJECT_BYTES, PACK_BYTES } from '../../src/views/projection/packed-lines.js';

/** Lines of a recorded fixture. */
export function fixtureLines(name: string): string[] {
  return readFileSync(join(FIXTURES, `${name}.jsonl`), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
}

/**
 * A recorded run whose main conversation is made long: its first main assistant line repeated
 * `copies` times as separate API messages, before the rest of the run. Returns the input.
 */
export function longMainRun(copies: number): Buffer {
  const lines = fixtureLines('foreground-fanout-3');
  const at = lines.findIndex((line) => {
    const value = JSON.parse(line);
    return value.type === 'assistant' && value.parent_tool_use_id == null;
  });
  const template = JSON.parse(lines[at]);
  const extra: string[] = [];
  for (let copy = 0; copy < copies; copy++) {
    const value = structuredClone(template);
    value.message.id = `${template.message.id}_copy${copy}`;
    value.uuid = `${String(template.uuid).slice(0, 24)}${String(copy).padStart(12, '0')}`;
    extra.push(JSON.stringify(value));
  }
  return Buffer.from([...lines.slice(0, at), ...extra, ...lines.slice(at)].join('\n') + '\n');
}

/** Resolves once `ready()` holds, checking after each turn of the event loop. */
export async function until(ready: () => boolean): Promise<void> {
  while (!ready()) await new Promise((resolve) => setImmediate(resolve));
}

/** A test that waits for the stall warning: room for a loaded machine. */
export const STALL = { timeout: 20_000 };

export const HANG = { timeout: 20_000 };

/**
 * The bytes the projection's memory buffer counts for a channel's lines of these lengths, by
 * the rule docs/library.md gives: the chunks they are packed into (256 bytes, then each twice
 * the last up to 64 KiB, or a line's own length when longer; a line goes in the next chunk when
 * the last has no room), each with its object's bytes, a 4-byte end per line in a column that
 * doubles from 16, and the object's own bytes.
 */
export function packedBytes(lengths: readonly number[]): number {
  if (lengths.length === 0) return 0;
  let column = 16;
  while (column < lengths.length) column *= 2;
  let bytes = PACK_BYTES + 4 * column;
  let chunk = 0;
  let used = 0;
  for (const length of lengths) {
    if (chunk === 0 || used + length > chunk) {
      chunk = Math.max(length, chunk === 0 ? 256 : Math.min(64 * 1024, chunk * 2));
      bytes += chunk + CHUNK_OBJECT_BYTES;
      used = 0;
    }
    used += length;
  }
  return bytes;
}

/**
 * The bytes the run's record order counts for `records` records causing `changes` tree changes:
 * three 4-byte columns that double from 256 entries, and CHANGE_BYTES a change.
 */
export function recordOrderBytes(records: number, changes: number): number {
  if (records === 0) return 0;
  let column = 256;
  while (column < records) column *= 2;
  return 12 * column + CHANGE_BYTES * changes;
}

/**
 * What a run without files buffers for its late readers, from its events (read whole, nothing
 * given up) and its input lines: each channel's lines packed, and the record order.
 */
export function bufferedBytes(events: readonly RunEvent[], lines: readonly string[]): number {
  const byChannel = new Map<string | null, number[]>();
  let changes = 0;
  for (const event of events) {
    changes += event.changes.length;
    if (event.kind !== 'line') continue;
    const lengths = byChannel.get(event.channel) ?? [];
    lengths.push(Buffer.byteLength(lines[event.lineNo - 1]));
    byChannel.set(event.channel, lengths);
  }
  let bytes = recordOrderBytes(events.length, changes);
  for (const lengths of byChannel.values()) bytes += packedBytes(lengths);
  return bytes;
}
