/**
 * GitHub Copilot CLI (`copilot -p … --output-format json`) onto subtee's channel model. The
 * CLI prints one session event a line, `{ type, data, id, timestamp, parentId, ephemeral?,
 * agentId? }`; a subagent's events carry its `agentId`, and most carry
 * `data.parentToolCallId`, the `task` call that started it. (`parentId` is the previous event
 * of the session, not a parent agent; in `subagent.started`, `data.parentId` is the parent
 * agent's `agentId`.) The task call id becomes the channel id, as the
 * `Agent` tool_use id does for Claude Code, so subagents nest at any depth: a subagent's own
 * `task` call is in its channel. Pure: no I/O, no clock.
 */
import { isObject, nonEmpty, type JsonObject } from '../model/message.js';
import { rememberLatest } from '../model/latest.js';
import {
  argumentsOf,
  assistantLine,
  finite,
  initLine,
  promptLine,
  resultLine,
  shellResultText,
  taskNotificationLine,
  taskStartedLine,
  textLine,
  textOf,
  timestampOf,
  toolResultBlock,
  toolResultLine,
  toolUseBlock,
  usageOf,
  MappedLines,
  type ChannelTranscript,
  type MappedEvent,
  type StreamMapper,
} from './stream-lines.js';

export const COPILOT_DEFAULTS = Object.freeze({
  /** Tools whose calls start a subagent (their tool_use is shown as `Task`). */
  spawnTools: Object.freeze(['task']) as readonly string[],
});

export interface CopilotMapperOptions {
  spawnTools?: readonly string[];
}

/** How many subagents' `agentId`s are remembered (the latest), so state stays bounded. */
export const MAX_AGENTS_REMEMBERED = 10_000;
/** Longest id remembered: Copilot's are UUIDs and short call ids; a huge one is not held 10,000 times. */
const MAX_ID_CHARS = 256;

const COPILOT_TYPE = /^(session|user|assistant|tool|subagent|model|skill|hook|system|abort)\.[a-z_.]+$/;

/** Whether a line is a Copilot CLI session event (the first line of a run decides the format). */
export function isCopilotEvent(value: JsonObject): boolean {
  return (
    typeof value.type === 'string' &&
    COPILOT_TYPE.test(value.type) &&
    isObject(value.data) &&
    !('params' in value)
  );
}

const INSTALL_PATH = /\/pkg\/[^/]{1,64}\/(\d{1,6}\.\d{1,6}\.\d{1,6}(?:-[0-9A-Za-z.-]{1,40})?)\/builtin\//;

/**
 * The CLI's version, where its stream shows it: the install path of its built-in skills
 * (`…/pkg/<platform>/<version>/builtin/…`) in `session.skills_loaded`. Null otherwise.
 */
export function copilotVersionOf(event: JsonObject): string | null {
  if (event.type !== 'session.skills_loaded' || !isObject(event.data)) return null;
  const skills = event.data.skills;
  if (!Array.isArray(skills)) return null;
  for (let i = 0; i < Math.min(skills.length, 100); i++) {
    const skill = skills[i];
    const path = isObject(skill) ? nonEmpty(skill.path) : null;
    const m = path ? INSTALL_PATH.exec(path) : null;
    if (m) return m[1];
  }
  return null;
}

/** Copilot's per-call usage (`assistant.usage`) in Claude Code's field names. */
const COPILOT_USAGE = Object.freeze({
  input_tokens: 'inputTokens',
  output_tokens: 'outputTokens',
  cache_read_input_tokens: 'cacheReadTokens',
  cache_creation_input_tokens: 'cacheWriteTokens',
});

/**
 * Maps Copilot session events to stream-json-shaped lines, one event at a time. State: the
 * channel of each subagent's `agentId` and the spawn calls shown (the latest
 * MAX_AGENTS_REMEMBERED of each), the tool calls announced and not yet finished, and which
 * subagents reported their own usage; a call's and a usage entry go when the call or the
 * agent ends.
 */
export class CopilotMapper implements StreamMapper {
  version: string | null = null;
  private readonly spawnTools: ReadonlySet<string>;
  /**
   * agentId → the task call id that is its channel, kept after the agent ended: a command it
   * started can go on printing (`tool.shell_output`) under its `agentId` once Copilot's sync
   * wait gave up and the subagent completed. The latest MAX_AGENTS_REMEMBERED agents.
   */
  private readonly agents = new Map<string, string>();
  /** Tool calls shown as tool_use and not yet ended. */
  private readonly announced = new Set<string>();
  /** Spawn calls shown as `Task` (the latest MAX_AGENTS_REMEMBERED), ended or not. */
  private readonly spawnCalls = new Map<string, true>();
  /** Subagents whose usage came per call (`assistant.usage`), so their total is not added. */
  private readonly usageSeen = new Set<string>();
  /** The model each channel's latest message named (for its usage events); gone when it ends. */
  private readonly models = new Map<string | null, string>();
  private started = false;
  /** The main agent's last text: the run's result, as Claude Code's `result` line carries it. */
  private lastText: string | null = null;

