import { escapeControl } from '../escape.js';
import { channelTokens } from '../walk.js';
import { lineContent } from '../../model/content.js';
import {
  CUT_LENGTHS,
  cutText,
  DISPLAY_DEFAULTS,
  type CutClass,
  type DisplayPolicy,
} from '../../model/display.js';
import { SPAWN_TOOLS, isObject, systemSubtypeOf, type JsonObject } from '../../model/message.js';

/**
 * The report's data: plain JSON, the same shape whether it is embedded in a static page
 * (built from an output folder) or streamed to a live page (built from records). Every
 * string in it has had its control characters made visible (escapeControl); the page puts
 * strings on screen with textContent only, so no string can become markup.
 */
export const REPORT_FORMAT = 'subtee-report/1';

export const REPORT_DEFAULTS = Object.freeze({
  /**
   * The page is kept under this size: transcripts are cut further until it fits, then long
   * fields are shortened and the deepest channels left out.
   */
  maxPageBytes: 8 * 1024 * 1024,
  /**
   * Transcript characters kept per channel at most, each block counting what it takes on the page
   * (entryChars); less when many channels share the page.
   */
  channelChars: 64 * 1024,
  /** Characters of one text, thinking or result block (a `block`: head and tail around the marker). */
  entryChars: CUT_LENGTHS.block.chars,
  /** Characters of one tool call's input (an `input`). */
  toolInputChars: CUT_LENGTHS.input.chars,
  /** Characters of the prompt a subagent received (a `block`). */
  promptChars: CUT_LENGTHS.block.chars,
  /** Characters of a subagent's final report (a `summary`). */
  summaryChars: CUT_LENGTHS.summary.chars,
  /** Tool-call ticks drawn per channel on the timeline. */
  ticksPerChannel: 400,
});

export type ReportLimits = { -readonly [K in keyof typeof REPORT_DEFAULTS]: number };

export type EntryKind = 'prompt' | 'text' | 'thinking' | 'tool' | 'result' | 'run';

/** One content block of a transcript. */
export interface Entry {
  k: EntryKind;
  /** Time of its line (ms since the epoch), null when the line had no timestamp. */
  t: number | null;
  s: string;
  /** Tool name (`tool`). */
  n?: string;
  /** Tool call id (`tool`), or the call a result answers (`result`). */
  id?: string;
  err?: boolean;
  /** Characters cut out of the middle of this block. */
  cut?: number;
}

export interface Usage {
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
  /** Its tokens as every view counts them (channelTokens: input + output, else a stated total). */
  tokens: number;
}

/** What was left out of a channel's transcript to keep the page bounded. */
export interface Cut {
  /** Lines (one content block each, as Claude Code writes them) not shown, wholly or in part. */
  lines: number;
  chars: number;
}

export interface ChannelView {
  id: string | null;
  parent: string | null;
  orphan: boolean;
  depth: number | null;
  agent: string | null;
  description: string | null;
  status: string;
  background: boolean | null;
  summary: string | null;
  lines: number;
  counts: Record<string, number>;
  usage: Usage;
  /** Its own dollars (index.json's `cost.usd`); null when unpriced or unknown. */
  cost: number | null;
  /** How its output tokens were found (index.json's `cost.basis`); `~` marks estimated figures. */
  costBasis: 'exact' | 'estimated' | 'stream' | 'unknown' | null;
  /** First and last line times (ms), and when its parent's spawn call was seen. */
  first: number | null;
  last: number | null;
  spawned: number | null;
  /** The readable transcript, relative to the output folder, when there is one. */
  log: string | null;
  prompt: string | null;
  ticks: number[];
  entries: Entry[];
  cut: Cut | null;
}

export interface RunView {
  subtee: string;
  claudeCode: string | null;
  session: string | null;
  stalled: boolean;
  interrupted: boolean;
  input: { lines: number; bytes: number; quarantined: number };
  quarantine: string | null;
  warnings: Array<{ code: string; message: string }>;
  /** The run's dollars beside Claude Code's own; null when the index has none. */
  cost: RunCostView | null;
}

