import { lineContent } from '../model/content.js';
import { CUT_LENGTHS, cutText, DISPLAY_DEFAULTS, type DisplayPolicy } from '../model/display.js';
import { isObject, type JsonObject } from '../model/message.js';
import { viewOf } from '../model/line-view.js';
import type { LineRecord, SpooledRecord } from '../model/record.js';
import type { ChannelSnapshot } from '../model/tree.js';
import { escapeOneLine, escapeTextLines } from './escape.js';
import type { ReadonlyCostReport } from '../model/cost.js';
import { formatUsd, NO_USAGE_REASON, usdLeavingOut, type ChannelCostView } from './cost.js';

/** What the transcript cuts each field to: the display policy's length classes (model/display.ts). */
export const RENDER_DEFAULTS = Object.freeze({
  toolInputChars: CUT_LENGTHS.preview.chars,
  resultChars: CUT_LENGTHS.field.chars,
  promptChars: CUT_LENGTHS.field.chars,
});

/** A field value of the transcript (prompt, result, status summary): cut as the `field` class. */
const fieldText = (text: Parameters<typeof cutText>[0]): string => cutText(text, 'field').text;

export function channelLabel(ch: Pick<ChannelSnapshot, 'id' | 'agent' | 'tag'>): string {
  if (ch.id === null) return 'main';
  return `${ch.agent ?? 'agent'}·${ch.tag}`;
}

/** How wide the label of a subagent on stdout and in the end-of-run summary is at most. */
export const LABEL_DEFAULTS = Object.freeze({ maxChars: CUT_LENGTHS.label.chars });

/** A description as a label: on one line, spaces collapsed, cut to `maxChars` as a `label`. */
export function descriptionLabel(description: string, maxChars: number = LABEL_DEFAULTS.maxChars): string {
  // Cut first: the stream chooses how long a description is.
  const flat = cutText(description, 'label', maxChars * 4 + 1).text.replace(/\s+/g, ' ').trim();
  return escapeOneLine(cutText(flat, 'label', maxChars).text);
}

/**
 * What a label looks like: the same once compatibility forms are folded and invisible format
 * characters (zero-width spaces and joiners, U+2060, U+FEFF) are left out, so `review` and
 * `review` with a zero-width space after it count as one label.
 */
const shownAs = (label: string): string => label.normalize('NFKC').replace(/\p{Cf}/gu, '');

/**
 * Labels that tell agents apart on stdout and in the summary: a subagent's description (the
 * spawn call's, `part 4`) cut to a width once it is known, else its agent type and tag
 * (`general-purpose·0005rx`). A description another channel already shows gets the tag too,
 * so two agents never share a label, nor two that only look alike (`shownAs`). A channel
 * keeps the first description label it is given.
 */
export class ChannelLabels {
  readonly #byId = new Map<string, string>();
  readonly #taken = new Set<string>();

  constructor(readonly maxChars: number = LABEL_DEFAULTS.maxChars) {}

  of(ch: Pick<ChannelSnapshot, 'id' | 'agent' | 'description' | 'tag'>): string {
    if (ch.id === null) return 'main';
    const known = this.#byId.get(ch.id);
    if (known !== undefined) return known;
    const description = ch.description?.trim() ? descriptionLabel(ch.description, this.maxChars) : null;
    if (description === null) return escapeOneLine(channelLabel(ch));
    const taken = this.#taken.has(shownAs(description));
    const label = taken ? `${description}·${escapeOneLine(ch.tag)}` : description;
    this.#taken.add(shownAs(label));
    this.#byId.set(ch.id, label);
    return label;
  }
}

export function headerLines(ch: ChannelSnapshot): string[] {
  // The main conversation has no agent type, spawn description, spawning id or parent.
  if (ch.id === null) return ['# subtee transcript: main conversation', '# depth: 0', ''];
  return [
    `# subtee transcript: ${escapeOneLine(ch.agent ?? 'unknown agent')}`,
    `# description: ${escapeOneLine(ch.description ?? '(unknown)')}`,
    `# id: ${escapeOneLine(ch.id ?? 'main')}`,
    `# parent: ${ch.orphan ? '(not seen yet)' : escapeOneLine(ch.parent ?? 'main')}`,
    `# depth: ${ch.depth ?? '(unknown)'}`,
    '',
  ];
}

/**
 * The closing `# cost:` line of a transcript: the channel's dollars and its subtree's, its
 * models and tokens, and how they were found (docs/cost.md).
 */
export function costLine(cost: ChannelCostView | undefined, report: ReadonlyCostReport): string {
  // A null is unpriced or unknown and is shown as such, never as $0.
  const own = formatUsd(cost === undefined ? null : cost.usd);
  const subtree = usdLeavingOut(cost?.subtreeUsd ?? null, cost?.subtreeUnknown ?? 0);
  const models =
    cost && cost.models.length > 0 ? cost.models.map((m) => escapeOneLine(m)).join(', ') : 'no model';
  const t = cost?.tokens;
  const tokens = t
    ? `input ${t.input_tokens}, output ${t.output_tokens} (${cost!.basis}), ` +
      `cache read ${t.cache_read_input_tokens}, ` +
      `cache write ${t.cache_creation_5m_input_tokens + t.cache_creation_1h_input_tokens}`
    : `tokens unknown (${escapeOneLine(cost?.reason ?? NO_USAGE_REASON)})`;
  const basis = report.basis === 'result' ? 'basis result' : `basis table ${report.prices_date ?? ''}`.trim();
  return `# cost: ${own} · subtree ${subtree} · ${models} · ${tokens} · ${basis}`;
}