  constructor(options: CopilotMapperOptions = {}) {
    this.spawnTools = new Set(options.spawnTools ?? COPILOT_DEFAULTS.spawnTools);
  }

  transcriptOf(): ChannelTranscript {
    return 'stream';
  }

  /** The channel an event belongs to: its task call, found by `parentToolCallId` or `agentId`. */
  channelOf(event: JsonObject): string | null {
    const data = isObject(event.data) ? event.data : {};
    const byCall = nonEmpty(data.parentToolCallId);
    if (byCall) return byCall;
    const agentId = nonEmpty(event.agentId);
    if (agentId === null) return null;
    if (typeof event.type === 'string' && event.type.startsWith('subagent.')) {
      return nonEmpty(data.toolCallId) ?? this.agents.get(agentId) ?? null;
    }
    return this.agents.get(agentId) ?? null;
  }

  map(event: JsonObject): MappedEvent {
    const version = copilotVersionOf(event);
    if (version !== null) this.version ??= version;
    const channel = this.channelOf(event);
    const data = isObject(event.data) ? event.data : {};
    const ts = timestampOf(event);
    const mapped = new MappedLines();
    const push = mapped.push;
    if (!this.started) {
      this.started = true;
      push(initLine('copilot', this.version, null, null, ts), false);
    }
    // Ephemeral events (deltas, progress) are kept raw but shown by the whole events they lead to.
    if (event.ephemeral !== true) {
      switch (event.type) {
        case 'user.message': {
          const text = nonEmpty(data.content);
          if (text !== null) push(promptLine(channel, text, ts));
          break;
        }
        case 'assistant.reasoning': {
          const text = textOf(data.content);
          const thinking = [{ type: 'thinking', thinking: text }];
          push(assistantLine(channel, nonEmpty(data.reasoningId), thinking, null, ts));
          break;
        }
        case 'assistant.message':
          push(this.assistantMessage(channel, data, ts));
          break;
        case 'assistant.usage': {
          const usage = usageOf(data, COPILOT_USAGE);
          if (usage) {
            if (channel !== null) this.usageSeen.add(channel);
            const model = nonEmpty(data.model) ?? this.models.get(channel) ?? null;
            const id = nonEmpty(data.apiCallId) ?? nonEmpty(event.id);
            push(assistantLine(channel, id, [], usage, ts, model));
          }
          break;
        }
        case 'tool.execution_start': {
          const id = nonEmpty(data.toolCallId);
          if (id && !this.announced.has(id)) {
            const name = nonEmpty(data.toolName) ?? 'tool';
            const call = this.toolUse(id, name, argumentsOf(data.arguments));
            push(assistantLine(channel, null, [call], null, ts));
          }
          break;
        }
        case 'tool.execution_complete': {
          const id = nonEmpty(data.toolCallId);
          if (id) {
            this.announced.delete(id);
            push(toolResultLine(channel, [toolResult(id, data)], ts));
          }
          break;
        }
        case 'subagent.started': {
          const id = nonEmpty(data.toolCallId);
          const agentId = nonEmpty(event.agentId);
          if (id && agentId && agentId.length <= MAX_ID_CHARS && id.length <= MAX_ID_CHARS) {
            rememberLatest(this.agents, agentId, id, MAX_AGENTS_REMEMBERED);
          }
          if (id) {
            const name = nonEmpty(data.agentName) ?? nonEmpty(data.agentType);
            const description = nonEmpty(data.agentDescription);
            const parent = this.spawnerOf(data);
            if (!this.spawnCalls.has(id) && parent !== undefined && id.length <= MAX_ID_CHARS) {
              // Its spawn call was not read (a line too long to hold is read by its top-level
              // fields only): the call is shown here, where its parent agent made it.
              rememberLatest(this.spawnCalls, id, true, MAX_AGENTS_REMEMBERED);
              this.announced.add(id);
              const call = toolUseBlock(id, 'Task', { description, subagent_type: name });
              push(assistantLine(parent, null, [call], null, ts), false);
            }
            push(taskStartedLine(id, name, description, ts));
          }
          break;
        }
        case 'subagent.completed':
        case 'subagent.failed': {
          const id = nonEmpty(data.toolCallId) ?? channel;
          if (!id) break;
          const failed = event.type === 'subagent.failed';
          const total = finite(data.totalTokens);
          if (total !== undefined && !this.usageSeen.has(id)) {
            // Only the subagent's total is in the stream: it is the channel's usage.
            const usage = { total_tokens: total };
            push(assistantLine(id, `copilot-subagent-usage:${id}`, [], usage, ts, nonEmpty(data.model)));
          }
          const summary = failed ? (nonEmpty(data.error) ?? errorMessage(data.error)) : null;
          push(taskNotificationLine(id, failed ? 'failed' : 'completed', summary, ts));
          this.usageSeen.delete(id);
          this.models.delete(id);
          break;
        }
        case 'result': {
          const exitCode = finite(event.exitCode);
          const usage = isObject(event.usage) ? event.usage : {};
          push(
            resultLine(
              exitCode !== undefined && exitCode !== 0,
              this.lastText,
              nonEmpty(event.sessionId),
              null,
              finite(usage.sessionDurationMs) ?? null,
              ts,
            ),
          );
          break;
        }
        case 'session.error':
          push(textLine(channel, nonEmpty(event.id), `[error] ${errorMessage(data) ?? ''}`, ts));
          break;
      }
    }
    return mapped.of(channel);
  }

