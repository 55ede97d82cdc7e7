import { withDefaults } from '../../defaults.js';
import {
  roundUsd,
  type CostView,
  emptyTokens,
  MODEL_TOKEN_KINDS,
  type ModelTokens,
  type ReadonlyChannelCost,
  type UsageEvent,
} from '../../model/cost.js';
import type { SubteeRecord } from '../../model/record.js';
import {
  contentBlocks,
  resultText,
  isObject,
  isSyntheticMessage,
  lineTypeOf,
  systemSubtypeOf,
  type JsonObject,
  nonEmpty,
  usageNumbers,
} from '../../model/message.js';
import type { ChannelSnapshot } from '../../model/tree.js';
import { endFigures, type EndFigures } from '../../model/run-model.js';
import { CUT_LENGTHS, storedText } from '../../model/display.js';
import { jsonText } from '../../model/json-text.js';
import { runIdFrom, StreamClock } from './stream-facts.js';
import { channelUsage } from '../../views/cost.js';
import { channelTokens } from '../../views/walk.js';

/** The channel fields spans are made of: a live Channel or a snapshot of one. */
export type SpanChannel = Omit<ChannelSnapshot, 'counts' | 'tag' | 'seq'>;

export type AttributeValue = string | number | boolean;
type Attributes = Record<string, AttributeValue>;

/** One finished span, in the terms of the run: keys instead of ids, stream times in epoch ms. */
export interface SpanData {
  /** `agent:<channel id>` (`agent:` for the main conversation) or `tool:<tool_use id>`; unique in a run. */
  key: string;
  parentKey: string | null;
  name: string;
  startMs: number;
  endMs: number;
  attributes: Attributes;
  /** Span status ERROR with this description; null leaves the status unset. */
  error: string | null;
}

/** OpenTelemetry GenAI semantic-convention attribute names (incubating in semconv 1.45). */
export const GENAI = Object.freeze({
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  agentName: 'gen_ai.agent.name',
  agentId: 'gen_ai.agent.id',
  agentDescription: 'gen_ai.agent.description',
  agentVersion: 'gen_ai.agent.version',
  conversationId: 'gen_ai.conversation.id',
  requestModel: 'gen_ai.request.model',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  cacheReadTokens: 'gen_ai.usage.cache_read.input_tokens',
  cacheCreationTokens: 'gen_ai.usage.cache_creation.input_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolArguments: 'gen_ai.tool.call.arguments',
  toolResult: 'gen_ai.tool.call.result',
  inputMessages: 'gen_ai.input.messages',
  outputMessages: 'gen_ai.output.messages',
  errorType: 'error.type',
});

/** A channel's tokens as the summary and the report count them (input and output, or a total). */
const USAGE_TOKENS = 'subtee.usage.tokens';
/** What Langfuse groups a run's traces by: the run's session. */
const SESSION_ID = 'session.id';
/** OpenInference's span kind, which Arize Phoenix shows: `AGENT` or `TOOL`. */
const OPENINFERENCE_KIND = 'openinference.span.kind';
/** subtee's cost attributes: the channel's dollars, how they were found, and the run's on main. */
const COST = Object.freeze({
  usd: 'subtee.cost.usd',
  basis: 'subtee.cost.basis',
  tokensBasis: 'subtee.cost.output_tokens.basis',
  runUsd: 'subtee.run.cost.usd',
  resultUsd: 'subtee.run.result_cost.usd',
  unattributedUsd: 'subtee.run.unattributed_cost.usd',
});

/** Attributes that carry content, already cut to `maxContentChars` where they are made. */
const CONTENT_ATTRIBUTES: ReadonlySet<string> = new Set([
  GENAI.toolArguments,
  GENAI.toolResult,
  GENAI.inputMessages,
  GENAI.outputMessages,
]);

/**
 * Longest name or identifier kept in a span (session id, tool name, call id, description,
 * model…): they come from the input and are repeated on many spans, so one huge value would
 * otherwise be sent once per span.
 */
export const MAX_SPAN_NAME_CHARS = CUT_LENGTHS.stored.chars;

