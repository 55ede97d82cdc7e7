import type { Transform } from 'node:stream';
/**
 * What a sink hands on: the batch when something reads the sink's output (the next sink, or
 * the chain's final discard), nothing when the sink ends a program's own `pipeline()`.
 * Without this a sink at the end would fill its output buffer and stall the whole chain.
 */
export function passOn<T>(sink: Transform, batch: T): T | undefined {
  return sink.readableFlowing === null ? undefined : batch;
}
