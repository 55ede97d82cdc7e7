/**
 * Deep Agents / LangGraph JS onto subtee's channel model. A LangGraph v3 run stream
 * (`agent.streamEvents(input, { version: 'v3' })`) yields protocol events
 * `{ method, params: { namespace, timestamp, node?, data } }`; this maps them, one at a time,
 * onto lines shaped like Claude Code's stream-json, so the tree, the files, `index.json`, the
 * projection and every report work on them unchanged.
 *
 * A subagent is recognised the way Deep Agents itself recognises one: a namespace one level
 * below the root or below another subagent whose first `tasks` event carries
 * `metadata.lc_agent_name`. Its cause is the tool call whose `tool-started` event fired at that
 * namespace, and that tool call id becomes the channel id (as the `Agent` tool_use id does
 * for Claude Code). Everything here is pure: no I/O, no clock.
 */
import { jsonText } from '../model/json-text.js';
import { isObject, nonEmpty, type JsonObject } from '../model/message.js';

export const LANGGRAPH_DEFAULTS = Object.freeze({
  /**
   * Tools whose calls start a subagent. Their tool_use is held back until the subagent is
   * seen (it then becomes an `Agent` call) or the tool ends without one (it stays as it was),
   * so a refused call never shows up as an empty subagent.
   */
  spawnTools: Object.freeze(['task']) as readonly string[],
});

export interface LangGraphMapperOptions {
  spawnTools?: readonly string[];
  /** Told of an event kept without its timestamp (`TIMESTAMP_OUT_OF_RANGE`). */
  onWarning?: (code: string, message: string) => void;
}

/** The largest distance from 1970 a JavaScript Date can hold, in milliseconds either way. */
const MAX_DATE_MS = 8.64e15;

/** A LangGraph streaming-protocol event, as a run stream yields it or a recording holds it. */
export interface ProtocolEvent {
  type?: 'event';
  seq?: number;
  method: string;
  params: { namespace: string[]; timestamp?: number; node?: string; data: unknown };
}

/** Whether a parsed line or object is a LangGraph protocol event. */
export function isProtocolEvent(value: unknown): value is ProtocolEvent {
  return (
    isObject(value) &&
    typeof value.method === 'string' &&
    isObject(value.params) &&
    Array.isArray(value.params.namespace)
  );
}

interface ToolCallState {
  name: string;
  input: JsonObject;
  channel: string | null;
  messageId: string | null;
  /** A spawn tool's call not yet shown: waiting to learn whether a subagent runs. */
  held: boolean;
  /** Its result (or error) was shown. */
  settled: boolean;
}

interface SubagentNode {
  /** The subagent's channel id. */
  id: string;
  children: Map<string, SubagentNode>;
}

interface OpenMessage {
  channel: string | null;
  id: string | null;
  /**
   * The message's content blocks by their `index`, put in index order only when the message is
   * shown. A Map, not an array: the index is the stream's choice, and an array indexed by it
   * (4294967294, say) is walked hole by hole for minutes. So a message costs the blocks seen.
   */
  blocks: Map<number, JsonObject>;
  usage: unknown;
}

/**
 * The position a content-block event gives its block, or null for one it cannot name. A
 * position is a whole number from 0 up to 2^53 - 1 (-0 is 0): how large or sparse does not
 * matter, only the order. A negative, fractional, non-finite or larger index names no
 * position, so that event's block is left out of the message, as it always was. A block
 * started or finished again at the same index replaces the one held there; deltas extend
 * whichever block is held.
 */
function blockIndex(index: unknown): number | null {
  return typeof index === 'number' && Number.isSafeInteger(index) && index >= 0 ? index : null;
}

/** The fields of a LangChain message, whether a live instance or its `{ lc, kwargs }` JSON form. */
export function messageFields(message: unknown): JsonObject {
  if (!isObject(message)) return {};
  if (message.lc === 1 && isObject(message.kwargs)) return message.kwargs;
  return message;
}

