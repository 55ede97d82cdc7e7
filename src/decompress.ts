import { on } from 'node:events';
import { Readable, type Transform } from 'node:stream';
import * as zlib from 'node:zlib';
import { EXIT, SubteeError, systemReason } from './errors.js';

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
  const why = damaged ? `${kind} data is damaged or cut short (${e.message})` : systemReason(err);
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
    // Nothing is read ahead beyond what the chain asks for: with the default 16 KiB, a program
    // handing open() short lines through a slow reader had the input run 762 lines ahead of
    // it instead of 220 (test/projection.test.ts); the command line's time is the same.
    highWaterMark: 0,
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
    if (kind === 'gzip') {
      try {
        yield* gunzipMembers(rest());
      } catch (err) {
        throw damagedOr(readFailed(name, err, kind), err);
      }
      return;
    }
    const decoder = zstdDecompressor()!;
    const source = Readable.from(rest(), { objectMode: false });
    source.on('error', (err) => decoder.destroy(readFailed(name, err)));
    source.pipe(decoder);
    try {
      yield* decoder as AsyncIterable<Buffer>;
    } catch (err) {
      throw damagedOr(readFailed(name, err, kind), err);
    } finally {
      source.destroy();
      decoder.destroy();
    }
  } finally {
    void it.return?.();
  }
}

/** Damaged compressed data (a zlib error) as CutShortError: what came before it is kept. */
function damagedOr(failure: SubteeError, err: unknown): SubteeError {
  const damaged = (err as NodeJS.ErrnoException)?.code?.startsWith('Z_') === true;
  return damaged ? new CutShortError(failure) : failure;
}

const zlibError = (message: string): NodeJS.ErrnoException =>
  Object.assign(new Error(message), { code: 'Z_DATA_ERROR' });

/** Length of the gzip member header at the start of `bytes` (RFC 1952), or -1 while it is incomplete. */
export function gzipHeaderLength(bytes: Buffer): number {
  if (bytes.length >= 1 && bytes[0] !== 0x1f) throw zlibError('incorrect header check');
  if (bytes.length >= 2 && bytes[1] !== 0x8b) throw zlibError('incorrect header check');
  if (bytes.length >= 3 && bytes[2] !== 8) throw zlibError('unknown compression method');
  if (bytes.length < 10) return -1;
  const flags = bytes[3];
  let at = 10;
  if (flags & 4) {
    if (bytes.length < at + 2) return -1;
    at += 2 + bytes.readUInt16LE(at);
  }
  for (const flag of [8, 16]) {
    // A file name, a comment: zero-terminated.
    if (!(flags & flag)) continue;
    const end = bytes.indexOf(0, at);
    if (end === -1) return -1;
    at = end + 1;
  }
  if (flags & 2) at += 2;
  return bytes.length >= at ? at : -1;
}

const crc32 = (zlib as { crc32?: (data: Uint8Array, value?: number) => number }).crc32;

/**
 * gzip members one after another, each inflated raw with its header and trailer read here.
 * Node's gunzip drops what it inflated from the same write as bytes after a member that are
 * not another member, so a file ending in such bytes lost its last lines; here every member
 * is whole before they are refused. Zero bytes after the last member (padding) are allowed,
 * as gzip allows them.
 */
export async function* gunzipMembers(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const it = source[Symbol.asyncIterator]();
  /** Bytes read and not used yet: a header, a trailer, what follows a member. */
  let held: Buffer = Buffer.alloc(0);
  const readMore = async (): Promise<boolean> => {
    const r = await it.next();
    if (r.done) return false;
    held = held.length === 0 ? r.value : Buffer.concat([held, r.value]);
    return true;
  };
  try {
    for (let members = 0; ; members++) {
      if (held.length === 0 && !(await readMore())) {
        if (members === 0) throw zlibError('unexpected end of file');
        return;
      }
      if (members > 0 && held.every((byte) => byte === 0)) {
        held = Buffer.alloc(0);
        continue;
      }
      let headerLength: number;
      try {
        while ((headerLength = gzipHeaderLength(held)) === -1)
          if (!(await readMore())) throw zlibError('unexpected end of file');
      } catch (err) {
        if (members === 0) throw err;
        throw zlibError('what follows the last gzip member is not gzip data');
      }
      let input: Buffer = held.subarray(headerLength);
      held = Buffer.alloc(0);
      const inflater = zlib.createInflateRaw();
      let crc = 0;
      let size = 0;
      let fed = 0;
      try {
        for (;;) {
          if (input.length > 0) {
            for await (const piece of inflate(inflater, input)) {
              crc = crc32 ? crc32(piece, crc) : 0;
              size += piece.length;
              yield piece;
            }
            fed += input.length;
            const unused = fed - inflater.bytesWritten;
            if (unused > 0) {
              // The member's deflate data ended inside this piece: its trailer follows.
              held = input.subarray(input.length - unused);
              break;
            }
          }
          const r = await it.next();
          if (r.done) throw zlibError('unexpected end of file');
          input = r.value;
        }
      } finally {
        inflater.destroy();
      }
      while (held.length < 8) if (!(await readMore())) throw zlibError('unexpected end of file');
      if (crc32 && held.readUInt32LE(0) !== crc >>> 0) throw zlibError('incorrect data check');
      if (held.readUInt32LE(4) !== size % 2 ** 32) throw zlibError('incorrect length check');
      held = held.subarray(8);
    }
  } finally {
    void it.return?.();
  }
}

/**
 * Writes `input` to the inflater and yields what it inflates as it comes: its buffer stays
 * at its high-water mark (a highly compressed piece is not inflated whole into memory), and
 * by the time the write is called back everything it inflated has been handed out.
 */
async function* inflate(inflater: zlib.InflateRaw, input: Buffer): AsyncGenerator<Buffer> {
  // Aborted when the write is called back: all of `input` is inflated, the wait is over.
  const written = new AbortController();
  // Rejects with the inflater's error, or with an AbortError once the write is called back.
  const readable = on(inflater, 'readable', { signal: written.signal });
  inflater.write(input, () => written.abort());
  try {
    for (let done = false; ; ) {
      for (
        let piece = inflater.read() as Buffer | null;
        piece !== null;
        piece = inflater.read() as Buffer | null
      )
        yield piece;
      if (done) return;
      // Written: what it inflated last is read once more, above.
      done = await readable.next().then(
        () => false,
        (err: Error) => {
          if (!written.signal.aborted || err.cause !== written.signal.reason) throw err;
          return true;
        },
      );
    }
  } finally {
    void readable.return?.();
  }
}
