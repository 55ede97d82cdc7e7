/**
 * OpenAI Codex (`codex exec --json`) onto subtee's channel model. The CLI prints thread and
 * turn events and items (`item.started` / `item.updated` / `item.completed`): agent messages,
 * reasoning, shell commands, file changes, MCP and web calls, and `collab_tool_call` items for
 * the agents it spawns (`spawn_agent`, `wait`…), and top-level `error` events (a retry, or
 * the API error that failed the turn, shown on main as `[error] …`). A spawned thread's own
 * items are not in the stream: each thread id named by a spawn becomes a channel with the
 * spawn's prompt, and its status and final message from the `agents_states` later items carry.
 * Pure: no I/O, no clock.
 */
import { headOf } from '../model/bounded-text.js';
import { isObject, nonEmpty, type JsonObject } from '../model/message.js';
import {
  assistantLine,
  finite,
  initLine,
  promptLine,
  resultLine,
  shellResultText,
  taskNotificationLine,
  textLine,
  textOf,
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

const CODEX_TYPES = new Set([
  'thread.started',
  'turn.started',
  'turn.completed',
  'turn.failed',
  'item.started',
  'item.updated',
  'item.completed',
  'error',
]);

/** Whether a line is a Codex `exec --json` event. */
export function isCodexEvent(value: JsonObject): boolean {
  if (typeof value.type !== 'string' || !CODEX_TYPES.has(value.type) || 'data' in value) return false;
  if (value.type === 'thread.started') return typeof value.thread_id === 'string';
  if (value.type.startsWith('item.')) return isObject(value.item);
  // A top-level error (`Reconnecting…`, or what stopped the turn) has a message alone: Gemini's
  // has a `timestamp`, opencode's a `sessionID`, Claude Code's lines a subtype or a parent.
  if (value.type === 'error') {
    return (
      typeof value.message === 'string' &&
      !('timestamp' in value) &&
      !('sessionID' in value) &&
      !('subtype' in value) &&
      !('parent_tool_use_id' in value)
    );
  }
  return true;
}

/** Codex's turn usage in Claude Code's field names. */
export const CODEX_USAGE = Object.freeze({
  input_tokens: 'input_tokens',
  cache_read_input_tokens: 'cached_input_tokens',
  cache_creation_input_tokens: 'cache_write_input_tokens',
  output_tokens: 'output_tokens',
  reasoning_output_tokens: 'reasoning_output_tokens',
});

/**
 * `agents_states` statuses after which a spawned agent does no more. An agent closed
 * (`shutdown`) or interrupted before it finished was stopped, as Claude Code's `stopped`
 * notification says: an end, not a failure.
 */
const DONE_STATES: Readonly<Record<string, 'completed' | 'failed' | 'stopped'>> = Object.freeze({
  completed: 'completed',
  errored: 'failed',
  failed: 'failed',
  shutdown: 'stopped',
  not_found: 'failed',
  interrupted: 'stopped',
});

const COLLAB_TOOL = 'collab_tool_call';

/** A spawn names no description: the head of its prompt stands for one (surrogate pairs kept whole). */
const DESCRIPTION_CHARS = 80;

/**
 * Maps Codex events to stream-json-shaped lines. Everything the stream shows happens on the
 * main thread's channel; spawned threads get channels of their own that hold their prompt,
 * status and last message. State: the items started and not yet completed (to pair a command
 * with its result), the spawned threads still running, the last agent message, the turn count.
 */
export class CodexMapper implements StreamMapper {
  readonly version: string | null = null;
  private threadId: string | null = null;
  private readonly started = new Set<string>();
  /** Spawned threads not yet seen done. */
  private readonly running = new Set<string>();
  /** Every spawned thread: their channels hold the spawn and the result only. */
  private readonly spawned = new Set<string>();
  private lastText: string | null = null;
  private turns = 0;
  private errors = 0;

  transcriptOf(channel: string | null): ChannelTranscript {
    return transcriptOfSpawned(this.spawned, channel);
  }

  map(event: JsonObject): MappedEvent {
    const mapped = new MappedLines();
    const push = mapped.push;
    switch (event.type) {
      case 'thread.started':
        this.threadId ??= nonEmpty(event.thread_id);
        push(initLine('codex', null, nonEmpty(event.thread_id), null, null));
        break;
      case 'item.started':
      case 'item.updated':
      case 'item.completed':
        if (isObject(event.item)) this.item(event.type, event.item, push);
        break;
      case 'error':
        // Told on main as an error item is; it ends nothing (a `turn.failed` does).
        this.errors++;
        push(textLine(null, `codex-error-${this.errors}`, `[error] ${textOf(event.message)}`, null));
        break;
      case 'turn.completed':
      case 'turn.failed': {
        this.turns++;
        const usage = usageOf(event.usage, CODEX_USAGE);
        if (usage) push(assistantLine(null, `codex-turn-${this.turns}`, [], usage, null));
        const failed = event.type === 'turn.failed';
        const error = isObject(event.error) ? nonEmpty(event.error.message) : null;
        push(resultLine(failed, failed ? error : this.lastText, this.threadId, usage, null, null), !usage);
        break;
      }
    }
    return mapped.of(null);
  }

  end(): JsonObject[] {
    return [];
  }

  private item(phase: string, item: JsonObject, push: (line: JsonObject, isOwn?: boolean) => void): void {
    const id = nonEmpty(item.id);
    if (!id) return;
    const done = phase === 'item.completed';
    switch (item.type) {
      case 'agent_message':
        if (!done) return;
        this.lastText = textOf(item.text);
        push(textLine(null, id, this.lastText, null));
        return;
      case 'reasoning':
        if (!done) return;
        push(assistantLine(null, id, [{ type: 'thinking', thinking: textOf(item.text) }], null, null));
        return;
      case 'error':
        if (!done) return;
        push(textLine(null, id, `[error] ${textOf(item.message)}`, null));
        return;
      case 'todo_list':
        return;
      case COLLAB_TOOL:
        this.collab(id, done, item, push);
        return;
    }
    if (phase === 'item.updated') return;
    const announce = () => {
      if (this.started.has(id)) return;
      this.started.add(id);
      const [name, input] = toolOf(item);
      push(assistantLine(null, id, [toolUseBlock(id, name, input)], null, null), !done);
    };
    announce();
    if (!done) return;
    this.started.delete(id);
    push(toolResultLine(null, [itemResult(id, item)], null));
  }

  /**
   * A spawn names its threads in `receiver_thread_ids` once it completes: each is a `Task`
   * call (its id the thread id) with the spawn's prompt, and the thread's channel opens with
   * that prompt. Any later item's `agents_states` that says a thread is done ends its channel
   * with the thread's last message, as a Task result would.
   */
  private collab(
    id: string,
    done: boolean,
    item: JsonObject,
    push: (line: JsonObject, isOwn?: boolean) => void,
  ): void {
    const tool = nonEmpty(item.tool) ?? 'collab';
    const threads = Array.isArray(item.receiver_thread_ids)
      ? item.receiver_thread_ids.filter((t): t is string => typeof t === 'string' && t.length > 0)
      : [];
    const prompt = nonEmpty(item.prompt);
    if (tool === 'spawn_agent') {
      if (!done) return;
      const fresh = threads.filter((t) => !this.spawned.has(t));
      if (fresh.length > 0) {
        const blocks = fresh.map((t) =>
          toolUseBlock(t, 'Task', {
            prompt,
            description: prompt === null ? null : headOf(prompt, DESCRIPTION_CHARS),
            subagent_type: 'codex',
            tool,
          }),
        );
        push(assistantLine(null, id, blocks, null, null));
        for (const t of fresh) {
          this.spawned.add(t);
          this.running.add(t);
          if (prompt !== null) push(promptLine(t, prompt, null), false);
        }
      } else if (item.status === 'failed') {
        push(assistantLine(null, id, [toolUseBlock(id, tool, { prompt })], null, null));
        const refused = toolResultBlock(id, 'the agent could not be spawned', true);
        push(toolResultLine(null, [refused], null), false);
      }
      this.endThreads(item, push);
      return;
    }
    const call = toolUseBlock(id, tool, { receiver_thread_ids: threads, prompt });
    if (!done) {
      if (!this.started.has(id)) {
        this.started.add(id);
        push(assistantLine(null, id, [call], null, null));
      }
      return;
    }
    const blocks: JsonObject[] = [];
    if (!this.started.has(id)) push(assistantLine(null, id, [call], null, null));
    this.started.delete(id);
    blocks.push(toolResultBlock(id, statesText(item.agents_states), item.status === 'failed'));
    push(toolResultLine(null, blocks, null));
    this.endThreads(item, push);
  }

  /** Ends the threads `agents_states` says are done: a Task result in main, the last message in theirs. */
  private endThreads(item: JsonObject, push: (line: JsonObject, isOwn?: boolean) => void): void {
    const states = isObject(item.agents_states) ? item.agents_states : {};
    const blocks: JsonObject[] = [];
    for (const thread of Object.keys(states)) {
      const state = states[thread];
      if (!this.running.has(thread) || !isObject(state)) continue;
      const status = DONE_STATES[String(state.status)];
      if (!status) continue;
      this.running.delete(thread);
      const message = nonEmpty(state.message);
      if (message !== null) push(textLine(thread, `codex-final-${thread}`, message, null), false);
      // Told before the spawn's result, which would end the channel as completed.
      if (status === 'stopped') push(taskNotificationLine(thread, status, message, null), false);
      blocks.push(toolResultBlock(thread, message ?? `agent ${String(state.status)}`, status === 'failed'));
    }
    if (blocks.length > 0) push(toolResultLine(null, blocks, null), false);
  }
}

/** The tool name and input an item is shown with. */
function toolOf(item: JsonObject): [string, JsonObject] {
  switch (item.type) {
    case 'command_execution':
      return ['Bash', { command: textOf(item.command) }];
    case 'file_change':
      return ['Edit', { changes: Array.isArray(item.changes) ? item.changes : [] }];
    case 'mcp_tool_call':
      return [
        `mcp__${textOf(item.server)}__${textOf(item.tool)}`,
        isObject(item.arguments) ? item.arguments : { arguments: item.arguments ?? null },
      ];
    case 'web_search':
      return ['WebSearch', { query: textOf(item.query) }];
    default:
      return [typeof item.type === 'string' ? item.type.slice(0, 100) : 'item', {}];
  }
}

/** A completed item's result: a command's output and exit code, or what the item says. */
export function itemResult(id: string, item: JsonObject): JsonObject {
  const failed = item.status === 'failed' || item.status === 'declined';
  if (item.type === 'command_execution') {
    const exitCode = finite(item.exit_code);
    return toolResultBlock(
      id,
      shellResultText(textOf(item.aggregated_output), exitCode),
      failed || (exitCode !== undefined && exitCode !== 0),
    );
  }
  if (item.type === 'mcp_tool_call') {
    const error = isObject(item.error) ? nonEmpty(item.error.message) : null;
    return toolResultBlock(id, error ?? textOf(item.result), failed || error !== null);
  }
  return toolResultBlock(id, textOf(item.status ?? ''), failed);
}

function statesText(states: unknown): string {
  if (!isObject(states)) return '';
  return Object.entries(states)
    .map(([thread, s]) => `${thread}: ${isObject(s) ? textOf(s.status) : textOf(s)}`)
    .join('\n');
}

export function createCodexMapper(): CodexMapper {
  return new CodexMapper();
}
