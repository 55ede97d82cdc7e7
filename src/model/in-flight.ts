import { boundedText } from './bounded-text.js';
import {
  ASYNC_LAUNCH,
  asBlock,
  asStreamLine,
  channelIdOf,
  isObject,
  resultTextLazy,
  SPAWN_TOOLS,
  type ContentBlock,
  type JsonObject,
  type TranscriptKinds,
} from './message.js';
import { isText } from './scan.js';

/**
 * What a run is waiting on, read from its lines alone: per channel a model request, a
 * message streaming, foreground tool calls; and the run's background tasks. Each wait has
 * the allowance the agent itself gives it (Claude Code's own timeouts), so the idle watchdog
 * can tell a long but legitimate silence from a hang. Pure: times are plain numbers.
 */

/** The agent's own time limits, in milliseconds (Claude Code's defaults, or its environment). */
export interface WaitLimits {
  /** Silence between a streamed message's events (`--include-partial-messages`). */
  idleTimeoutMs: number;
  /** One API request: `API_TIMEOUT_MS`. */
  modelTimeoutMs: number;
  /** A tool call with no timeout of its own. */
  toolTimeoutMs: number;
  /** Bash without a `timeout` input: `BASH_DEFAULT_TIMEOUT_MS`. */
  bashDefaultTimeoutMs: number;
  /** The most a Bash `timeout` input may ask for: `BASH_MAX_TIMEOUT_MS`. */
  bashMaxTimeoutMs: number;
  /** MCP tool calls: `MCP_TOOL_TIMEOUT`; null = `toolTimeoutMs`. */
  mcpToolTimeoutMs: number | null;
  /** Background tasks: `CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS`; 0 = no limit. */
  bgWaitCeilingMs: number;
}

export const WAIT_LIMIT_DEFAULTS: Readonly<WaitLimits> = Object.freeze({
  idleTimeoutMs: 120_000,
  modelTimeoutMs: 600_000,
  toolTimeoutMs: 600_000,
  bashDefaultTimeoutMs: 120_000,
  bashMaxTimeoutMs: 600_000,
  mcpToolTimeoutMs: null,
  bgWaitCeilingMs: 600_000,
});

/** The shells whose `timeout` input bounds the call. */
const SHELL_TOOLS: ReadonlySet<string> = new Set(['Bash', 'PowerShell']);

/**
 * The producers whose shell calls Claude Code's Bash limits hold: Claude Code's own streams
 * (and lines of no stated producer). Every other CLI's calls get `toolTimeoutMs`: Codex maps
 * its `command_execution` to `Bash` but states no timeout in its stream, and the one its model
 * may ask for has no upper bound (its default, 10 s, is only for calls that ask for none);
 * Gemini CLI, Copilot CLI and opencode name their shells otherwise and state no limit either.
 */
const BASH_LIMITS_PRODUCERS: ReadonlySet<string | null> = new Set([null, 'claude']);

/**
 * The producers that print a tool call only once it has ended (opencode prints a tool part
 * completed or failed, never running): whatever silence follows a step's start or its last
 * printed part may be a call at work, a subagent among them, so a model wait of theirs allows
 * the larger of the model and tool allowances, and says so.
 */
const CALLS_SHOWN_ENDED: ReadonlySet<string | null> = new Set(['opencode']);

export type WaitKind = 'model' | 'tool' | 'background';

/** The model phases a channel can wait in. */
const MODEL_REQUEST = 'model request';
const MODEL_RESPONSE = 'model response';
const MESSAGE_STREAM = 'message stream';
type ModelPhase = typeof MODEL_REQUEST | typeof MODEL_RESPONSE | typeof MESSAGE_STREAM;
/** How a model wait of a CALLS_SHOWN_ENDED producer is named: a call may be running unseen. */
const OR_UNSEEN_CALLS = ' or a tool call not yet shown';

