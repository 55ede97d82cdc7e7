import type { LineRecord } from '../model/record.js';
import { contentBlocks, resultText, type Channel } from '../model/tree.js';

// C0 controls except TAB and LF, DEL, C1 controls, and the bidi controls that can reorder
// what a reader sees (Trojan Source). CR is escaped too: a raw CR overwrites a log line.
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** Makes model text safe for a terminal or a log viewer: control characters become visible escapes. */
export function escapeControl(s: string): string {
  return s.replace(UNSAFE, (c) => {
    const n = c.charCodeAt(0);
    return n <= 0xff ? `\\x${n.toString(16).padStart(2, '0')}` : `\\u${n.toString(16).padStart(4, '0')}`;
  });
}

/** Same as escapeControl, and newlines and tabs become `\n`/`\t` too: for one-line fields. */
export function escapeOneLine(s: string): string {
  return escapeControl(s).replace(/\n/g, '\\n').replace(/\t/g, '\\t');
}

export function shorten(s: string, max: number): string {
  if (s.length <= max) return s;
  return `${s.slice(0, max)}… (${s.length - max} more chars)`;
}

export const RENDER_DEFAULTS = Object.freeze({ toolInputChars: 200, resultChars: 500, promptChars: 500 });

export function channelLabel(ch: Channel): string {
  if (ch.id === null) return 'main';
  return `${ch.agent ?? 'agent'}·${ch.tag}`;
}

export function headerLines(ch: Channel): string[] {
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
  return `[status] ${status}${summary ? ` — ${escapeOneLine(shorten(summary, RENDER_DEFAULTS.resultChars))}` : ''}`;
}

/**
 * The readable lines of one record, in block order. `display` carries text that an earlier
 * stage chose to show instead of a block's own (the thinking truncator); null hides a block.
 */
export function renderRecord(rec: LineRecord): string[] {
  const v = rec.value;
  const out: string[] = [];
  if (v.type === 'assistant' || v.type === 'user') {
    const blocks = contentBlocks(v);
    for (let i = 0; i < blocks.length; i++) {
      const override = rec.display?.get(i);
      if (override === null) continue;
      const b = blocks[i];
      switch (b.type) {
        case 'text':
          if (typeof b.text === 'string') out.push(v.type === 'user' ? `[prompt] ${escapeControl(shorten(b.text, RENDER_DEFAULTS.promptChars))}` : escapeControl(b.text));
          break;
        case 'thinking':
          out.push(`[thinking] ${escapeControl(override ?? String(b.thinking ?? ''))}`);
          break;
        case 'redacted_thinking':
          out.push('[thinking] (redacted)');
          break;
        case 'tool_use': {
          const input = JSON.stringify(b.input ?? {});
          out.push(`[tool] ${escapeOneLine(String(b.name))} ${escapeOneLine(shorten(input, RENDER_DEFAULTS.toolInputChars))}`);
          break;
        }
        case 'tool_result': {
          const tag = b.is_error === true ? '[result:error]' : '[result]';
          out.push(`${tag} ${escapeOneLine(shorten(resultText(b), RENDER_DEFAULTS.resultChars))}`);
          break;
        }
      }
    }
    const message = v.message as Record<string, unknown> | undefined;
    if (v.type === 'user' && typeof message?.content === 'string') {
      out.push(`[prompt] ${escapeControl(shorten(message.content, RENDER_DEFAULTS.promptChars))}`);
    }
  } else if (v.type === 'result') {
    const text = typeof v.result === 'string' ? ` — ${escapeOneLine(shorten(v.result, RENDER_DEFAULTS.resultChars))}` : '';
    out.push(`[run] ${escapeOneLine(String(v.subtype ?? 'result'))}${v.is_error === true ? ' (error)' : ''}${text}`);
  }
  return out;
}
