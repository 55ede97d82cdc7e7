import { constants as fsConstants, createReadStream, openSync } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { decompressed, SNIFF_BYTES, unreadableCompression } from './decompress.js';
import { EXIT, SubteeError, systemReason } from './errors.js';

/**
 * Reads of 256 KiB when the input is a file (a pipe gives at most 64 KiB a read anyway);
 * larger reads were faster but pushed peak memory with 2,000 subagents to 150 MB.
 */
export const FILE_READ_BYTES = 256 * 1024;

export function inputUnreadable(file: string, err: unknown): SubteeError {
  return new SubteeError('ERR_INPUT', `cannot read ${file}: ${systemReason(err)}`, {
    exitCode: EXIT.IO,
    cause: err,
  });
}

export function inputIsFolder(file: string): SubteeError {
  return new SubteeError('ERR_INPUT', `cannot read ${file}: it is a folder, not a file`, {
    exitCode: EXIT.IO,
  });
}

/**
 * A recorded stream as bytes, decompressed (gzip, zstd…). A missing file, a folder, or a
 * format subtee cannot read fails here with ERR_INPUT, before anything is written.
 */
export async function openInputFile(file: string): Promise<Readable> {
  let kind;
  try {
    kind = await stat(file);
  } catch (err) {
    throw inputUnreadable(file, err);
  }
  if (kind.isDirectory()) throw inputIsFolder(file);
  if (!kind.isFile()) return openStreamInput(file, kind.isFIFO());
  let fh;
  try {
    fh = await open(file, 'r');
  } catch (err) {
    throw inputUnreadable(file, err);
  }
  // open(2) accepts a folder, and a format subtee cannot read shows in the first bytes: both
  // are refused here, before the output folder exists.
  try {
    if ((await fh.stat()).isDirectory()) throw inputIsFolder(file);
    const { buffer, bytesRead } = await fh.read(Buffer.alloc(SNIFF_BYTES), 0, SNIFF_BYTES, 0);
    const refused = unreadableCompression(buffer.subarray(0, bytesRead), file);
    if (refused) throw refused;
  } catch (err) {
    await fh.close();
    throw err instanceof SubteeError ? err : inputUnreadable(file, err);
  }
  return decompressed(fh.createReadStream({ highWaterMark: FILE_READ_BYTES }), file);
}

/**
 * A pipe, FIFO or device named as a file (`<(zcat x.gz)`, `/dev/stdin`) cannot be read at a
 * position, so its format is sniffed from the stream. A FIFO is opened without blocking: a
 * blocking open(2) waits for a writer in a thread no signal or watchdog can reach, while the
 * event loop waits for a non-blocking one's first bytes and still hears both.
 */
function openStreamInput(file: string, isFifo: boolean): Readable {
  if (!isFifo) {
    return decompressed(createReadStream(file, { highWaterMark: FILE_READ_BYTES }), file);
  }
  let fd;
  try {
    fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch (err) {
    throw inputUnreadable(file, err);
  }
  return decompressed(new Socket({ fd, readable: true, writable: false }), file);
}