/** One thing in flight, as a stall reports it. */
export interface Wait {
  readonly kind: WaitKind;
  /** The channel it belongs to (null: main); background tasks carry their spawn's id if known. */
  readonly channelId: string | null;
  /**
   * `Bash "npm test"`, `model request`, `message stream`, `Explore "dig" (t1)`…, as the stream
   * gave it: `cleanName` makes it fit for a message.
   */
  readonly what: string;
  /** When it started (the clock of `observe`). */
  readonly sinceMs: number;
  /** The silence it allows, before the grace; null: no limit. */
  readonly allowedMs: number | null;
  /** The allowance is the call's own `timeout` input. */
  readonly declared: boolean;
  /**
   * The agent enforces this allowance itself (its timeout fires, then it reports), so the
   * watchdog adds a grace; a streamed message's idle allowance is subtee's own and exact.
   */
  readonly graced: boolean;
}

/** A wait as a stall reports it: where, for how long, and what it was allowed. */
export interface StalledWait {
  readonly kind: WaitKind;
  readonly what: string;
  /** The channel's label (`main`, `general-purpose·a1b2c3`). */
  readonly channel: string;
  readonly channelId: string | null;
  readonly inFlightMs: number;
  /** Its allowance before the grace; null: no limit. */
  readonly allowedMs: number | null;
  readonly declared: boolean;
}

/**
 * A plugin placed above the watchdog whose call had not settled when it fired: the records it
 * held reached nothing below it, so the silence was (at least) the plugin's.
 */
export interface HeldRecords {
  /** The plugin's name. */
  readonly plugin: string;
  /** The call: `its function for line 5`, `its end()`. */
  readonly what: string;
  /** How long the call had been pending. */
  readonly heldMs: number;
}

/** Why the watchdog fired: `index.json`'s `stall`. */
export interface Stall {
  readonly silenceMs: number;
  /** The silence that was allowed, grace included. */
  readonly allowedMs: number;
  /** What was in flight, the longest allowance first (at most STALL_WAITS_LISTED). */
  readonly waitingOn: readonly StalledWait[];
  /** In flight but not listed. */
  readonly moreWaiting: number;
  /** Plugins above the watchdog holding records when it fired, the longest held first. */
  readonly heldBy: readonly HeldRecords[];
}

/** How many waits a stall lists; the rest are counted. */
export const STALL_WAITS_LISTED = 20;

/** How many waits are tracked one by one; past it they are folded into one (state stays bounded). */
export const MAX_TRACKED_WAITS = 10_000;
/** Characters of a command or description kept to name a wait. */
const WHAT_CHARS = 80;
/** How many ids the flight keeps ends for that came before what they end (the latest). */
export const MAX_ENDS_BEFORE_START = 1_000;
/**
 * The longest id such an end is kept for, as the tree remembers call ids (real ones are about
 * 30 characters): one huge id must not push out the others.
 */
export const MAX_END_ID_CHARS = 256;

interface ChannelState {
  /** The model phase: a request sent, a message arriving, or none (tools run, or the turn is over). */
  model: Wait | null;
  /** The phase `model` stands for (its `what` may say more); null with it. */
  phase: ModelPhase | null;
  /** Inside `message_start` … `message_stop`: the request streams, so idle silence applies. */
  streaming: boolean;
  /**
   * The message streaming asked for a call whose result had come before it (see
   * `EndsBeforeStart`): when it stops with no call pending, the next request is out.
   */
  answeredBeforeShown: boolean;
  /**
   * Foreground tool calls by tool_use id. A foreground spawn is here with no allowance of its
   * own (its channel's waits decide), unless its channel is not streamed: then it is awaited
   * as a call (see `unseenSpawnAllowance`).
   */
  /**
   * Null while none runs: a Map keeps its table once made, some 120 bytes a channel, and most
   * channels of a large run wait on no call at any one time.
   */
  tools: Map<string, Wait & { spawn: boolean }> | null;
}

/**
 * What the run states about its stream that limits what is awaited, as the run holds it
 * (the Session's read-only facts): read when a line is observed, never copied.
 */
