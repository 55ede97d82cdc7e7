/**
 * What a pool of parsing threads would save the main thread: for every JSON object line of
 * a file, the main thread's cost today (`JSON.parse` of the line) beside its cost if another
 * thread had parsed the line and handed the object over (`v8.deserialize` of the bytes a
 * worker's `postMessage` carries; `structuredClone`, the same algorithm in one call). The
 * main thread still needs the object: every stage and plugin reads records as objects.
 */
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';

export interface HandoverFigures {
  lines: number;
  bytes: number;
  /** Best of `rounds`, milliseconds for all lines. */
  parseMs: number;
  deserializeMs: number;
  cloneMs: number;
}

function objectLine(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

function bestMs(rounds: number, work: () => void): number {
  let best = Infinity;
  for (let round = 0; round < rounds; round++) {
    const start = performance.now();
    work();
    best = Math.min(best, performance.now() - start);
  }
  return best;
}

export function measureHandover(file: string, rounds = 5): HandoverFigures {
  const texts = readFileSync(file, 'utf8').split('\n').filter(objectLine);
  const values = texts.map((text) => JSON.parse(text) as unknown);
  const serialized = values.map((value) => v8.serialize(value));
  let sink = 0;
  const parseMs = bestMs(rounds, () => {
    for (const text of texts) sink += (JSON.parse(text) as object) ? 1 : 0;
  });
  const deserializeMs = bestMs(rounds, () => {
    for (const bytes of serialized) sink += (v8.deserialize(bytes) as object) ? 1 : 0;
  });
  const cloneMs = bestMs(rounds, () => {
    for (const value of values) sink += structuredClone(value) ? 1 : 0;
  });
  if (sink === 0 && texts.length > 0) throw new Error('nothing was parsed');
  const bytes = texts.reduce((total, text) => total + Buffer.byteLength(text), 0);
  return { lines: texts.length, bytes, parseMs, deserializeMs, cloneMs };
}
