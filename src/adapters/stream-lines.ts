/**
 * What the coding-agent adapters (Copilot CLI, Codex, Gemini CLI, opencode) share: the
 * contract of a mapper and builders of the stream-json-shaped lines they emit. Pure: no I/O,
 * no clock.
 */
import { headOf } from '../model/bounded-text.js';
import { jsonText } from '../model/json-text.js';
import { isObject, nonEmpty, type JsonObject } from '../model/message.js';

/**
 * What one input event became. `channel` is the channel whose `.jsonl` keeps the event's own
 * bytes (null: main). `lines` are the stream-json-shaped lines to route, in order; `own` is
 * the index of the one that stands for the event itself (its bytes travel with it), or -1
 * when none does: the input-format stage then routes, after them, a placeholder line to
 * `channel` that carries the bytes and shows nothing. The other lines are derived: routed and shown, never
 * written to a `.jsonl`, so every input line lands in exactly one file.
 */
export interface MappedEvent {
  channel: string | null;
  lines: JsonObject[];
  own: number;
}

/**
 * Where a channel's transcript comes from: `stream` when the stream carries the agent's own
 * events, `spawn-and-result` when it carries only the spawn call and the result the parent
 * got (the producer writes the child's transcript elsewhere).
 */
import type { ChannelTranscript } from '../model/session.js';
export type { ChannelTranscript } from '../model/session.js';

/**
 * The lines a mapper makes of one event, in order. The first pushed as its own stands for the
 * event; when none does, the input-format stage routes a placeholder after them.
 */
export class MappedLines {
  readonly lines: JsonObject[] = [];
  own = -1;
  readonly push = (line: JsonObject, isOwn = true): void => {
    if (isOwn && this.own === -1) this.own = this.lines.length;
    this.lines.push(line);
  };

  of(channel: string | null): MappedEvent {
    return { channel, lines: this.lines, own: this.own };
  }
}

/** `spawn-and-result` for a spawned channel whose steps the stream does not carry. */
export function transcriptOfSpawned(spawned: ReadonlySet<string>, channel: string | null): ChannelTranscript {
  return channel !== null && spawned.has(channel) ? 'spawn-and-result' : 'stream';
}

/** A producer's events onto stream-json-shaped lines, one event at a time. */
export interface StreamMapper {
  /** The producer's version as the stream states it, once it has; null while unknown. */
  readonly version: string | null;
  map(event: JsonObject): MappedEvent;
  /** Lines owed at the end of the stream (a final result the producer never prints). */
  end(): JsonObject[];
  transcriptOf(channel: string | null): ChannelTranscript;
}

/** The `type` of a placeholder line: routed to a channel, counted, never shown. */
const EVENT_LINE_TYPE = 'producer_event';

/** The placeholder that carries an event's bytes to its channel when no mapped line does. */
export function eventLine(producer: string, event: JsonObject, channel: string | null): JsonObject {
  return {
    type: EVENT_LINE_TYPE,
    producer,
    event: typeof event.type === 'string' ? event.type.slice(0, 100) : null,
    parent_tool_use_id: channel,
  };
}

function withTime(fields: JsonObject, timestamp: string | null): JsonObject {
  return timestamp === null ? fields : { ...fields, timestamp };
}

/** The first line of a run: who produced it, its version and session when the stream says. */
export function initLine(
  producer: string,
  version: string | null,
  sessionId: string | null,
  model: string | null,
  timestamp: string | null,
): JsonObject {
  return withTime(
    {
      type: 'system',
      subtype: 'init',
      session_id: sessionId,
      model,
      producer,
      producer_version: version,
      parent_tool_use_id: null,
    },
    timestamp,
  );
}

export function assistantLine(
  channel: string | null,
  messageId: string | null,
  content: JsonObject[],
  usage: JsonObject | null,
  timestamp: string | null,
  model: string | null = null,
): JsonObject {
  const message: JsonObject = { id: messageId, type: 'message', role: 'assistant', content };
  // The model the producer states for the message (Copilot's `model`): cost prices it by name.
  if (model !== null) message.model = model;
  if (usage) message.usage = usage;
  return withTime({ type: 'assistant', message, parent_tool_use_id: channel }, timestamp);
}