export interface StreamFacts {
  /** Who writes the stream (null: unknown): a tool call gets its own producer's limits. */
  readonly producer: string | null;
  /**
   * How much of each channel the stream shows (null: all of it). A `spawn-and-result`
   * channel's work is not in the stream: its spawn call in the parent is what is awaited,
   * and the channel's own lines (its prompt, its result) await nothing.
   */
  readonly transcripts: TranscriptKinds | null;
}

const UNKNOWN_STREAM: StreamFacts = Object.freeze({ producer: null, transcripts: null });

// What an end seen before its start says about an id: bits of one number (see EndsBeforeStart).
/** A `tool_result` for a call not shown yet: the call, when it comes, is not awaited. */
const CALL_ANSWERED = 1;
/** Its subagent ended (its spawn's result, not a launch; a `task_notification`): no channel opens. */
const CHANNEL_ENDED = 2;
/** A `task_notification` named it: a background task started on it is over already. */
const TASK_ENDED = 4;
/**
 * An end named this task id and no spawn (a `task_notification`, or a `task_updated` with an end
 * status): the task's `task_started`, should it come later, is over already (a notification
 * naming the spawn says so by TASK_ENDED on its id, so that a new spawn resuming the task is
 * awaited).
 */
const TASK_ID_ENDED = 8;
/**
 * An end of this task id came (a `task_notification` naming it or its spawn, a `task_updated`
 * with an end status): a `background_tasks_changed` that still lists the task was taken before
 * the end was processed, and does not bring it back (a new start of the task, resumed by a new
 * spawn, does).
 */
const TASK_NOTIFIED = 16;
/**
 * A `task_started` started this task id (in the background or not): an end naming the task
 * alone ends that start, and leaves no TASK_ID_ENDED for a later one (the task resumed by a new
 * spawn).
 */
const TASK_STARTED = 32;

/** The `patch.status` of a `task_updated` that ends its task. */
const TASK_END_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'killed']);
const isTaskEnd = (status: unknown) => typeof status === 'string' && TASK_END_STATUSES.has(status);

/**
 * Ends by id, kept for what has not started yet or may still show a line. Lines of different
 * channels interleave, so a subagent's lines, or the parent's `tool_result` answering its
 * spawn, can come before the line carrying the spawn, and a line of a channel after its end.
 * Ids and flags only: at most the latest MAX_ENDS_BEFORE_START ids of at most MAX_END_ID_CHARS
 * characters; the oldest is forgotten first, so an id that never starts costs nothing for long.
 * Pure.
 */
class EndsBeforeStart {
  private readonly flags = new Map<string, number>();

  /** Adds `flag` to what `id` has, as the newest; an id too long is not kept. */
  keep(id: string, flag: number): void {
    if (id.length > MAX_END_ID_CHARS) return;
    const had = this.forget(id);
    this.flags.set(id, had | flag);
    if (this.flags.size > MAX_ENDS_BEFORE_START) this.forget(this.flags.keys().next().value!);
  }

  has(id: string, flag: number): boolean {
    return this.flags.size > 0 && ((this.flags.get(id) ?? 0) & flag) !== 0;
  }

  /** Whether `id` has `flag`, which it then no longer has (what it says is applied once). */
  take(id: string, flag: number): boolean {
    if (!this.has(id, flag)) return false;
    const rest = this.flags.get(id)! & ~flag;
    if (rest === 0) this.forget(id);
    else this.flags.set(id, rest);
    return true;
  }

  /** Drops `id`; its flags (0: none). */
  private forget(id: string): number {
    const flags = this.flags.get(id);
    if (flags === undefined) return 0;
    this.flags.delete(id);
    return flags;
  }
}

