import { createHash, randomUUID } from 'node:crypto';
import { runIdOf } from '../../model/message.js';

/** Epoch milliseconds of an ISO `timestamp` field, or null when it is missing or not a date. */
export function streamTimeMs(value: Record<string, unknown>): number | null {
  const ts = value.timestamp;
  if (typeof ts !== 'string' || ts.length === 0) return null;
  const ms = Date.parse(ts);
  return Number.isFinite(ms) ? ms : null;
}

/**
 * The time of each record as the stream itself tells it, never the wall clock, so a replayed
 * recording gets the times of the original run. Only assistant and user lines carry a
 * `timestamp`; any other line (system lifecycle lines, results) happens at the latest time
 * seen so far. The clock never runs backwards: lines of concurrent subagents interleave with
 * timestamps a few milliseconds out of order.
 */
export class StreamClock {
  /** The latest time seen, or null before the first timestamped line. */
  latest: number | null = null;
  /** The earliest time seen. */
  first: number | null = null;

  /** Advances the clock with one line and returns that line's time (null before any time is known). */
  observe(value: Record<string, unknown>): { ms: number | null; own: boolean } {
    const own = streamTimeMs(value);
    if (own !== null) {
      if (this.first === null || own < this.first) this.first = own;
      if (this.latest === null || own > this.latest) this.latest = own;
      return { ms: own, own: true };
    }
    return { ms: this.latest, own: false };
  }
}

/** A run's identity from a line (see `runIdOf`): the key a replay of a recording lands on again. */
export const runIdFrom = runIdOf;

/** A fallback identity for a stream whose lines carry no uuid at all. */
export function randomRunId(): string {
  return randomUUID();
}

/** 32 hex digits derived from a run id: the OTLP trace id of that run. */
export function traceIdOf(runId: string): string {
  return createHash('sha256').update(`subtee-trace\0${runId}`).digest('hex').slice(0, 32);
}

/**
 * 16 hex digits: the span id of one span of a trace, derived from the trace id and a key
 * unique within it.
 */
export function spanIdOf(traceId: string, key: string): string {
  return createHash('sha256').update(`${traceId}\0${key}`).digest('hex').slice(0, 16);
}
