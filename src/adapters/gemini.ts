/**
 * Gemini CLI (`gemini -p … --output-format stream-json`) onto subtee's channel model. The CLI
 * prints `init`, `message` (the assistant's text in `delta` pieces), `tool_use`,
 * `tool_result`, `error` and a final `result` with the run's token counts. A subagent is an
 * `invoke_agent` call: the stream shows the call and its result only (the child's own
 * transcript is written to disk, not printed), so each call becomes a channel holding the
 * call's prompt, its status and its result. Pure: no I/O, no clock.
 */
import { headOf } from '../model/bounded-text.js';
import { isObject, nonEmpty, type JsonObject } from '../model/message.js';
import {
  assistantLine,
  finite,
  initLine,
  promptLine,
  resultLine,
  textLine,
  textOf,
  timestampOf,
  toolResultBlock,
  toolResultLine,
  toolUseBlock,
  usageOf,
  MappedLines,
  transcriptOfSpawned,
  type ChannelTranscript,
  type MappedEvent,
  type StreamMapper,
} from './stream-lines.js';

export const GEMINI_DEFAULTS = Object.freeze({
  /** Tools whose calls start a subagent. */
  spawnTools: Object.freeze(['invoke_agent']) as readonly string[],
  /**
   * The most characters (UTF-16 units) of one message joined from `delta` pieces that are
   * held and shown, cut marker included: 4 MiB. The pieces keep their bytes in the channel's
   * `.jsonl`, so the joined text is for display only; unbounded, 200 pieces of 1 MiB took
   * 1.2 GB and 530 failed with `Invalid string length`. Past it, the first part is kept.
   */
  maxJoinedChars: 4 * 1024 * 1024,
});

export interface GeminiMapperOptions {
  spawnTools?: readonly string[];
  /** Below the marker's room (80) only the marker is left, which may pass the limit. */
  maxJoinedChars?: number;
  /** Told of a joined message cut at `maxJoinedChars` (`JOINED_TEXT_CUT`). */
  onWarning?: (code: string, message: string) => void;
}

const GEMINI_TYPES = new Set(['init', 'message', 'tool_use', 'tool_result', 'error', 'result']);

/** Whether a line is a Gemini CLI stream-json event (each carries an ISO `timestamp`). */
export function isGeminiEvent(value: JsonObject): boolean {
  if (typeof value.type !== 'string' || !GEMINI_TYPES.has(value.type)) return false;
  // Claude Code's lines (`result` among them) have a subtype or a parent_tool_use_id.
  if (typeof value.timestamp !== 'string') return false;
  if ('parent_tool_use_id' in value || 'subtype' in value) return false;
  if (value.type === 'init') return typeof value.session_id === 'string';
  if (value.type === 'message') return typeof value.role === 'string';
  if (value.type === 'tool_use' || value.type === 'tool_result') return typeof value.tool_id === 'string';
  if (value.type === 'result') return isObject(value.stats) || typeof value.status === 'string';
  return typeof value.message === 'string';
}

/** The run's token counts (`result.stats`) in Claude Code's field names. */
export const GEMINI_USAGE = Object.freeze({
  input_tokens: 'input_tokens',
  output_tokens: 'output_tokens',
  cache_read_input_tokens: 'cached',
});

interface OpenText {
  /** The joined pieces, or once cut, their first part (the marker is added when shown). */
  text: string;
  /** Characters of the pieces left out: 0 while everything is held. */
  cut: number;
  timestamp: string | null;
}

/**
 * Room kept for the cut marker below the limit, so the shown text stays within it: the marker
 * with a 16-digit count (2^53) is 61 characters.
 */
const CUT_MARK_ROOM = 80;

const cutMark = (cut: number) => ` […${cut} chars cut; every piece is in the .jsonl…]`;

/**
 * Maps Gemini CLI events to stream-json-shaped lines. The assistant's delta pieces are joined
 * into one message, shown when the next event that is not a piece arrives (or at the end).
 * State: the text being joined (at most `maxJoinedChars`), the spawn calls not yet answered,
 * the session id, a message counter.
 */
export class GeminiMapper implements StreamMapper {
  readonly version: string | null = null;
  private readonly spawnTools: ReadonlySet<string>;
  private readonly maxJoinedChars: number;
  private readonly onWarning: (code: string, message: string) => void;
  private open: OpenText | null = null;
  /** Spawn calls whose channel is open. */
  private readonly spawns = new Set<string>();
  private readonly spawned = new Set<string>();
  private sessionId: string | null = null;
  private messages = 0;
  private lastText: string | null = null;

  constructor(options: GeminiMapperOptions = {}) {
    this.spawnTools = new Set(options.spawnTools ?? GEMINI_DEFAULTS.spawnTools);
    this.maxJoinedChars = options.maxJoinedChars ?? GEMINI_DEFAULTS.maxJoinedChars;
    this.onWarning = options.onWarning ?? (() => {});
  }

  transcriptOf(channel: string | null): ChannelTranscript {
    return transcriptOfSpawned(this.spawned, channel);
  }

