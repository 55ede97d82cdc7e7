import {
  ASYNC_LAUNCH,
  asStreamLine,
  channelIdOf,
  contentBlocks,
  nonEmpty,
  resultText,
  runIdOf,
  SPAWN_TOOLS,
  usageNumbers,
  type AssistantLine,
  type CountedBlockType,
  isObject,
  isSyntheticMessage,
  type JsonObject,
  type SystemLine,
  type ToolResultBlock,
  type ToolUseBlock,
  type UserLine,
} from './message.js';
import { boundedText } from './bounded-text.js';
import { rememberLatest } from './latest.js';

/**
 * `stopped`: the subagent was stopped before it finished (Claude Code's `task_notification`
 * status `stopped`, as when the user stops it); an end, not a failure.
 */
export type ChannelStatus = 'running' | 'completed' | 'failed' | 'stopped';

/** The statuses a subagent ends with, as `task_notification` names them. */
const NOTIFIED_ENDS: ReadonlySet<unknown> = new Set<ChannelStatus>(['completed', 'failed', 'stopped']);

/**
 * Longest agent name kept: every stdout label, pino record, ClickHouse row and span repeats
 * it, so one huge `subagent_type` would otherwise be copied once per line.
 */
export const MAX_AGENT_CHARS = 100;

function agentName(value: unknown): string | null {
  const name = nonEmpty(value);
  return name === null ? null : boundedText(name, MAX_AGENT_CHARS);
}

/**
 * Where a channel sat in the tree when a line was routed to it, and what it was called: what a
 * view of that line names it by. The tree makes a new one when a spawn or a task_started
 * places or names the channel (a line that arrived before its spawn keeps the place it had),
 * never changes one.
 */
export interface ChannelPlace {
  readonly id: string | null;
  readonly parent: string | null;
  readonly depth: number | null;
  readonly agent: string | null;
  readonly description: string | null;
  readonly tag: string;
}

/**
 * A channel as every reader holds it: a record's `channel` (`RoutedLine.channel`), `RunView.tree`'s
 * channels, a plugin's `ctx.session.tree`. It is the tree's own node, read only at run time as in
 * its type: each field is a getter over state only the tree sets, and the node is frozen, so a
 * write on it (a field, or one added or defined) throws a TypeError, as a write on a record does.
 * Read it while the line that routed it is handled: it changes as later lines arrive (`events`
 * carry snapshots that do not).
 */
export interface ReadonlyChannel {
  /** The spawning tool_use id; null for the main conversation. */
  readonly id: string | null;
  readonly parent: string | null;
  /** Lines arrived for this id before (or without) its spawn call. */
  readonly orphan: boolean;
  readonly depth: number | null;
  readonly agent: string | null;
  readonly description: string | null;
  readonly status: ChannelStatus;
  /** From task_started / the spawn input / the launch result; null while unknown. */
  readonly background: boolean | null;
  readonly summary: string | null;
  readonly lines: number;
  /** The blocks counted so far, as a frozen object made when read. */
  readonly counts: Readonly<Record<CountedBlockType, number>>;
  /** The usage summed so far, frozen: the same object until the next line changes it. */
  readonly usage: Readonly<Record<string, number>>;
  readonly firstSeen: string | null;
  readonly lastSeen: string | null;
  /**
   * When the channel began: its spawn line's time (the `Agent`/`Task` call), else the time of
   * the line that opened it; a line without a timestamp takes the run's latest. Null for main
   * (main runs from the run's first line: see `channelTimes`).
   */
  readonly startedAt: string | null;
  /** When it reported (its tool_result or task notification), as `startedAt`; null while it runs. */
  readonly endedAt: string | null;
  /** The ids it spawned, frozen: the same list until its next spawn. */
  readonly children: readonly string[];
  /** A short tag unique within the run, for labels such as `[Explore·a1b2c3]`. */
  readonly tag: string;
  /** Creation order, for stable listings. */
  readonly seq: number;
  /** Where the channel sits now, frozen (see ChannelPlace). */
  readonly place: ChannelPlace;
}

/** A channel as it was at one moment: what events carry, frozen, never updated. */
export type ChannelSnapshot = Omit<ReadonlyChannel, 'children' | 'place'>;

/**
 * Written out field by field, in the channel's order: a copy made by spreading gets a hidden
 * class of its own, and freezing it another, so every snapshot cost V8 two fresh classes and
 * their descriptor arrays (with 10,000 subagents, 27,500 of each, 8 MB, left for a full
 * collection). Built as literals they share one frozen class.
 */
export function snapshotOf(ch: ReadonlyChannel): ChannelSnapshot {
  const { counts, usage } = ch;
  return Object.freeze({
    id: ch.id,
    parent: ch.parent,
    orphan: ch.orphan,
    depth: ch.depth,
    agent: ch.agent,
    description: ch.description,
    status: ch.status,
    background: ch.background,
    summary: ch.summary,
    lines: ch.lines,
    // A tree's channel hands both out frozen, never to be changed: the snapshot keeps them.
    counts: Object.isFrozen(counts)
      ? counts
      : Object.freeze({
          text: counts.text,
          thinking: counts.thinking,
          tool_use: counts.tool_use,
          tool_result: counts.tool_result,
        }),
    usage: Object.isFrozen(usage) ? usage : frozenCopy(usage),
    firstSeen: ch.firstSeen,
    lastSeen: ch.lastSeen,
    startedAt: ch.startedAt,
    endedAt: ch.endedAt,
    tag: ch.tag,
    seq: ch.seq,
  });
}

