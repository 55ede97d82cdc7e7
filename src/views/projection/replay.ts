/** Channels read back from a store in the order of the run's lines, for a late `events` loop. */
import type { JsonObject } from '../../model/message.js';
import type { EventLog } from './event-log.js';
import { ProjectionError, type ReplayStore } from './types.js';

/** Channel files read at once by one late `events` loop; the rest are closed and reopened. */
const REPLAY_OPEN_FILES = 64;


/**
 * Reads channels back from a store in the order of the run's lines, for a late `events` loop
 * when files are written: each channel from its start, at most REPLAY_OPEN_FILES read at once
 * (one closed to make room is reopened at its place when its next line is due).
 */
export class ChannelFileCursors {
  private readonly open = new Map<string | null, AsyncIterator<JsonObject>>();
  private readonly read = new Map<string | null, number>();
  private readonly total = new Map<string | null, number>();
  /** Never more than the store reads at once: a loop holding them all would wait on itself. */
  private readonly maxOpen: number;

  constructor(
    private readonly store: ReplayStore,
    log: EventLog,
    count: number,
  ) {
    this.maxOpen = Math.max(1, Math.min(REPLAY_OPEN_FILES, store.maxOpenFiles ?? REPLAY_OPEN_FILES));
    for (let at = 0; at < count; at++) {
      const id = log.channelOf(at);
      if (id !== undefined) this.total.set(id, (this.total.get(id) ?? 0) + 1);
    }
  }

  async next(id: string | null): Promise<JsonObject> {
    let lines = this.open.get(id);
    if (lines) {
      this.open.delete(id); // re-inserted last: the map's order is the order of use
    } else {
      if (this.open.size >= this.maxOpen) {
        const [oldest, its] = this.open.entries().next().value!;
        this.open.delete(oldest);
        await its.return?.(undefined);
      }
      const from = this.read.get(id) ?? 0;
      lines = this.store.read(id, from, this.total.get(id) ?? 0)[Symbol.asyncIterator]();
    }
    this.open.set(id, lines);
    const next = await lines.next();
    if (next.done) {
      throw new ProjectionError('ERR_PROJECTION_REPLAY', `the file of channel ${id ?? 'main'} ends early`);
    }
    this.read.set(id, (this.read.get(id) ?? 0) + 1);
    return next.value;
  }

  async close(): Promise<void> {
    for (const lines of this.open.values()) await lines.return?.(undefined);
    this.open.clear();
  }
}