/** Every attribute that is not content cut to MAX_SPAN_NAME_CHARS. */
function boundedAttributes(attributes: Attributes): Attributes {
  for (const [key, value] of Object.entries(attributes)) {
    if (typeof value === 'string' && !CONTENT_ATTRIBUTES.has(key))
      attributes[key] = storedText(value, 'stored', MAX_SPAN_NAME_CHARS);
  }
  return attributes;
}

/** Anthropic usage keys → GenAI token attributes. */
const USAGE_ATTRIBUTES: ReadonlyArray<[string, string]> = [
  ['input_tokens', GENAI.inputTokens],
  ['output_tokens', GENAI.outputTokens],
  ['cache_read_input_tokens', GENAI.cacheReadTokens],
  ['cache_creation_input_tokens', GENAI.cacheCreationTokens],
];

export const TRACE_BUILDER_DEFAULTS = Object.freeze({
  /** Prompts, reports, tool arguments and results as span attributes (GenAI content is opt-in). */
  captureContent: false,
  /** Longest content attribute, in characters (the display policy's `block` class). */
  maxContentChars: CUT_LENGTHS.block.chars,
});

export interface TraceBuilderOptions {
  captureContent?: boolean;
  maxContentChars?: number;
  /** Used only for a stream that carries no timestamp at all. */
  fallbackMs?: number;
  /** The run's cost ledger (the session's `cost`): each agent span carries its channel's dollars. */
  costs?: Pick<CostView, 'channelCost' | 'report' | 'hasResult'>;
}

interface AgentState {
  channel: SpanChannel;
  /**
   * The channel as its latest status event left it, with its figures then: what its span
   * shows when it is handed out at its notification, whatever later lines did since.
   */
  ended: { channel: SpanChannel; figures: EndFigures | null } | null;
  /**
   * What the run model counted for the channel after `ended` froze it, up to its notification:
   * its lines' `usage` events summed, and a total a line states alone (GitHub Copilot CLI
   * states a subagent's total only in the event that ends it, after its task call's result
   * ended its channel).
   */
  late: LateUsage | null;
  /**
   * The channel's latest API message and the total it states (0 for none): the tree counts a
   * message's total once, a later line of it replacing what the earlier ones stated.
   */
  totalMessage: { id: string; total: number } | null;
  startMs: number | null;
  /** When the channel first stopped running. */
  endMs: number | null;
  model: string | null;
  prompt: string | null;
  lastText: string | null;
  exported: boolean;
}

/** What a channel's lines added after its end froze its figures (see AgentState.late). */
interface LateUsage {
  /** The tokens of the `usage` events, by kind. */
  tokens: ModelTokens;
  /** Their dollars at the table's rates; null once one of them is unpriced. */
  usd: number | null;
  /** Whether any `usage` event was counted. */
  counted: boolean;
  /** What totals stated alone added: the ledger counts no kind of token for them, no event. */
  total: number;
}

interface ToolState {
  id: string;
  name: string;
  agentId: string | null;
  startMs: number | null;
  args: string | null;
}

export const agentKey = (id: string | null) => `agent:${id ?? ''}`;
export const toolKey = (id: string) => `tool:${id}`;

/**
 * Turns routed records into the spans of one trace, as they finish: an `invoke_agent` span
 * per channel, parented under the `execute_tool` span of the tool call that spawned it, and
 * an `execute_tool` span per tool call, from its tool_use to its tool_result. Plain logic,
 * no I/O; the OTLP sink gives the spans ids and sends them.
 *
 * A tool span ends at its result. A subagent's span ends when it stops running, but is only
 * handed out at its `task_notification` (which can still turn a completed foreground agent
 * into a failed one) or at the end of the run, when every span still open is closed at the
 * last time the stream showed.
 */
export class TraceBuilder {
  readonly clock = new StreamClock();
  runId: string | null = null;
  sessionId: string | null = null;
  private version: string | null = null;
  private initModel: string | null = null;
  private readonly opts: typeof TRACE_BUILDER_DEFAULTS & TraceBuilderOptions;
  private readonly agents = new Map<string | null, AgentState>();
  private readonly tools = new Map<string, ToolState>();
  private readonly finishedTools = new Set<string>();

