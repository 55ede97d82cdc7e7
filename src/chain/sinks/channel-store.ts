/**
 * The files sink's channel store: a channel's lines read back from its `.jsonl` file, after
 * what the sink holds is written. The projection replays late readers through it.
 */
import { createReadStream } from 'node:fs';
import type { JsonObject } from '../../model/message.js';
import type { ChannelStore } from '../../model/session.js';
import { LineSplitter } from '../../model/lines.js';
import { lineValue } from '../../model/line-view.js';
import { StreamScanner } from '../../model/stream-scan.js';
import { ProjectionError } from '../../views/projection.js';

export interface ChannelFilesAt {
  /** The absolute path of a channel's `.jsonl` file, once the channel has one. */
  jsonlPath(id: string | null): string | undefined;
  /** Writes what is queued, so the files hold every line handed to the sink so far. */
  flush(): void;
}

/** A store over channel files; `heldLineBytes()`: the line parser's limit, read when a replay starts. */
export function fileChannelStore(files: ChannelFilesAt, heldLineBytes: () => number): ChannelStore {
  return {
    read(channel, from, to) {
      return {
        [Symbol.asyncIterator]: () => {
          files.flush();
          const path = files.jsonlPath(channel);
          if (!path) {
            return (async function* (): AsyncGenerator<JsonObject> {
              if (to > from) {
                throw new ProjectionError('ERR_PROJECTION_REPLAY', `no file for channel ${channel ?? 'main'}`);
              }
            })();
          }
          return readJsonLines(path, heldLineBytes(), to, from, channel);
        },
      };
    },
  };
}

/**
 * Lines `skip` to `count` of a `.jsonl` file, parsed. A line longer than `heldLineBytes` comes
 * back as a live reader saw it when the line parser spooled it: its top-level scalar members only.
 * A file with fewer whole lines (cut short, even mid-line) fails with ERR_PROJECTION_REPLAY.
 */
async function* readJsonLines(
  path: string,
  heldLineBytes: number,
  count: number,
  skip: number,
  channel: string | null,
): AsyncGenerator<JsonObject> {
  const values: JsonObject[] = [];
  let seen = 0;
  let scanner: StreamScanner | null = null;
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
      if (!final) return;
      const verdict = scanner.end();
      scanner = null;
      if (wanted()) values.push(verdict.ok ? (verdict.value as JsonObject) : {});
      seen++;
    },
  });
  const stream = createReadStream(path);
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

