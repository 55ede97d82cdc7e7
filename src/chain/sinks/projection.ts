import type { Transform } from 'node:stream';
import type { RecordBatch } from '../../model/record.js';
import { requireSession, type SinkRun } from '../../model/session.js';
import type { Projection, ReplayStore } from '../../views/projection.js';
import { createBatchTransform } from '../batch-transform.js';

export interface ProjectionSinkOptions {
  session: SinkRun;
  /** The projection the records feed; `open()` makes one per run. */
  projection: Projection;
  /**
   * Where the projection's late readers replay a channel from: the chain's channel store
   * (`ctx.channelStore`, the files sink's `.jsonl` files); none: from memory.
   */
  store?: ReplayStore | null;
}

/**
 * Projection sink: record batches in, the same out (object mode), feeding the live
 * projection. Backpressure: while an open reader is too far behind, the callback waits for
 * it, which holds the input; handles nobody reads never hold anything. At the end, or when
 * the chain is destroyed (interrupt, stall, error), every reader ends.
 */
export function createProjectionSink(options: ProjectionSinkOptions): Transform {
  requireSession(options, 'createProjectionSink');
  const { projection } = options;
  projection.bind(options.store ?? null);
  return createBatchTransform({
    sink: true,
    transformBatch(batch: RecordBatch) {
      projection.accept(batch);
      if (!projection.pressured) return batch;
      return projection.drained().then(() => batch);
    },
    flushAtEnd: () => projection.finish(),
    teardown: () => projection.finish(),
  });
}
