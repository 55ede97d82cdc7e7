import { FileChannelStore } from './channel-store.js';
import {
  closeSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Transform } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { OutputError, outNotEmpty, unwrittenText, writeFailed } from '../../errors.js';
import { outLockPath, refuseIfBusy, releaseOutLock, takeOutLock, type OutLock } from './out-lock.js';
import {
  channelRoom,
  describedRoom,
  indexForWriting,
  INDEX_ROOM,
  jsonBytes,
  runCosts,
  warningsRoom,
  type ChannelPaths,
  type RunCosts,
} from '../../views/index-file.js';
import { jsonPieces } from '../../views/json-pieces.js';
import type { LineRecord, RecordBatch, SpooledRecord } from '../../model/record.js';
import { escapeOneLine, escapeTextLines } from '../../views/escape.js';
import {
  costLine,
  headerLines,
  promptLine,
  renderRecord,
  spooledLine,
  statusLine,
} from '../../views/text.js';
import { requireSession, type SinkRun } from '../../model/session.js';
import { fullThinking, lineContent } from '../../model/content.js';
import { viewOf } from '../../model/line-view.js';
import { isObject, nonEmpty, systemSubtypeOf, type JsonObject } from '../../model/message.js';
import type { LazyText } from '../../model/scan.js';
import type { ChannelSnapshot } from '../../model/tree.js';
import { AppendFiles, relPath, type AppendFile } from './append-files.js';
import { appendSpool } from './spool-copy.js';
import { writePiecesSync } from './write-pieces.js';
import { IndexReserve } from './index-reserve.js';
import {
  createNewFile,
  descriptorBudget,
  makeDirs,
  openRegularUnder,
  removeEmptyFolders,
} from '../../safe-open.js';
import type { PreparedOut } from './prepared.js';
import { BatchTransform, type BatchOutcome } from '../batch-transform.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';
import { releaseLiveSpools, removeLeftoverSpools } from '../stages/line-spool.js';

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
  session: SinkRun;
  /**
   * Where each channel's files are named, shared with whoever reads them back (the chain
   * builds one from these options); the sink makes its own when none is given.
   */
  store?: FileChannelStore;
  /**
   * The chain's stop (`PluginContext.stopInput`): a failed write stops the input, and the
   * lines read until it stops are counted (not written) before index.json is. Without it a
   * failed write destroys the chain.
   */
  stopInput?: (reason: Error) => void;
  /**
   * Settles once every sink after this one has ended (the chain's `sinksAfterEnded`): the end
   * of the input is handed on once the transcripts are whole, and index.json is written then,
   * with what those sinks warned as they ended. Without it index.json is written at once.
   */
  sinksAfterEnded?: PromiseLike<void>;
}

/** A channel's files; their paths are made when index.json is written (`pathsOf`). */
interface ChannelFiles {
  readonly logFile: AppendFile;
  readonly jsonlFile: AppendFile;
  thinkingFile: AppendFile | null;
}

const pathsOf = (f: ChannelFiles): ChannelPaths => ({
  log: relPath(f.logFile),
  jsonl: relPath(f.jsonlFile),
  ...(f.thinkingFile ? { thinking_log: relPath(f.thinkingFile) } : {}),
});

const NL = Buffer.from('\n');

/**
 * Refuses an `out` that is a file, a folder another run is writing (ERR_OUT_BUSY, forced or
 * not), or a folder that already holds files (unless forced), then takes the folder's lock
 * (`takeOutLock`) before anything is written or removed there: two runs into one folder never
 * both get past here. With `force`, an `agents` entry that is not a real folder (a link, a
 * file) is replaced by one: subtee never writes through a link planted in `out`. Returns the
 * folders it made, outermost first, and the lock, held until the run ends.
 */
