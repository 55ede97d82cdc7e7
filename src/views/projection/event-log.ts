/** The run's records in order, as a late `events` loop replays them. */
import type { JsonObject } from '../../model/message.js';
import type { ChannelEvent } from '../../model/tree.js';
import { PackedLines } from './packed-lines.js';

/** A record as a late `events` loop replays it; `channel` undefined: quarantined bytes. */
export interface EventEntry {
  lineNo: number;
  channel: string | null | undefined;
  changes: readonly ChannelEvent[];
  /** The line's bytes (parsed again on replay), or for a spooled line its scalar members. */
  raw: Buffer | null;
  value: JsonObject | null;
}

/** A line's place in the lines its channel holds. */
export interface LinePlace {
  pack: PackedLines;
  at: number;
}

/**
 * What a record's tree changes cost the log, each: the map's entry and the frozen change with
 * its channel snapshot (measured on Node 22; a run has one or two per channel).
 */
export const CHANGE_BYTES = 600;

export const NO_CHANGES: readonly ChannelEvent[] = Object.freeze([]);

/**
 * The run's records in order, column by column: 12 bytes a record (its line number, its
 * channel's slot, its line's place in the lines its channel holds), so keeping it costs little
 * beside the lines themselves. The lines are those the channels hold, shared (a line is held
 * once); those of a channel that gave its own up are kept here. A line its channel's file
 * holds as routed is read back from there.
 */
export class EventLog {
  /** Per record: its line number, its channel's slot (0: quarantined bytes), its line's place + 1. */
  private lineNos = new Uint32Array(256);
  private slots = new Uint32Array(256);
  private places = new Uint32Array(256);
  private count = 0;
  private readonly slotOf = new Map<string | null, number>();
  private readonly ids: Array<string | null> = [null];
  /** Per slot, the lines of its channel (the channel's own, or kept here). */
  private readonly packs: Array<PackedLines | undefined> = [];
  private readonly changes = new Map<number, readonly ChannelEvent[]>();
  private readonly values = new Map<number, JsonObject>();
  /** What the columns and changes hold (none counted before the first record). */
  bytes = 0;

  get length(): number {
    return this.count;
  }

  /**
   * The lines the log keeps for a channel: those the channel holds (`held`) when the log has
   * none for it yet, else its own.
   */
  linesOf(channel: string | null, held: PackedLines | null): PackedLines {
    const slot = this.slot(channel);
    let pack = this.packs[slot];
    if (pack === undefined) this.packs[slot] = pack = held ?? new PackedLines();
    return pack;
  }

  /** Adds a record (`line`: where its bytes are); returns how many bytes that added to `bytes`. */
  push(entry: Omit<EventEntry, 'raw'>, line: LinePlace | null): number {
    const before = this.bytes;
    const at = this.count++;
    if (at === 0) this.bytes += 3 * this.lineNos.byteLength;
    if (at === this.lineNos.length) {
      this.lineNos = this.grown(this.lineNos);
      this.slots = this.grown(this.slots);
      this.places = this.grown(this.places);
    }
    this.lineNos[at] = entry.lineNo;
    const slot = entry.channel === undefined ? 0 : this.slot(entry.channel);
    this.slots[at] = slot;
    if (line) {
      if (this.packs[slot] !== line.pack) throw new Error("a line's place is not in its channel's lines");
      this.places[at] = line.at + 1;
    }
    if (entry.changes.length > 0) {
      this.changes.set(at, entry.changes);
      this.bytes += CHANGE_BYTES * entry.changes.length;
    }
    if (entry.value) this.values.set(at, entry.value);
    return this.bytes - before;
  }

  entry(at: number): EventEntry {
    const place = this.places[at];
    return {
      lineNo: this.lineNos[at],
      channel: this.channelOf(at),
      changes: this.changes.get(at) ?? NO_CHANGES,
      raw: place === 0 ? null : this.packs[this.slots[at]]!.line(place - 1),
      value: this.values.get(at) ?? null,
    };
  }

  channelOf(at: number): string | null | undefined {
    const slot = this.slots[at];
    return slot === 0 ? undefined : this.ids[slot];
  }

  private slot(id: string | null): number {
    let slot = this.slotOf.get(id);
    if (slot === undefined) {
      slot = this.ids.push(id) - 1;
      this.slotOf.set(id, slot);
    }
    return slot;
  }

  private grown(array: Uint32Array<ArrayBuffer>): Uint32Array<ArrayBuffer> {
    const bigger = new Uint32Array(array.length * 2);
    bigger.set(array);
    this.bytes += bigger.byteLength - array.byteLength;
    return bigger;
  }
}
