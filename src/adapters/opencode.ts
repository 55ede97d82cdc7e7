/**
 * opencode (`opencode run --format json`) onto subtee's channel model. The CLI prints one
 * event per finished part of a message: `step_start`, `text`, `reasoning`, `tool_use` (the
 * call and its result at once), `step_finish` (the step's tokens) and `error`, each with the
 * session's `sessionID`. A subagent is a `task` call: the stream shows the call and its
 * result only (the child session is stored by opencode, not printed), so each call becomes a
 * channel holding its prompt, status and result. opencode prints no final event: the run's
 * result is made at the end of the stream, when its last step finished. Pure: no I/O, no clock.
 */
import { isObject, nonEmpty, type JsonObject } from '../model/message.js';
import {
  assistantLine,
  finite,
  initLine,
  isoFromMs,
  promptLine,
  resultLine,
  shellResultText,
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

export const OPENCODE_DEFAULTS = Object.freeze({
  /** Tools whose calls start a subagent. */
  spawnTools: Object.freeze(['task']) as readonly string[],
});

export interface OpencodeMapperOptions {
  spawnTools?: readonly string[];
}

const OPENCODE_TYPES = new Set(['step_start', 'text', 'reasoning', 'tool_use', 'step_finish', 'error']);

/** Whether a line is an opencode `run --format json` event. */
export function isOpencodeEvent(value: JsonObject): boolean {
  return (
    typeof value.type === 'string' &&
    OPENCODE_TYPES.has(value.type) &&
    typeof value.sessionID === 'string' &&
    (isObject(value.part) || value.type === 'error')
  );
}

/** A `step_finish` reason for a step that ends asking for tools: the run goes on. */
const TOOL_CALLS = 'tool-calls';

/** A step's tokens (`step_finish` `part.tokens`) in Claude Code's field names. */
const OPENCODE_USAGE = Object.freeze({
  input_tokens: 'input',
  output_tokens: 'output',
  reasoning_output_tokens: 'reasoning',
  cache_read_input_tokens: 'cache.read',
  cache_creation_input_tokens: 'cache.write',
});

/**
 * Maps opencode events to stream-json-shaped lines. State: the session id, the spawn calls
 * seen (their channels), the last text, whether an error was printed.
 */
export class OpencodeMapper implements StreamMapper {
  readonly version: string | null = null;
  private readonly spawnTools: ReadonlySet<string>;
  private readonly spawned = new Set<string>();
  private sessionId: string | null = null;
  private lastText: string | null = null;
  private error: string | null = null;
  private lastTime: string | null = null;
  private seen = false;
  private errors = 0;
  /**
   * How the stream stands at its end: inside a step (`step_start` without its `step_finish`),
   * between steps (the last step finished asking for tools), or done (the last step finished
   * for good). Only done, or an error opencode printed, makes the run's result.
   */
  private step: 'none' | 'open' | 'tools' | 'done' = 'none';

  constructor(options: OpencodeMapperOptions = {}) {
    this.spawnTools = new Set(options.spawnTools ?? OPENCODE_DEFAULTS.spawnTools);
  }

  transcriptOf(channel: string | null): ChannelTranscript {
    return transcriptOfSpawned(this.spawned, channel);
  }

  map(event: JsonObject): MappedEvent {
    const ts = isoFromMs(event.timestamp);
    if (ts !== null) this.lastTime = ts;
    const part = isObject(event.part) ? event.part : {};
    const mapped = new MappedLines();
    const push = mapped.push;
    if (!this.seen) {
      this.seen = true;
      this.sessionId = nonEmpty(event.sessionID);
      push(initLine('opencode', null, this.sessionId, null, ts), false);
    }
    const messageId = nonEmpty(part.messageID);
    switch (event.type) {
      case 'text': {
        const text = textOf(part.text);
        this.lastText = text;
        push(textLine(null, messageId, text, ts));
        break;
      }
      case 'reasoning':
        push(assistantLine(null, messageId, [{ type: 'thinking', thinking: textOf(part.text) }], null, ts));
        break;
      case 'tool_use':
        this.tool(part, messageId, ts, push);
        break;
      case 'step_start':
        this.step = 'open';
        break;
      case 'step_finish': {
        this.step = part.reason === TOOL_CALLS ? 'tools' : 'done';
        const usage = usageOf(part.tokens, OPENCODE_USAGE);
        if (usage) push(assistantLine(null, messageId, [], usage, ts));
        break;
      }
      case 'error': {
        const error = isObject(event.error) ? event.error : {};
        const data = isObject(error.data) ? error.data : {};
        this.error = nonEmpty(data.message) ?? nonEmpty(error.message) ?? nonEmpty(error.name) ?? 'error';
        const text = `[error] ${this.error}`;
        push(textLine(null, `opencode-error-${++this.errors}`, text, ts));
        break;
      }
    }
    return mapped.of(null);
  }

  /**
   * The run's result, which opencode does not print: failed when it printed an error,
   * completed when its last step finished for good. A stream cut short (opencode killed mid-step,
   * or between a step that asked for tools and the next) has none: the run did not complete.
   */
  end(): JsonObject[] {
    if (!this.seen) return [];
    const failed = this.error !== null;
    if (!failed && this.step !== 'done') return [];
    const text = failed ? this.error : this.lastText;
    return [resultLine(failed, text, this.sessionId, null, null, this.lastTime)];
  }

  private tool(
    part: JsonObject,
    messageId: string | null,
    ts: string | null,
    push: (line: JsonObject, isOwn?: boolean) => void,
  ): void {
    const id = nonEmpty(part.callID) ?? nonEmpty(part.id);
    if (!id) return;
    const name = nonEmpty(part.tool) ?? 'tool';
    const state = isObject(part.state) ? part.state : {};
    const input = isObject(state.input) ? state.input : {};
    const metadata = isObject(state.metadata) ? state.metadata : {};
    const spawn = this.spawnTools.has(name);
    if (spawn) {
      const agent = nonEmpty(input.subagent_type);
      const call = toolUseBlock(id, 'Task', { ...input, subagent_type: agent, tool: name });
      push(assistantLine(null, messageId, [call], null, ts));
      this.spawned.add(id);
      const prompt = nonEmpty(input.prompt);
      if (prompt !== null) push(promptLine(id, prompt, ts), false);
    } else {
      push(assistantLine(null, messageId, [toolUseBlock(id, name, input)], null, ts));
    }
    // A call still running has no result yet; opencode prints a tool part once it has ended.
    if (state.status !== 'completed' && state.status !== 'error') return;
    const failed = state.status === 'error';
    const exitCode = finite(metadata.exit);
    let text = failed ? textOf(state.error) : textOf(state.output);
    if (name === 'bash' && !failed) text = shellResultText(text, exitCode);
    const isError = failed || (exitCode !== undefined && exitCode !== 0);
    if (spawn) {
      const report = taskReport(text);
      push(toolResultLine(null, [toolResultBlock(id, report ?? text, isError)], ts), false);
      if (report !== null || text.length > 0) {
        push(textLine(id, `opencode-result-${id}`, report ?? text, ts), false);
      }
    } else {
      push(toolResultLine(null, [toolResultBlock(id, text, isError)], ts), false);
    }
  }
}

/** The report inside a task's output (`<task …><task_result>…</task_result></task>`), or null. */
export function taskReport(output: string): string | null {
  const start = output.indexOf('<task_result>');
  const stop = output.lastIndexOf('</task_result>');
  if (start === -1 || stop < start) return null;
  return output.slice(start + '<task_result>'.length, stop).trim();
}

export function createOpencodeMapper(options: OpencodeMapperOptions = {}): OpencodeMapper {
  return new OpencodeMapper(options);
}