/** Text of a LangChain message content: a string, or a list of blocks of which text ones count. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const parts: string[] = [];
  for (const block of content) {
    if (typeof block === 'string') parts.push(block);
    else if (isObject(block) && typeof block.text === 'string') parts.push(block.text);
  }
  return parts.join('\n');
}

/** The text a tool produced: a string, a ToolMessage, or a Command that carries one. */
export function toolOutputText(output: unknown, toolCallId: string): string {
  if (typeof output === 'string') return output;
  if (!isObject(output)) return jsonText(output) ?? '';
  const update = isObject(output.update)
    ? output.update
    : isObject(messageFields(output).update)
      ? (messageFields(output).update as JsonObject)
      : null;
  if (update && Array.isArray(update.messages)) {
    const reply = update.messages.map(messageFields).find((m) => m.tool_call_id === toolCallId);
    if (reply) return contentText(reply.content);
  }
  const fields = messageFields(output);
  if ('content' in fields) return contentText(fields.content);
  return jsonText(output) ?? '';
}

/** LangChain usage metadata in the field names Claude Code uses. */
export function claudeUsage(usage: unknown): JsonObject | null {
  if (!isObject(usage)) return null;
  const out: JsonObject = {};
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  if (num(usage.input_tokens) !== undefined) out.input_tokens = usage.input_tokens;
  if (num(usage.output_tokens) !== undefined) out.output_tokens = usage.output_tokens;
  const details = isObject(usage.input_token_details) ? usage.input_token_details : {};
  if (num(details.cache_read) !== undefined) out.cache_read_input_tokens = details.cache_read;
  if (num(details.cache_creation) !== undefined) out.cache_creation_input_tokens = details.cache_creation;
  return Object.keys(out).length > 0 ? out : null;
}

const key = (ns: readonly string[]) => ns.join('\u0000');

function parseInput(input: unknown): JsonObject {
  if (isObject(input)) return input;
  if (typeof input === 'string') {
    try {
      const value: unknown = JSON.parse(input);
      if (isObject(value)) return value;
    } catch {
      // not JSON: kept as text below
    }
    return { input };
  }
  return input === undefined ? {} : { input };
}

/**
 * Maps protocol events to stream-json-shaped lines. Call `map` for each event in order and
 * `end` once at the end of the stream; both return the lines to route, possibly none.
 */
export class LangGraphMapper {
  private readonly spawnTools: ReadonlySet<string>;
  /** `lc_agent_name` per namespace, from its first `tasks` event (undefined when it has none). */
  private readonly agentNames = new Map<string, string | undefined>();
  /** Namespace → channel id of each subagent found. */
  private readonly subagents = new Map<string, string>();
  /**
   * The same subagents as a tree of namespace segments, so the ones enclosing a namespace are
   * found in one walk down it: joining every prefix of a namespace 40,000 deep was quadratic.
   */
  private readonly subagentTree: SubagentNode = { id: '', children: new Map() };
  /** Namespace → the tool call that started running there last. */
  private readonly activeCall = new Map<string, string>();
  /** LangGraph task id → the tool call it was sent for, when a task input names one. */
  private readonly taskCalls = new Map<string, string>();
  private readonly calls = new Map<string, ToolCallState>();
  private readonly openMessages = new Map<string, OpenMessage>();
  private readonly ignoredMessages = new Set<string>();
  /** Per channel ('' = main), its last assistant text: the report a status line quotes. */
  private readonly lastText = new Map<string, string>();
  private readonly toolResults = new Map<string, string>();
  /** The error text of a spawn call that failed, by call id. */
  private readonly toolErrors = new Map<string, string>();
  /**
   * Subagents that failed with no error text of their own: LangGraph names the error only on
   * the root's `failed` event, which follows theirs.
   */
  private readonly failedUnexplained: string[] = [];
  /** Subagents whose end was told (a task notification), so it is told once. */
  private readonly ended = new Set<string>();
  /** Channel id → task id (its namespace) of each subagent found. */
  private readonly spawned = new Map<string, string>();
  /** Calls ended by their subagent's failure or the run's before their own result came. */
  private readonly endedEarly = new Set<string>();
  private lastTimestamp: string | undefined;

  private readonly onWarning: (code: string, message: string) => void;