export class InFlight {
  private readonly channels = new Map<string | null, ChannelState>();
  private readonly background = new Map<string, Wait>();
  /**
   * The background task awaited on each spawn id its wait carries (the latest, should two name
   * one spawn): a task_notification naming the spawn alone ends it. Only tasks in `background`.
   */
  private readonly taskBySpawn = new Map<string, string>();
  private tracked = 0;
  /** Ends seen before what they end: calls answered, channels and tasks ended (see EndsBeforeStart). */
  private readonly endsBeforeStart = new EndsBeforeStart();
  /** Waits past MAX_TRACKED_WAITS: how many, and the longest allowance among them (until `result`). */
  private overflow: { count: number; allowedMs: number | null; sinceMs: number } | null = null;
  /** `stream`: the run's facts about its stream (the Session), read as each line is observed. */
  constructor(
    private readonly limits: WaitLimits,
    private readonly stream: StreamFacts = UNKNOWN_STREAM,
  ) {}

  /** Reads one line (a parsed JSON object) arriving at `now`. */
  observe(value: JsonObject, now: number): void {
    const line = asStreamLine(value);
    if (!line) return;
    const channelId = channelIdOf(value);
    if (channelId !== null && this.unstreamed(channelId)) return;
    switch (line.type) {
      case 'system':
        this.observeSystem(line as unknown as JsonObject, channelId, now);
        return;
      case 'stream_event': {
        // Most stream events are token deltas: only a message's start and stop matter here.
        const eventType = line.event.type;
        if (eventType === 'message_start' || eventType === 'message_stop')
          this.observeStreamEvent(eventType, channelId, now);
        return;
      }
      case 'assistant':
        this.observeAssistant(value, channelId, now);
        return;
      case 'user':
        this.observeUser(value, channelId, now);
        return;
      case 'result':
        if (channelId !== null) return;
        // The conversation is over: nothing of it is awaited any more, only background tasks.
        this.channels.clear();
        this.tracked = this.background.size;
        this.overflow = null;
        return;
    }
  }

  /** Everything in flight now, the longest allowance first. */
  waits(): Wait[] {
    const all: Wait[] = [...this.background.values()];
    for (const state of this.channels.values()) {
      if (state.model) all.push(state.model);
      if (state.tools) for (const tool of state.tools.values()) if (!tool.spawn) all.push(tool);
    }
    if (this.overflow) {
      all.push({
        kind: 'tool',
        channelId: null,
        what: `${this.overflow.count} more calls not tracked one by one`,
        sinceMs: this.overflow.sinceMs,
        allowedMs: this.overflow.allowedMs,
        declared: false,
        graced: true,
      });
    }
    return all.sort((a, b) => rank(b.allowedMs) - rank(a.allowedMs) || a.sinceMs - b.sinceMs);
  }

  private observeSystem(line: JsonObject, channelId: string | null, now: number): void {
    const taskId = typeof line.task_id === 'string' && line.task_id !== '' ? line.task_id : null;
    switch (line.subtype) {
      case 'init':
        // A (new) turn of the main conversation: its first request is on its way.
        this.requestModel(null, now);
        return;
      case 'status':
        if (line.status === 'requesting') this.requestModel(channelId, now);
        return;
      case 'task_started':
        if (taskId === null) return;
        if (line.is_backgrounded === true) this.startBackground(taskId, line, now);
        else this.startForeground(taskId);
        return;
      case 'task_updated':
        // Claude Code states a task's end here first (`patch.status`), then in its task_notification.
        if (taskId && isObject(line.patch) && isTaskEnd(line.patch.status)) this.endTask(taskId, false, true);
        return;
      case 'task_notification': {
        const spawnId = typeof line.tool_use_id === 'string' ? line.tool_use_id : null;
        // Naming its spawn alone, it ends the task started on that spawn, if one is awaited.
        const ended = taskId ?? (spawnId === null ? undefined : this.taskBySpawn.get(spawnId));
        if (ended !== undefined) this.endTask(ended, spawnId !== null);
        // Its spawn's task is over too, should its task_started come later.
        if (spawnId !== null) this.endChannel(spawnId, TASK_ENDED);
        return;
      }
      case 'background_tasks_changed': {
        if (!Array.isArray(line.tasks)) return;
        // The list replaces what was known: it names every background task still alive.
        const known = new Map(this.background);
        for (const id of known.keys()) this.deleteBackground(id);
        for (const task of line.tasks) {
          if (!isObject(task) || typeof task.task_id !== 'string') continue;
          if (this.endsBeforeStart.has(task.task_id, TASK_NOTIFIED)) continue;
          const before = known.get(task.task_id);
          this.addBackground(task.task_id, task, before?.sinceMs ?? now, before?.channelId ?? null);
        }
        return;
      }
    }
  }