export function statusLine(status: string, summary: string | null): string {
  const text = summary ? ` — ${escapeOneLine(fieldText(summary))}` : '';
  return `[status] ${status}${text}`;
}

/** The `[prompt]` line of a prompt a channel received, cut as a `field`. */
export function promptLine(text: string): string {
  return escapeTextLines(fieldText(text), '[prompt] ');
}

/** The readable lines of one record, in block order, thinking as `policy` shows it. */
export function renderRecord(rec: LineRecord, policy: DisplayPolicy = DISPLAY_DEFAULTS): string[] {
  const out: string[] = [];
  for (const item of lineContent(viewOf(rec), policy)) {
    switch (item.kind) {
      case 'prompt':
        out.push(promptLine(item.text));
        break;
      case 'text':
        out.push(escapeTextLines(item.text));
        break;
      case 'thinking':
        out.push(item.redacted ? '[thinking] (redacted)' : escapeTextLines(String(item.text), '[thinking] '));
        break;
      case 'tool_use': {
        const input = inputPreview(item.input, RENDER_DEFAULTS.toolInputChars);
        out.push(`[tool] ${escapeOneLine(item.name)} ${escapeOneLine(input)}`);
        break;
      }
      case 'tool_result': {
        const tag = item.isError ? '[result:error]' : '[result]';
        out.push(`${tag} ${escapeOneLine(fieldText(item.text))}`);
        break;
      }
      case 'run': {
        const shown = item.text === null ? null : fieldText(item.text);
        const result = shown === null ? '' : ` — ${escapeOneLine(shown)}`;
        out.push(`[run] ${escapeOneLine(item.subtype)}${item.isError ? ' (error)' : ''}${result}`);
        break;
      }
    }
  }
  return out;
}

type PreviewFrame =
  { value: unknown[]; keys: null; at: number } | { value: JsonObject; keys: string[]; at: number };

/**
 * A tool call's input as JSON (what JSON.stringify would give), cut to `maxChars` as a
 * `preview` (the marker has no count when the rest was never written out). Written as a loop
 * that stops once enough is written: the stream chooses how deep and how large an input is,
 * and JSON.stringify recurses (a 10,000-deep input overflows the stack) and serialises all of it.
 */
export function inputPreview(input: unknown, maxChars: number): string {
  let out = '';
  let partial = false;
  const full = () => out.length > maxChars;
  const scalar = (v: unknown) => {
    // A long string is cut before it is quoted, so a huge input costs only what is shown.
    const long = typeof v === 'string' && v.length > maxChars;
    if (long) partial = true;
    const s = long ? v.slice(0, maxChars + 1) : v;
    out += JSON.stringify(s) ?? 'null';
  };
  const stack: PreviewFrame[] = [];
  const open = (v: unknown) => {
    if (Array.isArray(v)) {
      out += '[';
      stack.push({ value: v, keys: null, at: 0 });
    } else if (isObject(v)) {
      out += '{';
      stack.push({ value: v, keys: Object.keys(v), at: 0 });
    } else {
      scalar(v);
    }
  };
  open(input ?? {});
  while (stack.length > 0 && !full()) {
    const top = stack[stack.length - 1];
    const length = top.keys === null ? top.value.length : top.keys.length;
    if (top.at === length) {
      out += top.keys === null ? ']' : '}';
      stack.pop();
      continue;
    }
    if (top.at > 0) out += ',';
    if (top.keys === null) {
      open(top.value[top.at++] ?? null);
    } else {
      const key = top.keys[top.at++];
      out += `${JSON.stringify(key)}:`;
      open(top.value[key]);
    }
  }
  return cutText(out, 'preview', maxChars, partial || stack.length > 0 ? null : out.length).text;
}

/** Characters of a spooled line's start shown in its readable entry (a `preview`). */
export const SPOOLED_PREVIEW_CHARS = CUT_LENGTHS.preview.chars;

/**
 * The readable entry of a line too long to hold: its size, where its bytes are, and its
 * start (the line's own bytes, escaped onto one line).
 */
export function spooledLine(rec: SpooledRecord, jsonl: string): string {
  const type = typeof rec.value?.type === 'string' ? `${escapeOneLine(rec.value.type)} ` : '';
  // Only the line's start is held: the marker has no count.
  const start = cutText(rec.head.toString('utf8'), 'preview', SPOOLED_PREVIEW_CHARS, null).text;
  return `[long line] ${type}line of ${rec.spool.bytes} bytes, whole in ${jsonl}: ` + escapeOneLine(start);
}
