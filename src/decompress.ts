import { Readable, type Transform } from 'node:stream';
import * as zlib from 'node:zlib';
import { EXIT, SubteeError } from './errors.js';

export type Compression = 'gzip' | 'zstd' | 'xz' | 'bzip2';

const MAGIC: ReadonlyArray<readonly [Compression, readonly number[]]> = [
  ['gzip', [0x1f, 0x8b]],
  ['zstd', [0x28, 0xb5, 0x2f, 0xfd]],
  ['xz', [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]],
  ['bzip2', [0x42, 0x5a, 0x68]],
];

/** Bytes needed to tell every format above apart. */
export const SNIFF_BYTES = 6;

/** The compression a stream's first bytes announce, or null for plain text. */
export function compressionOf(head: Buffer): Compression | null {
  for (const [name, magic] of MAGIC) {
    if (head.length >= magic.length && magic.every((b, i) => head[i] === b)) return name;
  }
  return null;
}

/** zstd support arrived in Node.js 22.15 / 23.8; older versions have no decompressor. */
function zstdDecompressor(): Transform | null {
  const create = (zlib as unknown as { createZstdDecompress?: () => Transform }).createZstdDecompress;
  return typeof create === 'function' ? create() : null;
}

/** The refusal for input in a compressed format this Node.js cannot read, or null. */
export function unreadableCompression(head: Buffer, name: string): SubteeError | null {
  const kind = compressionOf(head);
  if (kind === null || kind === 'gzip' || (kind === 'zstd' && zstdDecompressor())) return null;
  const why =
    kind === 'zstd'
      ? `it is zstd-compressed and Node.js ${process.version} has no zstd decompressor (22.15 or later has)`
      : `it is ${kind}-compressed`;
  const message = `cannot read ${name}: ${why}; decompress it first: ${kind} -dc FILE | subtee …`;
  return new SubteeError('ERR_INPUT', message, { exitCode: EXIT.IO });
}

function readFailed(name: string, err: unknown, kind: Compression | null = null): SubteeError {
  if (err instanceof SubteeError) return err;
  const e = err as NodeJS.ErrnoException;
  const damaged = kind !== null && e?.code?.startsWith('Z_') === true;
  const why = damaged ? `${kind} data is damaged or cut short (${e.message})` : (e?.code ?? String(err));
  return new SubteeError('ERR_INPUT', `cannot read ${name}: ${why}`, { exitCode: EXIT.IO, cause: err });
}

/**
 * Compressed input that is damaged or ends mid-stream. What could be decompressed before the
 * damage was passed on: the run files it (its last partial line as a truncated line), records
 * INPUT_CUT_SHORT and then fails with ERR_INPUT.
 */
export class CutShortError extends SubteeError {
  constructor(failure: SubteeError) {
    super('ERR_INPUT', failure.message, { exitCode: EXIT.IO, cause: failure.cause });
  }
}

/**
 * The input as text: a gzip stream (or zstd, where this Node.js can read it) is decompressed,
 * recognised by its first bytes whatever the file is called; a format subtee cannot read is
 * refused with ERR_INPUT instead of being quarantined line by line. Plain input passes as is.
 * Damaged or cut-short compressed data fails the stream with CutShortError after what could be
 * decompressed. Nothing is read before
 * the chain asks, so a silent input is still timed by the watchdog and a signal still stops it.
 */
export function decompressed(input: Readable, name: string): Readable {
  const chunks = decode(input, name);
  return new Readable({
    read() {
      chunks.next().then(
        (r) => this.push(r.done ? null : r.value),
        (err) => this.destroy(err),
      );
    },
    // A generator cannot return while it waits for a read, so a chain that stops early (a
    // signal, a stall) closes the input here, or a silent pipe would keep the process alive.
    destroy(err, cb) {
      input.destroy();
      chunks.return(undefined).catch(() => {});
      cb(err);
    },
  });
}

async function* decode(input: Readable, name: string): AsyncGenerator<Buffer> {
  const it = input[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  try {
    const parts: Buffer[] = [];
    let length = 0;
    let ended = false;
    try {
      while (length < SNIFF_BYTES) {
        const r = await it.next();
        if (r.done) {
          ended = true;
          break;
        }
        parts.push(r.value);
        length += r.value.length;
      }
    } catch (err) {
      throw readFailed(name, err);
    }
    const head = Buffer.concat(parts, length);
    const kind = compressionOf(head);
    async function* rest(): AsyncGenerator<Buffer> {
      if (head.length > 0) yield head;
      if (ended) return;
      for (let r = await it.next(); !r.done; r = await it.next()) yield r.value;
    }
    if (kind === null) {
      try {
        yield* rest();
      } catch (err) {
        throw readFailed(name, err);
      }
      return;
    }
    const refused = unreadableCompression(head, name);
    if (refused) throw refused;
    const decoder = kind === 'gzip' ? zlib.createGunzip() : zstdDecompressor()!;
    const source = Readable.from(rest(), { objectMode: false });
    source.on('error', (err) => decoder.destroy(readFailed(name, err)));
    source.pipe(decoder);
    try {
      yield* decoder as AsyncIterable<Buffer>;
    } catch (err) {
      const failure = readFailed(name, err, kind);
      const damaged = (err as NodeJS.ErrnoException)?.code?.startsWith('Z_') === true;
      throw damaged ? new CutShortError(failure) : failure;
    } finally {
      source.destroy();
      decoder.destroy();
    }
  } finally {
    void it.return?.();
  }
}
