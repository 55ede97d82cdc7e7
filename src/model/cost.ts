/**
 * What each channel cost, in tokens of each kind and in dollars, from the stream alone.
 *
 * Tokens: an assistant line's `usage` is the API's `message_start` snapshot. Its input and
 * cache counts are final; its `output_tokens` is not. A message's true output is its
 * `message_delta` stream event's (partial messages on: `exact`); otherwise the `result`
 * line's per-model output total is shared over the messages in proportion to what each
 * produced (`estimated`); before or without a result, the lines' own figure stands
 * (`stream`, an undercount).
 *
 * Dollars: once the `result` arrives, Claude Code's own `modelUsage[model].costUSD` is the
 * truth: a per-token rate is derived from it (its dollars over its tokens weighted by the
 * table's rates for the model, or Anthropic's standard ratios for a model the table lacks),
 * so the channels' sum reproduces it whenever the stream shows every message. What the
 * result counts and the channels do not (usage of background subagents missing from the
 * stream) is `unattributed`, never spread over channels. Before or without a result the
 * dated table prices each kind of token; a model with no price costs `null`.
 *
 * Claude Code's own transcripts (`takeTranscripts`) give each channel's true output where
 * they agree with the stream: that channel's basis is `exact`. A channel with no usage at all
 * costs `null` (basis `unknown`, with the reason), never $0. The run's figures are those of its
 * channels whose usage is known, the others counted apart; with none known, its dollars are
 * `null` unless the result states them, and its output tokens' basis is `unknown`.
 *
 * Numbers are bounded (`COST_BOUNDS`): a negative, non-finite or absurd token count, rate or
 * stated dollar figure is refused with a warning naming the line, so no figure the ledger
 * gives is negative, NaN or infinite.
 *
 * Plain logic: `observe()` takes each routed line, `report()` computes on demand. State is
 * per channel and per model, plus the one message being assembled per channel.
 */
import { boundedText } from './bounded-text.js';
import { isObject, isSyntheticMessage, MAX_MESSAGE_TOKENS, nonEmpty, type JsonObject } from './message.js';
import {
  MAX_USD_PER_MILLION_TOKENS,
  priceOf,
  STANDARD_RATIOS,
  type ModelPrice,
  type PriceTable,
  PRICE_TABLE,
} from './prices.js';

/** The kinds of token a message is billed for, as index.json names them. */
export interface ModelTokens {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_5m_input_tokens: number;
  cache_creation_1h_input_tokens: number;
}

/**
 * What the ledger counted for one line: the tokens it added to its channel's tally for one
 * model (a line repeating its message's usage adds only what changed, so the repeats Claude
 * Code prints once per content block add nothing; a `message_delta` settles the message's
 * output, adding the exact figure less the lines' own), and those tokens at the price table's
 * rates. Summed over a channel's lines, the tokens are the channel's stream figures
 * (`channelCost` before a result line); the result's estimated output and Claude Code's
 * transcripts are not a line's. A frozen `ModelEvent` (see RunModel.take).
 */
export interface UsageEvent {
  readonly type: 'usage';
  readonly lineNo: number;
  /** The channel's id; null for main. */
  readonly channel: string | null;
  readonly model: string;
  /** The API message the usage is of. */
  readonly messageId: string;
  /** What the line added, per kind; negative when it states less than an earlier line of its message. */
  readonly tokens: Readonly<ModelTokens>;
  /** `tokens` at the price table's rates; null when the table has no price for the model. */
  readonly usd: number | null;
}

/** How the output token counts were found: see the module comment. */
export type OutputTokensBasis = 'exact' | 'estimated' | 'stream';
/** How a channel's or a model's figures were found; `unknown`: the stream states no usage for it. */
export type TokensBasis = OutputTokensBasis | 'unknown';
export type CostBasis = 'result' | 'table';

/**
 * What the ledger takes as a figure; anything outside is refused with a warning. No API
 * message counts ten million tokens of one kind (the largest context windows hold two
 * million), no run a trillion of one kind per model, no rate passes $10,000 per million
 * tokens, and no run of an agent costs a million dollars.
 */
export const COST_BOUNDS = Object.freeze({
  messageTokens: MAX_MESSAGE_TOKENS,
  runTokens: 1_000_000_000_000,
  usdPerMillionTokens: MAX_USD_PER_MILLION_TOKENS,
  runUsd: 1_000_000,
});

/** How the ledger reports a refused figure or a disagreement (the session's `warn`). */
export type CostWarn = (code: string, message: string, subject?: string) => void;

/** The model of an assistant line that names none (another producer). */
const UNNAMED_MODEL = 'unknown';

/** Characters a token is taken to hold when estimating a message's output from its blocks. */
const CHARS_PER_TOKEN = 4;
/** Work allowed per tool input when measuring it: the stream chooses how large an input is. */
const MEASURE_MAX_NODES = 10_000;

/** Models whose rate a ledger keeps: a run names a few; a stream naming more costs a lookup each. */
const RATES_KEPT = 64;

export interface ModelCost extends ModelTokens {
  usd: number | null;
  result_usd: number | null;
  /** How its output tokens were found over the channels that used it. */
  basis: TokensBasis;
}

export interface ChannelCost {
  /** Models in first-use order. */
  models: string[];
  /** null: unpriced, or no usage known (basis `unknown`). */
  usd: number | null;
  /** Tokens over all its models, output true or estimated. */
  tokens: ModelTokens;
  basis: TokensBasis;
  /** Why the basis is `unknown`; null otherwise. */
  reason: string | null;
  /** Its figures are Claude Code's transcript's, the stream showing none of its messages. */
  transcriptOnly: boolean;
}

/** A channel's cost as the ledger's readers get it (see CostView). */
export type ReadonlyChannelCost = Readonly<Omit<ChannelCost, 'models' | 'tokens'>> & {
  readonly models: readonly string[];
  readonly tokens: Readonly<ModelTokens>;
};

/**
 * The run's cost as the ledger's readers get it: the report a run computes once it ends is
 * the one every view reads, so none of them may change it (its objects are frozen, and the
 * channels' map is typed read-only).
 */
export type ReadonlyCostReport = Readonly<Omit<CostReport, 'models' | 'channels' | 'unpriced'>> & {
  readonly models: Readonly<Record<string, Readonly<ModelCost>>>;
  readonly channels: ReadonlyMap<string | null, ReadonlyChannelCost>;
  readonly unpriced: readonly string[];
};

/** The ledger as sinks, views and plugins read it: figures out, nothing to set. */
export interface CostView {
  /**
   * The run's report: at its end, tells COST_DISAGREES (once) when the result disagrees, and
   * MODEL_MISMATCH (once) when the run's final result line names another model than the lines.
   */
  report(): ReadonlyCostReport;
  /** The report as it stands now, read mid-run (a live view): no warning is told. */
  reportSoFar(): ReadonlyCostReport;
  channelCost(channel: string | null): ReadonlyChannelCost | null;
  readonly hasResult: boolean;
  readonly seenUsage: boolean;
  readonly prices: PriceTable;
  unattributedUsd(): number | null;
  fromTranscript(key: string | null): boolean;
}

export interface CostReport {
  usd: number | null;
  channels_usd: number | null;
  unattributed_usd: number | null;
  basis: CostBasis;
  prices_date: string | null;
  /** The least exact basis of the channels whose usage is known; `unknown` when none is. */
  output_tokens: TokensBasis;
  result_usd: number | null;
  models: Record<string, ModelCost>;
  /** Per channel key (the channel's id, null for main). */
  channels: Map<string | null, ChannelCost>;
  /** Models the run used that nothing prices. */
  unpriced: string[];
}

