/**
 * What a stream-json line means, as types. Lines are parsed once by the line parser and
 * never copied: the readers below check the shape of a parsed object and hand back the same
 * object, narrowed, or skip what does not have the shape. Everything here is pure.
 */
import { isText, LazyText } from './scan.js';

export type JsonObject = Record<string, unknown>;

export const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * An object whose JSON text is what its own properties hold: no prototype but Object's (or
 * none) and no `toJSON`. A Date, a boxed string, a Map or a class instance is not.
 */
export function isPlainObject(value: unknown): value is JsonObject {
  if (!isObject(value) || typeof value.toJSON === 'function') return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** A non-empty string, or null. */
export const nonEmpty = (value: unknown): string | null =>
  typeof value === 'string' && value.length > 0 ? value : null;

// Content blocks

export interface TextBlock {
  type: 'text';
  text: string;
}

export interface ThinkingBlock {
  type: 'thinking';
  /** Empty when the CLI omits thinking text and sends only a signature. */
  thinking: string;
  signature?: string;
}

export interface RedactedThinkingBlock {
  type: 'redacted_thinking';
}

export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}

export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  /** A string, or a list of blocks of which the text ones are read (see resultText). */
  content?: unknown;
  is_error?: boolean;
}

export type ContentBlock = TextBlock | ThinkingBlock | RedactedThinkingBlock | ToolUseBlock | ToolResultBlock;
export type ContentBlockType = ContentBlock['type'];

/** The block kinds counted per channel in index.json. */
export type CountedBlockType = 'text' | 'thinking' | 'tool_use' | 'tool_result';

/** The block's type when it is one subtee understands and its fields have their types. */
export function blockType(block: JsonObject): ContentBlockType | null {
  switch (block.type) {
    case 'text':
      return typeof block.text === 'string' ? 'text' : null;
    case 'thinking':
      return block.thinking === undefined || isText(block.thinking) ? 'thinking' : null;
    case 'redacted_thinking':
      return 'redacted_thinking';
    case 'tool_use':
      return typeof block.id === 'string' && typeof block.name === 'string' ? 'tool_use' : null;
    case 'tool_result':
      return typeof block.tool_use_id === 'string' ? 'tool_result' : null;
    default:
      return null;
  }
}

/**
 * The raw content list of an assistant or user line, in order, objects only. Its index is
 * the block index that stages such as the thinking truncator refer to.
 */
export function rawBlocks(line: JsonObject): JsonObject[] {
  const message = line.message;
  if (!isObject(message) || !Array.isArray(message.content)) return [];
  // A loop, not `filter`: V8's `filter` leaves its fast path on a frozen list (a value a plugin
  // was handed), which took twice as long; on any other list the two take the same.
  const content: unknown[] = message.content;
  const blocks: JsonObject[] = [];
  for (let i = 0; i < content.length; i++) {
    const block = content[i];
    if (isObject(block)) blocks.push(block);
  }
  return blocks;
}

/** A raw block as a typed block, or null when subtee does not understand it. */
export function asBlock(block: JsonObject): ContentBlock | null {
  return blockType(block) === null ? null : (block as unknown as ContentBlock);
}

/** The typed blocks of a line; blocks subtee does not understand are left out. */
export function contentBlocks(line: JsonObject): ContentBlock[] {
  const out: ContentBlock[] = [];
  for (const raw of rawBlocks(line)) {
    const block = asBlock(raw);
    if (block) out.push(block);
  }
  return out;
}

/** Text of a tool_result's content, which is a string or a list of blocks. */
export function resultText(block: ToolResultBlock): string {
  const content = block.content;
  if (typeof content === 'string') return content;
  if (content instanceof LazyText) return content.toString();
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) {
    if (isObject(part) && typeof part.text === 'string') text += (text ? '\n' : '') + part.text;
  }
  return text;
}

/** The same, but a long string left undecoded in a line view stays a LazyText (for previews). */
export function resultTextLazy(block: ToolResultBlock): string | LazyText {
  return block.content instanceof LazyText ? block.content : resultText(block);
}

// Lines

/**
 * Token counts of one API message as the API reports them: the four counts below, and any
 * other numeric field (nested objects such as `server_tool_use` are left out).
 */
export interface Usage {
  readonly input_tokens?: number;
  readonly output_tokens?: number;
  readonly cache_creation_input_tokens?: number;
  readonly cache_read_input_tokens?: number;
  readonly [field: string]: number | undefined;
}

interface LineBase {
  parent_tool_use_id?: string | null;
  timestamp?: string;
  session_id?: string;
  uuid?: string;
}

export interface AssistantLine extends LineBase {
  type: 'assistant';
  message: {
    id?: string;
    model?: string;
    content: unknown[];
    usage?: JsonObject;
    stop_reason?: string | null;
  };
}

export interface UserLine extends LineBase {
  type: 'user';
  /** `content` is a list of blocks, or a plain string for a prompt. */
  message: { content: unknown };
}

export interface SystemLine extends LineBase {
  type: 'system';
  subtype: string;
  /** `init` */
  claude_code_version?: string;
  /** `task_started`, `task_notification`, `task_progress`, `task_updated` */
  tool_use_id?: string;
  task_id?: string;
  subagent_type?: string;
  description?: string;
  is_backgrounded?: boolean;
  /** `task_started`: `local_bash` for a shell command, absent for a subagent. */
  task_type?: string;
  spawn_depth?: number;
  status?: string;
  summary?: string;
}