  private observeStreamEvent(
    eventType: 'message_start' | 'message_stop',
    channelId: string | null,
    now: number,
  ): void {
    const state = this.channel(channelId, now);
    if (!state) return;
    if (eventType === 'message_start') {
      state.streaming = true;
      state.answeredBeforeShown = false;
      this.setModel(state, channelId, MESSAGE_STREAM, now);
    } else {
      // Its calls all answered before they were shown: the next request is out, as after a result.
      const next = state.answeredBeforeShown && state.tools === null ? MODEL_REQUEST : null;
      state.streaming = false;
      state.answeredBeforeShown = false;
      this.setModel(state, channelId, next, now);
    }
  }

  private observeAssistant(value: JsonObject, channelId: string | null, now: number): void {
    const state = this.channel(channelId, now);
    if (!state) return;
    let calls = 0;
    let answered = 0;
    const content = contentOf(value);
    for (let index = 0; index < content.length; index++) {
      const block = blockOf(content[index], 'tool_use');
      if (block === null) continue;
      // Its result came first (lines interleave): the call is over, nothing to await.
      if (this.endsBeforeStart.take(block.id, CALL_ANSWERED)) {
        answered++;
        continue;
      }
      calls++;
      this.addTool(state, channelId, block.id, block.name, block.input, now);
    }
    if (state.streaming) {
      if (answered > 0) state.answeredBeforeShown = true;
      return;
    }
    // Without partial messages a line is one finished block: the message may go on with
    // more (a long tool input is silence too), so the model still answers; once it has asked
    // for a tool, that call's allowance covers the rest of the message, and once every call
    // it asked for is answered, the next request is out.
    if (calls > 0 || state.tools !== null) this.setModel(state, channelId, null, now);
    else if (answered > 0) this.requestModel(channelId, now);
    else if (state.phase !== MODEL_RESPONSE) this.setModel(state, channelId, MODEL_RESPONSE, now);
  }

  private observeUser(value: JsonObject, channelId: string | null, now: number): void {
    const state = this.channel(channelId, now);
    if (!state) return;
    let results = 0;
    const content = contentOf(value);
    for (let index = 0; index < content.length; index++) {
      const block = blockOf(content[index], 'tool_result');
      if (block === null) continue;
      results++;
      const call = state.tools?.get(block.tool_use_id);
      if (!call) {
        this.resultBeforeCall(block);
        continue;
      }
      state.tools!.delete(block.tool_use_id);
      if (state.tools!.size === 0) state.tools = null;
      this.tracked--;
      // A background spawn's launch result: the subagent runs on as a background task.
      if (call.spawn && !ASYNC_LAUNCH.test(resultTextLazy(block).slice(0, 100).toString()))
        this.endChannel(block.tool_use_id);
    }
    // A prompt, or the last awaited result: the next request goes out.
    if (results === 0 || state.tools === null) this.requestModel(channelId, now);
  }

  /**
   * A tool_result for no call its channel awaits: its call line may come later (lines
   * interleave), answered already. Unless it is a background launch, whatever runs under the
   * id has ended: a subagent whose own lines came first.
   */
  private resultBeforeCall(block: Extract<ContentBlock, { type: 'tool_result' }>): void {
    const id = block.tool_use_id;
    this.endsBeforeStart.keep(id, CALL_ANSWERED);
    if (!ASYNC_LAUNCH.test(resultTextLazy(block).slice(0, 100).toString())) this.endChannel(id);
  }

