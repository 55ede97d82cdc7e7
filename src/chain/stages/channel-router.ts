import { Transform, type TransformCallback } from 'node:stream';
import { BATCH_HIGH_WATER_MARK, type RecordBatch } from '../../model/record.js';
import { requireSession, type Session } from '../../model/session.js';
import { viewOf } from '../../model/line-view.js';

export interface ChannelRouterOptions {
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

/**
 * Channel router: record batches in, the same records out with `channel` and `events` set.
 * Object mode on both sides. The tree logic lives in ChannelTree; this is the stream adapter.
 * Quarantine records pass through untouched.
 */
export function createChannelRouter(options: ChannelRouterOptions): Transform {
  const tree = requireSession(options, 'createChannelRouter').tree;
  return new Transform({
    objectMode: true,
    highWaterMark: BATCH_HIGH_WATER_MARK,
    transform(batch: RecordBatch, _enc, cb: TransformCallback) {
      for (const rec of batch) {
        if (rec.kind === 'quarantine' || (rec.kind === 'spooled' && rec.value === null)) continue;
        const { channel, events } = tree.route(rec.kind === 'spooled' ? rec.value! : viewOf(rec));
        rec.channel = channel;
        if (events.length > 0) rec.events = events;
      }
      cb(null, batch);
    },
  });
}