interface Tally {
  input: number;
  cacheRead: number;
  cache5m: number;
  cache1h: number;
  /** Of `cache5m`, the writes of messages whose usage stated no 5-minute/1-hour split. */
  cacheUnsplit: number;
  /** Output of messages whose message_delta was seen. */
  exactOutput: number;
  /** The lines' own output of the other messages. */
  streamOutput: number;
  /** What the other messages produced, in estimated tokens: their share of the result's output. */
  estimate: number;
  estimatedMessages: number;
  /** Messages, and those whose usage stated at least one kind of token. */
  messages: number;
  known: number;
}

/** A message's figures, as the tally needs them. */
interface MessageFigures {
  input: number;
  cacheRead: number;
  cache5m: number;
  cache1h: number;
  /** Its cache writes when its usage stated no split (counted in `cache5m` too), else 0. */
  cacheUnsplit: number;
  lineOutput: number;
  chars: number;
  exact: number | null;
  /** Its usage stated at least one kind of token (not only a total). */
  known: boolean;
}

/**
 * The message a channel's lines are arriving for: its figures as its model's tally holds
 * them (what its latest line stated), kept as the numbers the tally needs, not as the
 * line's object, which could hold anything the line put there and would stay alive, one per
 * channel, to the end of the run. A line's new figures replace them in `apply`.
 */
interface OpenMessage extends MessageFigures {
  id: string;
  model: string;
  /** Its figures are in the tally: false until its first line is applied. */
  counted: boolean;
}

const noFigures = (): MessageFigures => ({
  input: 0,
  cacheRead: 0,
  cache5m: 0,
  cache1h: 0,
  cacheUnsplit: 0,
  lineOutput: 0,
  chars: 0,
  exact: null,
  known: false,
});

/** Copies a message's figures field by field (no object made: this runs for every assistant line). */
function copyFigures(to: MessageFigures, from: MessageFigures): void {
  to.input = from.input;
  to.cacheRead = from.cacheRead;
  to.cache5m = from.cache5m;
  to.cache1h = from.cache1h;
  to.cacheUnsplit = from.cacheUnsplit;
  to.lineOutput = from.lineOutput;
  to.chars = from.chars;
  to.exact = from.exact;
  to.known = from.known;
}

/**
 * A channel's tallies by model, in the order the models came, with a Map's interface. Nearly
 * every channel uses one model and a run may have 10,000 channels: the first model is kept in
 * two fields, and a Map (some 200 bytes before its first entry) is made for a second one only.
 */
class ModelTallies {
  #firstModel = '';
  #first: Tally | null = null;
  #more: Map<string, Tally> | null = null;