  private requestModel(channelId: string | null, now: number): void {
    const state = this.channel(channelId, now);
    if (!state || state.streaming || state.phase === MODEL_REQUEST) return;
    this.setModel(state, channelId, MODEL_REQUEST, now);
  }

  /** The channel's model phase from `now` (null: none), with the allowance it is given. */
  private setModel(
    state: ChannelState,
    channelId: string | null,
    phase: ModelPhase | null,
    now: number,
  ): void {
    state.phase = phase;
    if (phase === null) {
      state.model = null;
      return;
    }
    // A streamed message's idle allowance is subtee's own and exact: no grace.
    const graced = phase !== MESSAGE_STREAM;
    let what: string = phase;
    let allowedMs = graced ? this.limits.modelTimeoutMs : this.limits.idleTimeoutMs;
    if (graced && CALLS_SHOWN_ENDED.has(this.stream.producer)) {
      what += OR_UNSEEN_CALLS;
      allowedMs = Math.max(allowedMs, this.limits.toolTimeoutMs);
    }
    state.model = { kind: 'model', channelId, what, sinceMs: now, allowedMs, declared: false, graced };
  }

  /** A spawned channel whose own steps the stream does not carry (see `transcripts`). */
  private unstreamed(channelId: string): boolean {
    const transcripts = this.stream.transcripts;
    return transcripts !== null && transcripts.transcriptOf(channelId) === 'spawn-and-result';
  }

  private addTool(
    state: ChannelState,
    channelId: string | null,
    id: string,
    name: string,
    input: unknown,
    now: number,
  ): void {
    const args = isObject(input) ? input : {};
    // A subagent the stream shows only spawned and ended is awaited as its call, not by its channel.
    const foreground = SPAWN_TOOLS.has(name) && args.run_in_background !== true;
    const unseen = foreground && this.unstreamed(id);
    const spawn = foreground && !unseen;
    const { allowedMs, declared } = unseen ? this.unseenSpawnAllowance() : this.toolAllowance(name, args);
    const label = describeCall(name, args);
    if (!this.track()) return this.fold(spawn ? this.limits.modelTimeoutMs : allowedMs, now);
    // One object per call: a spread copy of one raised peak memory measurably.
    (state.tools ??= new Map()).set(id, {
      kind: 'tool',
      channelId,
      what: label,
      sinceMs: now,
      allowedMs,
      declared,
      graced: true,
      spawn,
    });
    // A foreground subagent is decided by its own channel: its first request is on its way.
    if (spawn && !this.channels.has(id)) this.requestModel(id, now);
  }

  /**
   * A subagent whose steps are not in the stream: the silence may span all its model requests
   * and tool calls, so it allows the larger of the two allowances (Gemini CLI's subagents stop
   * at 10 minutes unless their definition says otherwise; opencode's `task` and Codex's agents
   * state no limit).
   */
  private unseenSpawnAllowance(): { allowedMs: number; declared: boolean } {
    return { allowedMs: Math.max(this.limits.modelTimeoutMs, this.limits.toolTimeoutMs), declared: false };
  }

  private toolAllowance(name: string, input: JsonObject): { allowedMs: number; declared: boolean } {
    const limits = this.limits;
    if (SHELL_TOOLS.has(name) && BASH_LIMITS_PRODUCERS.has(this.stream.producer)) {
      const asked = input.timeout;
      const declared = typeof asked === 'number' && Number.isFinite(asked) && asked > 0;
      const wanted = declared ? asked : limits.bashDefaultTimeoutMs;
      return { allowedMs: Math.min(wanted, limits.bashMaxTimeoutMs), declared };
    }
    if (name.startsWith('mcp__') && limits.mcpToolTimeoutMs !== null)
      return { allowedMs: limits.mcpToolTimeoutMs, declared: false };
    return { allowedMs: limits.toolTimeoutMs, declared: false };
  }

