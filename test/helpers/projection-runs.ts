// Runs and readers the projection tests share: recorded fixtures lengthened, reads of the
// channel files watched, and waits on the event loop.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FIXTURES } from './helpers.js';

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