  constructor(options: TraceBuilderOptions = {}) {
    this.opts = withDefaults(TRACE_BUILDER_DEFAULTS, options);
  }

  /** The spans this record finishes. */
  add(rec: SubteeRecord): SpanData[] {
    if (rec.kind !== 'line') return [];
    const v = rec.value;
    const { ms } = this.clock.observe(v);
    this.runId ??= runIdFrom(v);
    if (this.sessionId === null) {
      const sessionId = nonEmpty(v.session_id);
      this.sessionId = sessionId === null ? null : storedText(sessionId, 'stored', MAX_SPAN_NAME_CHARS);
    }
    const out: SpanData[] = [];
    const ch = rec.channel;
    const kind = lineTypeOf(v);
    // The line's usage before its status events: a snapshot one of them froze holds it already.
    if (rec.usage) this.followUsage(rec.usage);
    if (kind === 'assistant' && ch) this.followTotal(v, this.agentOf(ch, ms));
    for (const ev of rec.events ?? []) {
      const a = this.agentOf(ev.channel, ms);
      if (ev.type !== 'status') continue;
      a.ended = { channel: ev.channel, figures: endFigures(ev) };
      a.late = null;
      if (ev.channel.status !== 'running') a.endMs ??= ms;
    }
    const agent = ch ? this.agentOf(ch, ms) : null;
    const subtype = systemSubtypeOf(v);
    if (subtype === 'init') {
      this.version = nonEmpty(v.claude_code_version) ?? this.version;
      this.initModel ??= nonEmpty(v.model);
    } else if (kind === 'assistant' && agent) {
      this.assistant(v, agent, ms);
    } else if (kind === 'user' && agent) {
      this.user(v, agent, ms, out);
    } else if (subtype === 'task_notification') {
      // The channel as of its end, this line or before: never as later lines left it.
      const done = this.agents.get(nonEmpty(v.tool_use_id) ?? '');
      const ended = done?.ended;
      if (done && ended && !done.exported && ended.channel.status !== 'running' && !ended.channel.orphan) {
        out.push(this.agentSpan(done, {}, withLateUsage(ended, done.late)));
      }
    }
    return out;
  }

  /**
   * Closes the trace at the end of the run: every span not yet handed out, at the last time
   * the stream showed. `channels` are the run's final channels (main first).
   */
  finish(
    channels: Iterable<SpanChannel>,
    run: { interrupted?: boolean; stalled?: boolean } = {},
  ): SpanData[] {
    const out: SpanData[] = [];
    const end = this.now();
    for (const tool of this.tools.values()) {
      out.push(this.toolSpan(tool, end, null, { 'subtee.tool.unfinished': true }));
    }
    this.tools.clear();
    let main: AgentState | null = null;
    for (const ch of channels) {
      const a = this.agentOf(ch, null);
      if (ch.id === null) main = a;
      else if (!a.exported) out.push(this.agentSpan(a));
    }
    main ??= this.agentOf(null, null);
    if (!main.exported) {
      const extra: Attributes = {};
      if (run.interrupted) extra['subtee.run.interrupted'] = true;
      if (run.stalled) extra['subtee.run.stalled'] = true;
      main.endMs = end;
      out.push(this.agentSpan(main, extra));
    }
    return out;
  }

  private now(): number {
    return this.clock.latest ?? this.opts.fallbackMs ?? Date.now();
  }

  private agentOf(ch: SpanChannel | null, ms: number | null): AgentState {
    const id = ch?.id ?? null;
    let a = this.agents.get(id);
    if (!a) {
      a = {
        channel: ch ?? mainPlaceholder,
        ended: null,
        late: null,
        totalMessage: null,
        startMs: ms,
        endMs: null,
        model: null,
        prompt: null,
        lastText: null,
        exported: false,
      };
      this.agents.set(id, a);
    } else {
      if (ch) a.channel = ch;
      a.startMs ??= ms;
    }
    return a;
  }

  /**
   * Adds what the run model's cost ledger counted for a line (its `usage` event) to its
   * channel's late usage, once the channel's end froze its figures.
   */
  private followUsage(ev: UsageEvent): void {
    const agent = this.agents.get(ev.channel);
    if (agent === undefined || agent.ended === null || agent.exported) return;
    const late = (agent.late ??= noLateUsage());
    for (const k of MODEL_TOKEN_KINDS) late.tokens[k] += ev.tokens[k];
    late.usd = late.usd === null || ev.usd === null ? null : late.usd + ev.usd;
    late.counted = true;
  }

