import { Transform, type TransformCallback } from 'node:stream';
import { BATCH_HIGH_WATER_MARK, type RecordBatch } from '../../model/record.js';
import { requireSession, type Session } from '../../model/session.js';
import type { Projection } from '../../views/projection.js';
import { passOn } from './pass-on.js';

export interface ProjectionSinkOptions {
  session: Session;
  /** The projection the records feed; `open()` makes one per run. */
  projection: Projection;
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
  const sink = new Transform({
    objectMode: true,
    highWaterMark: BATCH_HIGH_WATER_MARK,
    transform(batch: RecordBatch, _enc, cb: TransformCallback) {
      try {
        projection.accept(batch);
      } catch (err) {
        return cb(err as Error);
      }
      if (!projection.pressured) return cb(null, passOn(sink, batch));
      projection.drained().then(() => cb(null, passOn(sink, batch)));
    },
    flush(cb: TransformCallback) {
      projection.finish();
      cb();
    },
    destroy(err, cb) {
      projection.finish();
      cb(err);
    },
  });
  return sink;
}
