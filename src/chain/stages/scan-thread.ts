/**
 * A worker thread of the line parser (`threads` > 1): it checks the lines of one input
 * chunk with the byte scanner and hands back their tapes, in the order they came.
 */
import { parentPort } from 'node:worker_threads';
import { scanJson, Tape, TAG_ARRAY, TAG_OBJECT } from '../../model/scan.js';

/**
 * Byte positions of a line's entries made relative to the line's start (its own Buffer on the
 * main thread).
 */
function rebase(ints: Int32Array, from: number, to: number, start: number): void {
  for (let e = from; e < to; e += 4) {
    const tag = ints[e] & 7;
    ints[e + 1] -= start;
    if (tag !== TAG_OBJECT && tag !== TAG_ARRAY) ints[e + 2] -= start; // containers keep a tape index there
  }
}

export interface ScanJob {
  id: number;
  /** A copy of the chunk; it comes back with the result, to be reused. */
  bytes: ArrayBuffer;
  length: number;
  /**
   * Start and end of each line to scan, in `bytes`: the chunk's lines, then lines that began
   * in an earlier chunk.
   */
  lines: Int32Array;
  /** A tape buffer to reuse, if the main thread has one. */
  tape: ArrayBuffer | null;
}

export interface ScanResult {
  id: number;
  bytes: ArrayBuffer;
  tape: ArrayBuffer;
  /** Per line: its object's tape index, or NOT_JSON / UNDECIDED. */
  at: Int32Array;
}

parentPort?.on('message', (job: ScanJob) => {
  const buf = Buffer.from(job.bytes, 0, job.length);
  const tape = new Tape(0);
  tape.ints = job.tape ? new Int32Array(job.tape) : new Int32Array(Math.max(1024, job.length >> 4));
  const count = job.lines.length >> 1;
  const at = new Int32Array(count);
  for (let k = 0; k < count; k++) {
    const start = job.lines[2 * k];
    const from = tape.used;
    at[k] = scanJson(buf, start, job.lines[2 * k + 1], tape);
    rebase(tape.ints, from, tape.used, start);
  }
  const result: ScanResult = { id: job.id, bytes: job.bytes, tape: tape.ints.buffer as ArrayBuffer, at };
  parentPort!.postMessage(result, [job.bytes, result.tape, at.buffer]);
});