  constructor(options: LangGraphMapperOptions = {}) {
    this.spawnTools = new Set(options.spawnTools ?? LANGGRAPH_DEFAULTS.spawnTools);
    this.onWarning = options.onWarning ?? (() => {});
  }

  /** An event's time as ISO text; a number no Date can hold is dropped, not fatal. */
  private isoTime(timestamp: unknown): string | undefined {
    if (typeof timestamp !== 'number' || !Number.isFinite(timestamp)) return undefined;
    if (Math.abs(timestamp) > MAX_DATE_MS) {
      const shown = String(timestamp).slice(0, 40);
      const message = `an event's timestamp ${shown} is not a date; it was kept without one`;
      this.onWarning('TIMESTAMP_OUT_OF_RANGE', message);
      return undefined;
    }
    return new Date(timestamp).toISOString();
  }

  map(event: JsonObject): JsonObject[] {
    if (!isProtocolEvent(event)) return [];
    const ns = event.params.namespace.filter((s): s is string => typeof s === 'string');
    const data = isObject(event.params.data) ? event.params.data : {};
    const ts = this.isoTime(event.params.timestamp);
    if (ts) this.lastTimestamp = ts;
    const out: JsonObject[] = [];
    switch (event.method) {
      case 'lifecycle':
        this.lifecycle(ns, data, ts, out);
        break;
      case 'tasks':
        if ('result' in data) this.taskResult(ns, data, ts, out);
        else this.taskStart(ns, data, ts, out);
        break;
      case 'tools':
        this.tools(ns, data, ts, out);
        break;
      case 'messages':
        this.messages(ns, data, ts, out);
        break;
    }
    return out;
  }

  /** At the end of the stream: calls still held and messages never finished are shown. */
  end(): JsonObject[] {
    const out: JsonObject[] = [];
    for (const m of this.openMessages.values()) out.push(this.assistantLine(m, this.lastTimestamp));
    this.openMessages.clear();
    this.releaseHeld(this.lastTimestamp, out);
    return out;
  }

  /**
   * The subagents enclosing a namespace, outermost first, among its first `levels` segments.
   * A subagent starts only below the root or below another subagent, so they are the nodes of
   * the tree met walking down the namespace until a segment has none.
   */
  private enclosing(ns: readonly string[], levels: number): SubagentNode[] {
    const found: SubagentNode[] = [];
    let node = this.subagentTree;
    for (let i = 0; i < levels; i++) {
      const child = node.children.get(ns[i]);
      if (child === undefined) break;
      found.push(child);
      node = child;
    }
    return found;
  }

  /** The channel a namespace's events belong to: its nearest enclosing subagent, or main. */
  private channelOf(ns: readonly string[], includeSelf: boolean): string | null {
    const found = this.enclosing(ns, includeSelf ? ns.length : ns.length - 1);
    return found.length > 0 ? found[found.length - 1].id : null;
  }

  private lifecycle(ns: string[], data: JsonObject, ts: string | undefined, out: JsonObject[]): void {
    const status = data.event;
    if (ns.length === 0) {
      if (status === 'running' || status === 'started') {
        out.push(
          line(
            { type: 'system', subtype: 'init', producer: 'langgraph', graph_name: nonEmpty(data.graph_name) },
            ts,
          ),
        );
      } else if (status === 'completed' || status === 'failed') {
        this.releaseHeld(ts, out);
        const failed = status === 'failed';
        const error = failed ? errorText(data.error) : null;
        // The run's error is why the subagents it stopped failed.
        for (const id of error ? this.failedUnexplained.splice(0) : []) {
          out.push(this.notification(id, null, 'failed', error, ts));
        }
        // Calls the failure cut short failed with it, as Deep Agents reports them.
        if (failed) {
          for (const [id, call] of this.calls) {
            if (call.settled) continue;
            this.endedEarly.add(id);
            this.toolResultLine(id, error ?? 'the run failed', true, ts, out);
          }
        }
        out.push(
          line(
            {
              type: 'result',
              subtype: failed ? 'error' : 'success',
              is_error: failed,
              // A failed run has no final answer: its error is in `errors`.
              result: failed ? null : (this.lastText.get('') ?? null),
              ...(error ? { errors: [error] } : {}),
            },
            ts,
          ),
        );
      }
      return;
    }
    const id = this.subagents.get(key(ns));
    if (id === undefined || this.ended.has(id)) return;
    // `interrupted` is a pause (an `interrupt()` waiting for input; the thread may resume): no
    // end, so the subagent stays running, and the projection says `interrupted` once the run
    // ends, as Deep Agents' own `run.subagents` does.
    const mapped = status === 'completed' ? 'completed' : status === 'failed' ? 'failed' : null;
    if (!mapped) return;
    // A failed subagent's summary is why it failed, never its last words.
    const summary =
      mapped === 'failed'
        ? (this.toolErrors.get(id) ?? errorText(data.error))
        : (this.toolResults.get(id) ?? this.lastText.get(id) ?? null);
    if (mapped === 'failed' && summary === null) this.failedUnexplained.push(id);
    out.push(this.notification(id, ns.join('/'), mapped, summary, ts));
    // Its spawning call ends as it did: a failed subagent's call is an error, as Deep Agents says.
    const call = this.calls.get(id);
    if (mapped === 'failed' && summary !== null && call && !call.settled) {
      this.endedEarly.add(id);
      this.toolResultLine(id, summary, true, ts, out);
    }
  }