function frozenCopy(from: Readonly<Record<string, number>>): Readonly<Record<string, number>> {
  const copy: Record<string, number> = {};
  for (const key in from) copy[key] = from[key];
  return Object.freeze(copy);
}

/** A tree change caused by one line, carrying the channel as it was right after that line. */
export type ChannelEvent =
  /** A channel seen for the first time: from its spawn call, or from a line on an unknown id. */
  | { readonly type: 'open'; readonly channel: ChannelSnapshot }
  /** The spawn call of a channel that was first seen as an orphan: parent and depth now known. */
  | { readonly type: 'spawn'; readonly channel: ChannelSnapshot }
  /** The channel ended (completed, failed or stopped), with the summary that came with this change. */
  | { readonly type: 'status'; readonly channel: ChannelSnapshot; readonly summary: string | null };

/**
 * A `tool_use` block on an assistant line, as the tree counts it (`counts.tool_use`: a string
 * `id` and `name`; a spawn call is one too). One per block seen: a block repeated on another
 * line is another event.
 */
export interface ToolCallEvent {
  readonly type: 'toolCall';
  readonly lineNo: number;
  /** The id of the channel the call is on; null for main. */
  readonly channel: string | null;
  /** The call's `tool_use` id. */
  readonly id: string;
  readonly name: string;
}

/** A `tool_result` block (a string `tool_use_id`), as the tree counts it (`counts.tool_result`). */
export interface ToolResultEvent {
  readonly type: 'toolResult';
  readonly lineNo: number;
  /** The id of the channel the result is on; null for main. */
  readonly channel: string | null;
  /** The `tool_use` id of the call it answers. */
  readonly id: string;
  readonly isError: boolean;
}

export type ToolEvent = ToolCallEvent | ToolResultEvent;

const NO_TOOLS: readonly ToolEvent[] = Object.freeze([]);

/** A leaf's `children` until its first spawn: most channels never spawn one. */
const NO_CHILDREN: readonly string[] = Object.freeze([]);

/**
 * How the tree sets its channels' state: the node's fields are private and it has no method
 * that changes them, so a reader holding the node (a record's `channel`) has nothing to call;
 * these are made inside the class (its static block) and kept in this module.
 */
interface ChannelWriter {
  /** A line on the channel: one more, and its time (null when it has none). */
  line(ch: Channel, ts: string | null): void;
  count(ch: Channel, type: CountedBlockType): void;
  addUsage(ch: Channel, messageId: string, now: Record<string, number>): void;
  /** Seen before (or without) its spawn, or placed by it; when it began, if not known yet. */
  open(ch: Channel, orphan: boolean, startedAt: string | null): void;
  /** Its parent, agent and description (a spawn, task_started): one new place. */
  name(ch: Channel, parent: string | null, agent: string | null, description: string | null): void;
  depth(ch: Channel, depth: number): void;
  addChild(ch: Channel, id: string): void;
  /** The ids it spawned, the tree's own list: read, never kept nor handed out. */
  children(ch: Channel): readonly string[];
  background(ch: Channel, background: boolean): void;
  status(ch: Channel, status: ChannelStatus): void;
  /** It reported: its status, its summary if one came, and when. */
  end(ch: Channel, status: ChannelStatus, summary: string | null, endedAt: string | null): void;
  /** Its skip link in main's tree (see `ChannelTree.isBelow`), set as it joins that tree. */
  skipUp(ch: Channel, to: Channel): void;
  /** Its skip link; null before it joins main's tree, and for main. */
  skipOf(ch: Channel): Channel | null;
}

let write!: ChannelWriter;

/**
 * A channel as the tree keeps it and every reader holds it (see ReadonlyChannel): its state in
 * private fields, read through getters, set only through `write`; the instance and its
 * prototype frozen, so no field can be set, added or shadowed. With the state, privately, the
 * API message whose lines are arriving on it (invisible to readers, copies and JSON). One
 * object per channel, where a map beside the tree held the message: with 10,000 subagents
 * alive to the run's end, each map cost some 50 bytes per channel. Its counts are four numbers,
 * not an object of their own (a frozen one is made when they are read); its usage and
 * children are frozen when read and copied at their next change, so a reader's object never
 * changes under it and a line that changes them copies nothing unless they were read since.
 */
class Channel implements ReadonlyChannel {
  readonly id: string | null;
  readonly tag: string;
  readonly seq: number;
  #orphan = false;
  #status: ChannelStatus = 'running';
  #background: boolean | null = null;
  #summary: string | null = null;
  #lines = 0;
  #text = 0;
  #thinking = 0;
  #toolUse = 0;
  #toolResult = 0;
  #usage: Record<string, number> = {};
  #firstSeen: string | null = null;
  #lastSeen: string | null = null;
  #startedAt: string | null = null;
  #endedAt: string | null = null;
  #children: string[] = NO_CHILDREN as string[];
  #messageId: string | null = null;
  #messageUsage: Record<string, number> | null = null;
  #skipUp: Channel | null = null;
  /**
   * Its parent, depth, agent and description are held here, not in fields of their own: one
   * frozen value, replaced when one of them changes, which a line routed now keeps as it is.
   */
  #place: ChannelPlace;

