/**
 * Anthropic list prices, dated, with where they were read. Used to price a run before its
 * `result` line arrives (live) and without one (a cut run, another producer); once the
 * result is there, Claude Code's own dollars decide (see cost.ts). A program or a user can
 * replace or add models (`--prices FILE`, the channel router's `prices` option).
 */
import { isObject } from './message.js';

/** USD per million tokens, per kind of token. */
export interface ModelPrice {
  readonly input: number;
  readonly output: number;
  readonly cache_read: number;
  readonly cache_write_5m: number;
  readonly cache_write_1h: number;
}

export interface PriceTable {
  /** The day the prices were read from their sources (YYYY-MM-DD). */
  readonly date: string;
  readonly sources: readonly string[];
  readonly models: Readonly<Record<string, ModelPrice>>;
}

const price = (
  input: number,
  output: number,
  cacheRead: number,
  write5m: number,
  write1h: number,
): ModelPrice =>
  Object.freeze({ input, output, cache_read: cacheRead, cache_write_5m: write5m, cache_write_1h: write1h });

const OPUS_4_5 = price(5, 25, 0.5, 6.25, 10);
const OPUS_4 = price(15, 75, 1.5, 18.75, 30);
const SONNET_4 = price(3, 15, 0.3, 3.75, 6);

/**
 * Models whose rates the sources state for every kind of token. Left out on purpose: models
 * priced by prompt length (Claude Haiku 5.5) and models whose cache-read rate the sources
 * disagree on; with a `result` line Claude Code's own figure prices them, without one they
 * are reported unpriced rather than guessed.
 */
export const PRICE_TABLE: PriceTable = Object.freeze({
  date: '2026-12-01',
  sources: Object.freeze([
    'https://platform.claude.com/docs/en/about-claude/pricing',
    'https://platform.claude.com/docs/en/models/opus-5-5/overview',
    'https://platform.claude.com/docs/en/models/opus-5/overview',
    'https://platform.claude.com/docs/en/models/sonnet-5/overview',
  ]),
  models: Object.freeze({
    'claude-opus-5-5': price(4, 20, 0.2, 5, 8),
    'claude-opus-5': price(5, 25, 0.5, 6.25, 10),
    'claude-opus-4-8': OPUS_4_5,
    'claude-opus-4-7': OPUS_4_5,
    'claude-opus-4-6': OPUS_4_5,
    'claude-opus-4-5': OPUS_4_5,
    'claude-opus-4-1': OPUS_4,
    'claude-opus-4': OPUS_4,
    'claude-sonnet-5': price(2, 10, 0.2, 2.5, 4),
    'claude-sonnet-4-5': SONNET_4,
    'claude-sonnet-4': SONNET_4,
    'claude-3-7-sonnet': SONNET_4,
    'claude-haiku-4-5': price(1, 5, 0.1, 1.25, 2),
    'claude-3-5-haiku': price(0.8, 4, 0.08, 1, 1.6),
    'claude-3-haiku': price(0.25, 1.25, 0.03, 0.3, 0.5),
  }),
});

/**
 * Anthropic's usual multipliers of the input rate (output 5×, cache read 0.1×, 5-minute
 * write 1.25×, 1-hour write 2×): how Claude Code's dollars for a model the table does not
 * know are split over the kinds of token (cost.ts); never used to invent a price.
 */
export const STANDARD_RATIOS: ModelPrice = price(1, 5, 0.1, 1.25, 2);

/** A model id as the stream writes it, matched to a table entry: exact, else without `[1m]` or a date. */
export function priceOf(table: PriceTable, model: string): ModelPrice | null {
  const own = (name: string) => (Object.hasOwn(table.models, name) ? table.models[name] : null);
  const bare = model.replace(/\[[^\]]*\]$/, '');
  return own(model) ?? own(bare) ?? own(bare.replace(/-\d{8}$/, ''));
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Whether `s` is a calendar day written YYYY-MM-DD (2026-13-45 is not one). */
export function isCalendarDay(s: unknown): s is string {
  if (typeof s !== 'string') return false;
  const m = DATE.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const day = new Date(Date.UTC(y, mo - 1, d));
  return day.getUTCFullYear() === y && day.getUTCMonth() === mo - 1 && day.getUTCDate() === d && y >= 1970;
}

/** The highest rate a price file may state: USD per million tokens (see cost.ts COST_BOUNDS). */
export const MAX_USD_PER_MILLION_TOKENS = 10_000;
const KINDS = ['input', 'output', 'cache_read', 'cache_write_5m', 'cache_write_1h'] as const;

/**
 * The table a price file describes, laid over `base`: its models replace or add to the
 * base's, its date and sources stand for the whole. What is wrong with it, as one line, when
 * it is not a price file: `{ "date": "YYYY-MM-DD", "models": { "<id>": { "input": 3,
 * "output": 15, "cache_read"?: …, "cache_write_5m"?: …, "cache_write_1h"?: … } } }`, USD per
 * million tokens; a cache rate left out is the standard multiple of the input rate. The rates
 * written must be from 0 to MAX_USD_PER_MILLION_TOKENS; a derived one may be up to twice that.
 */
export function overridePrices(base: PriceTable, data: unknown): PriceTable | string {
  if (!isObject(data)) return 'must be a JSON object';
  if (!isCalendarDay(data.date)) return 'date: must be a day written YYYY-MM-DD (such as 2026-12-01)';
  if (!isObject(data.models)) return 'models: must be an object of model ids';
  const sources = data.sources ?? [];
  if (!Array.isArray(sources) || !sources.every((s) => typeof s === 'string'))
    return 'sources: must be a list of strings';
  for (const key of Object.keys(data))
    if (!['$schema', 'date', 'sources', 'models'].includes(key)) return `${shownId(key)}: unknown key`;
  // Ids come from the file: a null prototype keeps `__proto__` an ordinary model id.
  const models: Record<string, ModelPrice> = Object.assign(Object.create(null), base.models);
  for (const [id, given] of Object.entries(data.models)) {
    if (!isObject(given)) return `models.${shownId(id)}: must be an object`;
    const rate = (kind: (typeof KINDS)[number]) => {
      const v = given[kind];
      return v === undefined && kind !== 'input' && kind !== 'output'
        ? (given.input as number) * STANDARD_RATIOS[kind]
        : v;
    };
    for (const kind of Object.keys(given))
      if (!(KINDS as readonly string[]).includes(kind))
        return `models.${shownId(id)}.${shownId(kind)}: unknown key`;
    // Only the rates the file writes are checked: a cache rate left out is a multiple of the
    // input rate (up to 2×), and may pass the bound a written rate may not.
    for (const kind of KINDS) {
      const v = given[kind];
      if (v === undefined && kind !== 'input' && kind !== 'output') continue;
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MAX_USD_PER_MILLION_TOKENS)
        return (
          `models.${shownId(id)}.${kind}: must be a number of USD per million tokens, ` +
          `from 0 to ${MAX_USD_PER_MILLION_TOKENS.toLocaleString('en-US')}`
        );
    }
    const [input, output, read, write5m, write1h] = KINDS.map((kind) => rate(kind) as number);
    models[id] = price(input, output, read, write5m, write1h);
  }
  return Object.freeze({
    date: data.date,
    sources: Object.freeze([...(sources as string[])]),
    models: Object.freeze(models),
  });
}

/** A key from a price file inside an error line: printable ASCII, at most 60 characters. */
const shownId = (s: string): string =>
  (s.length > 60 ? `${s.slice(0, 59)}…` : s).replace(/[^\x20-\x7e…]/g, '?');