  end(): never[] {
    return [];
  }

  private assistantMessage(channel: string | null, data: JsonObject, ts: string | null): JsonObject {
    const content: JsonObject[] = [];
    const reasoning = nonEmpty(data.reasoningText);
    if (reasoning) content.push({ type: 'thinking', thinking: reasoning });
    const text = nonEmpty(data.content);
    if (text) content.push({ type: 'text', text });
    if (text && channel === null) this.lastText = text;
    const requests = Array.isArray(data.toolRequests) ? data.toolRequests : [];
    for (const request of requests) {
      if (!isObject(request)) continue;
      const id = nonEmpty(request.toolCallId);
      if (!id) continue;
      content.push(this.toolUse(id, nonEmpty(request.name) ?? 'tool', argumentsOf(request.arguments)));
    }
    const model = nonEmpty(data.model);
    if (model !== null) this.models.set(channel, model);
    return assistantLine(channel, nonEmpty(data.messageId), content, null, ts, model);
  }

  /**
   * The channel of the agent that started a subagent, from `subagent.started`: its
   * `data.parentId` names the parent's `agentId` (a subagent started by the main agent has
   * none). Undefined when the parent is an agent not known (or no longer remembered).
   */
  private spawnerOf(data: JsonObject): string | null | undefined {
    if (data.parentId === undefined) return null;
    const parent = nonEmpty(data.parentId);
    return parent === null ? undefined : this.agents.get(parent);
  }

  /** A tool_use block; a spawn tool's call becomes `Task` so the tree opens its channel. */
  private toolUse(id: string, name: string, args: JsonObject): JsonObject {
    this.announced.add(id);
    if (!this.spawnTools.has(name)) return toolUseBlock(id, name, args);
    if (id.length <= MAX_ID_CHARS) rememberLatest(this.spawnCalls, id, true, MAX_AGENTS_REMEMBERED);
    const agent = nonEmpty(args.agent_type) ?? nonEmpty(args.name);
    return toolUseBlock(id, 'Task', { ...args, subagent_type: agent, tool: name });
  }
}

/** A finished tool call's result block: its output (a shell's with its exit code) or its error. */
export function toolResult(id: string, data: JsonObject): JsonObject {
  const result = isObject(data.result) ? data.result : {};
  const shell = isObject(data.shellExecution) ? data.shellExecution : {};
  const exitCode = finite(shell.exitCode);
  const failed = data.success === false || (exitCode !== undefined && exitCode !== 0);
  const output = textOf(result.content ?? errorMessage(data.error) ?? '');
  // Copilot's own output usually ends with the exit code already.
  const stated = /exit code -?\d+/.test(output);
  const text = exitCode !== undefined && !stated ? shellResultText(output, exitCode) : output;
  return toolResultBlock(id, text, failed);
}

function errorMessage(error: unknown): string | null {
  if (typeof error === 'string') return nonEmpty(error);
  return isObject(error) ? nonEmpty(error.message) : null;
}

export function createCopilotMapper(options: CopilotMapperOptions = {}): CopilotMapper {
  return new CopilotMapper(options);
}