  constructor(id: string | null, tag: string, seq: number, depth: number | null) {
    this.id = id;
    this.tag = tag;
    this.seq = seq;
    this.#place = Object.freeze({ id, parent: null, depth, agent: null, description: null, tag });
    Object.freeze(this);
  }

  get place(): ChannelPlace {
    return this.#place;
  }
  get parent(): string | null {
    return this.#place.parent;
  }
  get orphan(): boolean {
    return this.#orphan;
  }
  get depth(): number | null {
    return this.#place.depth;
  }
  get agent(): string | null {
    return this.#place.agent;
  }
  get description(): string | null {
    return this.#place.description;
  }
  get status(): ChannelStatus {
    return this.#status;
  }
  get background(): boolean | null {
    return this.#background;
  }
  get summary(): string | null {
    return this.#summary;
  }
  get lines(): number {
    return this.#lines;
  }
  get counts(): Readonly<Record<CountedBlockType, number>> {
    return Object.freeze({
      text: this.#text,
      thinking: this.#thinking,
      tool_use: this.#toolUse,
      tool_result: this.#toolResult,
    });
  }
  get usage(): Readonly<Record<string, number>> {
    return Object.freeze(this.#usage);
  }
  get firstSeen(): string | null {
    return this.#firstSeen;
  }
  get lastSeen(): string | null {
    return this.#lastSeen;
  }
  get startedAt(): string | null {
    return this.#startedAt;
  }
  get endedAt(): string | null {
    return this.#endedAt;
  }
  get children(): readonly string[] {
    return Object.freeze(this.#children);
  }

  /**
   * Every field a reader sees, as a plain object: what `JSON.stringify` writes of a channel (a
   * plugin's log line, a debugger's view). The fields are getters, so a spread (`{ ...channel }`)
   * copies only `id`, `tag` and `seq`; this, or `snapshotOf`, makes a copy.
   */
  toJSON(): ChannelSnapshot & { readonly children: readonly string[]; readonly place: ChannelPlace } {
    return { ...snapshotOf(this), children: this.children, place: this.place };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): object {
    return this.toJSON();
  }

  /** A new place, written out as a literal so that every place shares one hidden class. */
  #moveTo(parent: string | null, depth: number | null, agent: string | null, description: string | null) {
    const { id, tag } = this;
    this.#place = Object.freeze({ id, parent, depth, agent, description, tag });
  }

  /**
   * One API message arrives as consecutive lines, one per block, each repeating the
   * message's usage; the latest line's usage replaces what earlier lines of that message
   * contributed. Only the current message is remembered, so memory does not grow with the
   * length of the run (nor a channel's state with its messages: a message whose lines resume
   * after another's, A, B, A, which no CLI writes, is counted again).
   */
  #addUsage(messageId: string, now: Record<string, number>): void {
    const before = this.#messageId === messageId ? this.#messageUsage : null;
    let usage = this.#usage;
    // Handed to a reader since it last changed: the reader keeps that one, the channel a copy.
    if (Object.isFrozen(usage)) {
      usage = {};
      for (const k in this.#usage) usage[k] = this.#usage[k];
      this.#usage = usage;
    }
    for (const k in now) usage[k] = (usage[k] ?? 0) + now[k] - (before?.[k] ?? 0);
    if (before) for (const k in before) if (!(k in now)) usage[k] -= before[k];
    this.#messageId = messageId;
    this.#messageUsage = now;
  }

  static {
    Object.freeze(this.prototype);
    write = {
      line(ch, ts) {
        ch.#lines++;
        if (ts) {
          ch.#firstSeen ??= ts;
          ch.#lastSeen = ts;
        }
      },
      count(ch, type) {
        switch (type) {
          case 'text':
            ch.#text++;
            break;
          case 'thinking':
            ch.#thinking++;
            break;
          case 'tool_use':
            ch.#toolUse++;
            break;
          case 'tool_result':
            ch.#toolResult++;
        }
      },
      addUsage: (ch, messageId, now) => ch.#addUsage(messageId, now),
      open(ch, orphan, startedAt) {
        ch.#orphan = orphan;
        ch.#startedAt ??= startedAt;
      },
      name(ch, parent, agent, description) {
        const p = ch.#place;
        if (parent !== p.parent || agent !== p.agent || description !== p.description)
          ch.#moveTo(parent, p.depth, agent, description);
      },
      depth(ch, depth) {
        const p = ch.#place;
        if (depth !== p.depth) ch.#moveTo(p.parent, depth, p.agent, p.description);
      },
      addChild(ch, id) {
        // The shared empty list, or a list handed to a reader: the channel goes on with a copy.
        if (Object.isFrozen(ch.#children)) ch.#children = [...ch.#children, id];
        else ch.#children.push(id);
      },
      children: (ch) => ch.#children,
      background(ch, background) {
        ch.#background = background;
      },
      status(ch, status) {
        ch.#status = status;
      },
      end(ch, status, summary, endedAt) {
        ch.#status = status;
        ch.#summary = summary ?? ch.#summary;
        ch.#endedAt = endedAt;
      },
      skipUp(ch, to) {
        ch.#skipUp = to;
      },
      skipOf: (ch) => ch.#skipUp,
    };
  }
}

/**
 * The subagent tree, rebuilt from the stream alone. Plain logic with no I/O: `route()` takes
 * one parsed line and returns the channel it belongs to plus the tree changes it caused.
 */
export class ChannelTree {
  readonly main: ReadonlyChannel;
  readonly #main: Channel;
  private readonly byId = new Map<string, Channel>();
  private readonly tags = new Set<string>();
  /** Next `~n` suffix to try per tag base, so a run of colliding ids costs O(1) each. */
  private readonly tagSuffix = new Map<string, number>();
  /**
   * Which spawn trees channels belong to: main's tree is every channel whose depth is real
   * (see `inMainTree`); the others, orphans and what they spawned, are kept as union-find
   * sets here (a link up, with the size at each root), so these maps hold only channels not
   * yet joined to main. A spawn links an orphan's whole tree under its parent; when the
   * parent is in that same tree the spawn would close a cycle, which this finds without
   * walking the tree.
   */
  private readonly treeLink = new Map<Channel, Channel>();
  private readonly treeSize = new Map<Channel, number>();
  /**
   * Channels whose depth is a guess, not from a spawn chain to main: task_started's
   * spawn_depth, and what a channel spawned under such a guess took from it.
   */
  private readonly guessedDepth = new Set<Channel>();
  /**
   * Tool calls other than spawns, by id, with the channel that made them: a line whose
   * `parent_tool_use_id` names one (Claude Code's `tool_progress` heartbeat of a long Bash
   * call) belongs to that channel, not to a subagent. A call is forgotten at its result, but
   * one run in the background (`run_in_background`), whose result comes as it starts, is kept;
   * at most the latest MAX_CALLS_REMEMBERED.
   */
  private readonly calls = new Map<string, { channel: Channel; background: boolean }>();
  /**
   * Reports that came before their channel, by id: a task_notification, or a tool_result that
   * answers no call the tree knows, on an id no line has opened yet (a spawn line forwarded
   * late). The channel ends with them as it opens, at its spawn or its first line. At most the
   * latest MAX_ENDS_BEFORE_SPAWN ids, and MAX_END_CHARS_BEFORE_SPAWN characters of ids and
   * summaries besides the newest's: an id that never opens is forgotten, oldest first.
   */
  private readonly endsBeforeSpawn = new Map<string, EndsBeforeSpawn>();
  private endsBeforeSpawnChars = 0;
  private seq = 0;
  sessionId: string | null = null;
  /** The run's identity: the first `uuid` a line carries (see `runIdOf`); null until one does. */
  runId: string | null = null;
  version: string | null = null;
  /** The run's first and latest line time (arrival order): main's span; the time of a line without one. */
  firstTime: string | null = null;
  lastTime: string | null = null;
  /** How many `result` lines the run had; only the last one closes it. */
  results = 0;
  /** Spawn calls ignored because they would have closed a cycle (see `spawn`). */
  spawnCycles = 0;
  /** The first such spawn, for the warning. */
  firstCycle: { id: string; on: string | null } | null = null;
  /**
   * Spawn calls on an id that already has its place, with another parent or description (a
   * replayed spawn line has neither): the id keeps its first spawn's channel (see `spawn`).
   */
  spawnRepeats = 0;
  /** The first such spawn, for the warning: the id, and the description each spawn gave it. */
  firstRepeat: { id: string; first: string | null; again: string | null } | null = null;
  /** `system/init` lines naming a session other than the one before (two runs in one stream). */
  sessionChanges = 0;
  /** The first such change, for the warning. */
  firstSessionChange: { from: string; to: string } | null = null;

  constructor() {
    this.#main = this.newChannel(null);
    this.main = this.#main;
  }

  get(id: string | null): ReadonlyChannel | undefined {
    return id === null ? this.main : this.byId.get(id);
  }

  /** Every channel, main first, then in creation order. */
  channels(): ReadonlyChannel[] {
    return [this.main, ...this.byId.values()];
  }

  get size(): number {
    return this.byId.size + 1;
  }

  /** The tool calls and results of the line being routed (none: null, no list made). */
  private lineTools: ToolEvent[] | null = null;
  private lineNo = 0;

  /**
   * Routes one line (`lineNo` names it in its tool events): its channel, the tree changes it
   * caused, and the tool calls and results on it (one shared empty list for most lines).
   */
  route(
    value: JsonObject,
    lineNo = 0,
  ): { channel: ReadonlyChannel; events: readonly ChannelEvent[]; tools: readonly ToolEvent[] } {
    const pending: PendingEvent[] = [];
    this.lineTools = null;
    this.lineNo = lineNo;
    const ts = nonEmpty(value.timestamp);
    if (ts) {
      this.firstTime ??= ts;
      this.lastTime = ts;
    }
    const channel = this.channelFor(channelIdOf(value), pending);
    write.line(channel, ts);
    this.runId ??= runIdOf(value);
    const line = asStreamLine(value);
    switch (line?.type) {
      case 'assistant':
        this.assistant(line, channel, pending);
        break;
      case 'user':
        this.user(line, channel, pending);
        break;
      case 'system':
        this.system(line, pending);
        break;
      case 'result':
        this.results++;
        write.status(this.#main, line.is_error === true ? 'failed' : 'completed');
        break;
    }
    // Snapshots are taken once the whole line is applied, so an event shows its line's effect.
    // Frozen, list and events: the same objects reach every sink and every events loop.
    const events = pending.map((ev): ChannelEvent =>
      Object.freeze(
        ev.type === 'status'
          ? { type: 'status', channel: snapshotOf(ev.channel), summary: ev.summary }
          : { type: ev.type, channel: snapshotOf(ev.channel) },
      ),
    );
    const tools = this.lineTools === null ? NO_TOOLS : Object.freeze(this.lineTools);
    this.lineTools = null;
    return { channel, events: Object.freeze(events), tools };
  }

  /** A tool call or result seen on the line being routed. */
  private tool(block: ToolUseBlock | ToolResultBlock, channel: ReadonlyChannel): void {
    const lineNo = this.lineNo;
    const on = channel.id;
    const event: ToolEvent =
      block.type === 'tool_use'
        ? { type: 'toolCall', lineNo, channel: on, id: block.id, name: block.name }
        : {
            type: 'toolResult',
            lineNo,
            channel: on,
            id: block.tool_use_id,
            isError: block.is_error === true,
          };
    (this.lineTools ??= []).push(Object.freeze(event));
  }

  private newChannel(id: string | null): Channel {
    // Main is at depth 0 from the start; a subagent's depth is unknown until its spawn.
    if (id === null) return new Channel(null, 'main', this.seq++, 0);
    return new Channel(id, this.uniqueTag(id), this.seq++, null);
  }

  /**
   * A tag is a piece of the id that tells it apart, so `agents/*<tag>*` finds its files.
   * Claude's `toolu_01…` ids (and Bedrock's or Vertex's `toolu_bdrk_01…`) are random after
   * that start: take 6 characters from there, up to 12 while the shorter ones are taken.
   * Other producers' ids share a long start (Gemini's `invoke_agent__invoke_agent_<ms>_<n>`,
   * Codex's time-ordered UUIDs) and differ at the end: an id of up to 12 characters is its own
   * tag (`call_10`), a longer one gives its last 6 characters, up to 12. When every length is
   * taken, the 6-character piece with a `~n` suffix. Bounded work per id, however many ids
   * share a long prefix or suffix.
   */
  private uniqueTag(id: string): string {
    const claude = CLAUDE_ID_START.exec(id);
    const body = claude === null ? id : id.slice(claude[0].length) || id;
    const fromEnd = claude === null && body.length > TAG_MAX_CHARS;
    const piece = (n: number): string => (fromEnd ? body.slice(body.length - n) : body.slice(0, n));
    const shortest = claude === null && !fromEnd ? body.length : Math.min(6, body.length);
    for (let n = shortest; n <= Math.min(TAG_MAX_CHARS, body.length); n++) {
      const tag = piece(n);
      if (!this.tags.has(tag)) {
        this.tags.add(tag);
        return tag;
      }
    }
    const base = piece(Math.min(6, body.length));
    let i = this.tagSuffix.get(base) ?? 2;
    while (this.tags.has(`${base}~${i}`)) i++;
    this.tagSuffix.set(base, i + 1);
    const tag = `${base}~${i}`;
    this.tags.add(tag);
    return tag;
  }

  private channelFor(id: string | null, pending: PendingEvent[]): Channel {
    if (id === null) return this.#main;
    let ch = this.byId.get(id);
    if (!ch) {
      const caller = this.calls.get(id);
      if (caller) return caller.channel;
      ch = this.newChannel(id);
      write.open(ch, true, this.lastTime);
      this.byId.set(id, ch);
      pending.push({ type: 'open', channel: ch });
      this.endKept(ch, pending);
    }
    return ch;
  }

  private spawn(block: ToolUseBlock, parent: Channel, pending: PendingEvent[]): void {
    const id = nonEmpty(block.id);
    if (!id) return;
    const input: JsonObject = isObject(block.input) ? block.input : {};
    let ch = this.byId.get(id);
    const known = ch !== undefined;
    // Claude Code never spawns a channel on its own channel or below it; such a stream would
    // make the tree a cycle. The spawn is ignored: the channel stays where it is (an orphan:
    // depth null, or task_started's spawn_depth) and the tree stays a tree every walk can trust.
    if (ch && !ch.orphan) {
      // Spawned again (a replayed spawn line, or a second parent): its first place is kept.
      if (id === parent.id || this.isBelow(parent, ch)) this.spawnCycle(id, parent);
      else this.spawnAgain(ch, parent, nonEmpty(input.description));
      return;
    }
    if (id === parent.id || (ch && this.treeOf(ch) === this.treeOf(parent))) {
      this.spawnCycle(id, parent);
      return;
    }
    if (!ch) {
      ch = this.newChannel(id);
      this.byId.set(id, ch);
    }
    write.open(ch, false, this.lastTime);
    const agent = agentName(input.subagent_type) ?? ch.agent;
    write.name(ch, parent.id, agent, nonEmpty(input.description) ?? ch.description);
    write.addChild(parent, id);
    const underMain = this.inMainTree(parent);
    if (!underMain) this.joinTrees(ch, parent);
    if (typeof input.run_in_background === 'boolean' && ch.background === null) {
      write.background(ch, input.run_in_background);
    }
    if (parent.depth !== null) this.setDepth(ch, parent.depth + 1, underMain);
    pending.push({ type: known ? 'spawn' : 'open', channel: ch });
    if (!known) this.endKept(ch, pending);
  }

  /** A spawn of `ch`, which has its place, by `parent`: counted when it is not a replay. */
  private spawnAgain(ch: Channel, parent: Channel, description: string | null): void {
    if (parent.id === ch.parent && (description === null || description === ch.description)) return;
    this.spawnRepeats++;
    this.firstRepeat ??= { id: ch.id!, first: ch.description, again: description };
  }

  private spawnCycle(id: string, parent: Channel): void {
    this.spawnCycles++;
    this.firstCycle ??= { id, on: parent.id };
  }

  /** The channel `ch` was spawned by: main for one spawned by main (not for an orphan). */
  private parentOf(ch: Channel): Channel | undefined {
    return ch.orphan ? undefined : ch.parent === null ? this.#main : this.byId.get(ch.parent);
  }

  /**
   * Whether `ch` descends from `root`, a channel that has a parent. In main's tree, by the
   * skip links: each channel there holds an ancestor to skip up to (main for depth 1), and the
   * links of a path skip 1, 1, 3, 1, 1, 3, 7… levels (as a skew-binary number counts), so this
   * takes O(log depth) steps at any depth. Elsewhere (a tree whose spawn to main was not seen
   * yet) by climbing parent links, at most CYCLE_CLIMB_LINKS of them, so a stream of such spawns
   * costs bounded time.
   */
  private isBelow(ch: Channel, root: Channel): boolean {
    if (this.inMainTree(root)) {
      if (!this.inMainTree(ch)) return false;
      const depth = root.depth!;
      let at = ch;
      while (at.depth! > depth) {
        const skip = write.skipOf(at)!;
        at = skip.depth! >= depth ? skip : this.parentOf(at)!;
      }
      return at === root;
    }
    if (this.treeOf(ch) !== this.treeOf(root)) return false;
    let at: Channel | undefined = ch;
    for (let links = 0; at && at !== root && links < CYCLE_CLIMB_LINKS; links++) at = this.parentOf(at);
    return at === root;
  }

  /** Sets the skip link of `ch`, just joined to main's tree, whose parent has its own. */
  private linkSkip(ch: Channel): void {
    const up = this.parentOf(ch)!;
    const upSkip = write.skipOf(up) ?? up;
    const upSkip2 = write.skipOf(upSkip) ?? upSkip;
    const even = up.depth! - upSkip.depth! === upSkip.depth! - upSkip2.depth!;
    write.skipUp(ch, even ? upSkip2 : up);
  }

  /**
   * Gives `root` a depth and flows it down to its descendants. Under main the depth is the
   * real one and replaces whatever a channel had (a spawn_depth guess); elsewhere it is a
   * guess from task_started and only fills depths still unknown. A channel's depth is thus set
   * at most twice (unknown → guess → real) and the walk stops at channels already set, so a
   * chain arriving children-first costs linear time. A loop over an explicit stack: the
   * stream chooses how deep the tree is. The tree has no cycle (see `spawn`).
   */
  private setDepth(root: Channel, depth: number, real: boolean): void {
    const stack: Array<[Channel, number]> = [[root, depth]];
    while (stack.length > 0) {
      const [ch, d] = stack.pop()!;
      if (real ? this.inMainTree(ch) : ch.depth !== null) continue;
      if (real) {
        // Joined to main's tree, with all of its own: it leaves the sets kept for the others.
        this.guessedDepth.delete(ch);
        this.treeLink.delete(ch);
        this.treeSize.delete(ch);
        write.depth(ch, d);
        this.linkSkip(ch);
      } else {
        this.guessedDepth.add(ch);
        write.depth(ch, d);
      }
      for (const childId of write.children(ch)) {
        const child = this.byId.get(childId);
        if (child) stack.push([child, d + 1]);
      }
    }
  }

  /** Whether `ch` hangs below main by spawns: its depth is known and not a guess. */
  private inMainTree(ch: Channel): boolean {
    return ch.depth !== null && !this.guessedDepth.has(ch);
  }

  /** Main for a channel in its tree, else the root of `ch`'s set, shortening the links it walked. */
  private treeOf(ch: Channel): Channel {
    if (this.inMainTree(ch)) return this.#main;
    let root = ch;
    for (let up = this.treeLink.get(root); up; up = this.treeLink.get(root)) root = up;
    for (let at = ch; at !== root;) {
      const up = this.treeLink.get(at)!;
      this.treeLink.set(at, root);
      at = up;
    }
    return root;
  }

  private joinTrees(a: Channel, b: Channel): void {
    const ra = this.treeOf(a);
    const rb = this.treeOf(b);
    if (ra === rb) return;
    const sa = this.treeSize.get(ra) ?? 1;
    const sb = this.treeSize.get(rb) ?? 1;
    const [small, big] = sa < sb ? [ra, rb] : [rb, ra];
    this.treeLink.set(small, big);
    this.treeSize.set(big, sa + sb);
    this.treeSize.delete(small);
  }

  private assistant(line: AssistantLine, channel: Channel, pending: PendingEvent[]): void {
    for (const block of contentBlocks(line as unknown as JsonObject)) {
      if (block.type === 'redacted_thinking') continue;
      write.count(channel, block.type);
      if (block.type === 'tool_result') this.tool(block, channel);
      if (block.type !== 'tool_use') continue;
      this.tool(block, channel);
      if (SPAWN_TOOLS.has(block.name)) this.spawn(block, channel, pending);
      else this.call(block, channel);
    }
    const key = nonEmpty(line.message.id);
    // A message Claude Code wrote itself is no API call: its usage counts nowhere, as in the ledger.
    if (key && isObject(line.message.usage) && !isSyntheticMessage(line.message as unknown as JsonObject))
      write.addUsage(channel, key, usageNumbers(line.message.usage));
  }

  /** Remembers a non-spawn call's channel (see `calls`); an id no real CLI makes is not kept. */
  private call(block: ToolUseBlock, channel: Channel): void {
    const id = nonEmpty(block.id);
    if (!id || id.length > MAX_CALL_ID_CHARS || this.byId.has(id)) return;
    const background = isObject(block.input) && block.input.run_in_background === true;
    rememberLatest(this.calls, id, { channel, background }, MAX_CALLS_REMEMBERED);
  }

  private user(line: UserLine, channel: Channel, pending: PendingEvent[]): void {
    for (const block of contentBlocks(line as unknown as JsonObject)) {
      if (block.type !== 'tool_result') continue;
      write.count(channel, 'tool_result');
      this.tool(block, channel);
      const call = this.calls.get(block.tool_use_id);
      if (call?.background === false) this.calls.delete(block.tool_use_id);
      const target = this.byId.get(block.tool_use_id);
      if (!target && !call) this.resultBeforeSpawn(block);
      if (!target || target.status !== 'running') continue;
      const text = resultText(block);
      if (ASYNC_LAUNCH.test(text)) {
        write.background(target, true);
        continue;
      }
      if (target.background === true) continue;
      this.end(target, block.is_error === true ? 'failed' : 'completed', text, pending);
    }
  }

  private system(line: SystemLine, pending: PendingEvent[]): void {
    switch (line.subtype) {
      case 'init': {
        const session = nonEmpty(line.session_id);
        if (session !== null && this.sessionId !== null && session !== this.sessionId) {
          this.sessionChanges++;
          this.firstSessionChange ??= { from: this.sessionId, to: session };
        }
        this.sessionId = session ?? this.sessionId;
        this.version = nonEmpty(line.claude_code_version) ?? this.version;
        if (this.main.status !== 'running') write.status(this.#main, 'running');
        return;
      }
      case 'task_started': {
        // A foreground or background shell command is a task too, never an agent.
        if (line.task_type === LOCAL_BASH) return;
        const ch = this.byId.get(nonEmpty(line.tool_use_id) ?? '');
        if (!ch) return;
        if (typeof line.is_backgrounded === 'boolean') write.background(ch, line.is_backgrounded);
        const agent = ch.agent ?? agentName(line.subagent_type);
        write.name(ch, ch.parent, agent, ch.description ?? nonEmpty(line.description));
        if (ch.depth === null && isDepth(line.spawn_depth)) this.setDepth(ch, line.spawn_depth, false);
        return;
      }
      case 'task_notification': {
        const id = nonEmpty(line.tool_use_id);
        if (id === null || !NOTIFIED_ENDS.has(line.status)) return;
        const status = line.status as ChannelStatus;
        const ch = this.byId.get(id);
        if (ch) this.end(ch, status, nonEmpty(line.summary), pending, true);
        // A shell command's task names its call, which the tree knows: no subagent's end.
        else if (!this.calls.has(id)) this.noticeBeforeSpawn(id, status, nonEmpty(line.summary));
      }
    }
  }

  private end(
    ch: Channel,
    status: ChannelStatus,
    summary: string | null,
    pending: PendingEvent[],
    final = false,
    endedAt = this.lastTime,
  ): void {
    if (ch.status !== 'running' && !final) return;
    // A repeated notification that brings no summary the channel lacks changes nothing.
    if (ch.status === status && (ch.summary !== null || summary === null)) return;
    // Main's end is the run's latest line (see `channelTimes`), never a time of its own.
    write.end(ch, status, summary, ch.id !== null ? endedAt : null);
    pending.push({ type: 'status', channel: ch, summary });
  }

  /**
   * A tool_result on an id with no channel and no call: the report of a subagent whose spawn
   * has not come yet. Kept as the first end of its id (a later result could not end the
   * channel, which would no longer be running); a launch ends nothing.
   */
  private resultBeforeSpawn(block: ToolResultBlock): void {
    const id = nonEmpty(block.tool_use_id);
    if (!id || id.length > MAX_CALL_ID_CHARS || this.endsBeforeSpawn.has(id)) return;
    const text = resultText(block);
    if (ASYNC_LAUNCH.test(text)) return;
    const status: ChannelStatus = block.is_error === true ? 'failed' : 'completed';
    const result: KeptEnd = { status, summary: text, at: this.lastTime };
    this.keepEnds(id, { result, notice: null, chars: id.length + text.length });
  }

  /** A task_notification on an id with no channel: merged as `end` would merge it on one. */
  private noticeBeforeSpawn(id: string, status: ChannelStatus, summary: string | null): void {
    if (id.length > MAX_CALL_ID_CHARS) return;
    const kept = this.endsBeforeSpawn.get(id);
    const before = kept?.notice ?? null;
    if (before && before.status === status && (before.summary !== null || summary === null)) return;
    const notice = { status, summary: summary ?? before?.summary ?? null, at: this.lastTime };
    const result = kept?.result ?? null;
    const chars = id.length + (result?.summary?.length ?? 0) + (notice.summary?.length ?? 0);
    this.keepEnds(id, { result, notice, chars });
  }

  /** Keeps `ends` as the newest, forgetting the oldest past either bound (never the newest). */
  private keepEnds(id: string, ends: EndsBeforeSpawn): void {
    this.forgetEnds(id);
    this.endsBeforeSpawn.set(id, ends);
    this.endsBeforeSpawnChars += ends.chars;
    for (const oldest of this.endsBeforeSpawn.keys()) {
      const within = this.endsBeforeSpawn.size <= MAX_ENDS_BEFORE_SPAWN &&
        this.endsBeforeSpawnChars <= MAX_END_CHARS_BEFORE_SPAWN;
      if (within || oldest === id) return;
      this.forgetEnds(oldest);
    }
  }

  private forgetEnds(id: string): EndsBeforeSpawn | undefined {
    const ends = this.endsBeforeSpawn.get(id);
    if (ends === undefined) return undefined;
    this.endsBeforeSpawn.delete(id);
    this.endsBeforeSpawnChars -= ends.chars;
    return ends;
  }

  /**
   * A channel just opened ends with the reports its id had before, as if they came after it:
   * its result first (unless its spawn runs in the background), then its notification, each
   * at its own time.
   */
  private endKept(ch: Channel, pending: PendingEvent[]): void {
    const ends = this.forgetEnds(ch.id!);
    if (ends === undefined) return;
    const { result, notice } = ends;
    if (result && ch.background !== true)
      this.end(ch, result.status, result.summary, pending, false, result.at);
    if (notice) this.end(ch, notice.status, notice.summary, pending, true, notice.at);
  }
}

/** A report kept for a channel not opened yet: its status, summary and time. */
interface KeptEnd {
  readonly status: ChannelStatus;
  readonly summary: string | null;
  readonly at: string | null;
}

/** What an id's reports before its channel add up to, and the characters they hold. */
interface EndsBeforeSpawn {
  readonly result: KeptEnd | null;
  readonly notice: KeptEnd | null;
  readonly chars: number;
}

/**
 * How far up a spawn's parent is followed, in a tree not yet under main, to tell whether the
 * spawn closes a cycle (see `isBelow`): a deeper one is ignored as a second parent's spawn is.
 */
export const CYCLE_CLIMB_LINKS = 1_000;
/** How many non-spawn tool calls the tree remembers the channel of (the latest). */
export const MAX_CALLS_REMEMBERED = 10_000;
/** How many ids the tree keeps reports for that came before their channel (the latest). */
export const MAX_ENDS_BEFORE_SPAWN = 1_000;
/** The characters of those ids and summaries kept at most, besides the newest's. */
export const MAX_END_CHARS_BEFORE_SPAWN = 1_000_000;
/** Longest call id remembered: real ids are about 30 characters; a huge one must not be held 10,000 times. */
const MAX_CALL_ID_CHARS = 256;
/** `task_started`'s `task_type` for a shell command (Claude Code's Bash), not a subagent. */
const LOCAL_BASH = 'local_bash';

/** A channel's time span as index.json and every view show it. */
export interface ChannelTimes {
  startedAt: string | null;
  endedAt: string | null;
  /** endedAt − startedAt; null when either is unknown or not a date, or the end is the earlier. */
  elapsedMs: number | null;
}

/** What a channel's span is made of (a ReadonlyChannel's fields, or a copy of them). */
export interface ChannelSpan {
  id: string | null;
  status: string;
  firstSeen: string | null;
  lastSeen: string | null;
  startedAt?: string | null;
  endedAt?: string | null;
}

/**
 * A channel's span: a subagent's from its spawn to its report, or to the run's latest line
 * while it runs; main's from the run's first line to its latest. Times the stream did not
 * give fall back to the channel's own first and last line.
 */
export function channelTimes(
  tree: Pick<ChannelTree, 'firstTime' | 'lastTime'>,
  ch: ChannelSpan,
): ChannelTimes {
  const main = ch.id === null;
  const startedAt = (main ? tree.firstTime : ch.startedAt) ?? ch.firstSeen;
  const endedAt = (main || ch.status === 'running' ? tree.lastTime : ch.endedAt) ?? ch.lastSeen;
  return { startedAt, endedAt, elapsedMs: elapsedBetween(startedAt, endedAt) };
}

/** Milliseconds from one ISO time to another; null when either is missing or the end is the earlier. */
export function elapsedBetween(from: string | null, to: string | null): number | null {
  if (from === null || to === null) return null;
  const ms = Date.parse(to) - Date.parse(from);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

/** Longest label tag tried before a `~n` suffix. */
const TAG_MAX_CHARS = 12;
/** The start of a Claude tool-use id, before its random part: `toolu_`, `toolu_bdrk_`, then `01`. */
const CLAUDE_ID_START = /^toolu_(?:[a-z]{2,8}_)?(?:01)?/;

/** A depth a stream may claim: a whole number from 1 (main is 0) to a bound no real tree reaches. */
const isDepth = (v: unknown): v is number =>
  Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= 1_000_000;

/** An event while its line is being applied: the live channel, snapshotted at the end. */
type PendingEvent =
  { type: 'open' | 'spawn'; channel: Channel } | { type: 'status'; channel: Channel; summary: string | null };