  /** A subagent's end, told once. */
  private notification(
    id: string,
    taskId: string | null,
    status: string,
    summary: string | null,
    ts: string | undefined,
  ): JsonObject {
    this.ended.add(id);
    const fields: JsonObject = { type: 'system', subtype: 'task_notification', tool_use_id: id };
    if (taskId !== null) fields.task_id = taskId;
    return line({ ...fields, status, summary }, ts);
  }

  private taskStart(ns: string[], data: JsonObject, ts: string | undefined, out: JsonObject[]): void {
    const k = key(ns);
    if (!this.agentNames.has(k)) {
      const metadata = isObject(data.metadata) ? data.metadata : {};
      this.agentNames.set(k, nonEmpty(metadata.lc_agent_name) ?? undefined);
    }
    const taskId = nonEmpty(data.id);
    const input = data.input;
    const sent = isObject(input) && isObject(input.tool_call) ? nonEmpty(input.tool_call.id) : null;
    if (taskId && sent) this.taskCalls.set(taskId, sent);
    this.startSubagent(ns, data, ts, out);
  }

  private startSubagent(ns: string[], data: JsonObject, ts: string | undefined, out: JsonObject[]): void {
    const k = key(ns);
    const name = this.agentNames.get(k);
    if (!name || this.subagents.has(k)) return;
    const parent = ns.slice(0, -1);
    if (parent.length > 0 && !this.subagents.has(key(parent))) return;
    const segment = ns[ns.length - 1];
    const cause =
      this.activeCall.get(k) ?? this.taskCalls.get(segment.slice(segment.indexOf(':') + 1)) ?? null;
    const id = cause ?? `langgraph:${ns.join('/')}`;
    const parentChannel = this.channelOf(ns, false);
    const call = cause ? this.calls.get(cause) : undefined;
    const args = call?.input ?? {};
    const description = nonEmpty(args.description);
    // The running agent's own name is what Deep Agents reports; the spawn call carries it.
    const input: JsonObject = { ...args, subagent_type: name };
    this.subagents.set(k, id);
    this.spawned.set(id, ns.join('/'));
    const parentNode = parent.length > 0 ? this.enclosing(parent, parent.length).at(-1) : this.subagentTree;
    parentNode?.children.set(segment, { id, children: new Map() });
    out.push(this.toolUseLine(parentChannel, call?.messageId ?? null, id, 'Agent', input, ts));
    if (call) call.held = false;
    out.push(
      line(
        {
          type: 'system',
          subtype: 'task_started',
          task_id: ns.join('/'),
          tool_use_id: id,
          subagent_type: name,
          description,
          is_backgrounded: false,
          spawn_depth: this.depthOf(ns),
        },
        ts,
      ),
    );
    const prompt = promptOf(data.input) ?? description;
    if (prompt !== null) {
      out.push(
        line(
          {
            type: 'user',
            message: { role: 'user', content: [{ type: 'text', text: prompt }] },
            parent_tool_use_id: id,
          },
          ts,
        ),
      );
    }
  }

