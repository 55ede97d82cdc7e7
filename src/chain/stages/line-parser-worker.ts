import { Transform, type TransformCallback } from 'node:stream';
import { Worker } from 'node:worker_threads';
import { SubteeError } from '../../errors.js';
import { fromScan, planLine, scannedRecord, scanLine, type Scanned } from '../../model/line-view.js';
import { BATCH_HIGH_WATER_MARK, type RecordBatch, type SubteeRecord } from '../../model/record.js';
import { LAZY_TEXT_BYTES, Tape } from '../../model/scan.js';
import { requireSession, type Session } from '../../model/session.js';
import { endSpool, LineSpool, spoolDir } from './line-spool.js';
import { countQuarantine, junkRunRecord, warnIfAllQuarantined } from './line-input.js';
import { isBlank, LineSplitter } from '../../model/lines.js';
import type { ScanJob, ScanResult } from './scan-thread.js';

/** Chunks handed to each worker and not back yet, before the parser stops taking input. */
const IN_FLIGHT_PER_WORKER = 3;

/** A line of a job: a record made on the main thread, or one waiting for the worker's scan. */
type Slot = SubteeRecord | { lineNo: number; raw: Buffer; scan: number };

interface Job {
  id: number;
  chunk: Buffer;
  slots: Slot[];
  /** Lines sent to the worker; null when the job needs no scan and is done. */
  sent: number | null;
  result: ScanResult | null;
}

/**
 * The line parser with its byte scanning on worker threads: the same records, counts and
 * warnings as `createLineParser`, in the same order. The main thread splits lines and makes
 * records; a worker checks a chunk's lines of LAZY_TEXT_BYTES or more with the scanner,
 * working on a copy of the chunk while the main thread routes and writes the chunks before.
 * Chunks go to the `workers` in turn and come back in input order. A line that spans two
 * chunks, a short line (parsed whole) and a line past `maxLineBytes` (spooled) stay on the
 * main thread. A worker is started when its first chunk has a line for it.
 */