  /**
   * Follows a total a line states alone (`usage.total_tokens` with no kind of token), as the
   * tree adds it: the ledger counts no kind of token for it, so no `usage` event carries it.
   */
  private followTotal(v: JsonObject, agent: AgentState): void {
    const message = isObject(v.message) ? v.message : null;
    const id = message === null ? null : nonEmpty(message.id);
    if (message === null || id === null || !isObject(message.usage)) return;
    const total = usageNumbers(message.usage).total_tokens ?? 0;
    const before = agent.totalMessage?.id === id ? agent.totalMessage.total : 0;
    agent.totalMessage = { id, total };
    if (agent.ended === null || agent.exported || total === before) return;
    (agent.late ??= noLateUsage()).total += total - before;
  }

  private assistant(v: JsonObject, agent: AgentState, ms: number | null): void {
    const message = isObject(v.message) ? v.message : {};
    const model = nonEmpty(message.model);
    if (model && !isSyntheticMessage(message)) agent.model ??= model;
    for (const b of contentBlocks(v)) {
      if (b.type === 'tool_use') {
        const id = nonEmpty(b.id);
        if (!id || this.tools.has(id) || this.finishedTools.has(id)) continue;
        const max = this.opts.maxContentChars;
        const input = jsonText(b.input ?? {}) ?? '';
        const args = this.opts.captureContent ? storedText(input, 'block', max) : null;
        this.tools.set(id, {
          id,
          name: nonEmpty(b.name) ?? 'unknown',
          agentId: agent.channel.id,
          startMs: ms,
          args,
        });
      } else if (b.type === 'text' && this.opts.captureContent && typeof b.text === 'string') {
        agent.lastText = b.text;
      }
    }
  }

  private user(v: JsonObject, agent: AgentState, ms: number | null, out: SpanData[]): void {
    for (const b of contentBlocks(v)) {
      if (b.type === 'tool_result') {
        const tool = this.tools.get(nonEmpty(b.tool_use_id) ?? '');
        if (!tool) continue;
        this.tools.delete(tool.id);
        const failed = b.is_error === true;
        const result = this.opts.captureContent
          ? storedText(resultText(b), 'block', this.opts.maxContentChars)
          : null;
        const error = failed ? this.errorText('tool error', result) : null;
        const extra: Attributes = result === null ? {} : { [GENAI.toolResult]: result };
        out.push(this.toolSpan(tool, ms ?? this.now(), error, extra));
      } else if (b.type === 'text' && typeof b.text === 'string' && this.opts.captureContent) {
        // A subagent's first user message is the prompt it was given.
        if (agent.channel.id !== null) agent.prompt ??= b.text;
      }
    }
  }

  /**
   * The channel's dollars: `at` its end (the figures its status event froze), else as the
   * ledger has them at the end of the run, with the run's on main.
   */
  private costAttributes(id: string | null, at: EndFigures | null): Attributes {
    const costs = this.opts.costs;
    if (!costs) return {};
    const out: Attributes = { [COST.basis]: at ? at.basis : costs.hasResult ? 'result' : 'table' };
    const own = at ? at.cost : costs.channelCost(id);
    // A channel with no usage known has no dollars: the attribute is left out, never 0.
    if (own !== null && own.usd !== null) out[COST.usd] = own.usd;
    out[COST.tokensBasis] = own?.basis ?? 'unknown';
    if (id === null) {
      const report = costs.report();
      if (report.usd !== null) out[COST.runUsd] = report.usd;
      if (report.result_usd !== null) out[COST.resultUsd] = report.result_usd;
      if (report.unattributed_usd !== null) out[COST.unattributedUsd] = report.unattributed_usd;
    }
    return out;
  }

  private errorText(what: string, detail: string | null | undefined): string {
    return detail ? `${what}: ${storedText(detail, 'preview')}` : what;
  }

