import { Transform, type TransformCallback } from 'node:stream';
import type { SubteeRecord } from '../record.js';
import { Run } from '../run.js';

export interface ChannelRouterOptions {
  run?: Run;
}

/**
 * Channel router: records in, the same records out with `channel` and `events` set.
 * Object mode on both sides. The tree logic lives in ChannelTree; this is the stream adapter.
 * Quarantine records pass through untouched.
 */
export function createChannelRouter(options: ChannelRouterOptions = {}): Transform {
  const tree = (options.run ?? new Run()).tree;
  return new Transform({
    objectMode: true,
    transform(rec: SubteeRecord, _enc, cb: TransformCallback) {
      if (rec.kind === 'line') {
        const { channel, events } = tree.route(rec.value);
        rec.channel = channel;
        if (events.length > 0) rec.events = events;
      }
      cb(null, rec);
    },
  });
}