/** An assistant line of one text block. */
export function textLine(
  channel: string | null,
  messageId: string | null,
  text: string,
  timestamp: string | null,
): JsonObject {
  return assistantLine(channel, messageId, [{ type: 'text', text }], null, timestamp);
}

export function promptLine(channel: string | null, text: string, timestamp: string | null): JsonObject {
  return withTime(
    {
      type: 'user',
      message: { role: 'user', content: [{ type: 'text', text }] },
      parent_tool_use_id: channel,
    },
    timestamp,
  );
}

export function toolUseBlock(id: string, name: string, input: JsonObject): JsonObject {
  return { type: 'tool_use', id, name, input };
}

export function toolResultBlock(toolUseId: string, text: string, isError: boolean): JsonObject {
  const block: JsonObject = { type: 'tool_result', tool_use_id: toolUseId, content: text };
  if (isError) block.is_error = true;
  return block;
}

export function toolResultLine(
  channel: string | null,
  blocks: JsonObject[],
  timestamp: string | null,
): JsonObject {
  return withTime(
    { type: 'user', message: { role: 'user', content: blocks }, parent_tool_use_id: channel },
    timestamp,
  );
}

/** Claude Code's notice that a subagent started, so its name and description reach the tree. */
export function taskStartedLine(
  id: string,
  agent: string | null,
  description: string | null,
  timestamp: string | null,
): JsonObject {
  return withTime(
    {
      type: 'system',
      subtype: 'task_started',
      tool_use_id: id,
      subagent_type: agent,
      description,
      parent_tool_use_id: id,
    },
    timestamp,
  );
}

/** A subagent's end as Claude Code reports it; a null summary keeps the one its result gave. */
export function taskNotificationLine(
  id: string,
  status: 'completed' | 'failed' | 'stopped',
  summary: string | null,
  timestamp: string | null,
): JsonObject {
  return withTime(
    {
      type: 'system',
      subtype: 'task_notification',
      tool_use_id: id,
      status,
      summary,
      parent_tool_use_id: id,
    },
    timestamp,
  );
}

export function resultLine(
  isError: boolean,
  text: string | null,
  sessionId: string | null,
  usage: JsonObject | null,
  durationMs: number | null,
  timestamp: string | null,
): JsonObject {
  const fields: JsonObject = {
    type: 'result',
    subtype: isError ? 'error_during_execution' : 'success',
    is_error: isError,
    result: text,
    session_id: sessionId,
    parent_tool_use_id: null,
  };
  if (usage) fields.usage = usage;
  if (durationMs !== null) fields.duration_ms = durationMs;
  return withTime(fields, timestamp);
}

/** A finite number, or undefined. */
export function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/**
 * A usage object in Claude Code's field names from a producer's, given which of its fields
 * holds what; fields the producer lacks are left out, and an object with none is null.
 */
export function usageOf(source: unknown, names: Readonly<Record<string, string>>): JsonObject | null {
  if (!isObject(source)) return null;
  const out: JsonObject = {};
  for (const [claudeName, theirs] of Object.entries(names)) {
    let value: unknown = source;
    for (const part of theirs.split('.')) value = isObject(value) ? value[part] : undefined;
    const n = finite(value);
    if (n !== undefined) out[claudeName] = n;
  }
  return Object.keys(out).length > 0 ? out : null;
}

/** A tool call's arguments as an object: JSON text is parsed, anything else wrapped. */
export function argumentsOf(value: unknown): JsonObject {
  if (isObject(value)) return value;
  if (typeof value === 'string') {
    try {
      const parsed: unknown = JSON.parse(value);
      if (isObject(parsed)) return parsed;
    } catch {
      // not JSON: kept as text below
    }
    return { input: value };
  }
  return value === undefined || value === null ? {} : { input: value };
}

/** Text from a string or a value shown as JSON; '' for nothing. */
export function textOf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  return jsonText(value) ?? '';
}

/** An ISO time from an epoch in milliseconds, when a Date can hold it. */
export function isoFromMs(value: unknown): string | null {
  const ms = finite(value);
  if (ms === undefined || Math.abs(ms) > 8.64e15) return null;
  return new Date(ms).toISOString();
}

