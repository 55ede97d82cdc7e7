/**
 * Claude Code's own transcripts, as far as cost needs them: the CLI writes each channel's
 * messages to `<config>/projects/<slug>/<session id>.jsonl` (main) and
 * `<session id>/subagents/agent-<id>.jsonl` (a subagent, its spawn named by
 * `agent-<id>.meta.json`'s `toolUseId`). An assistant line is written once per content block,
 * each repeating the message's final usage, so each message (by `message.id` and `requestId`)
 * counts once. Plain logic: the reading is in chain/transcripts.ts.
 */
import { isObject, isSyntheticMessage, nonEmpty } from './message.js';
import { COST_BOUNDS, emptyTokens, saneFigure, type ModelTokens, type TranscriptChannel } from './cost.js';

/** A session id or agent id that may name a file: letters, digits, `-` and `_`. */
export const SAFE_ID = /^[A-Za-z0-9_-]{1,128}$/;

/**
 * The project folder Claude Code keeps a working directory's sessions in: every character
 * other than a letter or a digit becomes `-` (`/srv/build` → `-srv-build`).
 */
export function projectSlug(cwd: string): string {
  return cwd.replace(/[^A-Za-z0-9]/g, '-');
}

/** The spawn a subagent's `agent-<id>.meta.json` names (its `toolUseId`), or null. */
export function metaToolUseId(meta: unknown): string | null {
  return isObject(meta) ? nonEmpty(meta.toolUseId) : null;
}

interface Message {
  model: string;
  tokens: ModelTokens;
}

/** The usage of one transcript file, fed a parsed line at a time. */
export class TranscriptUsage {
  /** Per message key, its latest usage (each block's line repeats it). */
  private readonly messages = new Map<string, Message>();
  /** Why the file cannot be trusted whole; the first reason stands. */
  partial: string | null = null;

  /** Takes one parsed line (`lineNo` 1-based, for the reason a figure is refused). */
  add(line: unknown, lineNo: number): void {
    if (!isObject(line) || line.type !== 'assistant' || !isObject(line.message)) return;
    const message = line.message;
    const model = nonEmpty(message.model);
    const id = nonEmpty(message.id);
    if (model === null || isSyntheticMessage(message) || id === null || !isObject(message.usage)) return;
    const usage = message.usage;
    const max = COST_BOUNDS.messageTokens;
    let bad: string | null = null;
    const count = (v: unknown, field: string): number => {
      if (v === undefined || v === null) return 0;
      if (saneFigure(v, max)) return Math.floor(v);
      bad ??= field;
      return 0;
    };
    const created = count(usage.cache_creation_input_tokens, 'cache_creation_input_tokens');
    const split = isObject(usage.cache_creation) ? usage.cache_creation : null;
    const oneHour =
      split === null ? 0 : Math.min(created, count(split.ephemeral_1h_input_tokens, 'ephemeral_1h'));
    const tokens: ModelTokens = {
      input_tokens: count(usage.input_tokens, 'input_tokens'),
      output_tokens: count(usage.output_tokens, 'output_tokens'),
      cache_read_input_tokens: count(usage.cache_read_input_tokens, 'cache_read_input_tokens'),
      cache_creation_5m_input_tokens: created - oneHour,
      cache_creation_1h_input_tokens: oneHour,
    };
    if (bad !== null) this.partial ??= `states an impossible usage.${bad} on line ${lineNo}`;
    const key = `${id}\u0000${nonEmpty(line.requestId) ?? ''}`;
    this.messages.set(key, { model, tokens });
  }

  /** Messages counted so far. */
  get size(): number {
    return this.messages.size;
  }

  /** The file's usage per model, each message once. */
  channel(file: string): TranscriptChannel {
    const models = new Map<string, { tokens: ModelTokens; messages: number }>();
    for (const { model, tokens } of this.messages.values()) {
      let m = models.get(model);
      if (!m) {
        m = {
          tokens: emptyTokens(),
          messages: 0,
        };
        models.set(model, m);
      }
      m.messages++;
      for (const k of Object.keys(tokens) as (keyof ModelTokens)[]) m.tokens[k] += tokens[k];
    }
    return { file, models, partial: this.partial };
  }
}