  private toolSpan(tool: ToolState, endMs: number, error: string | null, extra: Attributes): SpanData {
    this.finishedTools.add(tool.id);
    const startMs = tool.startMs ?? endMs;
    const attributes: Attributes = {
      [GENAI.operation]: 'execute_tool',
      [GENAI.toolName]: tool.name,
      [GENAI.toolCallId]: tool.id,
    };
    if (this.sessionId) {
      attributes[GENAI.conversationId] = this.sessionId;
      attributes[SESSION_ID] = this.sessionId;
    }
    attributes[OPENINFERENCE_KIND] = 'TOOL';
    if (tool.args !== null) attributes[GENAI.toolArguments] = tool.args;
    if (error) attributes[GENAI.errorType] = 'tool_error';
    Object.assign(attributes, extra);
    const name = storedText(`execute_tool ${tool.name}`, 'stored', MAX_SPAN_NAME_CHARS);
    const endAt = Math.max(startMs, endMs);
    return {
      key: toolKey(tool.id),
      parentKey: agentKey(tool.agentId),
      name,
      startMs,
      endMs: endAt,
      attributes: boundedAttributes(attributes),
      error,
    };
  }

  /**
   * The span of an agent: as it `ended` (its notification: the channel and figures its last
   * status event froze), else as it is now (the end of the run).
   */
  private agentSpan(a: AgentState, extra: Attributes = {}, ended: AgentState['ended'] = null): SpanData {
    a.exported = true;
    const ch = ended?.channel ?? a.channel;
    const figures = ended?.figures ?? null;
    const isMain = ch.id === null;
    const name = isMain ? 'main' : (ch.agent ?? 'subagent');
    const lastSeen = ch.lastSeen ? Date.parse(ch.lastSeen) : NaN;
    // A subagent spans its spawn to its report (the tree's times, when the stream gave them);
    // the main conversation the whole run, whichever channel spoke first.
    const spawnedMs = isMain ? null : msOf(ch.startedAt);
    const reportedMs = isMain ? null : msOf(ch.endedAt);
    const startMs =
      (isMain ? (this.clock.first ?? a.startMs) : (spawnedMs ?? a.startMs ?? this.clock.first)) ??
      this.now();
    let endMs = reportedMs ?? a.endMs ?? this.now();
    if (Number.isFinite(lastSeen) && lastSeen > endMs) endMs = lastSeen;
    const attributes: Attributes = {
      [GENAI.operation]: 'invoke_agent',
      [GENAI.provider]: 'anthropic',
      [GENAI.agentName]: name,
    };
    if (!isMain) attributes[GENAI.agentId] = ch.id!;
    if (ch.description) attributes[GENAI.agentDescription] = ch.description;
    if (this.version) attributes[GENAI.agentVersion] = this.version;
    if (this.sessionId) {
      attributes[GENAI.conversationId] = this.sessionId;
      attributes[SESSION_ID] = this.sessionId;
    }
    attributes[OPENINFERENCE_KIND] = 'AGENT';
    Object.assign(attributes, this.costAttributes(ch.id, figures));
    const model = a.model ?? (isMain ? this.initModel : null);
    if (model) attributes[GENAI.requestModel] = model;
    // The usage every view shows (channelUsage): the ledger's true or estimated output tokens
    // where it knows them (the lines' own are the message_start snapshot), none it does not.
    const costs = this.opts.costs;
    const usage = channelUsage(ch.usage, costs ? (figures ? figures.cost : costs.channelCost(ch.id)) : null);
    for (const [k, attr] of USAGE_ATTRIBUTES)
      if (typeof usage[k] === 'number') attributes[attr] = usage[k];
    // A producer that states only a total (GitHub Copilot CLI's subagents) is counted by it.
    const tokens = channelTokens({ usage });
    if (tokens > 0) attributes[USAGE_TOKENS] = tokens;
    if (this.runId) attributes['subtee.run.id'] = this.runId;
    if (ch.depth !== null) attributes['subtee.depth'] = ch.depth;
    attributes['subtee.status'] = ch.status;
    if (ch.background !== null) attributes['subtee.background'] = ch.background;
    if (ch.orphan) attributes['subtee.orphan'] = true;
    attributes['subtee.lines'] = ch.lines;
    const max = this.opts.maxContentChars;
    if (this.opts.captureContent) {
      // The conventions' message form: a list of messages, each a role and its parts.
      const message = (role: string, text: string) =>
        JSON.stringify([{ role, parts: [{ type: 'text', content: storedText(text, 'block', max) }] }]);
      if (a.prompt !== null) attributes[GENAI.inputMessages] = message('user', a.prompt);
      const report = ch.summary ?? a.lastText;
      if (report !== null) attributes[GENAI.outputMessages] = message('assistant', report);
    }
    let error: string | null = null;
    if (ch.status === 'failed') {
      const detail = this.opts.captureContent ? ch.summary : null;
      error = this.errorText(isMain ? 'run failed' : 'subagent failed', detail);
      attributes[GENAI.errorType] = isMain ? 'run_failed' : 'subagent_failed';
    }
    Object.assign(attributes, extra);
    // An orphan's spawn call was never seen: it hangs under the main conversation.
    const spawnSeen = !isMain && (this.tools.has(ch.id!) || this.finishedTools.has(ch.id!));
    const parentKey = isMain ? null : ch.orphan || !spawnSeen ? agentKey(null) : toolKey(ch.id!);
    const spanName = storedText(`invoke_agent ${name}`, 'stored', MAX_SPAN_NAME_CHARS);
    const endAt = Math.max(startMs, endMs);
    const bounded = boundedAttributes(attributes);
    const key = agentKey(ch.id);
    return { key, parentKey, name: spanName, startMs, endMs: endAt, attributes: bounded, error };
  }
}