export function timestampOf(event: JsonObject): string | null {
  return nonEmpty(event.timestamp);
}

/** A shell command's output with its exit code, as a transcript shows a result. */
export function shellResultText(output: string, exitCode: number | undefined): string {
  if (exitCode === undefined) return output;
  return `${output}${output.length === 0 || output.endsWith('\n') ? '' : '\n'}[exit code ${exitCode}]`;
}

/** What bounds the text of the lines one event maps to (see `shareRepeatedText`). */
export const MAPPED_TEXT_LIMITS = Object.freeze({
  /** Texts shorter than this are never cut: copying them costs little. */
  longChars: 1024,
  /** Repeated long texts stay whole while their copies add up to no more than this... */
  repeatFloorChars: 256 * 1024,
  /** ...or the event's own size, whichever is more; later copies keep this much of their head. */
  headChars: 200,
});

/** One container met in the walk: where it sits, so a copy of it can go into its parent's copy. */
interface WalkFrame {
  value: JsonObject | unknown[];
  /** The object's keys (null for an array) and the next one to visit. */
  keys: string[] | null;
  at: number;
  copy: JsonObject | unknown[] | null;
  parent: WalkFrame | null;
  key: string | number;
}

function walkFrame(value: JsonObject | unknown[], parent: WalkFrame | null, key: string | number): WalkFrame {
  return { value, keys: Array.isArray(value) ? null : Object.keys(value), at: 0, copy: null, parent, key };
}

/**
 * The lines one event maps to, with no long text copied without bound: a mapper may name one
 * field on many lines (a spawn's prompt on each of the thousands of agents it starts, a run's
 * error on each subagent it stopped). A text of `longChars` or more met again among the lines
 * stays whole while the copies add up to at most the event's own size (`eventChars`, or
 * `repeatFloorChars` when that is more); after that a copy keeps its first `headChars` and says
 * the text is shown whole above. So the lines' text is bounded by the event, the texts the
 * mapper already held, and `headChars` a copy. Lines and containers that change are copied
 * (the originals may be the event's own objects or the mapper's state); nothing else is. The
 * walk is iterative, in document order: a value's depth is the stream's choice.
 */
export function shareRepeatedText(
  lines: JsonObject[],
  eventChars: number,
  limits: Readonly<typeof MAPPED_TEXT_LIMITS> = MAPPED_TEXT_LIMITS,
): JsonObject[] {
  const seen = new Set<string>();
  const budget = Math.max(eventChars, limits.repeatFloorChars);
  let repeated = 0;
  let out: JsonObject[] | null = null;
  const copyOf = (frame: WalkFrame): Record<string | number, unknown> => {
    if (!frame.copy) {
      frame.copy = Array.isArray(frame.value) ? frame.value.slice() : { ...frame.value };
      if (frame.parent) copyOf(frame.parent)[frame.key] = frame.copy;
      else (out ??= lines.slice())[frame.key as number] = frame.copy as JsonObject;
    }
    return frame.copy as Record<string | number, unknown>;
  };
  for (let i = 0; i < lines.length; i++) {
    const stack: WalkFrame[] = [walkFrame(lines[i], null, i)];
    while (stack.length > 0) {
      const frame = stack[stack.length - 1];
      const size = frame.keys ? frame.keys.length : (frame.value as unknown[]).length;
      if (frame.at >= size) {
        stack.pop();
        continue;
      }
      const key = frame.keys ? frame.keys[frame.at++] : frame.at++;
      const value = (frame.value as Record<string | number, unknown>)[key];
      if (typeof value === 'string') {
        if (value.length < limits.longChars) continue;
        if (!seen.has(value)) {
          seen.add(value);
        } else if (repeated + value.length <= budget) {
          repeated += value.length;
        } else {
          const shown = headOf(value, limits.headChars);
          const more = value.length - shown.length;
          copyOf(frame)[key] = `${shown}… [${more} more characters: the same text is shown whole above]`;
        }
      } else if (value !== null && typeof value === 'object') {
        stack.push(walkFrame(value as JsonObject, frame, key));
      }
    }
  }
  return out ?? lines;
}
