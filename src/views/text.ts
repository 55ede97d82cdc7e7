import { headOf } from '../model/bounded-text.js';
import {
  asBlock,
  isObject,
  rawBlocks,
  resultTextLazy,
  type ContentBlock,
  type JsonObject,
} from '../model/message.js';
import { viewOf } from '../model/line-view.js';
import type { LineRecord, SpooledRecord } from '../model/record.js';
import type { ChannelSnapshot } from '../model/tree.js';
import { escapeControl, escapeOneLine, shorten } from './escape.js';

export const RENDER_DEFAULTS = Object.freeze({ toolInputChars: 200, resultChars: 500, promptChars: 500 });

export function channelLabel(ch: ChannelSnapshot): string {
  if (ch.id === null) return 'main';
  return `${ch.agent ?? 'agent'}·${ch.tag}`;
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

export function statusLine(status: string, summary: string | null): string {
  const text = summary ? ` — ${escapeOneLine(shorten(summary, RENDER_DEFAULTS.resultChars))}` : '';
  return `[status] ${status}${text}`;
}

/**
 * The content blocks of a line subtee understands, each with what readable outputs show for
 * it: `display` carries text an earlier stage chose to show instead of a block's own (the
 * thinking truncator) and is keyed by the block's index in the raw content list.
 */
export function* shownBlocks(
  rec: LineRecord,
): Generator<{ block: ContentBlock; override: string | undefined }> {
  const raw = rawBlocks(viewOf(rec));
  for (let i = 0; i < raw.length; i++) {
    const override = rec.display?.get(i);
    if (override === null) continue;
    const block = asBlock(raw[i]);
    if (block) yield { block, override };
  }
}

/** The readable lines of one record, in block order. */
export function renderRecord(rec: LineRecord): string[] {
  const v = viewOf(rec);
  const out: string[] = [];
  if (v.type === 'assistant' || v.type === 'user') {
    for (const { block, override } of shownBlocks(rec)) {
      switch (block.type) {
        case 'text':
          out.push(
            v.type === 'user'
              ? `[prompt] ${escapeControl(shorten(block.text, RENDER_DEFAULTS.promptChars))}`
              : escapeControl(block.text),
          );
          break;
        case 'thinking':
          out.push(`[thinking] ${escapeControl(String(override ?? block.thinking ?? ''))}`);
          break;
        case 'redacted_thinking':
          out.push('[thinking] (redacted)');
          break;
        case 'tool_use': {
          const input = inputPreview(block.input, RENDER_DEFAULTS.toolInputChars);
          out.push(`[tool] ${escapeOneLine(block.name)} ${escapeOneLine(input)}`);
          break;
        }
        case 'tool_result': {
          const tag = block.is_error === true ? '[result:error]' : '[result]';
          out.push(`${tag} ${escapeOneLine(shorten(resultTextLazy(block), RENDER_DEFAULTS.resultChars))}`);
          break;
        }
      }
    }
    const message = v.message as { content?: unknown } | undefined;
    if (v.type === 'user' && typeof message?.content === 'string') {
      out.push(`[prompt] ${escapeControl(shorten(message.content, RENDER_DEFAULTS.promptChars))}`);
    }
  } else if (v.type === 'result') {
    const result =
      typeof v.result === 'string' ? escapeOneLine(shorten(v.result, RENDER_DEFAULTS.resultChars)) : null;
    const error = v.is_error === true ? ' (error)' : '';
    out.push(
      `[run] ${escapeOneLine(String(v.subtype ?? 'result'))}${error}${result === null ? '' : ` — ${result}`}`,
    );
  }
  return out;
}

type PreviewFrame =
  { value: unknown[]; keys: null; at: number } | { value: JsonObject; keys: string[]; at: number };

/**
 * A tool call's input as JSON (what JSON.stringify would give), cut to at most `maxChars`
 * characters, the last one `…` when cut. Written as a loop that stops once enough is
 * written: the stream chooses how deep and how large an input is, and JSON.stringify
 * recurses (a 10,000-deep input overflows the stack) and serialises all of it.
 */
export function inputPreview(input: unknown, maxChars: number): string {
  let out = '';
  const full = () => out.length > maxChars;
  const scalar = (v: unknown) => {
    // A long string is cut before it is quoted, so a huge input costs only what is shown.
    const s = typeof v === 'string' && v.length > maxChars ? v.slice(0, maxChars + 1) : v;
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
  return out.length > maxChars ? `${headOf(out, maxChars - 1)}…` : out;
}

/** Characters of a spooled line's start shown in its readable entry. */
export const SPOOLED_PREVIEW_CHARS = 200;

/**
 * The readable entry of a line too long to hold: its size, where its bytes are, and its
 * start (the line's own bytes, escaped onto one line).
 */
export function spooledLine(rec: SpooledRecord, jsonl: string): string {
  const type = typeof rec.value?.type === 'string' ? `${escapeOneLine(rec.value.type)} ` : '';
  const start = shorten(rec.head.toString('utf8'), SPOOLED_PREVIEW_CHARS).replace(
    /… \(\d+ more chars\)$/,
    '…',
  );
  return (
    `[long line] ${type}line of ${rec.spool.bytes} bytes, whole in ${jsonl}: ` + escapeOneLine(start)
  );
}