  private depthOf(ns: readonly string[]): number {
    return this.enclosing(ns, ns.length).length;
  }

  /** A node's result: the tool calls of the model message it produced are announced here. */
  private taskResult(ns: string[], data: JsonObject, ts: string | undefined, out: JsonObject[]): void {
    const result = isObject(data.result) ? data.result : null;
    if (!result || !Array.isArray(result.messages)) return;
    const channel = this.channelOf(ns, true);
    for (const message of result.messages) {
      const fields = messageFields(message);
      if (!Array.isArray(fields.tool_calls)) continue;
      const messageId = nonEmpty(fields.id);
      for (const tc of fields.tool_calls) {
        if (!isObject(tc)) continue;
        const id = nonEmpty(tc.id);
        const name = nonEmpty(tc.name);
        if (!id || !name || this.calls.has(id)) continue;
        this.announce(id, name, parseInput(tc.args), channel, messageId, ts, out);
      }
    }
  }

  private announce(
    id: string,
    name: string,
    input: JsonObject,
    channel: string | null,
    messageId: string | null,
    ts: string | undefined,
    out: JsonObject[],
  ): void {
    const held = this.spawnTools.has(name);
    this.calls.set(id, { name, input, channel, messageId, held, settled: false });
    if (!held) out.push(this.toolUseLine(channel, messageId, id, name, input, ts));
  }

  private tools(ns: string[], data: JsonObject, ts: string | undefined, out: JsonObject[]): void {
    const id = nonEmpty(data.tool_call_id);
    if (!id) return;
    switch (data.event) {
      case 'tool-started':
        this.activeCall.set(key(ns), id);
        if (!this.calls.has(id)) {
          this.announce(
            id,
            nonEmpty(data.tool_name) ?? 'tool',
            parseInput(data.input),
            this.channelOf(ns, false),
            null,
            ts,
            out,
          );
        }
        return;
      case 'tool-finished':
      case 'tool-error': {
        // Already ended by its subagent's failure, or the run's: told once.
        if (this.endedEarly.has(id)) return;
        this.release(id, ts, out);
        const isError = data.event === 'tool-error';
        const text = isError
          ? (nonEmpty(data.message) ?? toolOutputText(data.error ?? data.output, id))
          : toolOutputText(data.output, id);
        if (!isError) this.toolResults.set(id, text);
        else this.toolErrors.set(id, text);
        // A subagent whose spawning call failed failed, even if its own graph then says it
        // completed (Deep Agents' lifecycle does, for a subagent whose model threw).
        if (isError && this.spawned.has(id) && !this.ended.has(id)) {
          out.push(this.notification(id, this.spawned.get(id)!, 'failed', text, ts));
        }
        this.toolResultLine(id, text, isError, ts, out, this.channelOf(ns, false));
      }
    }
  }

  /** A call's result (or error) on the channel that made the call. */
  private toolResultLine(
    id: string,
    text: string,
    isError: boolean,
    ts: string | undefined,
    out: JsonObject[],
    fallback: string | null = null,
  ): void {
    const call = this.calls.get(id);
    if (call) call.settled = true;
    const channel = call?.channel ?? fallback;
    const block: JsonObject = { type: 'tool_result', tool_use_id: id, content: text };
    if (isError) block.is_error = true;
    out.push(
      line({ type: 'user', message: { role: 'user', content: [block] }, parent_tool_use_id: channel }, ts),
    );
  }

  /** A held spawn call that ended without a subagent: shown as the call it was. */
  private release(id: string, ts: string | undefined, out: JsonObject[]): void {
    const call = this.calls.get(id);
    if (!call?.held) return;
    call.held = false;
    out.push(this.toolUseLine(call.channel, call.messageId, id, call.name, call.input, ts));
  }

  private releaseHeld(ts: string | undefined, out: JsonObject[]): void {
    for (const [id, call] of this.calls) if (call.held) this.release(id, ts, out);
  }