export function prepareOutDir(out: string, force: boolean): { made: string[]; lock: OutLock } {
  if (out === '') throw new OutputError('ERR_OUT_NOT_DIR', out, '--out must name a folder, not ""');
  let st;
  try {
    st = statSync(out);
  } catch {
    st = null;
  }
  if (st && !st.isDirectory())
    throw new OutputError('ERR_OUT_NOT_DIR', out, `--out ${out} exists and is not a folder`);
  // Busy first: a folder a live run writes holds files too, and --force must not clear it.
  if (st) refuseIfBusy(out);
  if (st && !force && readdirSync(out).length > 0) throw outNotEmpty(out);
  const agents = join(out, 'agents');
  const made: string[] = [];
  try {
    made.push(...makeDirs(out));
  } catch (err) {
    throw writeFailed(agents, err);
  }
  let lock: OutLock;
  try {
    lock = takeOutLock(out, force);
  } catch (err) {
    removeEmptyFolders(made);
    throw err instanceof OutputError ? err : writeFailed(outLockPath(out), err);
  }
  try {
    const entry = lstatOrNull(agents);
    if (entry && !entry.isDirectory()) unlinkSync(agents);
    if (!entry?.isDirectory()) {
      mkdirSync(agents);
      made.push(agents);
    }
  } catch (err) {
    releaseOutLock(lock);
    throw writeFailed(agents, err);
  }
  if (st && force) {
    try {
      removeLeftoverSpools(out);
      removeEarlierTranscripts(out);
    } catch (err) {
      releaseOutLock(lock);
      throw err;
    }
  }
  return { made, lock };
}

/**
 * The output folder made ready as the files sink makes it ready before its first line:
 * checked, locked, made, cleared of an earlier run's transcripts with `force`, and index.json's
 * room taken in it. Handed to the sink (`filesSinkPlugin`), or let go by `releaseOutput`.
 */
export function prepareOutput(out: string, force: boolean): PreparedOut {
  const { made, lock } = prepareOutDir(out, force);
  const path = join(out, 'index.json.tmp');
  try {
    return { out, made, lock, reserve: new IndexReserve(path, force) };
  } catch (err) {
    releaseOutLock(lock);
    throw writeFailed(path, err);
  }
}

/**
 * Lets go of an output folder no run wrote into (a command that could not start): index.json's
 * room is removed, then the lock, and the folders the preparing made while they are still
 * empty. An earlier run's transcripts that `force` removed stay removed.
 */
export function releaseOutput(prepared: PreparedOut): void {
  prepared.reserve.close();
  removeQuietly(prepared.reserve.path);
  releaseOutLock(prepared.lock);
  removeEmptyFolders(prepared.made);
}

/** The files a run writes at the top of its folder, some only sometimes. */
const TOP_RUN_FILES = Object.freeze([
  'index.json',
  'main.log',
  'main.jsonl',
  'main.thinking.log',
  'quarantine.log',
  'report.html',
]);

/**
 * Removes what an earlier run left in a folder a forced run writes into, so that the folder
 * holds this run's transcripts only: every `.log`/`.jsonl` entry of `agents/` (subtee's own
 * folder) and the top-level files a run writes. A link is removed, never
 * followed; a folder is left alone; the ClickHouse spool (rows still to send) is kept.
 */