  map(event: JsonObject): MappedEvent {
    const ts = timestampOf(event);
    const mapped = new MappedLines();
    const push = mapped.push;
    const isPiece = event.type === 'message' && event.role === 'assistant';
    if (!isPiece) this.flush(push);
    switch (event.type) {
      case 'init':
        this.sessionId = nonEmpty(event.session_id);
        push(initLine('gemini', null, this.sessionId, nonEmpty(event.model), ts));
        break;
      case 'message': {
        const text = textOf(event.content);
        if (isPiece) {
          if (event.delta === true) this.join(text, ts);
          else push(this.textLine(text, ts));
        } else if (event.role === 'user') {
          push(promptLine(null, text, ts));
        }
        break;
      }
      case 'tool_use': {
        const id = nonEmpty(event.tool_id);
        if (!id) break;
        const name = nonEmpty(event.tool_name) ?? 'tool';
        const args = isObject(event.parameters) ? event.parameters : {};
        if (this.spawnTools.has(name)) {
          const agent = nonEmpty(args.agent_name) ?? nonEmpty(args.name);
          const prompt = nonEmpty(args.prompt) ?? nonEmpty(args.task);
          const description = nonEmpty(args.description);
          const input = { ...args, subagent_type: agent, description, tool: name };
          push(assistantLine(null, `gemini-call-${id}`, [toolUseBlock(id, 'Task', input)], null, ts));
          this.spawns.add(id);
          this.spawned.add(id);
          if (prompt !== null) push(promptLine(id, prompt, ts), false);
        } else {
          push(assistantLine(null, `gemini-call-${id}`, [toolUseBlock(id, name, args)], null, ts));
        }
        break;
      }
      case 'tool_result': {
        const id = nonEmpty(event.tool_id);
        if (!id) break;
        const failed = event.status !== 'success';
        const error = isObject(event.error) ? nonEmpty(event.error.message) : null;
        const output = failed ? (error ?? textOf(event.output)) : textOf(event.output);
        push(toolResultLine(null, [toolResultBlock(id, output, failed)], ts));
        if (this.spawns.delete(id) && output.length > 0) {
          push(textLine(id, `gemini-result-${id}`, output, ts), false);
        }
        break;
      }
      case 'error': {
        const text = `[${textOf(event.severity) || 'error'}] ${textOf(event.message)}`;
        push(textLine(null, `gemini-error-${++this.messages}`, text, ts));
        break;
      }
      case 'result': {
        const stats = isObject(event.stats) ? event.stats : {};
        const usage = usageOf(stats, GEMINI_USAGE);
        // The stream's only token counts are the run's totals, subagents' included: main's usage.
        if (usage) push(assistantLine(null, 'gemini-run-usage', [], usage, ts), false);
        const failed = event.status !== 'success';
        const error = isObject(event.error) ? nonEmpty(event.error.message) : null;
        const durationMs = finite(stats.duration_ms) ?? null;
        push(resultLine(failed, failed ? error : this.lastText, this.sessionId, usage, durationMs, ts));
        break;
      }
    }
    return mapped.of(null);
  }

  end(): JsonObject[] {
    const lines: JsonObject[] = [];
    this.flush((line) => lines.push(line));
    return lines;
  }

  private textLine(text: string, ts: string | null): JsonObject {
    this.lastText = text;
    return textLine(null, `gemini-message-${++this.messages}`, text, ts);
  }

  /**
   * A piece onto the open message. Past the limit only the count grows: every piece is in the
   * `.jsonl`, and holding them all joined is what ran out of memory.
   */
  private join(piece: string, ts: string | null): void {
    const open = (this.open ??= { text: '', cut: 0, timestamp: ts });
    if (open.cut > 0) {
      open.cut += piece.length;
      return;
    }
    const whole = open.text.length + piece.length;
    if (whole <= this.maxJoinedChars) {
      open.text += piece;
      return;
    }
    const room = Math.max(0, this.maxJoinedChars - CUT_MARK_ROOM);
    // One unit past the room, so headOf sees a pair the cut would split, even across pieces.
    const head =
      open.text.length > room ? open.text : open.text + piece.slice(0, room - open.text.length + 1);
    open.text = headOf(head, room);
    open.cut = whole - open.text.length;
    this.onWarning(
      'JOINED_TEXT_CUT',
      `a Gemini CLI message joined from its delta pieces passed ${this.maxJoinedChars} characters; ` +
        "transcripts show its first part, and every piece is kept in its channel's .jsonl",
    );
  }

  /** The joined text of the message the pieces made, as one line (derived: its pieces carry the bytes). */
  private flush(push: (line: JsonObject, isOwn?: boolean) => void): void {
    if (!this.open) return;
    const { text, cut, timestamp } = this.open;
    this.open = null;
    push(this.textLine(cut > 0 ? text + cutMark(cut) : text, timestamp), false);
  }
}

export function createGeminiMapper(options: GeminiMapperOptions = {}): GeminiMapper {
  return new GeminiMapper(options);
}