  /**
   * A task ended (`task_notification`, or `task_updated` with an end status): it is awaited no
   * more, and a list taken before this end does not bring it back. Naming no spawn, only the task
   * id can tell its task_started, should it come later, that it is over: unless that start came
   * already. `startStays`: the end is stated again later (a task_updated's, by its
   * task_notification), so the start it ended stays known for that statement to end it.
   */
  private endTask(taskId: string, spawnNamed: boolean, startStays = false): void {
    this.deleteBackground(taskId);
    const started = startStays
      ? this.endsBeforeStart.has(taskId, TASK_STARTED)
      : this.endsBeforeStart.take(taskId, TASK_STARTED);
    this.endsBeforeStart.keep(taskId, started || spawnNamed ? TASK_NOTIFIED : TASK_NOTIFIED | TASK_ID_ENDED);
  }

  /**
   * A foreground task is awaited through its spawn's call and channel, not as a task; its start
   * is kept all the same, so that its end by the task id alone (its task_updated) ends this start
   * and not a later one (the task resumed in the background).
   */
  private startForeground(taskId: string): void {
    if (!this.endsBeforeStart.take(taskId, TASK_ID_ENDED)) this.endsBeforeStart.keep(taskId, TASK_STARTED);
  }

  private startBackground(taskId: string, line: JsonObject, now: number): void {
    // Its notification came first, naming the task alone: this is the start it ended.
    if (this.endsBeforeStart.take(taskId, TASK_ID_ENDED)) return this.deleteBackground(taskId);
    // Unless its spawn's notification came first (addBackground lets it go), it runs anew: a list
    // that names it from now on is not stale.
    const spawnId = typeof line.tool_use_id === 'string' ? line.tool_use_id : null;
    if (spawnId === null || !this.endsBeforeStart.has(spawnId, TASK_ENDED))
      this.endsBeforeStart.take(taskId, TASK_NOTIFIED);
    this.endsBeforeStart.keep(taskId, TASK_STARTED);
    this.addBackground(taskId, line, now);
  }

  private addBackground(
    taskId: string,
    task: JsonObject,
    since: number,
    knownChannel: string | null = null,
  ): void {
    const channelId = typeof task.tool_use_id === 'string' ? task.tool_use_id : knownChannel;
    // Its spawn's task_notification came first: the task is over.
    if (channelId !== null && this.endsBeforeStart.has(channelId, TASK_ENDED))
      return this.deleteBackground(taskId);
    const known = this.background.get(taskId);
    if (known) {
      // Claude Code lists a task (background_tasks_changed) before task_started names its spawn.
      if (known.channelId === null && channelId !== null) {
        this.background.set(taskId, { ...known, channelId });
        this.taskBySpawn.set(channelId, taskId);
      }
      return;
    }
    const allowedMs = this.limits.bgWaitCeilingMs === 0 ? null : this.limits.bgWaitCeilingMs;
    if (!this.track()) return this.fold(allowedMs, since);
    if (channelId !== null) this.taskBySpawn.set(channelId, taskId);
    this.background.set(taskId, {
      kind: 'background',
      channelId,
      what: describeTask(taskId, task),
      sinceMs: since,
      allowedMs,
      declared: false,
      graced: true,
    });
  }

  private deleteBackground(taskId: string): void {
    const wait = this.background.get(taskId);
    if (wait === undefined) return;
    this.background.delete(taskId);
    this.tracked--;
    if (wait.channelId !== null && this.taskBySpawn.get(wait.channelId) === taskId)
      this.taskBySpawn.delete(wait.channelId);
  }

  /**
   * A subagent ended: its channel waits on nothing any more, and a line of it that comes later
   * (lines interleave) opens it no more. `flags`: what else the end says of the id.
   */
  private endChannel(id: string, flags = 0): void {
    this.endsBeforeStart.keep(id, CHANNEL_ENDED | flags);
    const state = this.channels.get(id);
    if (!state) return;
    this.tracked -= 1 + (state.tools?.size ?? 0);
    this.channels.delete(id);
  }

