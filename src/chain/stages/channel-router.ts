import { closeSync, constants, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import type { Transform } from 'node:stream';
import type { LineRecord, RecordBatch, SubteeRecord } from '../../model/record.js';
import { UsageError } from '../../errors.js';
import { overridePrices } from '../../model/prices.js';
import { requireSession, type Session } from '../../model/session.js';
import { viewOf } from '../../model/line-view.js';
import type { JsonObject } from '../../model/message.js';
import { escapeOneLine } from '../../views/escape.js';
import { createBatchTransform } from '../batch-transform.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';

export interface ChannelRouterOptions {
  /**
   * A price file (JSON, USD per million tokens per model, see `overridePrices`) laid over the
   * shipped table, for runs whose models or prices it lacks.
   */
  prices?: string;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

/**
 * The text of a price file. A named pipe is opened without blocking: a blocking open waits for
 * a writer in a thread no signal reaches. With no writer it reads as empty (and is refused);
 * once a writer is there (`<(cat prices.json)`), its data is waited for.
 */
function readPricesText(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  let blocking: number | null = null;
  try {
    if (!fstatSync(fd).isFIFO()) return readFileSync(fd, 'utf8');
    const parts: Buffer[] = [];
    const buf = Buffer.alloc(64 * 1024);
    for (;;) {
      let n: number;
      try {
        n = readSync(blocking ?? fd, buf, 0, buf.length, null);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || blocking !== null) throw err;
        // A writer is there and has not written yet: it opens at once now.
        blocking = openSync(path, 'r');
        continue;
      }
      if (n === 0) return Buffer.concat(parts).toString('utf8');
      parts.push(Buffer.from(buf.subarray(0, n)));
    }
  } finally {
    closeSync(fd);
    if (blocking !== null) closeSync(blocking);
  }
}

/** The session's price table with the file at `path` laid over it; a UsageError when it is not one. */
function loadPrices(session: Session, path: string): void {
  let data: unknown;
  try {
    data = JSON.parse(readPricesText(path));
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    const message = `prices ${escapeOneLine(path)}: cannot read it as JSON (${why})`;
    throw new UsageError('ERR_PRICES', message, err);
  }
  const table = overridePrices(session.cost.prices, data);
  if (typeof table === 'string')
    throw new UsageError('ERR_PRICES', `prices ${escapeOneLine(path)}: ${table}`);
  session.cost.prices = table;
}

/**
 * Channel router: record batches in, the same records out with `channel` and `events` set.
 * Object mode on both sides. The tree logic lives in ChannelTree; this is the stream adapter.
 * Quarantine records pass through untouched. A line the tree cannot take (a bug, or a value
 * an earlier stage made unreadable) is not lost: it goes on as a quarantine record (reason
 * `failed`), so its bytes land in quarantine.log, and the session counts it.
 */
export function createChannelRouter(options: ChannelRouterOptions): Transform {
  const session = requireSession(options, 'createChannelRouter');
  if (options.prices !== undefined) loadPrices(session, options.prices);
  const tree = session.tree;
  let cyclesSeen = 0;
  return createBatchTransform({
    transformBatch(batch: RecordBatch) {
      for (let i = 0; i < batch.length; i++) {
        const rec = batch[i];
        if (rec.kind === 'quarantine' || (rec.kind === 'spooled' && rec.value === null)) continue;
        let routed: { value: JsonObject; channel: string | null } | null = null;
        try {
          const value = rec.kind === 'spooled' ? rec.value! : viewOf(rec);
          const { channel, events } = tree.route(value);
          rec.channel = channel;
          if (events.length > 0) rec.events = events;
          routed = { value, channel: channel.id };
        } catch (err) {
          session.recordFailed('channel-router', rec.lineNo, err);
          // A spooled line has no bytes in memory to quarantine: it stays on main's channel.
          if (rec.kind === 'line') batch[i] = unroutable(session, rec);
        }
        // Costing is a reading of a line already routed: its failure is counted, the line stays put.
        if (routed !== null) {
          try {
            session.cost.observe(routed.value, routed.channel);
          } catch (err) {
            session.recordFailed('channel-router', rec.lineNo, err);
          }
        }
        if (tree.spawnCycles !== cyclesSeen) {
          cyclesSeen = tree.spawnCycles;
          const c = tree.firstCycle!;
          session.warn(
            'SPAWN_CYCLE',
            `input line ${rec.lineNo} spawns ${escapeOneLine(c.id)} on ` +
              (c.on === c.id
                ? 'its own channel'
                : `the channel of ${escapeOneLine(String(c.on))}, which descends from it`) +
              ' (a spawn cycle): that spawn is ignored, the channel stays an orphan (depth unknown)',
          );
        }
      }
      return batch;
    },
  });
}

function unroutable(session: Session, rec: LineRecord): SubteeRecord {
  session.input.quarantined++;
  session.quarantineLines.push(rec.lineNo);
  return { kind: 'quarantine', lineNo: rec.lineNo, raw: rec.raw, reason: 'failed', final: true };
}

export const channelRouterPlugin = defineBuiltin<Omit<ChannelRouterOptions, 'session'>>({
  name: 'channel-router',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    prices: {
      type: 'string',
      minLength: 1,
      description: 'JSON price file (USD per million tokens per model) laid over the shipped, dated table',
    },
  },
  create: (o, ctx) => createChannelRouter({ ...o, session: ctx.session }),
});