  private messages(ns: string[], data: JsonObject, ts: string | undefined, out: JsonObject[]): void {
    const streamKey = nonEmpty(data.run_id) ?? nonEmpty(data.id) ?? key(ns);
    if (this.ignoredMessages.has(streamKey)) {
      if (data.event === 'message-finish') this.ignoredMessages.delete(streamKey);
      return;
    }
    const open = this.openMessages.get(streamKey);
    const index = blockIndex(data.index);
    switch (data.event) {
      case 'message-start':
        // Tool messages are the tools' results, which the tools channel already carries.
        if (data.role === 'tool') {
          this.ignoredMessages.add(streamKey);
          return;
        }
        this.openMessages.set(streamKey, {
          channel: this.channelOf(ns, false),
          id: nonEmpty(data.id),
          blocks: new Map(),
          usage: data.usage,
        });
        return;
      case 'content-block-start':
        if (open && index !== null && isObject(data.content)) open.blocks.set(index, { ...data.content });
        return;
      case 'content-block-delta': {
        const block = open && index !== null ? open.blocks.get(index) : undefined;
        const delta = isObject(data.delta) ? data.delta : {};
        if (block && delta.type === 'text-delta' && typeof delta.text === 'string')
          block.text = String(block.text ?? '') + delta.text;
        if (block && delta.type === 'reasoning-delta' && typeof delta.reasoning === 'string')
          block.reasoning = String(block.reasoning ?? '') + delta.reasoning;
        return;
      }
      case 'content-block-finish':
        if (open && index !== null && isObject(data.content)) open.blocks.set(index, data.content);
        return;
      case 'message-finish':
        if (!open) return;
        this.openMessages.delete(streamKey);
        if (data.usage !== undefined) open.usage = data.usage;
        out.push(this.assistantLine(open, ts));
    }
  }

  private assistantLine(m: OpenMessage, ts: string | undefined): JsonObject {
    const content: JsonObject[] = [];
    const texts: string[] = [];
    for (const [, block] of [...m.blocks].sort(([a], [b]) => a - b)) {
      if (block.type === 'text' && typeof block.text === 'string') {
        content.push({ type: 'text', text: block.text });
        texts.push(block.text);
      } else if (block.type === 'reasoning') {
        content.push({
          type: 'thinking',
          thinking: typeof block.reasoning === 'string' ? block.reasoning : '',
        });
      }
    }
    if (texts.length > 0) this.lastText.set(m.channel ?? '', texts.join('\n'));
    const message: JsonObject = { id: m.id, type: 'message', role: 'assistant', content };
    const usage = claudeUsage(m.usage);
    if (usage) message.usage = usage;
    return line({ type: 'assistant', message, parent_tool_use_id: m.channel }, ts);
  }

  private toolUseLine(
    channel: string | null,
    messageId: string | null,
    id: string,
    name: string,
    input: JsonObject,
    ts: string | undefined,
  ): JsonObject {
    return line(
      {
        type: 'assistant',
        message: {
          id: messageId,
          type: 'message',
          role: 'assistant',
          content: [{ type: 'tool_use', id, name, input }],
        },
        parent_tool_use_id: channel,
      },
      ts,
    );
  }
}

function line(fields: JsonObject, ts: string | undefined): JsonObject {
  return ts === undefined ? fields : { ...fields, timestamp: ts };
}

/** The prompt a subagent was started with: the last human message of its first task's input. */
function promptOf(input: unknown): string | null {
  if (!isObject(input) || !Array.isArray(input.messages)) return null;
  for (let i = input.messages.length - 1; i >= 0; i--) {
    const m = input.messages[i];
    const fields = messageFields(m);
    const type =
      isObject(m) && Array.isArray(m.id)
        ? String(m.id[m.id.length - 1])
        : typeof (m as { _getType?: unknown })?._getType === 'function'
          ? (m as { _getType(): string })._getType()
          : fields.type;
    if (type === 'HumanMessage' || type === 'human') return contentText(fields.content);
  }
  return null;
}

/** The text of a LangGraph error: a string, or an object with a message. */
function errorText(error: unknown): string | null {
  if (typeof error === 'string') return nonEmpty(error);
  return isObject(error) ? nonEmpty(error.message) : null;
}
