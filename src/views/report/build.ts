import { channelIdOf, isObject, type JsonObject } from '../../model/message.js';
import { closeSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { HELD_LINE_BYTES, LineSplitter } from '../../model/lines.js';
import { parseBounded, planLine } from '../../model/line-view.js';
import { elementsAt, membersAt, scanJson, Tape, valueAt } from '../../model/scan.js';
import { EXIT, SubteeError, systemReason } from '../../errors.js';
import { withDefaults } from '../../defaults.js';
import { openRegularForRead, openRunFile } from '../../safe-open.js';
import {
  endStatus,
  field,
  isoTime,
  lineFacts,
  REPORT_DEFAULTS,
  REPORT_FORMAT,
  safeLogPath,
  TranscriptBudget,
  usageOf,
  channelUsd,
  channelBasis,
  runCostView,
  clip,
  jsonForScript,
  type ChannelView,
  type ReportData,
  type ReportLimits,
  type RunView,
} from './model.js';
import { WARNINGS_TOLD_PER_CODE } from '../../model/run-model.js';
import { pageBytes } from './page.js';
import { counted } from '../summary.js';
import { escapeOneLine } from '../escape.js';
import { statedSubtree, treeRows, type PageChannel } from './client.js';
import {
  cutText,
  DISPLAY_DEFAULTS,
  displayPolicy,
  THINKING_MODES,
  type DisplayPolicy,
} from '../../model/display.js';

export interface ReportBuildOptions extends Partial<ReportLimits> {
  /** Shown in the page; the package's version by default. */
  subteeVersion?: string;
  /**
   * For a run whose `.jsonl` files keep another producer's events (index.json `producer`),
   * a reader of one channel's file that maps each event to the stream-json lines it stands
   * for, or null when the producer's files already hold stream-json lines.
   */
  channelReader?: (
    producer: string,
  ) => ((event: JsonObject, channel: string | null, eventBytes?: number) => JsonObject[]) | null;
  /**
   * For a run whose events all stay in main's `.jsonl` (LangGraph's), a reader of that file
   * that maps each event to the lines it stands for, of every channel, in order (each routed
   * by its `parent_tool_use_id`); null for a line that is no such event (main's own line).
   */
  runReader?: (producer: string) => ((event: JsonObject, eventBytes: number) => JsonObject[] | null) | null;
  /** How the page shows thinking; without one, what index.json says the run's views did. */
  display?: DisplayPolicy;
}

/** What a written report holds (see writeReport in the report sink's room). */
export interface ReportResult {
  path: string;
  bytes: number;
  limitBytes: number;
  channels: number;
  cutChannels: number;
  /** Channels not in the page at all (index.json and the `.log` files have them). */
  leftOutChannels?: number;
}

/** Estimates for sharing the page: its style and script, one channel's fields, one tick. */
const PAGE_BYTES = 64 * 1024;
const CHANNEL_BYTES = 800;
const TICK_BYTES = 14;

export function subteeVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * The read buffer one call of `forEachLine` hands the next: most `.jsonl` files fit one read,
 * and a fresh megabyte per file (2,000 files for a run of 2,000 subagents) kept 5–20 MB of
 * dead buffers waiting for a collection.
 */
let spareChunk: Buffer | null = null;

/**
 * Calls `fn` with each line of a file (a path, or a path inside a root folder, no link on the
 * way), without its newline, read a chunk at a time; the line's bytes are only valid during
 * the call (the read buffer is used again). A line
 * longer than `maxLineBytes` (one the line parser spooled) is not held: `onLongLine` gets
 * its length instead.
 */
export function forEachLine(
  path: string | [root: string, relative: string],
  fn: (line: Buffer) => void,
  onLongLine: (bytes: number) => void,
  maxLineBytes = HELD_LINE_BYTES,
  chunkBytes = 1024 * 1024,
): void {
  let longBytes = 0;
  const splitter = new LineSplitter(maxLineBytes, {
    line: fn,
    overflow(piece, _lineNo, final) {
      longBytes += piece.length;
      if (!final) return;
      onLongLine(longBytes);
      longBytes = 0;
    },
  });
  // The folder may hold planted entries: a link would show an outside file in the page.
  const fd = typeof path === 'string' ? openRegularForRead(path) : openRunFile(...path);
  // Taken, not shared: an `fn` that reads another file this way gets a buffer of its own.
  let chunk = spareChunk !== null && spareChunk.length === chunkBytes ? spareChunk : null;
  spareChunk = null;
  try {
    for (;;) {
      // The splitter keeps views of an unfinished line's start: that buffer stays its own.
      if (chunk === null || splitter.heldBytes > 0) chunk = Buffer.allocUnsafe(chunkBytes);
      const n = readSync(fd, chunk, 0, chunkBytes, null);
      if (n === 0) break;
      splitter.push(chunk.subarray(0, n));
    }
    splitter.end();
  } finally {
    closeSync(fd);
  }
  spareChunk = chunk;
}

/** A `.jsonl` path from index.json, kept only if it names a file inside the output folder. */
function safeJsonlPath(v: unknown): string | null {
  return typeof v === 'string' ? safeLogPath(v.replace(/\.jsonl$/, '.log')) && v : null;
}

const READ_REFUSALS: Record<string, string> = {
  ELOOP: 'it is a symbolic link, and subtee does not read through links',
  ENOTREG: 'it is not a regular file (a named pipe or a device)',
  EHARDLINK: 'it is a hard link (a file with other names), and subtee does not read through links',
};

function readRefusal(err: unknown): string {
  return systemReason(err, READ_REFUSALS);
}

/** index.json: its members but `channels`, and a walk over the channels, one entry at a time. */
interface IndexReading {
  head: JsonObject;
  channels(each: (entry: unknown) => void): void;
}

function readIndex(out: string): IndexReading {
  const path = join(out, 'index.json');
  let bytes: Buffer;
  try {
    const fd = openRegularForRead(path);
    try {
      bytes = readFileSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file (is it a subtee output folder?)' : readRefusal(err);
    throw new SubteeError('ERR_INPUT', `cannot read ${path}: ${why}`, { exitCode: EXIT.IO, cause: err });
  }
  const notIndex = () =>
    new SubteeError('ERR_INPUT', `cannot read ${path}: not a subtee index (no channels)`, {
      exitCode: EXIT.IO,
    });
  // Scanned, then built a channel at a time: parsed whole, the index of 10,000 channels was
  // some 30 MB of objects alive until the report was written.
  const tape = new Tape(Math.max(1024, bytes.length >> 2));
  const root = scanJson(bytes, 0, bytes.length, tape);
  if (root < 0) return parsedIndex(path, bytes.toString('utf8'), notIndex);
  const head: JsonObject = {};
  let channelsAt = -1;
  for (const [key, at] of membersAt(bytes, tape, root)) {
    if (key === 'channels') channelsAt = at;
    // JSON.parse makes `__proto__` an own member, as here.
    else
      Object.defineProperty(head, key, {
        value: valueAt(bytes, tape, at),
        writable: true,
        enumerable: true,
        configurable: true,
      });
  }
  const elements = channelsAt < 0 ? null : elementsAt(tape, channelsAt);
  if (elements === null) throw notIndex();
  return { head, channels: (each) => elements.forEach((at) => each(valueAt(bytes, tape, at))) };
}

/** What the scanner leaves to JSON.parse (not JSON, or too many values for a tape), read whole. */
function parsedIndex(path: string, text: string, notIndex: () => SubteeError): IndexReading {
  let index: unknown;
  try {
    index = JSON.parse(text);
  } catch (err) {
    throw new SubteeError('ERR_INPUT', `cannot read ${path}: not valid JSON`, {
      exitCode: EXIT.IO,
      cause: err,
    });
  }
  if (!isObject(index) || !Array.isArray(index.channels)) throw notIndex();
  const channels: unknown[] = index.channels;
  return { head: index, channels: (each) => channels.forEach(each) };
}

function channelView(c: JsonObject, summaryChars: number): ChannelView {
  const counts: Record<string, number> = {};
  if (isObject(c.counts))
    for (const [k, v] of Object.entries(c.counts))
      if (typeof v === 'number' && Number.isFinite(v)) counts[field(k, 'label') ?? '?'] = v;
  return {
    id: typeof c.id === 'string' ? field(c.id) : null,
    parent: field(c.parent),
    orphan: c.orphan === true,
    depth: typeof c.depth === 'number' && Number.isSafeInteger(c.depth) ? c.depth : null,
    agent: field(c.agent),
    description: field(c.description),
    status: endStatus(c.status),
    background: typeof c.background === 'boolean' ? c.background : null,
    summary: typeof c.summary === 'string' ? clip(c.summary, summaryChars, 'summary').s : null,
    lines: typeof c.lines === 'number' && Number.isFinite(c.lines) ? c.lines : 0,
    counts,
    usage: usageOf(c.usage),
    cost: channelUsd(c.cost),
    costBasis: channelBasis(c.cost),
    // Its span: spawn to report (index.json's started_at/ended_at; older ones have only lines).
    first: isoTime(c.started_at ?? c.first_seen),
    last: isoTime(c.ended_at ?? c.last_seen),
    spawned: null,
    log: safeLogPath(c.log),
    prompt: null,
    ticks: [],
    entries: [],
    cut: null,
  };
}

/**
 * The report's data from an output folder: index.json for the tree, statuses and run
 * facts, and each channel's `.jsonl` read line by line for its transcript, tool calls and
 * spawn times. Transcripts share the page budget; the rest stays in the `.log` files.
 */
export function readReportData(
  out: string,
  options: ReportBuildOptions = {},
): { data: ReportData; budgets: TranscriptBudget[] } {
  const limits = withDefaults(REPORT_DEFAULTS, options) as ReportLimits;
  const { run, producer, channels, jsonl, toolUses, display } = indexFacts(out, options);
  const byId = new Map<string, ChannelView>();
  for (const ch of channels) if (ch.id !== null && !byId.has(ch.id)) byId.set(ch.id, ch);
  // Room for the page itself and each channel's fields and ticks first; transcripts share
  // the rest (a little less: escaping and multi-byte text make bytes outgrow characters).
  let overhead = PAGE_BYTES;
  for (const tools of toolUses)
    overhead += CHANNEL_BYTES + TICK_BYTES * Math.min(limits.ticksPerChannel, tools);
  const share = Math.floor(((limits.maxPageBytes - overhead) * 0.9) / Math.max(1, channels.length));
  const perChannel = Math.max(0, Math.min(limits.channelChars, share));
  const budgets = channels.map(() => new TranscriptBudget(perChannel, limits.ticksPerChannel));
  const spawnPrompts = new Map<string, string>();

  /** What a channel's transcript takes of each line shown on it. */
  const onValueOf = (ch: ChannelView, budget: TranscriptBudget) => (value: JsonObject, lineBytes: number) => {
    const f = lineFacts(value, limits, display);
    for (let k = 0; k < f.tools; k++) budget.tick(f.time);
    for (const s of f.spawns) {
      const childId = field(s.id) ?? '';
      const child = byId.get(childId);
      if (child && child.spawned === null) child.spawned = f.time;
      if (s.prompt !== null && !spawnPrompts.has(childId)) spawnPrompts.set(childId, s.prompt);
    }
    if (ch.prompt === null && ch.id !== null) ch.prompt = f.prompt;
    if (budget.room === 0) budget.skipLine(lineBytes);
    else budget.addLine(f.entries);
  };
  const handlers = channels.map((ch, i) => onValueOf(ch, budgets[i]));
  const handlerOf = new Map<string | null, (value: JsonObject, lineBytes: number) => void>();
  channels.forEach((ch, i) => {
    if (!handlerOf.has(ch.id)) handlerOf.set(ch.id, handlers[i]);
  });
  const runReader = producer === null ? null : (options.runReader?.(producer) ?? null);

  channels.forEach((ch, i) => {
    const rel = jsonl[i];
    if (rel === null) return;
    const budget = budgets[i];
    const onValue = handlers[i];
    const mapped = producer === null ? null : (options.channelReader?.(producer) ?? null);
    // Main's file holds the whole run's events: each is shown on the channels it maps to.
    const whole = ch.id === null ? runReader : null;
    try {
      forEachLine(
        [out, rel],
        (line) => {
          // Once the budget is spent only tool calls matter (ticks and spawn times): skip
          // decoding the lines that cannot hold one (a mapped producer's may hold one by
          // another name).
          if (budget.room === 0 && mapped === null && whole === null && !line.includes('"tool_use"')) {
            if (line.length > 0) budget.skipLine(line.length);
            return;
          }
          // Bounded by the line's size however it nests (a line too dense is read by its top members).
          const read = planLine(line) === 'not-object' ? null : parseBounded(line, true);
          const value = read?.ok ? read.value : undefined;
          if (!isObject(value)) return;
          const lines = whole?.(value, line.length) ?? null;
          if (lines !== null) {
            for (const v of lines) (handlerOf.get(channelIdOf(v)) ?? onValue)(v, line.length);
          } else if (mapped === null) onValue(value, line.length);
          else for (const v of mapped(value, ch.id, line.length)) onValue(v, line.length);
        },
        (bytes) => budget.skipLine(bytes),
      );
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT')
        throw new SubteeError('ERR_INPUT', `cannot read ${join(out, rel)}: ${readRefusal(err)}`, {
          exitCode: EXIT.IO,
          cause: err,
        });
    }
  });
  for (const ch of channels)
    if (ch.prompt === null && ch.id !== null) ch.prompt = spawnPrompts.get(ch.id) ?? null;

  const data: ReportData = {
    format: REPORT_FORMAT,
    live: false,
    run,
    channels,
    page: { bytes: 0, limitBytes: limits.maxPageBytes, channelChars: perChannel, cutChannels: 0 },
  };
  attach(data, budgets);
  return { data, budgets };
}

/** What the report takes from index.json, its channels read one entry at a time (see readIndex). */
function indexFacts(
  out: string,
  options: ReportBuildOptions,
): {
  run: ReportData['run'];
  producer: string | null;
  channels: ChannelView[];
  jsonl: Array<string | null>;
  toolUses: number[];
  display: DisplayPolicy;
} {
  const { head: index, channels: eachChannel } = readIndex(out);
  const channels: ChannelView[] = [];
  const jsonl: Array<string | null> = [];
  const toolUses: number[] = [];
  eachChannel((c) => {
    if (!isObject(c)) return;
    channels.push(channelView(c, options.summaryChars ?? REPORT_DEFAULTS.summaryChars));
    jsonl.push(safeJsonlPath(c.jsonl));
    toolUses.push(isObject(c.counts) && typeof c.counts.tool_use === 'number' ? c.counts.tool_use : 0);
  });
  const input = isObject(index.input) ? index.input : {};
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  return {
    run: {
      subtee: options.subteeVersion ?? subteeVersion(),
      claudeCode: field(index.claude_code_version),
      session: field(index.session_id),
      stalled: index.stalled === true,
      interrupted: index.interrupted === true,
      input: { lines: n(input.lines), bytes: n(input.bytes), quarantined: n(input.quarantined) },
      quarantine: index.quarantine === 'quarantine.log' ? 'quarantine.log' : null,
      warnings: (Array.isArray(index.warnings) ? index.warnings : []).filter(isObject).map((w) => ({
        code: field(w.code) ?? '?',
        message: field(w.message, 'block') ?? '',
      })),
      cost: runCostView(index.cost),
    },
    producer: typeof index.producer === 'string' ? index.producer : null,
    channels,
    jsonl,
    toolUses,
    display: options.display ?? indexDisplay(index.display),
  };
}

/** The display policy index.json records (`display`); thinking whole when it records none. */
export function indexDisplay(value: unknown): DisplayPolicy {
  if (!isObject(value)) return DISPLAY_DEFAULTS;
  const mode = THINKING_MODES.find((m) => m === value.thinking);
  const chars = value.thinking_chars;
  const valid = typeof chars === 'number' && Number.isSafeInteger(chars) && chars >= 0;
  return displayPolicy({ thinking: mode, thinkingChars: valid ? chars : undefined });
}

function attach(data: ReportData, budgets: TranscriptBudget[]): void {
  data.channels.forEach((ch, i) => {
    ch.entries = budgets[i].entries;
    ch.ticks = budgets[i].ticks;
    ch.cut = budgets[i].cut();
  });
  data.page.cutChannels = data.channels.filter((c) => c.cut !== null).length;
}

/**
 * The most of the page the run's warnings may take. subtee lists at most WARNINGS_TOLD_PER_CODE
 * of a code in index.json, but a folder it did not write may list any number.
 */
const WARNINGS_PAGE_SHARE = 1 / 8;

/**
 * The warnings the page lists: in order, while they fit in `budgetBytes` and their code has had
 * fewer than WARNINGS_TOLD_PER_CODE; the rest counted in one last WARNINGS_OMITTED.
 */
export function fitWarnings(warnings: RunView['warnings'], budgetBytes: number): RunView['warnings'] {
  const shown: RunView['warnings'] = [];
  const perCode = new Map<string, number>();
  let room = budgetBytes;
  for (const w of warnings) {
    const told = perCode.get(w.code) ?? 0;
    const bytes = Buffer.byteLength(jsonForScript(w)) + 1;
    if (told >= WARNINGS_TOLD_PER_CODE || bytes > room) continue;
    perCode.set(w.code, told + 1);
    room -= bytes;
    shown.push(w);
  }
  const omitted = warnings.length - shown.length;
  if (omitted > 0) {
    const message = `${counted(omitted, 'more warning')} in index.json, not listed here`;
    shown.push({ code: 'WARNINGS_OMITTED', message });
  }
  return shown;
}

/** What prompts, final reports and descriptions are shortened to, in turn, once transcripts are gone. */
const FIELD_CHARS = [1000, 300, 100];

/**
 * The page's data, fitted under the size limit: when the transcripts as read do not fit
 * (JSON escaping and multi-byte text make bytes outgrow characters), every channel's budget
 * shrinks by the overshoot and the page is measured again, from memory. With many channels
 * their own fields outweigh any transcript, so once transcripts and ticks are gone the long
 * text fields are shortened, and then the page keeps as many channels as fit, the tree's top
 * first, and says how many it left out. Write it with `pagePieces(data, data.page.bytes)`.
 */
export function fitReportPage(out: string, options: ReportBuildOptions = {}): ReportData {
  const limits = withDefaults(REPORT_DEFAULTS, options) as ReportLimits;
  const { data, budgets } = readReportData(out, options);
  data.run.warnings = fitWarnings(data.run.warnings, limits.maxPageBytes * WARNINGS_PAGE_SHARE);
  let size = pageBytes(data);
  for (let attempt = 0; size > limits.maxPageBytes && attempt < 8; attempt++) {
    const per = attempt < 7 ? Math.floor(data.page.channelChars * (limits.maxPageBytes / size) * 0.9) : 0;
    data.page.channelChars = per;
    const ticks = attempt < 7 ? Math.floor(limits.ticksPerChannel * (limits.maxPageBytes / size)) : 0;
    for (const b of budgets) b.shrink(per, ticks);
    attach(data, budgets);
    size = pageBytes(data);
  }
  if (size > limits.maxPageBytes) size = shortenFields(data, limits.maxPageBytes, size);
  if (size > limits.maxPageBytes) leaveOutChannels(data, limits.maxPageBytes);
  return data;
}

/** Shortens prompts, final reports and descriptions step by step until the page fits; its size. */
function shortenFields(data: ReportData, limit: number, size: number): number {
  // Each step shortens the fields as read, so the count of chars cut that it shows stays true.
  const whole = data.channels.map((ch) => [ch.summary, ch.prompt, ch.description] as const);
  // Cut at the head, as a `preview` is, to each step's length.
  const short = (s: string | null, chars: number) => (s === null ? null : cutText(s, 'preview', chars).text);
  for (const chars of FIELD_CHARS) {
    if (size <= limit) break;
    if (!whole.some((fields) => fields.some((s) => s !== null && s.length > chars))) continue;
    data.page.fieldChars = chars;
    data.channels.forEach((ch, i) => {
      const [summary, prompt, description] = whole[i];
      ch.summary = short(summary, chars);
      ch.prompt = short(prompt, chars);
      ch.description = short(description, chars);
    });
    size = pageBytes(data);
  }
  return size;
}

/**
 * Keeps the channels that fit, taken level by level in the page's walk order (main and its
 * subagents first), so every kept channel's parent is kept too; the rest are left out and
 * counted. Each channel is one piece of the page, so its share is known without a new pass.
 * A kept channel with channels left out under it states its subtree's figures, added up over
 * every channel (the Σ columns show the subtree's, not the kept channels' sum).
 */
function leaveOutChannels(data: ReportData, limit: number): void {
  const all: PageChannel[] = data.channels;
  const rows = treeRows(all);
  // Stated on every channel with children while measuring (a bound), dropped below where unneeded.
  for (const r of rows) if (r.hasChildren) all[r.index].subtree = statedSubtree(r);
  const order = rows
    .map((r, at) => ({ index: r.index, level: r.level, at }))
    .sort((a, b) => a.level - b.level || a.at - b.at);
  // Measured with the widest counts the page section can end up with.
  data.channels = [];
  data.page.leftOutChannels = all.length;
  let room = limit - pageBytes(data);
  const keep = new Uint8Array(all.length);
  let kept = 0;
  for (const { index } of order) {
    const bytes = Buffer.byteLength(jsonForScript(all[index])) + (kept > 0 ? 1 : 0);
    // Stop at the first that does not fit: a smaller one further on may be its child.
    if (bytes > room) break;
    room -= bytes;
    keep[index] = 1;
    kept++;
  }
  // A subtree kept whole is added up by the page to the same figures: nothing to state.
  const whole = new Uint8Array(rows.length).fill(1);
  for (let r = rows.length - 1; r >= 0; r--) {
    const { index, parentRow } = rows[r];
    if (keep[index] === 0) whole[r] = 0;
    if (parentRow >= 0 && whole[r] === 0) whole[parentRow] = 0;
    if (whole[r] === 1) delete all[index].subtree;
  }
  data.channels = all.filter((_, i) => keep[i] === 1);
  data.page.leftOutChannels = all.length - kept;
  data.page.cutChannels = data.channels.filter((c) => c.cut !== null).length;
  pageBytes(data);
}

function mb(n: number): string {
  return n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(1)} MB` : `${(n / 1024).toFixed(1)} KB`;
}

/** The line subtee prints about a report it wrote. */
export function reportLine(r: ReportResult): string {
  const cut =
    r.cutChannels > 0
      ? `${r.cutChannels} of ${counted(r.channels, 'transcript')} cut to fit (the .log files have them whole)`
      : `${counted(r.channels, 'transcript')}, none cut`;
  const leftOut = r.leftOutChannels ?? 0;
  const missing =
    leftOut > 0
      ? `, ${leftOut} of ${counted(r.channels + leftOut, 'agent')} left out to fit ` +
        '(index.json and the .log files have them all)'
      : '';
  const size = `${mb(r.bytes)} (limit ${mb(r.limitBytes)})`;
  return `subtee: wrote ${escapeOneLine(r.path)}: ${size}, ${cut}${missing}\n`;
}
