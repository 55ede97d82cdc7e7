/** Channels read back from a store in the order of the run's lines, for a late `events` loop. */
import type { JsonObject } from '../../model/message.js';
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
  /** Per channel open, the place in its file of the line its cursor reads next. */
  private readonly at = new Map<string | null, number>();
  /** Never more than the store reads at once: a loop holding them all would wait on itself. */
  private readonly maxOpen: number;

  /** `fileLines`: the lines a channel's file holds now (a replay reads no further). */
  constructor(
    private readonly store: ReplayStore,
    private readonly fileLines: (id: string | null) => number,
  ) {
    this.maxOpen = Math.max(1, Math.min(REPLAY_OPEN_FILES, store.maxOpenFiles ?? REPLAY_OPEN_FILES));
  }

  /** The line at `place` in a channel's file (its lines read in order, but for those memory holds). */
  async next(id: string | null, place: number): Promise<JsonObject> {
    let lines = this.open.get(id);
    if (lines) {
      this.open.delete(id); // re-inserted last: the map's order is the order of use
      if (this.at.get(id) !== place) {
        await lines.return?.(undefined);
        lines = undefined;
      }
    } else if (this.open.size >= this.maxOpen) {
      const [oldest, its] = this.open.entries().next().value!;
      this.open.delete(oldest);
      await its.return?.(undefined);
    }
    lines ??= this.store.read(id, place, Math.max(place + 1, this.fileLines(id)))[Symbol.asyncIterator]();
    this.open.set(id, lines);
    const next = await lines.next();
    if (next.done) {
      throw new ProjectionError('ERR_PROJECTION_REPLAY', `the file of channel ${id ?? 'main'} ends early`);
    }
    this.at.set(id, place + 1);
    return next.value;
  }

  async close(): Promise<void> {
    for (const lines of this.open.values()) await lines.return?.(undefined);
    this.open.clear();
  }
}