interface RunCostView {
  usd: number | null;
  channelsUsd: number | null;
  resultUsd: number | null;
  unattributedUsd: number | null;
  basis: string;
  pricesDate: string | null;
  outputTokens: string;
}

const usdOrNull = (v: unknown): number | null =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;

/** The run's cost as the page shows it, from index.json's `cost` (or null). */
export function runCostView(cost: unknown): RunCostView | null {
  if (!isObject(cost)) return null;
  return {
    usd: usdOrNull(cost.usd),
    channelsUsd: usdOrNull(cost.channels_usd),
    resultUsd: usdOrNull(cost.result_usd),
    unattributedUsd: usdOrNull(cost.unattributed_usd),
    basis: cost.basis === 'result' ? 'result' : 'table',
    pricesDate: field(cost.prices_date, 'label'),
    outputTokens: field(cost.output_tokens, 'label') ?? 'stream',
  };
}

/** A channel's cost basis from its index.json row; null when it states none. */
export function channelBasis(cost: unknown): ChannelView['costBasis'] {
  const b = isObject(cost) ? cost.basis : null;
  return b === 'exact' || b === 'estimated' || b === 'stream' || b === 'unknown' ? b : null;
}

/** A channel's status as the page draws it: an end the tree names, else `running`. */
export function endStatus(status: unknown): 'completed' | 'failed' | 'stopped' | 'running' {
  return status === 'completed' || status === 'failed' || status === 'stopped' ? status : 'running';
}

/** A channel's own dollars from its index.json row. */
export function channelUsd(cost: unknown): number | null {
  return isObject(cost) ? usdOrNull(cost.usd) : null;
}

export interface PageInfo {
  /** Size of the page file; filled in when the page is written. */
  bytes: number;
  limitBytes: number;
  /** Transcript characters each channel was allowed. */
  channelChars: number;
  cutChannels: number;
  /**
   * Set only when transcripts cut to nothing were not enough: the characters each prompt, final
   * report and description was shortened to.
   */
  fieldChars?: number;
  /** Set only when even that was not enough: how many channels the page leaves out (its deepest). */
  leftOutChannels?: number;
}

export interface ReportData {
  format: typeof REPORT_FORMAT;
  live: boolean;
  run: RunView;
  channels: ChannelView[];
  page: PageInfo;
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const strOrNull = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);

/** A line's `timestamp` as ms since the epoch, or null. */
export function timeOf(value: JsonObject): number | null {
  if (typeof value.timestamp !== 'string') return null;
  const t = Date.parse(value.timestamp);
  return Number.isFinite(t) ? t : null;
}

export function isoTime(v: unknown): number | null {
  if (typeof v !== 'string') return null;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : null;
}

/**
 * Stream text made safe to show, cut as `cls` (head and tail around the marker) when longer
 * than `max`, its class's length unless the page's limits say otherwise.
 */
export function clip(
  s: string,
  max: number = CUT_LENGTHS.block.chars,
  cls: CutClass = 'block',
): { s: string; cut: number } {
  const c = cutText(s, cls, max);
  return { s: escapeControl(c.text), cut: c.cut };
}

/**
 * A one-line field (ids, names, descriptions): cut as `cls` (a `preview` unless said), controls
 * escaped, newlines shown as `\n`.
 */
export function field(v: unknown, cls: CutClass = 'preview', max?: number): string | null {
  const s = strOrNull(v);
  if (s === null) return null;
  return escapeControl(cutText(s, cls, max).text).replace(/\n/g, '\\n').replace(/\t/g, '\\t');
}

export function usageOf(u: unknown): Usage {
  const o = isObject(u) ? u : {};
  return {
    input: num(o.input_tokens),
    output: num(o.output_tokens),
    cacheRead: num(o.cache_read_input_tokens),
    cacheCreation: num(o.cache_creation_input_tokens),
    tokens: channelTokens({ usage: o }),
  };
}

/** What one stream line adds to the report of its channel (and the spawns it announces). */
export interface LineFacts {
  entries: Entry[];
  /** Tool calls made on this line, for the timeline's ticks. */
  tools: number;
  time: number | null;
  spawns: Array<{ id: string; prompt: string | null }>;
  /** The line's first prompt, cut to the page's `promptChars` (what a subagent was asked). */
  prompt: string | null;
  /** claude_code_version and session_id of a system/init line. */
  version: string | null;
  session: string | null;
}