export function createWorkerLineParser(options: {
  maxLineBytes: number;
  workers: number;
  session: Session;
}): Transform {
  const opts = options;
  const run = requireSession(options, 'createLineParser');
  const workers: Array<Worker | null> = Array.from({ length: Math.max(1, opts.workers) }, () => null);
  const inFlight = IN_FLIGHT_PER_WORKER * workers.length;
  let sentJobs = 0;
  let stopped = false;
  let failed: Error | null = null;
  let nextId = 0;
  const queue: Job[] = [];
  const spareBytes: ArrayBuffer[] = [];
  const spareTapes: ArrayBuffer[] = [];
  let waiting: TransformCallback | null = null;
  let ending: TransformCallback | null = null;

  let job: Job | null = null;
  let spool: LineSpool | null = null;
  // Quarantined lines are counted when their job is handed on, in input order: a long line's
  // verdict comes back from a worker after the short lines after it were judged.
  const settle = (lineNo: number, raw: Buffer, s: Scanned): SubteeRecord =>
    s.ok ? scannedRecord(lineNo, raw, s) : { kind: 'quarantine', lineNo, raw, reason: s.reason, final: true };

  const splitter = new LineSplitter(opts.maxLineBytes, {
    line(raw, lineNo, terminated) {
      if (isBlank(raw)) {
        run.input.blankLines++;
        return;
      }
      run.input.lines++;
      // Short lines are cheaper to check here than to hand over.
      if (!terminated || raw.length < LAZY_TEXT_BYTES || planLine(raw) !== 'scan') {
        job!.slots.push(settle(lineNo, raw, scanLine(raw, terminated)));
        return;
      }
      job!.slots.push({ lineNo, raw, scan: 0 });
    },
    junkRun(raw, lineNo, lines) {
      run.input.lines += lines;
      job!.slots.push(junkRunRecord(raw, lineNo, lines));
    },
    overflow(piece, lineNo, final, terminated = true) {
      spool ??= new LineSpool(spoolDir(run), lineNo);
      spool.push(piece);
      if (!final) return;
      job!.slots.push(endSpool(run, spool, lineNo, terminated, opts.maxLineBytes, false));
      spool = null;
    },
  });

  const start = (): Worker => {
    const w = new Worker(new URL('./scan-thread.js', import.meta.url));
    w.on('message', (r: ScanResult) => {
      const j = queue.find((q) => q.id === r.id);
      if (j) j.result = r;
      drain();
    });
    w.on('error', (err) => fail(err));
    w.on('exit', (code) => {
      // A worker stopped at the end or on destroy exits with 1 too: only other exits fail.
      if (code !== 0 && !stopped) fail(new Error(`the scan worker exited with code ${code}`));
    });
    return w;
  };

  const stopWorkers = () => {
    stopped = true;
    for (let k = 0; k < workers.length; k++) {
      void workers[k]?.terminate();
      workers[k] = null;
    }
  };

  const fail = (err: Error) => {
    if (failed) return;
    failed = new SubteeError('ERR_SCAN_WORKER', `line parser worker failed: ${err.message}`, { cause: err });
    stream.destroy(failed);
  };

  /**
   * Sends the job's lines to the worker, on a copy: the chunk, then any line that began in
   * an earlier chunk (the splitter joined it into a buffer of its own).
   */
  const send = (j: Job) => {
    const lines: number[] = [];
    const c = j.chunk;
    const joined: Buffer[] = [];
    let length = c.length;
    for (const s of j.slots) {
      if (!('scan' in s)) continue;
      const r = s.raw;
      if (
        r.buffer === c.buffer &&
        r.byteOffset >= c.byteOffset &&
        r.byteOffset + r.length <= c.byteOffset + c.length
      ) {
        lines.push(r.byteOffset - c.byteOffset, r.byteOffset - c.byteOffset + r.length);
      } else {
        lines.push(length, length + r.length);
        joined.push(r);
        length += r.length;
      }
    }
    if (lines.length === 0) return;
    let bytes = spareBytes.pop();
    if (!bytes || bytes.byteLength < length) bytes = new ArrayBuffer(Math.max(length, 256 * 1024));
    const view = new Uint8Array(bytes);
    view.set(c);
    for (let k = 0, at = c.length; k < joined.length; at += joined[k].length, k++) view.set(joined[k], at);
    const msg: ScanJob = {
      id: j.id,
      bytes,
      length,
      lines: Int32Array.from(lines),
      tape: spareTapes.pop() ?? null,
    };
    j.sent = lines.length >> 1;
    const slot = sentJobs++ % workers.length;
    const worker = (workers[slot] ??= start());
    worker.postMessage(msg, [bytes, msg.lines.buffer as ArrayBuffer, ...(msg.tape ? [msg.tape] : [])]);
  };

  /** Hands on finished jobs in order, and lets input in again when there is room. */
  const drain = () => {
    while (queue.length > 0 && (queue[0].sent === null || queue[0].result)) {
      const j = queue.shift()!;
      const batch = complete(j);
      if (batch.length > 0) stream.push(batch);
    }
    if (waiting && queue.length < inFlight) {
      const cb = waiting;
      waiting = null;
      cb();
    }
    if (ending && queue.length === 0) finish();
  };

  const complete = (j: Job): RecordBatch => {
    const r = j.result;
    const tape = new Tape(0);
    if (r) tape.ints = new Int32Array(r.tape);
    let k = 0;
    const batch = j.slots.map((s): SubteeRecord => {
      if (!('scan' in s)) return s;
      const at = r!.at[k++];
      return settle(s.lineNo, s.raw, fromScan(s.raw, tape, at, true));
    });
    if (r) {
      spareBytes.push(r.bytes);
      spareTapes.push(r.tape);
    }
    for (const rec of batch) {
      if (rec.kind === 'quarantine' && rec.final) countQuarantine(run, rec.lineNo, rec.lines ?? 1);
      else if (rec.kind === 'spooled' && rec.reason) countQuarantine(run, rec.lineNo, 1);
    }
    return batch;
  };

  const finish = () => {
    const cb = ending!;
    ending = null;
    job = { id: nextId++, chunk: Buffer.alloc(0), slots: [], sent: null, result: null };
    splitter.end();
    const last = complete(job);
    job = null;
    warnIfAllQuarantined(run);
    stopWorkers();
    cb(null, last.length > 0 ? last : undefined);
  };

  const stream: Transform = new Transform({
    writableObjectMode: false,
    readableObjectMode: true,
    readableHighWaterMark: BATCH_HIGH_WATER_MARK,
    transform(chunk: Buffer, _enc, cb: TransformCallback) {
      if (failed) return cb(failed);
      run.input.bytes += chunk.length;
      job = { id: nextId++, chunk, slots: [], sent: null, result: null };
      splitter.push(chunk);
      const j = job;
      job = null;
      queue.push(j);
      send(j);
      drain();
      if (queue.length >= inFlight) waiting = cb;
      else cb();
    },
    flush(cb: TransformCallback) {
      ending = cb;
      drain();
    },
    destroy(err, cb) {
      spool?.discard();
      stopWorkers();
      cb(err);
    },
  });
  return stream;
}