export interface ResultLine extends LineBase {
  type: 'result';
  subtype?: string;
  is_error?: boolean;
  result?: string;
  duration_ms?: number;
  usage?: JsonObject;
  total_cost_usd?: number;
}

export interface StreamEventLine extends LineBase {
  type: 'stream_event';
  event: JsonObject;
}

export type StreamLine = AssistantLine | UserLine | SystemLine | ResultLine | StreamEventLine;
export type LineType = StreamLine['type'];

const LINE_TYPES: ReadonlySet<string> = new Set<LineType>([
  'assistant',
  'user',
  'system',
  'result',
  'stream_event',
]);

/**
 * The kind a line says it is, when it is one of the kinds subtee reads; null for any other.
 * Typed, so a misspelt kind does not compile. Unlike asStreamLine it reads `type` alone and
 * not the line's shape (nor its `message`, which a lazy line view would parse).
 */
export function lineTypeOf(value: JsonObject): LineType | null {
  const type = value.type;
  return typeof type === 'string' && LINE_TYPES.has(type) ? (type as LineType) : null;
}

/** The system lines subtee reads, by `subtype`. */
type SystemSubtype =
  | 'init'
  | 'status'
  | 'task_started'
  | 'task_progress'
  | 'task_updated'
  | 'task_notification'
  | 'background_tasks_changed';

const SYSTEM_SUBTYPES: ReadonlySet<string> = new Set<SystemSubtype>([
  'init',
  'status',
  'task_started',
  'task_progress',
  'task_updated',
  'task_notification',
  'background_tasks_changed',
]);

/** The subtype of a system line when it is one subtee reads; null for any other line. */
export function systemSubtypeOf(value: JsonObject): SystemSubtype | null {
  if (value.type !== 'system') return null;
  const subtype = value.subtype;
  return typeof subtype === 'string' && SYSTEM_SUBTYPES.has(subtype) ? (subtype as SystemSubtype) : null;
}

/**
 * The line as one of the kinds subtee reads, when its discriminating fields have the right
 * shape; null for any other JSON object (still routed and kept, just not interpreted).
 */
export function asStreamLine(value: JsonObject): StreamLine | null {
  switch (value.type) {
    case 'assistant':
    case 'user':
      return isObject(value.message) ? (value as unknown as StreamLine) : null;
    case 'system':
      return typeof value.subtype === 'string' ? (value as unknown as SystemLine) : null;
    case 'result':
      return value as unknown as ResultLine;
    case 'stream_event':
      return isObject(value.event) ? (value as unknown as StreamEventLine) : null;
    default:
      return null;
  }
}

/** The channel id of a line: its non-empty `parent_tool_use_id`, else null (main). */
export function channelIdOf(value: JsonObject): string | null {
  return nonEmpty(value.parent_tool_use_id);
}

/**
 * Claude Code's model name on a message it wrote itself (an API error shown as text): not an
 * API call, so its usage counts nowhere (the tree's, the cost ledger's, the transcripts').
 */
const SYNTHETIC_MODEL = '<synthetic>';

/** Whether an assistant line's `message` is one Claude Code wrote itself (see SYNTHETIC_MODEL). */
export function isSyntheticMessage(message: JsonObject): boolean {
  return message.model === SYNTHETIC_MODEL;
}

/**
 * The most tokens of one kind an API message may state (the largest context windows hold two
 * million): a larger count, or a negative or non-finite one, is not a count (see cost.ts).
 */
export const MAX_MESSAGE_TOKENS = 10_000_000;

/**
 * The numeric fields of a usage object that are counts: finite, from 0 to MAX_MESSAGE_TOKENS
 * (the CLI nests objects such as server_tool_use; those are left out too). The cost ledger
 * warns of a refused figure, naming its line.
 */
export function usageNumbers(usage: unknown): Record<string, number> {
  const out: Record<string, number> = {};
  if (!isObject(usage)) return out;
  for (const key in usage) {
    const value = usage[key];
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= MAX_MESSAGE_TOKENS)
      out[key] = Math.floor(value);
  }
  return out;
}

/** Names of the tool that spawns a subagent: `Agent`, and `Task` before 2.1.63. */
export const SPAWN_TOOLS: ReadonlySet<string> = new Set(['Agent', 'Task']);

/** The result text of a background spawn: the subagent runs on, it has not ended. */
export const ASYNC_LAUNCH = /^\s*Async agent launched/;

/**
 * A run's identity, taken from the stream so that a replay of the same recording (or a resend
 * of what it produced) has the same one: the `uuid` of the first line that has one (the CLI
 * gives every message a fresh UUID). Null for a line without one.
 */
export function runIdOf(value: Record<string, unknown>): string | null {
  const u = value.uuid;
  return typeof u === 'string' && u.length > 0 && u.length <= 200 ? u : null;
}

/** How much of a channel a mapped producer's stream shows: all of it, or its spawn and result. */
export type ChannelTranscript = 'stream' | 'spawn-and-result';

/** What a mapped producer's stream says of each channel's transcript (its mapper answers). */
export interface TranscriptKinds {
  transcriptOf(channel: string | null): ChannelTranscript;
}
