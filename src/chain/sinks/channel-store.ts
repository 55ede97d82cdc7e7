/**
 * The files sink's channel store: where each channel's `.jsonl` file is (`main.jsonl`,
 * `agents/<stem>.jsonl`, a stem chosen once per channel by the store) and its lines read back
 * from there. Built with the chain from the files sink's options and handed to the sink, which
 * writes the files, and to the projection, which replays late readers through it: neither
 * knows the other.
 */
import { EventEmitter, on } from 'node:events';
import { createReadStream } from 'node:fs';
import { resolve } from 'node:path';
import type { Readable } from 'node:stream';
import type { JsonObject } from '../../model/message.js';
import type { ChannelStore } from '../../model/session.js';
import { LineSplitter } from '../../model/lines.js';
import { lineValue } from '../../model/line-view.js';
import { StreamScanner } from '../../model/stream-scan.js';
import { withLineCut } from '../../views/message-stream.js';
import { ProjectionError } from '../../views/projection/types.js';
import { descriptorBudget } from '../../safe-open.js';
import { FileNamer } from './file-names.js';

/** How a replay opens a channel's `.jsonl` file: `fs.createReadStream` unless one is given. */
export type OpenChannelFile = (path: string) => Readable;

/**
 * Channel files the late readers of one run read at once, all of them together: a reader past
 * it waits for another's file to close, never fails. 64, or half what the process's open-file
 * limit leaves the files sink, whichever is less (so 400 late readers under `ulimit -n 256` read
 * 64 files at a time, beside the files sink's own).
 */
export const replayOpenFiles = (): number => Math.max(1, Math.min(64, Math.floor(descriptorBudget(128) / 2)));

/** A count of open replay files, and the replays waiting for one to close, first come first served. */
class FileSlots {
  #used = 0;
  #waiting = 0;
  /** Emits `passed` when a closed file's slot passes to a waiting replay. */
  readonly #slots = new EventEmitter();
  /**
   * Core's queue of waiting promises: each `passed` settles the oldest `next()` not settled yet,
   * so slots pass in the order replays asked for them, with one listener however many wait.
   */
  readonly #turns = on(this.#slots, 'passed');

  constructor(readonly size: number) {}

  /** Resolves once the caller may open a file. */
  take(): Promise<void> | void {
    if (this.#used < this.size) {
      this.#used++;
      return;
    }
    this.#waiting++;
    return this.#turns.next().then(() => {});
  }

  /** A file closed: its slot passes to the first waiting replay, if any. */
  give(): void {
    if (this.#waiting === 0) {
      this.#used--;
      return;
    }
    this.#waiting--;
    this.#slots.emit('passed');
  }

  get open(): number {
    return this.#used;
  }
}

/**
 * A store over the channel files in `out`; `heldLineBytes()`: the line parser's limit, read
 * when a replay starts; `openFile`: how each replay opens its file.
 */
export class FileChannelStore implements ChannelStore {
  readonly #namer = new FileNamer();
  readonly #stems = new Map<string | null, string>();
  readonly #slots: FileSlots;

  /** `maxOpenFiles`: files read at once by every replay of the run together (see replayOpenFiles). */
  constructor(
    readonly out: string,
    private readonly heldLineBytes: () => number,
    private readonly openFile: OpenChannelFile = createReadStream,
    readonly maxOpenFiles: number = replayOpenFiles(),
  ) {
    this.#slots = new FileSlots(maxOpenFiles);
  }

  /** Replay files open now (at most `maxOpenFiles`). */
  get openFiles(): number {
    return this.#slots.open;
  }

  /** The stem of a channel's files, relative to `out`: `main`, or `agents/<safe name>`. */
  stemOf(id: string | null): string {
    let stem = this.#stems.get(id);
    if (stem === undefined) {
      stem = id === null ? 'main' : `agents/${this.#namer.stemFor(id)}`;
      this.#stems.set(id, stem);
    }
    return stem;
  }

  /** The absolute path of a channel's `.jsonl` file, once the channel has one. */
  jsonlPath(id: string | null): string | undefined {
    const stem = this.#stems.get(id);
    return stem === undefined ? undefined : resolve(this.out, `${stem}.jsonl`);
  }

  /**
   * Lines `from` up to `to` of a channel. Read a turn of the event loop later: the files sink
   * writes what a batch queued by then (at once past its `flushBytes`, else on the next turn),
   * so the file holds every line the sink was handed before this call.
   */
  read(channel: string | null, from: number, to: number): AsyncIterable<JsonObject> {
    const store = this;
    return (async function* (): AsyncGenerator<JsonObject> {
      await new Promise<void>((done) => setImmediate(done));
      const path = store.jsonlPath(channel);
      if (!path) {
        if (to > from) {
          throw new ProjectionError('ERR_PROJECTION_REPLAY', `no file for channel ${channel ?? 'main'}`);
        }
        return;
      }
      if (to <= from) return;
      // The file opens once one of the run's replay slots is free, and gives it back when
      // the replay ends, fails or its reader breaks off.
      await store.#slots.take();
      const stream = store.openFile(path);
      // Free once the file is closed, not when the replay is done with it: a closing file still
      // holds its descriptor.
      let given = false;
      const give = () => {
        if (given) return;
        given = true;
        store.#slots.give();
      };
      stream.once('close', give);
      try {
        yield* readJsonLines(stream, path, store.heldLineBytes(), to, from, channel);
      } finally {
        stream.destroy();
        if (stream.closed) give();
      }
    })();
  }
}

/**
 * Lines `skip` to `count` of a `.jsonl` file, parsed. A line longer than `heldLineBytes` comes
 * back as a live reader saw it when the line parser spooled it: its top-level scalar members only,
 * carrying its length and this file (`withLineCut`).
 * A file with fewer whole lines (cut short, even mid-line) fails with ERR_PROJECTION_REPLAY.
 */
async function* readJsonLines(
  stream: Readable,
  path: string,
  heldLineBytes: number,
  count: number,
  skip: number,
  channel: string | null,
): AsyncGenerator<JsonObject> {
  const values: JsonObject[] = [];
  let seen = 0;
  let scanner: StreamScanner | null = null;
  let cutBytes = 0;
  const wanted = () => seen >= skip && seen < count;
  const splitter = new LineSplitter(heldLineBytes, {
    line(raw) {
      if (wanted()) values.push(lineValue(raw));
      seen++;
    },
    overflow(piece, _lineNo, final) {
      if (seen < skip) {
        if (final) seen++;
        return;
      }
      (scanner ??= new StreamScanner()).push(piece);
      cutBytes += piece.length;
      if (!final) return;
      const verdict = scanner.end();
      scanner = null;
      const cut = { bytes: cutBytes, file: path };
      cutBytes = 0;
      if (wanted()) values.push(verdict.ok ? withLineCut(verdict.value as JsonObject, cut) : {});
      seen++;
    },
  });
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      splitter.push(chunk);
      yield* values.splice(0);
      if (seen >= count) return;
    }
  } finally {
    stream.destroy();
  }
  if (seen >= count) return;
  throw new ProjectionError(
    'ERR_PROJECTION_REPLAY',
    `the file of channel ${channel ?? 'main'} (${path}) ends early: ${seen} whole lines of ${count}`,
  );
}