function entry(
  k: EntryKind,
  t: number | null,
  text: string,
  max: number,
  extra: Partial<Entry> = {},
  cls: CutClass = 'block',
): Entry {
  const c = clip(text, max, cls);
  const e: Entry = { k, t, s: c.s, ...extra };
  if (c.cut > 0) e.cut = c.cut;
  return e;
}

/** Reads one parsed line: its transcript entries, tool calls and spawn calls. */
export function lineFacts(
  value: JsonObject,
  limits: ReportLimits = REPORT_DEFAULTS,
  display: DisplayPolicy = DISPLAY_DEFAULTS,
): LineFacts {
  const t = timeOf(value);
  const facts: LineFacts = {
    entries: [],
    tools: 0,
    time: t,
    spawns: [],
    prompt: null,
    version: null,
    session: null,
  };
  for (const item of lineContent(value, display)) {
    switch (item.kind) {
      case 'prompt':
        facts.prompt ??= clip(item.text, limits.promptChars).s;
        facts.entries.push(entry(item.kind, t, item.text, limits.entryChars));
        break;
      case 'text':
        facts.entries.push(entry(item.kind, t, item.text, limits.entryChars));
        break;
      case 'thinking':
        facts.entries.push(
          item.redacted
            ? { k: 'thinking', t, s: '(redacted)' }
            : entry('thinking', t, String(item.text), limits.entryChars),
        );
        break;
      case 'tool_use': {
        facts.tools++;
        const id = field(item.id) ?? undefined;
        let input: string;
        try {
          input = JSON.stringify(item.input ?? {}) ?? '';
        } catch {
          input = String(item.input);
        }
        const name = field(item.name) ?? 'tool';
        facts.entries.push(
          entry('tool', t, input, limits.toolInputChars, { n: name, ...(id ? { id } : {}) }, 'input'),
        );
        if (SPAWN_TOOLS.has(item.name) && item.id !== '') {
          const spawnInput = isObject(item.input) ? item.input : {};
          const prompt =
            typeof spawnInput.prompt === 'string' ? clip(spawnInput.prompt, limits.promptChars).s : null;
          facts.spawns.push({ id: item.id, prompt });
        }
        break;
      }
      case 'tool_result': {
        const ref = field(item.id) ?? undefined;
        const marks = { ...(ref ? { id: ref } : {}), ...(item.isError ? { err: true } : {}) };
        facts.entries.push(entry('result', t, String(item.text), limits.entryChars, marks));
        break;
      }
      case 'run': {
        const what = `${item.subtype}${item.isError ? ' (error)' : ''}`;
        const text = item.text === null ? '' : `: ${item.text}`;
        facts.entries.push(
          entry('run', t, `${what}${text}`, limits.entryChars, item.isError ? { err: true } : {}),
        );
        break;
      }
    }
  }
  if (systemSubtypeOf(value) === 'init') {
    facts.version = field(value.claude_code_version);
    facts.session = field(value.session_id);
  }
  return facts;
}

/**
 * What an entry takes on the page besides its text: its keys, kind, time and the comma after it
 * (`{"k":"thinking","t":1765432109876,"s":""},` is 43 characters).
 */
const ENTRY_CHARS = 44;
/** Room for the `"cut"` count a cut entry gains (`,"cut":` and up to 16 digits). */
const CUT_CHARS = 24;

/**
 * The characters an entry counts against a transcript budget: its text and what it takes around
 * it on the page, so blocks with little or no text (an empty text block, a thinking block that
 * came as a signature only) still fill the budget and a transcript of them stays bounded.
 */
export function entryChars(e: Entry): number {
  let n = ENTRY_CHARS + e.s.length;
  if (e.n !== undefined) n += 7 + e.n.length;
  if (e.id !== undefined) n += 8 + e.id.length;
  if (e.err === true) n += 11;
  if (e.cut !== undefined) n += CUT_CHARS;
  return n;
}