  has(model: string): boolean {
    return (this.#first !== null && model === this.#firstModel) || (this.#more?.has(model) ?? false);
  }

  get(model: string): Tally | undefined {
    if (this.#first !== null && model === this.#firstModel) return this.#first;
    return this.#more?.get(model);
  }

  set(model: string, tally: Tally): void {
    if (this.#first === null || model === this.#firstModel) {
      this.#firstModel = model;
      this.#first = tally;
    } else {
      (this.#more ??= new Map()).set(model, tally);
    }
  }

  /**
   * The models in the order they came, as a new array: walked with `get`, which allocates
   * nothing, where a generator of pairs made three objects per channel at the run's end.
   */
  names(): string[] {
    if (this.#first === null) return [];
    return this.#more ? [this.#firstModel, ...this.#more.keys()] : [this.#firstModel];
  }
}

interface ChannelLedger {
  models: ModelTallies;
  current: OpenMessage | null;
  /** A message_delta that came before any line of its message. */
  early: { id: string; output: number } | null;
  /** The largest total of tokens a usage stated without their kinds (Copilot's subagents). */
  totalOnly: number;
  /** Its figures came from Claude Code's transcript (see takeTranscripts). */
  transcript: 'exact' | 'only' | null;
  /**
   * The stream's own figures, kept while a transcript taken when the channel ended stands in
   * for them: usage arriving later puts them back (see takeChannelTranscript).
   */
  stream: { models: ModelTallies; current: OpenMessage | null; early: ChannelLedger['early'] } | null;
}

/** One channel's usage as Claude Code's transcript states it: per model, each message once. */
export interface TranscriptChannel {
  /** The file it was read from (shown in warnings). */
  file: string;
  models: Map<string, { tokens: ModelTokens; messages: number }>;
  /** Why the file may not hold every message (cut short, a line too long); null when whole. */
  partial: string | null;
}

export interface TranscriptFindings {
  /** Where they were looked for (shown in warnings). */
  dir: string;
  main: TranscriptChannel | null;
  /** Per spawning tool_use id (agent-<id>.meta.json's `toolUseId`). */
  subagents: Map<string, TranscriptChannel>;
  /** What could not be read (a link refused, a file too large…), one line each. */
  problems: string[];
}

/** A model's figures in the `result` line; `split`: it states its 5-minute/1-hour cache writes. */
interface ResultModel {
  tokens: ModelTokens;
  usd: number | null;
  split: boolean;
}

interface ResultUsage {
  totalUsd: number | null;
  models: Map<string, ResultModel>;
}

const emptyTally = (): Tally => ({
  input: 0,
  cacheRead: 0,
  cache5m: 0,
  cache1h: 0,
  cacheUnsplit: 0,
  exactOutput: 0,
  streamOutput: 0,
  estimate: 0,
  estimatedMessages: 0,
  messages: 0,
  known: 0,
});

/** A ModelTokens of every kind at 0. */
export const emptyTokens = (): ModelTokens => ({
  input_tokens: 0,
  output_tokens: 0,
  cache_read_input_tokens: 0,
  cache_creation_5m_input_tokens: 0,
  cache_creation_1h_input_tokens: 0,
});

/** The kinds of token a ModelTokens counts (a usage event's too). */
export const MODEL_TOKEN_KINDS: ReadonlyArray<keyof ModelTokens> = Object.freeze(
  Object.keys(emptyTokens()) as Array<keyof ModelTokens>,
);

/** The kinds of token a usage object may state (a total alone states none). */
const USAGE_KINDS = [
  'input_tokens',
  'output_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
] as const;

/** Whether `v` is a figure the ledger takes: a finite number from 0 to `max`. */
export const saneFigure = (v: unknown, max: number): v is number =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= max;

/** A name from the stream inside a warning: printable ASCII, at most 60 characters. */
const printable = (s: string): string => boundedText(s, 60).replace(/[^\x20-\x7e]/g, '?');

/** What a refusal says of its bound. */
const ABSURD = (max: number) =>
  `refused (a figure must be a number from 0 to ${max.toLocaleString('en-US')})`;

/** The dollars of `tokens` at `rate` (USD per million tokens of each kind). */
export function priceTokens(tokens: ModelTokens, rate: ModelPrice): number {
  return (
    (tokens.input_tokens * rate.input +
      tokens.output_tokens * rate.output +
      tokens.cache_read_input_tokens * rate.cache_read +
      tokens.cache_creation_5m_input_tokens * rate.cache_write_5m +
      tokens.cache_creation_1h_input_tokens * rate.cache_write_1h) /
    1e6
  );
}

const inputSide = (t: ModelTokens, rate: ModelPrice) => priceTokens({ ...t, output_tokens: 0 }, rate);

export class CostLedger {
  private readonly byChannel = new Map<string | null, ChannelLedger>();
  private result: ResultUsage | null = null;
  private cached: ReadonlyCostReport | null = null;
  /**
   * Per model, its tallies summed over the channels that used it (`channels` of them), kept as
   * each line changes a tally: what prices one channel's figures without the whole report.
   */
  private readonly sums = new Map<string, ModelSum & { channels: number }>();
  #reportsComputed = 0;
  /** COST_DISAGREES as the latest report found it (null: none), and whether it was told. */
  private disagreement: string | null = null;
  private disagreementTold = false;

  /** The working directory the init line states (where the run's transcripts are). */
  runCwd: string | null = null;
  /** The model an init line names (Gemini CLI's `init.model`): lines that name none use it. */
  private initModel: string | null = null;
  /**
   * MODEL_MISMATCH as the latest report found it (null: none), and whether it was told: the
   * run's final result is judged, not an earlier one that later lines may replace.
   */
  private mismatch: string | null = null;
  private mismatchTold = false;

  constructor(
    public prices: PriceTable = PRICE_TABLE,
    private readonly warn: CostWarn | null = null,
  ) {}

  /**
   * A token count of a line: missing is 0; negative, non-finite or above `max` is refused
   * (0) with one warning per field naming the first line.
   */
  private tokens(v: unknown, field: string, lineNo: number, max: number = COST_BOUNDS.messageTokens): number {
    if (v === undefined || v === null) return 0;
    if (saneFigure(v, max)) return Math.floor(v);
    if (typeof v === 'number' || typeof v === 'string') this.refuse(field, v, lineNo, max);
    return 0;
  }

  /** Stated dollars: a sane amount, else null with a warning. */
  private dollars(v: unknown, field: string, lineNo: number): number | null {
    if (v === undefined || v === null) return null;
    if (saneFigure(v, COST_BOUNDS.runUsd)) return v;
    this.refuse(field, v, lineNo, COST_BOUNDS.runUsd);
    return null;
  }

  private refuse(field: string, v: unknown, lineNo: number, max: number): void {
    const shown = typeof v === 'number' ? String(v) : JSON.stringify(String(v).slice(0, 40));
    const where = lineNo > 0 ? `input line ${lineNo}` : 'a line';
    this.warn?.(
      'COST_FIGURE_REFUSED',
      `${where}: ${field} ${shown} ${ABSURD(max)}; counted as not stated ` +
        '(later refusals of this field are not named)',
      field,
    );
  }

  /** A line's usage into the numbers of its message. */
  private takeUsage(msg: MessageFigures, usage: JsonObject, lineNo: number): void {
    const count = (v: unknown, field: string) => this.tokens(v, `usage.${field}`, lineNo);
    const created = count(usage.cache_creation_input_tokens, 'cache_creation_input_tokens');
    const split = isObject(usage.cache_creation) ? usage.cache_creation : null;
    const oneHour =
      split === null
        ? 0
        : Math.min(
            created,
            count(split.ephemeral_1h_input_tokens, 'cache_creation.ephemeral_1h_input_tokens'),
          );
    // Without the split, the writes are counted as 5-minute ones and priced as compute() says.
    msg.cacheUnsplit = split === null ? created : 0;
    msg.input = this.tokens(usage.input_tokens, 'usage.input_tokens', lineNo);
    msg.cacheRead = this.tokens(usage.cache_read_input_tokens, 'usage.cache_read_input_tokens', lineNo);
    msg.cache5m = created - oneHour;
    msg.cache1h = oneHour;
    msg.lineOutput = this.tokens(usage.output_tokens, 'usage.output_tokens', lineNo);
    msg.known = USAGE_KINDS.some((k) => saneFigure(usage[k], COST_BOUNDS.messageTokens));
  }

  /** The table's rate per model as usage events price them, for the table they were read from. */
  private readonly rates = new Map<string, ModelPrice | null>();
  private ratesOf: PriceTable | null = null;

  /** A model's rate in the table (null: none), looked up once per model (a few dozen kept). */
  private rateOf(model: string): ModelPrice | null {
    if (this.ratesOf !== this.prices) {
      this.rates.clear();
      this.ratesOf = this.prices;
    }
    let rate = this.rates.get(model);
    if (rate === undefined) {
      rate = priceOf(this.prices, model);
      if (this.rates.size < RATES_KEPT) this.rates.set(model, rate);
    }
    return rate;
  }

  /** Whether any assistant line with usage has been seen (on any channel). */
  get seenUsage(): boolean {
    return this.byChannel.size > 0;
  }

  /** Whether a `result` line with usage has been seen. */
  get hasResult(): boolean {
    return this.result !== null;
  }

  /**
   * Takes one routed line of channel `channel` (its id, null for main); `lineNo` names it in
   * warnings. Returns what it counted for the line (null: nothing, as for most lines).
   */
  observe(value: JsonObject, channel: string | null, lineNo = 0): UsageEvent | null {
    switch (value.type) {
      case 'assistant':
        return isObject(value.message) ? this.assistant(value.message, channel, lineNo) : null;
      case 'stream_event':
        if (isObject(value.event) && value.event.type === 'message_delta')
          return this.delta(value, channel, lineNo);
        return null;
      case 'system':
        if (value.subtype === 'init' && channel === null) {
          this.initModel = nonEmpty(value.model) ?? this.initModel;
          this.runCwd = nonEmpty(value.cwd) ?? this.runCwd;
        }
        return null;
      case 'result':
        this.takeResult(value, lineNo);
    }
    return null;
  }

  private ledger(channel: string | null): ChannelLedger {
    let ledger = this.byChannel.get(channel);
    if (!ledger) {
      ledger = {
        models: new ModelTallies(),
        current: null,
        early: null,
        totalOnly: 0,
        transcript: null,
        stream: null,
      };
      this.byChannel.set(channel, ledger);
    }
    return ledger;
  }

  private assistant(message: JsonObject, channel: string | null, lineNo: number): UsageEvent | null {
    if (isSyntheticMessage(message)) return null;
    const model = nonEmpty(message.model) ?? this.initModel ?? UNNAMED_MODEL;
    // A line without a message id cannot be told apart from a repeat: like the tree's usage,
    // it is not counted.
    const id = nonEmpty(message.id);
    if (id === null || !isObject(message.usage)) return null;
    this.cached = null;
    const ledger = this.ledger(channel);
    // Figures read from the transcript at the run's end stand: a later line changes nothing.
    // One taken when the channel ended gives way to the stream's figures again.
    if (ledger.transcript !== null && !this.untake(ledger)) return null;
    let msg = ledger.current;
    if (!msg || msg.id !== id || msg.model !== model) {
      msg = ledger.current = this.open(ledger, id, model);
    }
    // Every line of a message repeats its usage: the latest one stands.
    const next = this.next;
    this.takeUsage(next, message.usage, lineNo);
    const total = this.tokens(message.usage.total_tokens, 'usage.total_tokens', lineNo);
    if (!next.known && total > 0) ledger.totalOnly = Math.max(ledger.totalOnly, total);
    next.chars = msg.chars + producedChars(message.content);
    next.exact = msg.exact;
    return this.apply(ledger, msg, next, channel, lineNo);
  }

  /** A message's first line on a channel: counted among its model's messages. */
  private open(ledger: ChannelLedger, id: string, model: string): OpenMessage {
    const msg: OpenMessage = { id, model, ...noFigures(), counted: false };
    if (!ledger.models.has(model)) {
      ledger.models.set(model, emptyTally());
      this.sumOf(model).channels++;
    }
    ledger.models.get(model)!.messages++;
    if (ledger.early?.id === id) {
      msg.exact = ledger.early.output;
      ledger.early = null;
    }
    return msg;
  }

  private delta(value: JsonObject, channel: string | null, lineNo: number): UsageEvent | null {
    const event = value.event as JsonObject;
    const usage = isObject(event.usage) ? event.usage : null;
    if (!usage || typeof usage.output_tokens !== 'number') return null;
    if (!saneFigure(usage.output_tokens, COST_BOUNDS.messageTokens)) {
      this.tokens(usage.output_tokens, 'message_delta usage.output_tokens', lineNo);
      return null;
    }
    const output = Math.floor(usage.output_tokens);
    const id = nonEmpty(value.api_message_id);
    const ledger = this.ledger(channel);
    if (ledger.transcript !== null && !this.untake(ledger)) return null;
    const msg = ledger.current;
    this.cached = null;
    if (msg && (id === null || msg.id === id)) {
      const next = this.next;
      copyFigures(next, msg);
      next.exact = output;
      return this.apply(ledger, msg, next, channel, lineNo);
    }
    if (id !== null) ledger.early = { id, output };
    return null;
  }

  /**
   * Where a line's figures for its message are gathered before `apply` takes them: one
   * object for the ledger, not one per line.
   */
  private readonly next: MessageFigures = noFigures();

  /**
   * Replaces what the message added to its model's tally (its figures, nothing before its
   * first line) with what `next` adds, and keeps `next` as its figures; returns the
   * difference as the line's usage event, or null when it adds nothing.
   */
  private apply(
    ledger: ChannelLedger,
    msg: OpenMessage,
    next: MessageFigures,
    channel: string | null,
    lineNo: number,
  ): UsageEvent | null {
    const tally = ledger.models.get(msg.model)!;
    // In place, one field at a time (no keyed access, no object per line): this runs for
    // every assistant line. `was…`: what the message's figures added to the tally so far.
    const counted = msg.counted;
    const wasEstimated = counted && msg.exact === null ? 1 : 0;
    const wasStream = wasEstimated === 1 ? msg.lineOutput : 0;
    const wasEstimate =
      wasEstimated === 1 ? Math.max(msg.lineOutput, Math.ceil(msg.chars / CHARS_PER_TOKEN)) : 0;
    const exact = next.exact;
    const estimated = exact === null ? 1 : 0;
    const streamOutput = estimated === 1 ? next.lineOutput : 0;
    const estimate = estimated === 1 ? Math.max(next.lineOutput, Math.ceil(next.chars / CHARS_PER_TOKEN)) : 0;
    const addInput = next.input - msg.input;
    const addCacheRead = next.cacheRead - msg.cacheRead;
    const add5m = next.cache5m - msg.cache5m;
    const add1h = next.cache1h - msg.cache1h;
    const addUnsplit = next.cacheUnsplit - msg.cacheUnsplit;
    tally.cacheUnsplit += addUnsplit;
    const addExact = (exact ?? 0) - (counted ? (msg.exact ?? 0) : 0);
    const addStream = streamOutput - wasStream;
    tally.input += addInput;
    tally.cacheRead += addCacheRead;
    tally.cache5m += add5m;
    tally.cache1h += add1h;
    tally.exactOutput += addExact;
    tally.streamOutput += addStream;
    tally.estimate += estimate - wasEstimate;
    tally.estimatedMessages += estimated - wasEstimated;
    const sum = this.sums.get(msg.model)!;
    sum.input += addInput;
    sum.cacheRead += addCacheRead;
    sum.cache5m += add5m;
    sum.cache1h += add1h;
    sum.cacheUnsplit += addUnsplit;
    sum.exactOutput += addExact;
    sum.streamOutput += addStream;
    sum.estimate += estimate - wasEstimate;
    tally.known += (next.known ? 1 : 0) - (counted && msg.known ? 1 : 0);
    copyFigures(msg, next);
    msg.counted = true;
    const addOutput = addExact + addStream;
    if (addInput === 0 && addCacheRead === 0 && add5m === 0 && add1h === 0 && addOutput === 0) return null;
    const tokens: ModelTokens = {
      input_tokens: addInput,
      output_tokens: addOutput,
      cache_read_input_tokens: addCacheRead,
      cache_creation_5m_input_tokens: add5m,
      cache_creation_1h_input_tokens: add1h,
    };
    const rate = this.rateOf(msg.model);
    return Object.freeze({
      type: 'usage',
      lineNo,
      channel,
      model: msg.model,
      messageId: msg.id,
      tokens: Object.freeze(tokens),
      usd: rate === null ? null : priceTokens(tokens, rate),
    });
  }

  private takeResult(value: JsonObject, lineNo: number): void {
    const modelUsage = isObject(value.modelUsage) ? value.modelUsage : null;
    const total = this.dollars(value.total_cost_usd, 'total_cost_usd', lineNo);
    if (!modelUsage && total === null) return;
    this.cached = null;
    const models = new Map<string, ResultModel>();
    const max = COST_BOUNDS.runTokens;
    for (const [model, usage] of Object.entries(modelUsage ?? {})) {
      if (!isObject(usage)) continue;
      const field = (name: string) => `modelUsage.${printable(model)}.${name}`;
      const count = (name: string) => this.tokens(usage[name], field(name), lineNo, max);
      const created = count('cacheCreationInputTokens');
      const oneHour = Math.min(created, count('cacheCreationEphemeral1hInputTokens'));
      models.set(model, {
        tokens: {
          input_tokens: count('inputTokens'),
          output_tokens: count('outputTokens'),
          cache_read_input_tokens: count('cacheReadInputTokens'),
          cache_creation_5m_input_tokens: created - oneHour,
          cache_creation_1h_input_tokens: oneHour,
        },
        usd: this.dollars(usage.costUSD, field('costUSD'), lineNo),
        split:
          usage.cacheCreationEphemeral1hInputTokens !== undefined ||
          usage.cacheCreationEphemeral5mInputTokens !== undefined,
      });
    }
    this.result = { totalUsd: total, models };
  }

  /**
   * One channel's cost as it stands now: without a result, straight from its own tallies and
   * the table (cheap, for a subagent that just ended); with one, from the whole report.
   */
  channelCost(channel: string | null): ReadonlyChannelCost | null {
    if (this.result) return this.reportNow().channels.get(channel) ?? null;
    const ledger = this.byChannel.get(channel);
    if (!ledger) return null;
    const cost = this.newChannelCost(ledger);
    if (cost.basis === 'unknown') return cost;
    let usd: UsdTotal | null = newTotal();
    for (const model of cost.models) {
      const t = ledger.models.get(model)!;
      const tokens: ModelTokens = {
        input_tokens: t.input,
        output_tokens: t.exactOutput + t.streamOutput,
        cache_read_input_tokens: t.cacheRead,
        cache_creation_5m_input_tokens: t.cache5m,
        cache_creation_1h_input_tokens: t.cache1h,
      };
      const nothing = Object.values(tokens).every((n) => n === 0);
      const rate = priceOf(this.prices, model) ?? (nothing ? FREE : null);
      usd = plusUsd(usd, rate === null ? null : priceTokens(tokens, rate));
      for (const k of Object.keys(tokens) as (keyof ModelTokens)[]) cost.tokens[k] += tokens[k];
      if (t.estimatedMessages > 0) cost.basis = 'stream';
    }
    cost.usd = totalUsd(usd);
    roundChannelUsd(cost);
    return cost;
  }

  /** A model's sum over the channels, made at its first channel. */
  private sumOf(model: string): ModelSum & { channels: number } {
    let sum = this.sums.get(model);
    if (sum === undefined) this.sums.set(model, (sum = { ...emptySum(), channels: 0 }));
    return sum;
  }

  /** Adds a channel's tallies to the models' sums (`sign` -1: takes them out, before they change). */
  private account(ledger: ChannelLedger, sign: 1 | -1): void {
    for (const model of ledger.models.names()) {
      const sum = this.sumOf(model);
      addTally(sum, ledger.models.get(model)!, sign);
      sum.channels += sign;
      if (sum.channels === 0) this.sums.delete(model);
    }
  }

  /** How many times the whole report was worked out (each after a line changed the figures). */
  get reportsComputed(): number {
    return this.#reportsComputed;
  }

  /**
   * One channel's figures as a status event freezes them (the run model's EndFigures), in work
   * of the order of its own models, not of the run's channels, so a run whose subagents end
   * after its result line (Claude Code's background subagents) stays linear. Before a result,
   * `channelCost`. After it, the channel's tokens at the rates the result gives (`termsOf`, from
   * every channel's tokens as they stand), its output tokens its exact ones plus its share of
   * the result's output in proportion to what its messages produced, rounded to the nearest
   * token: the final report shares by largest remainders, so that the channels' shares add up
   * to the result's exactly, and may give a channel one token more or less.
   */
  endCost(channel: string | null): ReadonlyChannelCost | null {
    if (!this.result) return this.channelCost(channel);
    const ledger = this.byChannel.get(channel);
    if (!ledger) return null;
    const cost = this.newChannelCost(ledger);
    if (cost.basis === 'unknown') return cost;
    const resultModels = this.resultModels(this.sums.size === 1 ? [...this.sums.keys()] : []);
    let own: UsdTotal | null = newTotal();
    for (const model of cost.models) {
      const t = ledger.models.get(model)!;
      const sum = this.sums.get(model)!;
      const term = this.termsOf(model, sum, resultModels.get(model));
      const share =
        term.shared && term.toShare > 0 && sum.estimate > 0
          ? Math.round((term.toShare * t.estimate) / sum.estimate)
          : 0;
      const tokens: ModelTokens = {
        input_tokens: t.input,
        output_tokens: t.exactOutput + (term.shared ? share : t.streamOutput),
        cache_read_input_tokens: t.cacheRead,
        cache_creation_5m_input_tokens: t.cache5m,
        cache_creation_1h_input_tokens: t.cache1h,
      };
      own = plusUsd(own, term.rate ? modelUsd(tokens, t.cacheUnsplit, term) : null);
      for (const k of Object.keys(tokens) as (keyof ModelTokens)[]) cost.tokens[k] += tokens[k];
      const basis: TokensBasis =
        t.estimatedMessages === 0 ? 'exact' : term.shared ? 'estimated' : 'stream';
      cost.basis = worse(cost.basis, basis);
    }
    cost.usd = totalUsd(own);
    roundChannelUsd(cost);
    return cost;
  }

  /**
   * A channel's cost before its figures are added: `unknown` (null, with why) when no usage
   * states a kind of token.
   */
  private newChannelCost(ledger: ChannelLedger): ChannelCost {
    const models = ledger.models.names();
    let known = 0;
    for (const m of models) known += ledger.models.get(m)!.known;
    const cost: ChannelCost = {
      models,
      usd: 0,
      tokens: emptyTokens(),
      basis: 'exact',
      reason: null,
      transcriptOnly: ledger.transcript === 'only',
    };
    if (known > 0) return cost;
    cost.usd = null;
    cost.basis = 'unknown';
    cost.reason =
      ledger.totalOnly > 0
        ? `the stream states only a total of ${ledger.totalOnly} tokens, not their kinds`
        : 'the stream states no token counts for it';
    return cost;
  }

  /**
   * Claude Code's transcripts, read at the run's end: each channel whose transcript holds the
   * same messages as the stream (count, input and cache tokens per model) takes the
   * transcript's output tokens, exact; a channel the stream shows no usage for takes the
   * transcript whole. A transcript that is missing, cut short or disagrees changes nothing
   * and is named in a warning. `isChannel` tells a subagent of the run from a stray file.
   */
  takeTranscripts(found: TranscriptFindings, isChannel: (id: string) => boolean): void {
    this.cached = null;
    const dir = printable(found.dir);
    for (const problem of found.problems)
      this.warn?.('TRANSCRIPT_UNREADABLE', `transcripts in ${dir}: ${problem}`, problem);
    const missing: string[] = [];
    const take = (key: string | null, t: TranscriptChannel | null) => {
      const ledger = this.byChannel.get(key);
      const name = key === null ? 'main' : printable(key);
      if (t === null) {
        if (ledger) missing.push(name);
        return;
      }
      if (t.partial !== null) {
        this.warn?.(
          'TRANSCRIPT_PARTIAL',
          `transcript ${printable(t.file)} of ${name} ${t.partial}: that channel keeps the stream's figures`,
          name,
        );
        return;
      }
      const differs = ledger ? this.differs(ledger, t) : null;
      if (differs !== null) {
        this.warn?.(
          'TRANSCRIPT_DISAGREES',
          `transcript ${printable(t.file)} of ${name} disagrees with the stream (${differs}): ` +
            "that channel keeps the stream's figures",
          name,
        );
        return;
      }
      this.adopt(key, t, ledger === undefined || ledger.models.names().length === 0);
    };
    take(null, found.main);
    const unmatched: string[] = [];
    for (const [id, t] of found.subagents) {
      if (isChannel(id)) take(id, t);
      else unmatched.push(printable(id));
    }
    for (const key of this.byChannel.keys())
      if (key !== null && !found.subagents.has(key) && this.hasUsage(key)) missing.push(printable(key));
    // With no transcript of the session at all, the problem said so once.
    const anyFound = found.main !== null || found.subagents.size > 0;
    if (missing.length > 0 && anyFound)
      this.warn?.(
        'TRANSCRIPT_MISSING',
        `no transcript in ${dir} for ${missing.length} channel(s) with usage ` +
          `(${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ', …' : ''}): ` +
          'their output tokens stay estimated or as the stream states them',
      );
    if (unmatched.length > 0)
      this.warn?.(
        'TRANSCRIPT_UNMATCHED',
        `${unmatched.length} subagent transcript(s) in ${dir} name a spawn the stream does not show ` +
          `(${unmatched.slice(0, 3).join(', ')}${unmatched.length > 3 ? ', …' : ''}): ` +
          'not counted to any channel',
      );
  }

  /**
   * One subagent's transcript, read when it ended, so the live views show its exact figures
   * from then on: taken when it is whole and agrees with the stream, else left alone, silently,
   * for the run's end, which reads every transcript again and warns of what does not fit.
   */
  takeChannelTranscript(key: string, t: TranscriptChannel): boolean {
    const ledger = this.byChannel.get(key);
    if (t.partial !== null || (ledger && this.differs(ledger, t) !== null)) return false;
    this.cached = null;
    const own = this.ledger(key);
    let stream = own.stream;
    if (own.transcript === null) {
      const models = new ModelTallies();
      for (const model of own.models.names()) models.set(model, { ...own.models.get(model)! });
      stream = { models, current: own.current, early: own.early };
    }
    this.adopt(key, t, ledger === undefined || ledger.models.names().length === 0);
    own.stream = stream;
    return true;
  }

  /**
   * A channel whose transcript was taken when it ended, and which shows usage again: its own
   * figures come back, so the run's end checks the transcript against all of them (and warns
   * when they disagree). False when its figures are the run's end's, which stand.
   */
  private untake(ledger: ChannelLedger): boolean {
    const stream = ledger.stream;
    if (stream === null) return false;
    this.account(ledger, -1);
    ledger.models = stream.models;
    this.account(ledger, 1);
    ledger.current = stream.current;
    ledger.early = stream.early;
    ledger.transcript = null;
    ledger.stream = null;
    this.cached = null;
    return true;
  }

  /** Whether a channel's figures are its transcript's (taken when it ended, or at the run's end). */
  fromTranscript(key: string | null): boolean {
    return (this.byChannel.get(key)?.transcript ?? null) !== null;
  }

  private hasUsage(key: string | null): boolean {
    const ledger = this.byChannel.get(key);
    if (!ledger) return false;
    return ledger.models.names().some((m) => ledger.models.get(m)!.known > 0);
  }

  /** What differs between a channel's tallies and its transcript, or null when they agree. */
  private differs(ledger: ChannelLedger, t: TranscriptChannel): string | null {
    const names = ledger.models.names();
    if (names.length === 0) return null;
    for (const model of names) {
      const s = ledger.models.get(model)!;
      const m = t.models.get(model);
      const shown = printable(model);
      if (!m) return `the transcript has no message of ${shown}`;
      if (m.messages !== s.messages) return `${shown}: ${m.messages} messages, the stream ${s.messages}`;
      const input = (k: ModelTokens) =>
        k.input_tokens +
        k.cache_read_input_tokens +
        k.cache_creation_5m_input_tokens +
        k.cache_creation_1h_input_tokens;
      const streamInput = s.input + s.cacheRead + s.cache5m + s.cache1h;
      if (input(m.tokens) !== streamInput)
        return `${shown}: ${input(m.tokens)} input tokens, the stream ${streamInput}`;
      if (s.estimatedMessages === 0 && m.tokens.output_tokens !== s.exactOutput)
        return `${shown}: ${m.tokens.output_tokens} output tokens, the stream's exact ${s.exactOutput}`;
    }
    for (const model of t.models.keys())
      if (!ledger.models.has(model)) return `the stream has no message of ${printable(model)}`;
    return null;
  }

  /** A channel's tallies become its transcript's: every message's output exact. */
  private adopt(key: string | null, t: TranscriptChannel, only: boolean): void {
    const ledger = this.ledger(key);
    this.account(ledger, -1);
    for (const [model, m] of t.models) {
      if (!ledger.models.has(model)) ledger.models.set(model, emptyTally());
      const tally = ledger.models.get(model)!;
      tally.input = m.tokens.input_tokens;
      tally.cacheRead = m.tokens.cache_read_input_tokens;
      tally.cache5m = m.tokens.cache_creation_5m_input_tokens;
      tally.cache1h = m.tokens.cache_creation_1h_input_tokens;
      tally.cacheUnsplit = 0;
      tally.exactOutput = m.tokens.output_tokens;
      tally.streamOutput = 0;
      tally.estimate = 0;
      tally.estimatedMessages = 0;
      tally.messages = m.messages;
      tally.known = m.messages;
    }
    this.account(ledger, 1);
    ledger.current = null;
    ledger.early = null;
    ledger.stream = null;
    // Taken again at the end, a transcript taken when its channel ended says what it did then.
    ledger.transcript = only || ledger.transcript === 'only' ? 'only' : 'exact';
  }

  /** Cost and tokens per channel, per model and for the run, as they stand now. */
  report(): ReadonlyCostReport {
    const report = this.reportNow();
    // Told once, by a report asked for as such (the run's end), never by a channel's figure
    // read mid-run, while later lines may still change either side (a later result line
    // replaces an earlier one, naming its models anew).
    if (this.disagreement !== null && !this.disagreementTold) {
      this.disagreementTold = true;
      this.warn?.('COST_DISAGREES', this.disagreement);
    }
    if (this.mismatch !== null && !this.mismatchTold) {
      this.mismatchTold = true;
      this.warn?.('MODEL_MISMATCH', this.mismatch);
    }
    return report;
  }

  /**
   * The report as it stands now, for a view that reads it while the run goes (the live page):
   * later lines may still change either side of a disagreement, so no warning is told.
   */
  reportSoFar(): ReadonlyCostReport {
    return this.reportNow();
  }

  /**
   * The run's dollars its result counts and no channel shows, as they stand now (a row of the
   * run read mid-run: no warning is told, as for a channel's figure).
   */
  unattributedUsd(): number | null {
    return this.reportNow().unattributed_usd;
  }

  private reportNow(): ReadonlyCostReport {
    this.cached ??= this.compute();
    return this.cached;
  }

  /**
   * The result's per-model figures, with a model the lines never name under the one model
   * they do, when each side names exactly one (a gateway, an alias: see `renamed`).
   */
  private resultModels(lineModels: readonly string[]): Map<string, ResultModel> {
    const models = this.result?.models ?? new Map<string, ResultModel>();
    const renamed = this.renamed(lineModels);
    return renamed === null ? models : new Map([[renamed.lines, models.get(renamed.result)!]]);
  }

  /**
   * The one model the result names and the one model the lines name (`lineModels`), when they
   * differ: the result's figures are taken as the lines' model's. Null when they agree, or
   * either side names more than one.
   */
  private renamed(lineModels: readonly string[]): { result: string; lines: string } | null {
    const models = this.result?.models;
    if (!models || models.size !== 1 || lineModels.length !== 1) return null;
    const [named] = models.keys();
    const used = lineModels[0];
    return named === used || used === UNNAMED_MODEL ? null : { result: named, lines: used };
  }

  /**
   * How a model's tokens are priced, from its tokens over every channel (`sum`) and the
   * result's figures for it. With the result's dollars, a rate derived from them: its dollars
   * over its tokens weighted by the table's rates (Anthropic's usual multiples for a model the
   * table lacks), and the output tokens its messages account for, to share over them. A cache
   * write whose 5-minute/1-hour split one side leaves out is weighed as the other side splits
   * its writes (the result's writes as the lines split theirs; the lines' unsplit writes as
   * the result splits what the lines do not state), so the channels add up to the result's
   * dollars whichever side states the split. Without them, the table's rates (none: null,
   * unless the model has nothing to price).
   */
  private termsOf(model: string, sum: ModelSum, fromResult: ResultModel | undefined): ModelTerms {
    const table = this.rateOf(model);
    if (!fromResult || fromResult.usd === null) {
      const none =
        sum.input + sum.cacheRead + sum.cache5m + sum.cache1h + sum.exactOutput + sum.streamOutput === 0;
      const rate = table ?? (none ? FREE : null);
      const unsplitWrite = rate?.cache_write_5m ?? 0;
      return { rate, unsplitWrite, shared: false, toShare: 0, table: table !== null };
    }
    const weights = table ?? STANDARD_RATIOS;
    const r = fromResult.tokens;
    const stated5m = sum.cache5m - sum.cacheUnsplit;
    const blend = (w5m: number, w1h: number) =>
      w5m + w1h > 0
        ? (w5m * weights.cache_write_5m + w1h * weights.cache_write_1h) / (w5m + w1h)
        : weights.cache_write_5m;
    let resultWeights = weights;
    let unsplit: number;
    if (fromResult.split) {
      const r5m = Math.max(0, r.cache_creation_5m_input_tokens - stated5m);
      const r1h = Math.max(0, r.cache_creation_1h_input_tokens - sum.cache1h);
      unsplit =
        r5m + r1h > 0
          ? blend(r5m, r1h)
          : blend(r.cache_creation_5m_input_tokens, r.cache_creation_1h_input_tokens);
    } else {
      // The result's writes, all counted as 5-minute ones, weigh as the lines split theirs.
      unsplit = blend(stated5m, sum.cache1h);
      if (unsplit !== weights.cache_write_5m) resultWeights = { ...weights, cache_write_5m: unsplit };
    }
    const whole = priceTokens(r, resultWeights);
    const factor = whole > 0 ? fromResult.usd / whole : null;
    const rate = factor !== null ? scaled(weights, factor) : (table ?? scaled(weights, 0));
    // The output the stream's messages account for: the result's, times the share of the
    // result's input side the channels show (less than all when messages are missing).
    const resultInput = inputSide(r, resultWeights);
    const seenInput =
      inputSide(sumTokens(sum), weights) + (sum.cacheUnsplit * (unsplit - weights.cache_write_5m)) / 1e6;
    const share = resultInput > 0 ? Math.min(1, seenInput / resultInput) : 1;
    return {
      rate,
      unsplitWrite: factor !== null ? unsplit * factor : rate.cache_write_5m,
      shared: true,
      toShare: Math.max(0, Math.round(r.output_tokens * share) - sum.exactOutput),
      table: table !== null,
    };
  }

  private compute(): ReadonlyCostReport {
    this.#reportsComputed++;
    const result = this.result;
    const channels = [...this.byChannel.entries()];
    const lineModels: string[] = [];
    const seen = new Set<string>();
    for (const [, ledger] of channels)
      for (const m of ledger.models.names()) if (!seen.has(m) && seen.add(m)) lineModels.push(m);
    const resultModels = this.resultModels(lineModels);
    // Judged on each report, told by the run's end (report()): the final result is the run's.
    const renamed = this.renamed(lineModels);
    this.mismatch =
      renamed &&
      `the result line names model ${printable(renamed.result)} and the assistant lines ` +
        `${printable(renamed.lines)}: the result's figures for ${printable(renamed.result)} ` +
        `are taken as ${printable(renamed.lines)}'s`;
    const modelIds = [...lineModels];
    for (const m of resultModels.keys()) if (!seen.has(m) && seen.add(m)) modelIds.push(m);

    // Per model: how its tokens are priced, and each channel's output tokens.
    const terms = new Map<string, ModelTerms>();
    const outputs = new Map<string, Map<string | null, number>>();
    let usedTable = false;
    for (const model of modelIds) {
      const tallies = channels.flatMap(([key, ledger]) => {
        const t = ledger.models.get(model);
        return t ? [[key, t] as const] : [];
      });
      const sum = emptySum();
      for (const [, t] of tallies) addTally(sum, t, 1);
      const term = this.termsOf(model, sum, resultModels.get(model));
      terms.set(model, term);
      if (term.table) usedTable = true;
      const out = new Map<string | null, number>();
      if (term.shared) {
        const shares = apportion(
          term.toShare,
          tallies.map(([, t]) => t.estimate),
          sum.estimate,
          tallies.map(([key]) => key ?? ''),
        );
        tallies.forEach(([key, t], i) => out.set(key, t.exactOutput + shares[i]));
      } else {
        for (const [key, t] of tallies) out.set(key, t.exactOutput + t.streamOutput);
      }
      outputs.set(model, out);
    }

    const perChannel = new Map<string | null, ChannelCost>();
    // Model names come from the stream: a null prototype keeps `__proto__` an ordinary key.
    const perModel: Record<string, ModelCost> = Object.create(null);
    for (const model of modelIds)
      perModel[model] = {
        ...emptyTokens(),
        usd: 0,
        result_usd: resultModels.get(model)?.usd ?? null,
        // Until a channel whose usage is known used it (a model of the result alone, or of
        // channels that state no token counts, is unknown: its dollars null, never $0).
        basis: 'unknown',
      };
    // Channels whose usage is known, and how their output tokens were found, the least exact.
    let known = 0;
    let runBasis: TokensBasis = 'unknown';
    // Dollars added up free of float dust (addUsd), per model and over the channels. Channels of
    // unknown usage are counted apart: what they spent is in the unattributed dollars. With none
    // known, the channels' dollars are unknown too (null), though nothing is left out of the
    // unattributed dollars (what the result states less $0).
    const modelTotals = new Map<string, UsdTotal | null>(modelIds.map((m) => [m, newTotal()]));
    let channelsTotal: UsdTotal | null = newTotal();
    for (const [key, ledger] of channels) {
      const cost = this.newChannelCost(ledger);
      perChannel.set(key, cost);
      if (cost.basis === 'unknown') continue;
      known++;
      let own: UsdTotal | null = newTotal();
      for (const model of cost.models) {
        const t = ledger.models.get(model)!;
        const tokens: ModelTokens = {
          input_tokens: t.input,
          output_tokens: outputs.get(model)!.get(key) ?? 0,
          cache_read_input_tokens: t.cacheRead,
          cache_creation_5m_input_tokens: t.cache5m,
          cache_creation_1h_input_tokens: t.cache1h,
        };
        const term = terms.get(model)!;
        const usd = term.rate ? modelUsd(tokens, t.cacheUnsplit, term) : null;
        own = plusUsd(own, usd);
        modelTotals.set(model, plusUsd(modelTotals.get(model)!, usd));
        channelsTotal = plusUsd(channelsTotal, usd);
        const m = perModel[model];
        for (const k of Object.keys(tokens) as (keyof ModelTokens)[]) {
          cost.tokens[k] += tokens[k];
          m[k] += tokens[k];
        }
        const basis: TokensBasis =
          t.estimatedMessages === 0 ? 'exact' : term.shared ? 'estimated' : 'stream';
        cost.basis = worse(cost.basis, basis);
        m.basis = m.basis === 'unknown' ? basis : worse(m.basis, basis);
      }
      cost.usd = totalUsd(own);
      runBasis = runBasis === 'unknown' ? cost.basis : worse(runBasis, cost.basis);
    }
    for (const model of modelIds) perModel[model].usd = totalUsd(modelTotals.get(model)!);
    const unpriced = modelIds.filter((m) => terms.get(m)!.rate === null && perModel[m].result_usd === null);
    for (const m of unpriced) perModel[m].usd = null;
    for (const m of modelIds) if (perModel[m].basis === 'unknown') perModel[m].usd = null;
    const channelsUsd = totalUsd(channelsTotal);
    const resultUsd = result?.totalUsd ?? null;
    // Without a total, the result's per-model dollars are the run's, when each model has them.
    const runUsd = resultUsd ?? (result && everyModelPriced(result) ? sumResultModels(result) : null);
    // A result that states no dollars (modelUsage without costUSD) counts nothing to compare.
    let unattributed =
      result === null || channelsUsd === null || !statesDollars(result)
        ? null
        : noDust((runUsd ?? sumResultModels(result)) - channelsUsd);
    this.disagreement = null;
    if (unattributed !== null && unattributed < 0) {
      this.disagreement =
        `the result states $${roundUsd(runUsd ?? sumResultModels(result!))} for the run and its own ` +
        `per-model figures price the channels at $${roundUsd(channelsUsd!)}: nothing is unattributed`;
      unattributed = 0;
    }
    for (const c of perChannel.values()) roundChannelUsd(c);
    for (const m of Object.values(perModel)) {
      m.usd = roundUsd(m.usd);
      m.result_usd = roundUsd(m.result_usd);
    }
    for (const c of perChannel.values()) freezeChannelCost(c);
    for (const m of Object.values(perModel)) Object.freeze(m);
    // Without dollars the result states, the run's are its channels': unknown when a model is
    // unpriced or no channel's usage is known, else those of the channels whose usage is known
    // (the unknown ones counted apart, as a subtree's are).
    const tree = known === 0 ? null : channelsUsd;
    return Object.freeze({
      usd: roundUsd(runUsd ?? (unpriced.length > 0 ? null : tree)),
      channels_usd: roundUsd(tree),
      unattributed_usd: roundUsd(unattributed),
      basis: result ? 'result' : 'table',
      prices_date: !result || usedTable ? this.prices.date : null,
      output_tokens: runBasis,
      result_usd: roundUsd(resultUsd),
      models: Object.freeze(perModel),
      channels: perChannel,
      unpriced: Object.freeze(unpriced),
    });
  }
}

/** A channel's figures as the report hands them out: nothing in them can be set. */
function freezeChannelCost(c: ChannelCost): void {
  Object.freeze(c.models);
  Object.freeze(c.tokens);
  Object.freeze(c);
}

const FREE: ModelPrice = { input: 0, output: 0, cache_read: 0, cache_write_5m: 0, cache_write_1h: 0 };

/** A model's tokens over channels, the tallies' fields its pricing depends on (see termsOf). */
type ModelSum = Pick<
  Tally,
  'input' | 'cacheRead' | 'cache5m' | 'cache1h' | 'cacheUnsplit' | 'exactOutput' | 'streamOutput' | 'estimate'
>;

const emptySum = (): ModelSum => ({
  input: 0,
  cacheRead: 0,
  cache5m: 0,
  cache1h: 0,
  cacheUnsplit: 0,
  exactOutput: 0,
  streamOutput: 0,
  estimate: 0,
});

/** Adds a channel's tally to a model's sum (`sign` -1: takes it out). */
function addTally(sum: ModelSum, t: Tally, sign: 1 | -1): void {
  sum.input += sign * t.input;
  sum.cacheRead += sign * t.cacheRead;
  sum.cache5m += sign * t.cache5m;
  sum.cache1h += sign * t.cache1h;
  sum.cacheUnsplit += sign * t.cacheUnsplit;
  sum.exactOutput += sign * t.exactOutput;
  sum.streamOutput += sign * t.streamOutput;
  sum.estimate += sign * t.estimate;
}

/** A sum's input side as tokens (its output left out). */
const sumTokens = (sum: ModelSum): ModelTokens => ({
  input_tokens: sum.input,
  output_tokens: 0,
  cache_read_input_tokens: sum.cacheRead,
  cache_creation_5m_input_tokens: sum.cache5m,
  cache_creation_1h_input_tokens: sum.cache1h,
});

/** How a model's tokens are priced over the channels (see CostLedger.termsOf). */
interface ModelTerms {
  /** USD per million tokens of each kind; null: nothing prices the model. */
  rate: ModelPrice | null;
  /** USD per million cache-write tokens of a message that stated no 5-minute/1-hour split. */
  unsplitWrite: number;
  /** Its output tokens are shared from the result's (`estimated`). */
  shared: boolean;
  /** The result's output tokens to share over the messages of no exact output. */
  toShare: number;
  /** The price table has the model. */
  table: boolean;
}

/** Dollars of one channel's tokens of a model; `unsplit` of its 5-minute writes stated no split. */
function modelUsd(tokens: ModelTokens, unsplit: number, term: ModelTerms): number {
  const rate = term.rate!;
  return priceTokens(tokens, rate) + (unsplit * (term.unsplitWrite - rate.cache_write_5m)) / 1e6;
}

const scaled = (p: ModelPrice, factor: number): ModelPrice => ({
  input: p.input * factor,
  output: p.output * factor,
  cache_read: p.cache_read * factor,
  cache_write_5m: p.cache_write_5m * factor,
  cache_write_1h: p.cache_write_1h * factor,
});

function everyModelPriced(result: ResultUsage): boolean {
  if (result.models.size === 0) return false;
  for (const m of result.models.values()) if (m.usd === null) return false;
  return true;
}

function statesDollars(result: ResultUsage): boolean {
  if (result.totalUsd !== null) return true;
  for (const m of result.models.values()) if (m.usd !== null) return true;
  return false;
}

function sumResultModels(result: ResultUsage): number {
  let sum = 0;
  for (const m of result.models.values()) sum += m.usd ?? 0;
  return sum;
}

/**
 * Dollars to 12 decimal places: far below any price (a token costs at least 1e-8 dollars),
 * and free of the float dust of a figure's own arithmetic (0.0029200000000000007 is 0.00292).
 * A figure is rounded once, when shown: sums add the figures before rounding (`addUsd`).
 */
export const roundUsd = <T extends number | null>(usd: T): T =>
  (usd === null ? null : Math.round(usd * 1e12) / 1e12) as T;

/**
 * Dollars being added up, free of float dust however many figures are added (Neumaier's
 * compensated summation): what each addition's rounding loses is found exactly and kept in
 * `lost`, so `sum + lost` errs by a few roundings of the total, where a plain sum of n
 * figures errs by up to n roundings (12,000 channels' plain sum strays past the 12th decimal).
 */
interface UsdTotal {
  sum: number;
  lost: number;
}

/** What rounding lost in `sum`, the float sum of `a` and `b`: exactly (Fast2Sum, the larger first). */
export const roundingLost = (a: number, b: number, sum: number): number =>
  Math.abs(a) >= Math.abs(b) ? a - sum + b : b - sum + a;

/** Adds `usd` into `total`, keeping what rounding lost. */
function addUsd(total: UsdTotal, usd: number): void {
  const sum = total.sum + usd;
  total.lost += roundingLost(total.sum, usd, sum);
  total.sum = sum;
}

/** `total` with `usd` added; null once either is (a model without a price). */
function plusUsd(total: UsdTotal | null, usd: number | null): UsdTotal | null {
  if (total === null || usd === null) return null;
  addUsd(total, usd);
  return total;
}

const newTotal = (): UsdTotal => ({ sum: 0, lost: 0 });
const totalUsd = (total: UsdTotal | null): number | null => (total === null ? null : total.sum + total.lost);

/**
 * Each channel figure's dollars before rounding, where rounding changed them: what sums over
 * channels (a subtree's, in the views) add, so that a subtree of thousands of channels does not
 * gather their roundings (up to half a picodollar each). Keyed by the figure's frozen object.
 */
const unroundedUsd = new WeakMap<ReadonlyChannelCost, number>();

/** Rounds a channel's dollars as shown (`roundUsd`), keeping them unrounded for sums. */
function roundChannelUsd(cost: ChannelCost): void {
  const shown = roundUsd(cost.usd);
  if (cost.usd !== null && shown !== cost.usd) unroundedUsd.set(cost, cost.usd);
  cost.usd = shown;
}

/**
 * A channel's dollars as sums over channels add them: before rounding to 12 decimals, when the
 * ledger made the figure (a copy of it, or one made elsewhere, adds its `usd`); null as `usd`.
 */
export function usdToAdd(cost: ReadonlyChannelCost): number | null {
  const unrounded = unroundedUsd.get(cost);
  return unrounded !== undefined && roundUsd(unrounded) === cost.usd ? unrounded : cost.usd;
}

/** Floating-point dust (a difference of sums of the same figures) is zero. */
const noDust = (usd: number) => (Math.abs(usd) < 1e-9 ? 0 : usd);

/**
 * `total` whole tokens shared in proportion to `weights` (largest remainder: the shares add
 * up to `total` exactly). Equal remainders go by `keys`, not by position, so the same run
 * gets the same shares whatever order its channels first spoke in. With no weight at all
 * nothing can be shared: all zeros.
 */
export function apportion(
  total: number,
  weights: readonly number[],
  weightSum: number,
  keys: readonly string[] = weights.map((_, i) => String(i).padStart(12, '0')),
): number[] {
  if (weightSum <= 0 || total <= 0) return weights.map(() => 0);
  const exact = weights.map((w) => (total * w) / weightSum);
  const shares = exact.map(Math.floor);
  let left = total - shares.reduce((a, b) => a + b, 0);
  const order = exact
    .map((e, i) => [e - Math.floor(e), i] as const)
    .sort(
      (a, b) => b[0] - a[0] || (keys[a[1]] < keys[b[1]] ? -1 : keys[a[1]] > keys[b[1]] ? 1 : a[1] - b[1]),
    );
  for (let k = 0; left > 0 && k < order.length; k++, left--) shares[order[k][1]]++;
  return shares;
}

/**
 * Characters a line's blocks produced: text, thinking, and a tool call's input as JSON
 * (measured with a bounded walk, never serialised: the stream chooses its size and depth).
 */
function producedChars(content: unknown): number {
  if (!Array.isArray(content)) return 0;
  let chars = 0;
  for (const block of content) {
    if (!isObject(block)) continue;
    if (block.type === 'text') chars += lengthOf(block.text);
    else if (block.type === 'thinking') chars += lengthOf(block.thinking);
    else if (block.type === 'tool_use') chars += lengthOf(block.name) + measure(block.input);
  }
  return chars;
}

/** A string's or LazyText's length. */
const lengthOf = (v: unknown): number =>
  typeof v === 'string' ? v.length : isObject(v) && typeof v.length === 'number' ? v.length : 0;

function measure(value: unknown): number {
  let chars = 0;
  const stack: unknown[] = [value];
  for (let nodes = 0; stack.length > 0 && nodes < MEASURE_MAX_NODES; nodes++) {
    const v = stack.pop();
    if (typeof v === 'string') chars += v.length + 2;
    else if (typeof v === 'number' || typeof v === 'boolean') chars += String(v).length;
    else if (Array.isArray(v)) {
      chars += 2;
      for (const item of v) if (stack.length < MEASURE_MAX_NODES) stack.push(item);
    } else if (isObject(v)) {
      chars += 2;
      for (const key of Object.keys(v)) {
        chars += key.length + 3;
        if (stack.length < MEASURE_MAX_NODES) stack.push(v[key]);
      }
    } else chars += 4;
  }
  return chars;
}

const BASIS_ORDER: readonly TokensBasis[] = ['exact', 'estimated', 'stream', 'unknown'];

/** The less certain of two bases (a channel is as exact as its least exact message). */
export const worse = (a: TokensBasis, b: TokensBasis): TokensBasis =>
  BASIS_ORDER.indexOf(a) >= BASIS_ORDER.indexOf(b) ? a : b;