function removeEarlierTranscripts(out: string): void {
  const agents = join(out, 'agents');
  const stale = readdirSync(agents)
    .filter((name) => name.endsWith('.log') || name.endsWith('.jsonl'))
    .map((name) => join(agents, name));
  for (const path of [...stale, ...TOP_RUN_FILES.map((name) => join(out, name))]) {
    const entry = lstatOrNull(path);
    if (!entry || entry.isDirectory()) continue;
    try {
      unlinkSync(path);
    } catch (err) {
      throw writeFailed(path, err);
    }
  }
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
 * never held back waiting for more. At the input's end the transcripts get their last lines;
 * index.json follows once the sinks after it have ended (`sinksAfterEnded`). On interruption
 * (destroy) whatever was received is flushed and index.json is still written.
 */
export function createFilesSink(options: FilesSinkOptions): Transform {
  return new FilesSink(options);
}

class FilesSink extends BatchTransform {
  readonly #opts: typeof FILES_SINK_DEFAULTS & FilesSinkOptions;
  readonly #run: SinkRun;
  readonly #files: AppendFiles;
  readonly #store: FileChannelStore;
  readonly #byChannel = new Map<string | null, ChannelFiles>();
  #quarantine: AppendFile | null = null;
  #scheduled: NodeJS.Immediate | null = null;
  /** The transcripts ended (`#endTranscripts`): the run's costs, and what failed then, if anything. */
  #ended: { costs: RunCosts; failure: unknown } | null = null;
  #indexDone = false;
  /** Room on the disk for index.json, and what it is to hold: see `#reserveRoom`. */
  readonly #reserve: IndexReserve;
  /** The output folder's lock: let go once index.json is written (or could not be). */
  readonly #lock: OutLock;
  #indexRoom: number = INDEX_ROOM.headBytes;
  #warningsCounted = 0;
  /** Models whose room is counted (a run names a handful). */
  readonly #models = new Set<string>();
  /**
   * Subagents opened by a spawn whose transcript has no line yet: the `[prompt]` line of the
   * prompt the spawn call (or task_started) gave, or null. Claude Code forwards a foreground
   * subagent's prompt as its first line, never a background one's; see `#promptFirst`.
   */
  readonly #promptPending = new Map<string, string | null>();
  /** The write that failed, once the input was asked to stop for it: nothing is written after. */
  #failed: OutputError | null = null;

  /** `prepared`: the folder `options.out` made ready (prepareOutput), else it is made ready here. */
  constructor(options: FilesSinkOptions, prepared?: PreparedOut) {
    super({ sink: true });
    const opts = withDefaults(FILES_SINK_DEFAULTS, options);
    this.#opts = opts;
    this.#run = requireSession(options, 'createFilesSink');
    const ready = prepared ?? prepareOutput(opts.out, opts.force);
    this.#reserve = ready.reserve;
    this.#lock = ready.lock;
    try {
      this.#files = new AppendFiles(opts.out, opts.maxOpenFiles, opts.force, ['agents']);
      const run = this.#run;
      this.#store = options.store ?? new FileChannelStore(opts.out, () => run.heldLineBytes);
      this.#filesOf(this.#run.tree.main);
      this.#reserveRoom();
    } catch (err) {
      // No run will end here to let go of the folder.
      releaseOutLock(this.#lock);
      throw err;
    }
  }

  protected override transformBatch(batch: RecordBatch): BatchOutcome {
    // After a failed write the lines still arriving (until the input stops) are counted as
    // read and handed on, not written: a file a write broke off is never appended to again.
    if (this.#failed) return batch;
    try {
      this.#reserveRoom();
      for (const rec of batch) {
        if (rec.kind === 'quarantine') {
          this.#files.writeCopied(this.#quarantineFile(), rec.raw, rec.final);
        } else if (rec.kind === 'spooled' && rec.reason) {
          const quarantine = this.#quarantineFile();
          appendSpool(this.#files, quarantine, rec.spool);
          this.#files.write(quarantine, NL);
        } else {
          this.#writeLine(rec);
        }
      }
      if (this.#files.pendingBytes >= this.#opts.flushBytes) this.#flushNow();
      else this.#scheduled ??= setImmediate(() => this.#flushLater());
    } catch (err) {
      if (!this.#stopFor(err)) throw err;
    }
    return batch;
  }

  /**
   * A failed write stops the input (when the chain gave its stop): the run then ends as an
   * interrupted one does, every line read reaching the sinks and counted, and fails with the
   * write's error. False when the error is not a write's or there is no stop to ask.
   */
  #stopFor(err: unknown): boolean {
    if (!(err instanceof OutputError) || !this.#opts.stopInput) return false;
    if (this.#scheduled) clearImmediate(this.#scheduled);
    this.#scheduled = null;
    this.#failed = err;
    this.#opts.stopInput(err);
    return true;
  }

  protected override flushAtEnd(): BatchOutcome {
    const { failure } = this.#endTranscripts(null, false);
    const after = this.#opts.sinksAfterEnded;
    // A failure fails the run now: index.json is written at once, as on an interruption.
    if (failure !== null || after === undefined) return this.#endIndex(null);
    // The sinks after this one end now, and what they warn as they end is in index.json.
    this.endOutput();
    return Promise.resolve(after).then(() => this.#endIndex(null));
  }

  /**
   * Interrupted or failed, upstream, here or in a sink after this one (while index.json waits
   * for them): keep what arrived and write the index. Lines cut short are counted unwritten and
   * a failed write is named (OUTPUT_FAILED) when the transcripts were not whole yet; a sink
   * failing after they were is the run's error (stderr, the exit code), not the index's.
   */
  protected override teardown(error: Error | null): void {
    this.#endTranscripts(error, true);
    this.#endIndex(error);
  }

  #quarantineFile(): AppendFile {
    return (this.#quarantine ??= this.#files.file('quarantine', '.log', true));
  }

  /**
   * Grows the reserve to what index.json would now need at most, before the lines queued are
   * written: channels, their strings and models as they appear, the warnings and the listed
   * quarantine lines. A disk too full for it fails the writes that follow, not this.
   */
  #reserveRoom(): void {
    const warnings = this.#run.warnings;
    this.#indexRoom += warningsRoom(warnings, this.#warningsCounted);
    this.#warningsCounted = warnings.length;
    const listed = this.#run.quarantineLines.listed.length * INDEX_ROOM.quarantineLineBytes;
    this.#reserve.ensure(this.#indexRoom + listed);
  }

  #filesOf(ch: ChannelSnapshot): ChannelFiles {
    let f = this.#byChannel.get(ch.id);
    if (f) return f;
    const stem = this.#store.stemOf(ch.id);
    f = {
      logFile: this.#files.file(stem, '.log'),
      jsonlFile: this.#files.file(stem, '.jsonl', true),
      thinkingFile: null,
    };
    this.#byChannel.set(ch.id, f);
    this.#indexRoom += channelRoom(ch.id, stem) + describedRoom(ch);
    this.#files.writeText(f.logFile, headerLines(ch).join('\n') + '\n');
    this.#files.write(f.jsonlFile, Buffer.alloc(0));
    return f;
  }

  #writeLine(rec: LineRecord | SpooledRecord): void {
    const files = this.#files;
    const lines = this.#shownLines(rec);
    const model = rec.kind === 'line' ? rec.usage?.model : undefined;
    if (model !== undefined && !this.#models.has(model)) {
      this.#models.add(model);
      this.#indexRoom += INDEX_ROOM.modelBytes + 2 * jsonBytes(model);
    }
    const f = this.#filesOf(rec.channel ?? this.#run.tree.main);
    if (rec.kind === 'spooled') {
      appendSpool(files, f.jsonlFile, rec.spool);
      files.write(f.jsonlFile, NL);
      this.#promptFirst(rec.channel?.id ?? null, f, false);
      files.writeText(f.logFile, spooledLine(rec, relPath(f.jsonlFile)) + '\n');
      return;
    }
    // A derived line (mapped from another line's event) has no bytes of its own to keep.
    if (!rec.derived) {
      files.writeLine(f.jsonlFile, rec.raw);
    }
    if (lines.length > 0) {
      this.#promptFirst(rec.channel?.id ?? null, f, this.#hasPrompt(rec));
      files.writeText(f.logFile, lines.join('\n') + '\n');
    }
    if (this.#run.display.thinking === 'file') this.#writeThinking(f, rec);
  }

  /**
   * The record's events into their channels' transcripts, and its own transcript lines. The
   * raw line is written whatever happens; a record that cannot be shown gets a marker in the
   * transcript instead of failing the run (and losing the records after it).
   */
  #shownLines(rec: LineRecord | SpooledRecord): string[] {
    try {
      for (const ev of rec.events ?? []) {
        const f = this.#filesOf(ev.channel);
        if (ev.type !== 'open') this.#indexRoom += describedRoom(ev.channel);
        if (ev.type === 'open' && ev.channel.id !== null && rec.kind === 'line') {
          this.#promptPending.set(ev.channel.id, spawnPrompt(viewOf(rec), ev.channel.id));
        }
        if (ev.type === 'spawn') {
          this.#files.writeText(
            f.logFile,
            // The parent's id is the stream's: escaped as the `# parent:` header's is.
            `[spawn] parent ${escapeOneLine(ev.channel.parent ?? 'main')}, ` +
              `depth ${ev.channel.depth ?? '(unknown)'}\n`,
          );
        } else if (ev.type === 'status') {
          this.#promptFirst(ev.channel.id, f, false);
          this.#files.writeText(f.logFile, statusLine(ev.channel.status, ev.summary) + '\n');
        }
      }
      if (rec.kind !== 'line') return [];
      // A task_started line may give a channel its agent and description without an event:
      // no string of it takes more room in the index than the line's own JSON text.
      if (systemSubtypeOf(viewOf(rec)) === 'task_started') {
        this.#indexRoom += rec.raw.length;
        this.#taskPrompt(viewOf(rec));
      }
      return renderRecord(rec, this.#run.display);
    } catch (err) {
      const why = this.#run.recordFailed('files', rec.lineNo, err);
      return [`[line ${rec.lineNo} could not be shown: ${escapeOneLine(why)}]`];
    }
  }

  /**
   * Before a subagent's first transcript line (or its status, or its cost line when it has
   * neither), the prompt its spawn gave, unless that first line is the prompt itself: a
   * foreground subagent's forwarded prompt is shown once, a background one's is not lost.
   */
  #promptFirst(id: string | null, f: ChannelFiles, hasPrompt: boolean): void {
    if (id === null || !this.#promptPending.has(id)) return;
    const line = this.#promptPending.get(id);
    this.#promptPending.delete(id);
    if (line && !hasPrompt) this.#files.writeText(f.logFile, line + '\n');
  }

  /** Whether a record shows a prompt: checked once a channel, on its first shown line. */
  #hasPrompt(rec: LineRecord): boolean {
    const id = rec.channel?.id ?? null;
    if (id === null || !this.#promptPending.get(id)) return false;
    return lineContent(viewOf(rec), this.#run.display).some((item) => item.kind === 'prompt');
  }

  /** task_started's prompt, for a subagent whose spawn call gave none. */
  #taskPrompt(line: JsonObject): void {
    const id = nonEmpty(line.tool_use_id);
    if (id === null || this.#promptPending.get(id) !== null) return;
    if (typeof line.prompt !== 'string' || line.prompt === '') return;
    this.#promptPending.set(id, promptLine(line.prompt));
  }

  /** In `file` mode, a line's thinking whole into its channel's `.thinking.log`. */
  #writeThinking(f: ChannelFiles, rec: LineRecord): void {
    let texts: Array<string | LazyText>;
    try {
      texts = fullThinking(viewOf(rec));
    } catch (err) {
      this.#run.recordFailed('files', rec.lineNo, err);
      return;
    }
    if (texts.length === 0) return;
    const lineNo = rec.lineNo;
    f.thinkingFile ??= this.#files.file(f.logFile.stem, '.thinking.log');
    for (const t of texts) {
      const text = `[thinking] input line ${lineNo}\n${escapeTextLines(t.toString())}\n\n`;
      this.#files.write(f.thinkingFile, text);
    }
  }

  #writeIndex(costs: RunCosts): void {
    const byChannel = this.#byChannel;
    // Named once it holds a line (a failed write can leave it without one).
    const quarantine = this.#quarantine && this.#run.input.quarantined > 0 ? relPath(this.#quarantine) : null;
    const paths = (ch: ChannelSnapshot) => {
      const f = byChannel.get(ch.id);
      return f && pathsOf(f);
    };
    const index = indexForWriting(this.#run, paths, quarantine, costs, this.#run.display);
    const path = join(this.#opts.out, 'index.json');
    // Into the room reserved for it: on a full disk too. Should the document outgrow it (a
    // stream of many models), a fresh temporary file, then with the room of live spools.
    try {
      this.#reserve.fill(jsonPieces(index), path);
      return;
    } catch {
      // Written again below, where a failure is reported.
    }
    const write = () => {
      // A fresh temporary file (whatever has its name is replaced, never written through),
      // then one rename: a reader sees the old index or the new one, never half of one.
      const { fd } = createNewFile(`${path}.tmp`, true);
      try {
        // In pieces, each channel's entry made as it is written: with 10,000 channels the
        // document as one string was ~30 MB of peak memory, and its entries all alive at once
        // raised the run's peak again.
        writePiecesSync(fd, jsonPieces(index), '\n');
      } finally {
        closeSync(fd);
      }
      renameSync(`${path}.tmp`, path);
    };
    try {
      write();
    } catch (err) {
      removeQuietly(`${path}.tmp`);
      // A disk filled by a spooled line: its spool, which will not be copied now, makes room.
      if ((err as NodeJS.ErrnoException).code !== 'ENOSPC' || releaseLiveSpools(this.#opts.out) === 0) {
        throw writeFailed(path, err);
      }
      try {
        write();
      } catch (again) {
        removeQuietly(`${path}.tmp`);
        throw writeFailed(path, again);
      }
    }
  }

  /**
   * After a failed output or a chain cut short: the input lines in the folder, counted from
   * the files themselves (the model counts the rest as unwritten), and of them those in
   * `quarantine.log`. Every input line is one line of a channel's `.jsonl` or of
   * `quarantine.log` (a line cut short by the failure has no newline yet and is not counted),
   * so what the files hold is what was written, whichever write failed.
   */
  #linesWritten(): { written: number; quarantined: number } {
    const out = this.#opts.out;
    const quarantined = this.#quarantine ? linesIn(out, relPath(this.#quarantine)) : 0;
    let written = quarantined;
    for (const f of this.#byChannel.values()) written += linesIn(out, relPath(f.jsonlFile));
    return { written, quarantined };
  }

  /** The queued writes on the next turn of the event loop, unless a batch forces them first. */
  #flushLater(): void {
    this.#scheduled = null;
    try {
      this.#reserveRoom();
      this.#files.flush();
    } catch (err) {
      if (!this.#stopFor(err)) this.destroy(err as Error);
    }
  }

  #flushNow(): void {
    if (this.#scheduled) clearImmediate(this.#scheduled);
    this.#scheduled = null;
    this.#reserveRoom();
    this.#files.flush();
  }

  /** Each transcript ends with what its channel cost, known once the run is over. */
  #writeCostLines({ report, channels: costs }: RunCosts): void {
    for (const ch of this.#run.tree.channels()) {
      const f = this.#byChannel.get(ch.id);
      if (f) this.#promptFirst(ch.id, f, false);
      if (f) this.#files.writeText(f.logFile, costLine(costs.get(ch), report) + '\n');
    }
  }

  /**
   * Ends the transcripts: cost lines, what is buffered; after an output failed (here or in
   * another sink) the lines written are counted and an OUTPUT_FAILED warning names it, so that
   * index.json (`#endIndex`) tells a reader of the folder why the run failed.
   */
  #endTranscripts(error: Error | null, cutShort: boolean): { costs: RunCosts; failure: unknown } {
    if (this.#ended !== null) return this.#ended;
    // Once for the transcripts' last lines and the index: one pass over every channel, not two.
    const costs = runCosts(this.#run);
    let failure: unknown = null;
    try {
      // After a failed write, nothing but the index: what is still queued stays unwritten.
      if (this.#failed === null) {
        try {
          this.#writeCostLines(costs);
        } finally {
          this.#flushNow();
        }
      }
    } catch (err) {
      failure = err;
    } finally {
      // Before the index: under a tight descriptor limit it needs one of them. A file found
      // replaced while it was open fails the run as a failed write does.
      try {
        this.#files.closeAll();
      } catch (err) {
        if (this.#failed === null) failure ??= err;
      }
    }
    // The first write that failed is the one named (the chain's error, when it is one).
    const output = this.#failed ?? (error instanceof OutputError ? error : (failure ?? error));
    // Cut short (a failed plugin, an abort), lines read may never have reached this sink.
    if (output !== null || cutShort) {
      const { written, quarantined } = this.#linesWritten();
      this.#run.recordUnwritten(written, quarantined);
    }
    if (output instanceof OutputError)
      this.#run.warn('OUTPUT_FAILED', `${output.message}; ${unwrittenText(this.#run.input)}`);
    this.#ended = { costs, failure };
    return this.#ended;
  }

  /**
   * Writes index.json, once, after `#endTranscripts`: even when an output failed, and then
   * fails with that failure.
   */
  #endIndex(error: Error | null): void {
    if (this.#indexDone || this.#ended === null) return;
    this.#indexDone = true;
    const { costs, failure } = this.#ended;
    // The warnings the end added (a failed write's, the costs', the sinks' after this one):
    // room for them too, if any is left.
    try {
      this.#reserveRoom();
      this.#writeIndex(costs);
    } catch (err) {
      if (failure === null && error === null && this.#failed === null) throw err;
      // The run fails with its own error; this says what a reader of the folder will not find.
      const why = err instanceof Error ? err.message : String(err);
      this.#run.warn('INDEX_UNWRITTEN', `${why}: the folder has no index.json`);
    } finally {
      // The run has written its last file here: another run may have the folder.
      releaseOutLock(this.#lock);
    }
    if (failure !== null) throw failure;
  }
}

/** Newlines in a file of the output folder; a file that cannot be read back holds none. */
function linesIn(out: string, rel: string): number {
  let fd: number;
  try {
    fd = openRegularUnder(out, rel);
  } catch {
    return 0;
  }
  const buf = Buffer.allocUnsafe(64 * 1024);
  let count = 0;
  try {
    for (let n = readSync(fd, buf); n > 0; n = readSync(fd, buf)) {
      for (let i = buf.indexOf(LF); i !== -1 && i < n; i = buf.indexOf(LF, i + 1)) count++;
    }
  } catch {
    // What could be read is counted: the rest is not known to be there.
  } finally {
    closeSync(fd);
  }
  return count;
}

const LF = 0x0a;

type FilesSinkConfig = Omit<FilesSinkOptions, 'session' | 'store' | 'stopInput' | 'sinksAfterEnded'>;

export const filesSinkPlugin = defineBuiltin<FilesSinkConfig>({
  name: 'files',
  kind: 'sink',
  kit: BUILTIN_KIT,
  indexRole: () => 'writes',
  options: {
    out: {
      type: 'string',
      required: true,
      minLength: 1,
      description: 'folder for transcripts and index.json (new or empty, unless forced)',
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
        'write into an output folder that already holds files: every transcript, index.json and ' +
        'report.html an earlier run wrote there is removed first (other files are kept); a folder ' +
        'another run is writing is refused even so',
    },
  },
  create: (o, ctx) => {
    const store = ctx.channelStore;
    const shared = store instanceof FileChannelStore && store.out === o.out ? store : undefined;
    const options = {
      ...o,
      session: ctx.session,
      store: shared,
      stopInput: ctx.stopInput,
      sinksAfterEnded: ctx.sinksAfterEnded,
    };
    return new FilesSink(options, ctx.prepared?.takeOut(o.out));
  },
});

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Not there: nothing to tidy.
  }
}

/** The `[prompt]` line of the prompt a spawn call on `line` gives subagent `id`, or null. */
function spawnPrompt(line: JsonObject, id: string): string | null {
  for (const item of lineContent(line)) {
    if (item.kind !== 'tool_use' || item.id !== id || !isObject(item.input)) continue;
    const prompt = item.input.prompt;
    return typeof prompt === 'string' && prompt !== '' ? promptLine(prompt) : null;
  }
  return null;
}
