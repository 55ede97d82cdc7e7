import {
  asBlock,
  asStreamLine,
  isObject,
  lineTypeOf,
  rawBlocks,
  resultTextLazy,
  type JsonObject,
} from './message.js';
import { isText, type LazyText } from './scan.js';
import { DISPLAY_DEFAULTS, shownThinking, type DisplayPolicy } from './display.js';

/**
 * What a line says, read once for every view: the transcript, pino, the report. Each view
 * decides how to show an item (cut, escaped, as a pino event or a report entry); none reads
 * content blocks itself.
 */
export type ContentItem =
  /** A user's text: the prompt of the run or of a subagent (a text block or a plain string). */
  | { readonly kind: 'prompt'; readonly text: string }
  | { readonly kind: 'text'; readonly text: string }
  /** Thinking as the display policy shows it (cut, or a note that it is in a file). */
  | { readonly kind: 'thinking'; readonly text: string | LazyText; readonly redacted: boolean }
  | { readonly kind: 'tool_use'; readonly id: string; readonly name: string; readonly input: unknown }
  | {
      readonly kind: 'tool_result';
      readonly id: string;
      readonly text: string | LazyText;
      readonly isError: boolean;
    }
  /** A `result` line: how the run ended. */
  | {
      readonly kind: 'run';
      readonly subtype: string;
      readonly text: string | null;
      readonly isError: boolean;
    };

export type ContentKind = ContentItem['kind'];

/**
 * The whole text of each thinking block of an assistant or user line (what `file` mode writes
 * out): every line whose thinking `lineContent` shows through the policy.
 */
export function fullThinking(value: JsonObject): Array<string | LazyText> {
  const type = lineTypeOf(value);
  if (type !== 'assistant' && type !== 'user') return [];
  const out: Array<string | LazyText> = [];
  for (const raw of rawBlocks(value)) {
    const block = asBlock(raw);
    if (block?.type === 'thinking' && isText(block.thinking)) out.push(block.thinking);
  }
  return out;
}

const NO_CONTENT: readonly ContentItem[] = Object.freeze([]);

/**
 * The items of one line, in block order, thinking as `policy` shows it (a block it drops is
 * left out). A plain array, not a generator: it runs for every line of a run.
 */
export function lineContent(
  value: JsonObject,
  policy: DisplayPolicy = DISPLAY_DEFAULTS,
): readonly ContentItem[] {
  const type = lineTypeOf(value);
  if (type !== 'assistant' && type !== 'user' && type !== 'result') return NO_CONTENT;
  const line = asStreamLine(value);
  if (line?.type === 'result') {
    const subtype = typeof line.subtype === 'string' ? line.subtype : 'result';
    const text = typeof line.result === 'string' ? line.result : null;
    return [{ kind: 'run', subtype, text, isError: line.is_error === true }];
  }
  if (line?.type !== 'assistant' && line?.type !== 'user') return NO_CONTENT;
  const items: ContentItem[] = [];
  const raw = rawBlocks(value);
  for (let index = 0; index < raw.length; index++) {
    const block = asBlock(raw[index]);
    switch (block?.type) {
      case 'text':
        items.push({ kind: line.type === 'user' ? 'prompt' : 'text', text: block.text });
        break;
      case 'thinking': {
        // The policy applies to a thinking block wherever a line carries one: a model's
        // thinking is usually on an assistant line, but a producer may echo it on a user line.
        const full: unknown = block.thinking;
        const shown = isText(full) ? shownThinking(policy, full).text : '';
        if (shown !== null) items.push({ kind: 'thinking', text: shown, redacted: false });
        break;
      }
      case 'redacted_thinking':
        items.push({ kind: 'thinking', text: '', redacted: true });
        break;
      case 'tool_use':
        items.push({ kind: 'tool_use', id: block.id, name: block.name, input: block.input });
        break;
      case 'tool_result':
        items.push({
          kind: 'tool_result',
          id: block.tool_use_id,
          text: resultTextLazy(block),
          isError: block.is_error === true,
        });
        break;
    }
  }
  const message = line.message as unknown;
  if (line.type === 'user' && isObject(message) && typeof message.content === 'string')
    items.push({ kind: 'prompt', text: message.content });
  return items;
}
