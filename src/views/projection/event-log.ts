/** The run's records in order, as a late `events` loop replays them. */
import type { JsonObject } from '../../model/message.js';
import type { ChannelEvent } from '../../model/tree.js';

/** A record as a late `events` loop replays it; `channel` undefined: quarantined bytes. */
export interface EventEntry {
  lineNo: number;
  channel: string | null | undefined;
  changes: readonly ChannelEvent[];
  /** The line's bytes (parsed again on replay), or for a spooled line its scalar members. */
  raw: Buffer | null;
  value: JsonObject | null;
}

/** Bytes of one entry besides its line (two 4-byte columns, doubled while growing). */
export const ENTRY_BYTES = 16;

export const NO_CHANGES: readonly ChannelEvent[] = Object.freeze([]);

/**
 * The run's records in order, column by column: a few bytes a line, so keeping it costs
 * little beside the lines themselves (held only without files; with files they are read back).
 */
export class EventLog {
  /** Per record: its line number, and its channel's slot (0: quarantined bytes). */
  private lineNos = new Uint32Array(1024);
  private slots = new Uint32Array(1024);
  private count = 0;
  private readonly slotOf = new Map<string | null, number>();
  private readonly ids: Array<string | null> = [null];
  private readonly raws: Array<Buffer | null> = [];
  private readonly changes = new Map<number, readonly ChannelEvent[]>();
  private readonly values = new Map<number, JsonObject>();

  get length(): number {
    return this.count;
  }

  push(entry: EventEntry): void {
    const at = this.count++;
    if (at === this.lineNos.length) {
      this.lineNos = grown(this.lineNos);
      this.slots = grown(this.slots);
    }
    this.lineNos[at] = entry.lineNo;
    this.slots[at] = entry.channel === undefined ? 0 : this.slot(entry.channel);
    if (entry.raw) this.raws[at] = entry.raw;
    if (entry.changes.length > 0) this.changes.set(at, entry.changes);
    if (entry.value) this.values.set(at, entry.value);
  }

  entry(at: number): EventEntry {
    return {
      lineNo: this.lineNos[at],
      channel: this.channelOf(at),
      changes: this.changes.get(at) ?? NO_CHANGES,
      raw: this.raws[at] ?? null,
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
}

function grown(array: Uint32Array<ArrayBuffer>): Uint32Array<ArrayBuffer> {
  const bigger = new Uint32Array(array.length * 2);
  bigger.set(array);
  return bigger;
}