/**
 * The start of an entry that does not fit the `room` left (the transcript stays a prefix):
 * cut at its head as a `preview` is, when that keeps a useful start (null when it would not);
 * `rest` characters left out. The entry it makes counts at most `room`.
 */
function startOf(e: Entry, room: number): { entry: Entry; rest: number } | null {
  const text = room - (entryChars(e) - e.s.length) - (e.cut === undefined ? CUT_CHARS : 0);
  if (text < 200) return null;
  const c = cutText(e.s, 'preview', text);
  return { entry: { ...e, s: c.text, cut: (e.cut ?? 0) + c.cut }, rest: c.cut };
}

/**
 * One channel's transcript under a character budget (entries count their text and what they take
 * around it on the page, see entryChars). The transcript kept is always a
 * prefix (what happened first); what does not fit is counted, and the page points to the
 * channel's `.log` file for it. The prompt and final report are kept apart from the budget.
 */
export class TranscriptBudget {
  readonly entries: Entry[] = [];
  readonly ticks: number[] = [];
  cutLines = 0;
  /** Characters of text left out (what the entries take around their text is not counted). */
  cutChars = 0;
  private used = 0;

  constructor(
    private budget: number,
    private ticksMax: number,
  ) {}

  /** Room left; 0 once anything was cut (so the transcript stays a prefix). */
  get room(): number {
    return this.cutLines > 0 ? 0 : Math.max(0, this.budget - this.used);
  }

  /** Adds the entries of one line, as far as they fit; the budget they took. */
  addLine(entries: Entry[]): number {
    const before = this.used;
    let cut = false;
    for (const e of entries) {
      const room = this.room;
      const chars = cut ? 0 : entryChars(e);
      if (!cut && room >= chars) {
        this.entries.push(e);
        this.used += chars;
        continue;
      }
      // Keep the start of a block that does not fit when that shows something useful.
      const start = cut ? null : startOf(e, room);
      if (start) {
        this.entries.push(start.entry);
        this.used += entryChars(start.entry);
        this.cutChars += start.rest;
      } else {
        this.cutChars += e.s.length;
      }
      cut = true;
    }
    if (cut) this.cutLines++;
    return this.used - before;
  }

  /** A line that was not read because the budget was already spent. */
  skipLine(chars: number): void {
    this.cutLines++;
    this.cutChars += chars;
  }

  tick(t: number | null): void {
    if (t !== null && this.ticks.length < this.ticksMax) this.ticks.push(t);
  }

  cut(): Cut | null {
    return this.cutLines > 0 ? { lines: this.cutLines, chars: this.cutChars } : null;
  }

  /** Shrinks a transcript already built to a smaller budget (to fit the page). */
  shrink(budget: number, ticksMax: number): void {
    this.budget = budget;
    this.ticksMax = ticksMax;
    let used = 0;
    let keep = 0;
    for (; keep < this.entries.length; keep++) {
      const chars = entryChars(this.entries[keep]);
      if (used + chars > budget) break;
      used += chars;
    }
    // The block that straddles the budget keeps its start, as when it was first added.
    const start = keep < this.entries.length ? startOf(this.entries[keep], budget - used) : null;
    if (start) {
      this.entries[keep] = start.entry;
      this.cutChars += start.rest;
      this.cutLines++;
      used += entryChars(start.entry);
      keep++;
    }
    for (let i = keep; i < this.entries.length; i++) this.cutChars += this.entries[i].s.length;
    this.cutLines += this.entries.length - keep;
    this.entries.length = keep;
    this.used = used;
    if (this.ticks.length > ticksMax) this.ticks.length = ticksMax;
  }
}

/** JSON that is safe inside a `<script type="application/json">` element and in HTML generally. */
export function jsonForScript(data: unknown): string {
  // One pass per character with a constant replacement is ~20× faster than one pass with a callback.
  return JSON.stringify(data)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/** A log path from index.json, kept only if it names a file inside the output folder. */
export function safeLogPath(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  return /^(main|agents\/[A-Za-z0-9_.~-]{1,200})\.log$/.test(v) && !v.includes('..') ? v : null;
}