  /**
   * The channel's state, created on its first line; undefined when the tracking is full, or
   * when the channel has ended (a late line of it).
   */
  private channel(channelId: string | null, now: number): ChannelState | undefined {
    const known = this.channels.get(channelId);
    if (known) return known;
    if (channelId !== null && this.endsBeforeStart.has(channelId, CHANNEL_ENDED)) return undefined;
    if (!this.track()) {
      this.fold(this.limits.modelTimeoutMs, now);
      return undefined;
    }
    const state: ChannelState = {
      model: null,
      phase: null,
      streaming: false,
      answeredBeforeShown: false,
      tools: null,
    };
    this.channels.set(channelId, state);
    return state;
  }

  private track(): boolean {
    if (this.tracked >= MAX_TRACKED_WAITS) return false;
    this.tracked++;
    return true;
  }

  private fold(allowedMs: number | null, now: number): void {
    const before = this.overflow;
    const longest = before === null ? allowedMs : maxAllowance(before.allowedMs, allowedMs);
    this.overflow = { count: (before?.count ?? 0) + 1, allowedMs: longest, sinceMs: before?.sinceMs ?? now };
  }
}

const NO_BLOCKS: readonly unknown[] = Object.freeze([]);

/** A line's raw content list, read in place: this runs for every line, so nothing is copied. */
function contentOf(value: JsonObject): readonly unknown[] {
  const message = value.message;
  return isObject(message) && Array.isArray(message.content) ? message.content : NO_BLOCKS;
}

/** The raw block as a typed block of the kind asked for, or null. */
function blockOf<K extends 'tool_use' | 'tool_result'>(
  raw: unknown,
  kind: K,
): Extract<ContentBlock, { type: K }> | null {
  if (!isObject(raw) || raw.type !== kind) return null;
  return asBlock(raw) as Extract<ContentBlock, { type: K }> | null;
}

const rank = (allowedMs: number | null) => (allowedMs === null ? Infinity : allowedMs);

function maxAllowance(a: number | null, b: number | null): number | null {
  return a === null || b === null ? null : Math.max(a, b);
}

/**
 * The first characters of a text, for naming a wait; cleaned up (one line, bounded) only
 * when a stall is reported. A cut of a long string is copied so that it does not keep the
 * whole string alive while the call is in flight (at most MAX_TRACKED_WAITS of them).
 */
function headText(value: unknown): string | null {
  if (!isText(value)) return null;
  if (value.length <= WHAT_CHARS) return value.toString();
  const head = value.slice(0, WHAT_CHARS + 1).toString();
  return value.length <= SLICE_KEEPS_CHARS ? head : Buffer.from(head, 'utf16le').toString('utf16le');
}

/** Up to this length, a cut that keeps its whole string alive costs less than a copy. */
const SLICE_KEEPS_CHARS = 1024;

/** A name fit for a message: one line, at most WHAT_CHARS, whole characters. */
export function cleanName(text: string): string {
  return boundedText(text.replace(/\s+/g, ' ').trim(), WHAT_CHARS);
}

/**
 * `Bash "npm test"`, `Read "src/a.ts"`, `Agent "review the diff"`, a spawn without a description
 * by its prompt, or the tool's name alone (raw).
 */
function describeCall(name: string, input: JsonObject): string {
  const detail =
    headText(input.command) ??
    headText(input.description) ??
    headText(input.file_path) ??
    headText(input.url) ??
    headText(input.pattern) ??
    headText(input.prompt);
  const tool = name.length > WHAT_CHARS ? name.slice(0, WHAT_CHARS) : name;
  return detail ? `${tool} "${detail}"` : tool;
}

function describeTask(taskId: string, task: JsonObject): string {
  const kind = headText(task.subagent_type) ?? headText(task.task_type) ?? 'task';
  const description = headText(task.description);
  return `background ${kind}${description ? ` "${description}"` : ''} (${taskId.slice(0, WHAT_CHARS)})`;
}
