import {
  closeSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { OutputError, writeFailed } from '../../errors.js';
import { buildIndex, type ChannelPaths } from '../../views/index-file.js';
import {
  BATCH_HIGH_WATER_MARK,
  type LineRecord,
  type RecordBatch,
  type SpooledRecord,
} from '../../model/record.js';
import { escapeControl, escapeOneLine } from '../../views/escape.js';
import { headerLines, renderRecord, spooledLine, statusLine } from '../../views/text.js';
import { requireSession, type Session } from '../../model/session.js';
import type { ChannelSnapshot } from '../../model/tree.js';
import { passOn } from './pass-on.js';
import { AppendFiles, type AppendFile } from './append-files.js';
import { appendSpool } from './spool-copy.js';
import { FileNamer } from './file-names.js';
import { createNewFile, descriptorBudget, makeDirs } from '../../safe-open.js';
import { BUILTIN_KIT, definePlugin } from '../plugin.js';
import { removeLeftoverSpools } from '../stages/line-spool.js';

export const FILES_SINK_DEFAULTS = Object.freeze({
  /**
   * Open descriptors kept at most; others are closed and reopened for append. 128, or fewer
   * when the process's own limit (`ulimit -n`) leaves less room.
   */
  maxOpenFiles: descriptorBudget(128),
  /** Queued bytes that force a write before the next record is taken. */
  flushBytes: 1024 * 1024,
  /** Write into a folder that already holds files. */
  force: false,
});

export interface FilesSinkOptions {
  out: string;
  maxOpenFiles?: number;
  flushBytes?: number;
  force?: boolean;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

interface ChannelFiles extends ChannelPaths {
  logFile: AppendFile;
  jsonlFile: AppendFile;
  thinkingFile?: AppendFile;
}

const NL = Buffer.from('\n');

/**
 * Refuses an `out` that is a file, or a folder that already holds files (unless forced).
 * With `force`, an `agents` entry that is not a real folder (a link, a file) is replaced by
 * one: subtee never writes through a link planted in `out`.
 */
export function prepareOutDir(out: string, force: boolean): void {
  if (out === '') throw new OutputError('ERR_OUT_NOT_DIR', out, '--out must name a folder, not ""');
  let st;
  try {
    st = statSync(out);
  } catch {
    st = null;
  }
  if (st && !st.isDirectory())
    throw new OutputError('ERR_OUT_NOT_DIR', out, `--out ${out} exists and is not a folder`);
  if (st && !force && readdirSync(out).length > 0) {
    throw new OutputError(
      'ERR_OUT_NOT_EMPTY',
      out,
      `--out ${out} already holds files (a previous run?); choose a new folder or pass --force`,
    );
  }
  const agents = join(out, 'agents');
  try {
    makeDirs(out);
    const entry = lstatOrNull(agents);
    if (entry && !entry.isDirectory()) unlinkSync(agents);
    if (!entry?.isDirectory()) mkdirSync(agents);
  } catch (err) {
    throw writeFailed(agents, err);
  }
  if (st && force) removeLeftoverSpools(out);
}

function lstatOrNull(path: string) {
  try {
    return lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Files sink: a pass-through stage (record batches in, the same out) that writes
 * `main.log`/`main.jsonl`, `agents/<id>.log`/`.jsonl`, `quarantine.log` and `index.json`.
 *
 * Writes are queued and written synchronously in batches: when the queue passes
 * `flushBytes` (before the next record is accepted, which is the backpressure), and on the
 * next turn of the event loop otherwise, so a line is on disk as soon as input pauses —
 * never held back waiting for more. On interruption (destroy) whatever was received is
 * flushed and index.json is still written.
 */
export function createFilesSink(options: FilesSinkOptions): Transform {
  const opts = withDefaults(FILES_SINK_DEFAULTS, options);
  const run = requireSession(options, 'createFilesSink');
  prepareOutDir(opts.out, opts.force);
  const files = new AppendFiles(opts.out, opts.maxOpenFiles, opts.force);
  const namer = new FileNamer();
  const byChannel = new Map<string | null, ChannelFiles>();
  let quarantine: AppendFile | null = null;
  let scheduled: NodeJS.Immediate | null = null;
  let finished = false;

  const filesOf = (ch: ChannelSnapshot): ChannelFiles => {
    let f = byChannel.get(ch.id);
    if (f) return f;
    const stem = ch.id === null ? 'main' : `agents/${namer.stemFor(ch.id)}`;
    const log = `${stem}.log`;
    const jsonl = `${stem}.jsonl`;
    f = { log, jsonl, logFile: files.file(log), jsonlFile: files.file(jsonl) };
    byChannel.set(ch.id, f);
    files.write(f.logFile, headerLines(ch).join('\n') + '\n');
    files.write(f.jsonlFile, Buffer.alloc(0));
    return f;
  };

  const writeLine = (rec: LineRecord | SpooledRecord) => {
    // The raw line is written whatever happens; a record that cannot be shown gets a marker
    // in the transcript instead of failing the run (and losing the records after it).
    let lines: string[];
    try {
      for (const ev of rec.events ?? []) {
        const f = filesOf(ev.channel);
        if (ev.type === 'spawn') {
          files.write(
            f.logFile,
            `[spawn] parent ${ev.channel.parent ?? 'main'}, depth ${ev.channel.depth ?? '(unknown)'}\n`,
          );
        } else if (ev.type === 'status') {
          files.write(f.logFile, statusLine(ev.channel.status, ev.summary) + '\n');
        }
      }
      lines = rec.kind === 'line' ? renderRecord(rec) : [];
    } catch (err) {
      const why = run.recordFailed('files', rec.lineNo, err);
      lines = [`[line ${rec.lineNo} could not be shown: ${escapeOneLine(why)}]`];
    }
    const f = filesOf(rec.channel ?? run.tree.main);
    if (rec.kind === 'spooled') {
      appendSpool(files, f.jsonlFile, rec.spool);
      files.write(f.jsonlFile, NL);
      files.write(f.logFile, spooledLine(rec, f.jsonl) + '\n');
      return;
    }
    // A derived line (mapped from another line's event) has no bytes of its own to keep.
    if (!rec.derived) {
      files.write(f.jsonlFile, rec.raw);
      files.write(f.jsonlFile, NL);
    }
    if (lines.length > 0) files.write(f.logFile, lines.join('\n') + '\n');
    if (rec.thinkingFull) {
      if (!f.thinkingFile) {
        f.thinking_log = f.log.replace(/\.log$/, '.thinking.log');
        f.thinkingFile = files.file(f.thinking_log);
      }
      for (const t of rec.thinkingFull)
        files.write(f.thinkingFile, `[thinking] input line ${rec.lineNo}\n${escapeControl(t)}\n\n`);
    }
  };

  const writeIndex = () => {
    const index = buildIndex(run, (ch) => byChannel.get(ch.id), quarantine?.rel ?? null);
    const path = join(opts.out, 'index.json');
    const data = Buffer.from(JSON.stringify(index, null, 2) + '\n');
    try {
      // A fresh temporary file (whatever has its name is replaced, never written through),
      // then one rename: a reader sees the old index or the new one, never half of one.
      const { fd } = createNewFile(`${path}.tmp`, true);
      try {
        for (let off = 0; off < data.length;) off += writeSync(fd, data, off, data.length - off);
      } finally {
        closeSync(fd);
      }
      renameSync(`${path}.tmp`, path);
    } catch (err) {
      throw writeFailed(path, err);
    }
  };

  const flushNow = () => {
    if (scheduled) clearImmediate(scheduled);
    scheduled = null;
    files.flush();
  };

  const finish = () => {
    if (finished) return;
    finished = true;
    try {
      flushNow();
    } finally {
      // Before the index: under a tight descriptor limit it needs one of them.
      files.closeAll();
    }
    writeIndex();
  };

  filesOf(run.tree.main);
  run.channelFiles = {
    out: opts.out,
    jsonlPath: (id) => {
      const f = byChannel.get(id);
      return f && resolve(opts.out, f.jsonl);
    },
    flush: () => {
      if (!finished) flushNow();
    },
    spoolDir: opts.out,
  };

  const sink = new Transform({
    objectMode: true,
    highWaterMark: BATCH_HIGH_WATER_MARK,
    transform(batch: RecordBatch, _enc, cb: TransformCallback) {
      try {
        for (const rec of batch) {
          if (rec.kind === 'quarantine') {
            quarantine ??= files.file('quarantine.log');
            files.write(quarantine, rec.raw);
            if (rec.final) files.write(quarantine, NL);
          } else if (rec.kind === 'spooled' && rec.reason) {
            quarantine ??= files.file('quarantine.log');
            appendSpool(files, quarantine, rec.spool);
            files.write(quarantine, NL);
          } else {
            writeLine(rec);
          }
        }
        if (files.pendingBytes >= opts.flushBytes) flushNow();
        else
          scheduled ??= setImmediate(() => {
            scheduled = null;
            try {
              files.flush();
            } catch (err) {
              sink.destroy(err as Error);
            }
          });
      } catch (err) {
        return cb(err as Error);
      }
      cb(null, passOn(sink, batch));
    },
    flush(cb: TransformCallback) {
      try {
        finish();
      } catch (err) {
        return cb(err as Error);
      }
      cb();
    },
    destroy(err, cb) {
      // Interrupted or failed upstream: keep what arrived and say so in the index.
      try {
        finish();
      } catch (finishErr) {
        return cb(err ?? (finishErr as Error));
      }
      cb(err);
    },
  });
  return sink;
}

export const filesSinkPlugin = definePlugin<Omit<FilesSinkOptions, 'session'>>({
  name: 'files',
  kind: 'sink',
  kit: BUILTIN_KIT,
  options: {
    out: {
      type: 'string',
      required: true,
      minLength: 1,
      description: 'folder for transcripts and index.json (must be new or empty)',
    },
    maxOpenFiles: {
      type: 'integer',
      min: 4,
      default: FILES_SINK_DEFAULTS.maxOpenFiles,
      defaultVaries: true,
      description:
        'open file handles kept at most (others are reopened for append; the default fits under ulimit -n)',
    },
    flushBytes: {
      type: 'integer',
      min: 1,
      default: FILES_SINK_DEFAULTS.flushBytes,
      description: 'queued bytes that force a write',
    },
    force: {
      type: 'boolean',
      default: FILES_SINK_DEFAULTS.force,
      description:
        'write into an output folder that already holds files (entries of the same names are replaced)',
    },
  },
  create: (o, ctx) => createFilesSink({ ...o, session: ctx.session }),
});