const noLateUsage = (): LateUsage => ({
  tokens: emptyTokens(),
  usd: 0,
  counted: false,
  total: 0,
});

/**
 * A channel as its end froze it, with what its lines added after that (up to its
 * notification): the usage events on its figures and on its usage, a total stated alone on its
 * usage. Before a result line, the figures are then the ledger's as of the notification.
 */
function withLateUsage(ended: NonNullable<AgentState['ended']>, late: LateUsage | null) {
  if (late === null) return ended;
  const t = late.tokens;
  const usage: Record<string, number> = { ...ended.channel.usage };
  const add = (key: string, n: number) => {
    if (n !== 0) usage[key] = (usage[key] ?? 0) + n;
  };
  add('input_tokens', t.input_tokens);
  add('output_tokens', t.output_tokens);
  add('cache_read_input_tokens', t.cache_read_input_tokens);
  add('cache_creation_input_tokens', t.cache_creation_5m_input_tokens + t.cache_creation_1h_input_tokens);
  add('total_tokens', late.total);
  const figures = ended.figures && { ...ended.figures, cost: withLateCost(ended.figures.cost, late) };
  return { channel: { ...ended.channel, usage }, figures };
}

/**
 * A channel's frozen cost with the usage events counted after it. A channel whose usage was
 * unknown at its end is known once an event counted some: the lines' own figures (`stream`).
 */
function withLateCost(cost: ReadonlyChannelCost | null, late: LateUsage): ReadonlyChannelCost | null {
  if (!late.counted) return cost;
  const known = cost !== null && cost.basis !== 'unknown';
  const tokens = { ...late.tokens };
  if (known) for (const k of MODEL_TOKEN_KINDS) tokens[k] += cost.tokens[k];
  const usd = !known ? late.usd : cost.usd === null || late.usd === null ? null : cost.usd + late.usd;
  return {
    models: cost?.models ?? [],
    usd: roundUsd(usd),
    tokens,
    basis: known ? cost.basis : 'stream',
    reason: null,
    transcriptOnly: cost?.transcriptOnly ?? false,
  };
}

/** An ISO time in milliseconds; null when there is none or it is not a date. */
function msOf(iso: string | null): number | null {
  if (iso === null) return null;
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? ms : null;
}

const mainPlaceholder: SpanChannel = Object.freeze({
  id: null,
  parent: null,
  orphan: false,
  depth: 0,
  agent: null,
  description: null,
  status: 'running',
  background: null,
  summary: null,
  lines: 0,
  usage: {},
  firstSeen: null,
  lastSeen: null,
  startedAt: null,
  endedAt: null,
});
