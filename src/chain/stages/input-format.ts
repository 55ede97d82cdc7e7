import type { Transform } from 'node:stream';
import { CodexMapper, isCodexEvent } from '../../adapters/codex.js';
import { CopilotMapper, isCopilotEvent } from '../../adapters/copilot.js';
import { GeminiMapper, isGeminiEvent } from '../../adapters/gemini.js';
import { isProtocolEvent, LangGraphMapper, LANGGRAPH_DEFAULTS } from '../../adapters/langgraph.js';
import { isOpencodeEvent, OpencodeMapper } from '../../adapters/opencode.js';
import { RunIdReader } from '../../adapters/run-id.js';
import { eventLine, shareRepeatedText, type StreamMapper } from '../../adapters/stream-lines.js';
import { jsonText } from '../../model/json-text.js';
import { channelIdOf, lineTypeOf, type JsonObject } from '../../model/message.js';
import { viewOf } from '../../model/line-view.js';
import type { LineRecord, RecordBatch, SpooledRecord, SubteeRecord } from '../../model/record.js';
import {
  AGENT_NAMES,
  agentNameOf,
  requireSession,
  type AgentProducer,
  type Producer,
  type Session,
  type TranscriptKinds,
} from '../../model/session.js';
import { createBatchTransform } from '../batch-transform.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';

export const INPUT_FORMATS = [
  'auto',
  'claude',
  'langgraph',
  'copilot',
  'codex',
  'gemini',
  'opencode',
] as const;
export type InputFormat = (typeof INPUT_FORMATS)[number];

/** The coding agents whose events are mapped one by one, their bytes kept in the channel files. */
export const AGENT_PRODUCERS = Object.freeze(Object.keys(AGENT_NAMES) as AgentProducer[]);

const isAgentProducer = (p: Producer | null): p is AgentProducer => agentNameOf(p) !== null;

/**
 * A mapper for a coding agent's stream; `onWarning` hears what it had to cut (a run's
 * warnings; a report reading the files back passes none).
 */
export function createAgentMapper(
  producer: AgentProducer,
  onWarning?: (code: string, message: string) => void,
): StreamMapper {
  switch (producer) {
    case 'copilot':
      return new CopilotMapper();
    case 'codex':
      return new CodexMapper();
    case 'gemini':
      return new GeminiMapper({ onWarning });
    case 'opencode':
      return new OpencodeMapper();
  }
}

export const INPUT_FORMAT_DEFAULTS = Object.freeze({
  format: 'auto' as InputFormat,
  spawnTools: LANGGRAPH_DEFAULTS.spawnTools,
});

export interface InputFormatOptions {
  /** `auto` decides from the first JSON object line. */
  format?: InputFormat;
  /** LangGraph: the tools whose calls start subagents (Deep Agents' `task`). */
  spawnTools?: readonly string[];
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

/**
 * How a channel's `.jsonl` of a coding agent's run reads back (for the report built from an
 * output folder): each event through a fresh mapper of that producer, keeping the lines that
 * belong to the channel. Null for producers whose files hold stream-json lines.
 */
export function channelReaderFor(
  producer: string,
): ((event: JsonObject, channel: string | null, eventBytes?: number) => JsonObject[]) | null {
  if (!isAgentProducer(producer as Producer)) return null;
  const mapper = createAgentMapper(producer as AgentProducer);
  return (event, channel, eventBytes = 0) =>
    shareRepeatedText(mapper.map(event).lines, eventBytes).filter((line) => channelIdOf(line) === channel);
}

/**
 * How main's `.jsonl` of a LangGraph run reads back (for the report built from an output
 * folder): it holds the run's protocol events in order, each mapped through one mapper onto
 * the lines of every channel; a line that is no protocol event (null) is main's own. Null for
 * other producers.
 */
export function runReaderFor(
  producer: string,
): ((event: JsonObject, eventBytes: number) => JsonObject[] | null) | null {
  if (producer !== 'langgraph') return null;
  const mapper = new LangGraphMapper({ spawnTools: INPUT_FORMAT_DEFAULTS.spawnTools });
  return (event, eventBytes) =>
    isProtocolEvent(event) ? shareRepeatedText(mapper.map(event), eventBytes) : null;
}

/**
 * Who wrote a line: a LangGraph protocol event (`method` and `params.namespace`), a Copilot
 * CLI session event (`session.…`/`assistant.…` types with `data`), a Codex event
 * (`thread.started`, `turn.…`, `item.…`), a Gemini CLI event (`init`, `message`… with an ISO
 * `timestamp`), an opencode event (`sessionID` and `part`), or anything else, read as Claude
 * Code stream-json (the Agent SDK's messages are the same).
 */
export function detectProducer(value: JsonObject): Producer {
  if (isProtocolEvent(value)) return 'langgraph';
  if (isCopilotEvent(value)) return 'copilot';
  if (isCodexEvent(value)) return 'codex';
  if (isOpencodeEvent(value)) return 'opencode';
  if (isGeminiEvent(value)) return 'gemini';
  return 'claude';
}

/**
 * Input format: record batches in, record batches out. Claude Code stream-json passes
 * through untouched. A LangGraph protocol event keeps its bytes in main's `.jsonl` (see
 * `keepProtocolEvent`); the stream-json-shaped lines it maps to (see `LangGraphMapper`; none
 * for events that carry nothing a transcript shows, as checkpoints and state values) are
 * routed and shown, never written. What was decided is `session.producer` (`producer` in
 * index.json).
 */
export function createInputFormat(options: InputFormatOptions): Transform {
  const format = options.format ?? INPUT_FORMAT_DEFAULTS.format;
  const run = requireSession(options, 'createInputFormat');
  const mapper = new LangGraphMapper({
    spawnTools: options.spawnTools ?? INPUT_FORMAT_DEFAULTS.spawnTools,
    onWarning: (code, message) => run.warn(code, message),
  });
  // One reader per coding agent the run was read as, kept when `auto` turns to another
  // producer: a stray line read as another producer costs that line, and the lines after it
  // go on where the mapper left off (its tree state and the version its stream stated).
  const agents = new Map<AgentProducer, AgentEvents>();
  let agent: AgentEvents | null = null;
  const decided = (producer: Producer) => {
    agent?.detach();
    agent = null;
    if (!isAgentProducer(producer)) return run.stateProducer(producer);
    agent = agents.get(producer) ?? null;
    if (agent) agent.attach();
    else agents.set(producer, (agent = new AgentEvents(run, producer)));
  };
  const detector = new ProducerDetector(format === 'auto' ? null : format);
  if (format !== 'auto') decided(format);
  let lastLineNo = 0;
  const handle = (rec: SubteeRecord, out: RecordBatch) => {
    if (agent) return agent.push(rec, out);
    if (run.producer !== 'langgraph') return void out.push(rec);
    lastLineNo = rec.lineNo;
    // Quarantined bytes, and objects that are not protocol events, go on as they are.
    if (rec.kind !== 'line' || !isProtocolEvent(rec.value)) out.push(rec);
    else keepProtocolEvent(rec, mapper, out);
  };
  return createBatchTransform({
    transformBatch(batch: RecordBatch) {
      const out: RecordBatch = [];
      for (const rec of batch) {
        // Parsed while undecided (a view leaves unknown kinds' members unbuilt), as a mapped
        // producer's lines are anyway; a Claude line once decided is asked through its view.
        const cheap = detector.final && run.producer === 'claude';
        const value =
          rec.kind === 'line' ? (cheap ? viewOf(rec) : rec.value) : rec.kind === 'spooled' ? rec.value : null;
        if (value && detector.watching) {
          const seen = detector.observe(value, rec.lineNo);
          if (seen.producer !== run.producer) decided(seen.producer);
          if (seen.warning) run.warn(seen.warning.code, seen.warning.message, seen.warning.subject);
        }
        handle(rec, out);
      }
      return out.length > 0 ? out : undefined;
    },
    flushAtEnd() {
      const out: RecordBatch = [];
      const last = detector.atEnd();
      if (last) {
        decided(last.producer);
        run.warn(last.warning.code, last.warning.message, last.warning.subject);
      }
      if (agent) agent.end(out);
      else if (run.producer === 'langgraph')
        for (const line of shareRepeatedText(mapper.end(), 0)) out.push(derivedRecord(lastLineNo, line));
      return out.length > 0 ? out : undefined;
    },
  });
}

/** The shape of each producer's events, in the order `detectProducer` asks. */
const PRODUCER_SHAPES: ReadonlyArray<readonly [Producer, (value: JsonObject) => boolean]> = [
  ['langgraph', isProtocolEvent],
  // Copilot's last line, its `result`, has no `data`: it has a `sessionId` and an `exitCode`.
  ['copilot', (v) => isCopilotEvent(v) || (v.type === 'result' && typeof v.sessionId === 'string')],
  ['codex', isCodexEvent],
  ['opencode', isOpencodeEvent],
  ['gemini', isGeminiEvent],
  ['claude', (value) => lineTypeOf(value) !== null],
];
const SHAPE_OF = new Map(PRODUCER_SHAPES);

/** Which producers could have written a line, by the shapes of their events (see `detectProducer`). */
function producersFitting(value: JsonObject): Producer[] {
  return PRODUCER_SHAPES.filter(([, fits]) => fits(value)).map(([p]) => p);
}

/** Lines that fit one producer alone that `auto` waits for before its choice is final. */
const LINES_TO_DECIDE = 8;
/** Changes `auto` makes before its choice is final whatever comes: two stray lines, there and back. */
const MAX_CHANGES = 4;

/** What `ProducerDetector.observe` says to tell: a warning, its code and (for each change) its line. */
export interface DetectorWarning {
  code: 'INPUT_FORMAT_CHANGED' | 'INPUT_FORMAT_MISMATCH';
  message: string;
  subject?: string;
}

/**
 * `--input-format auto`, decided from more than one line: the first JSON line names a
 * producer at once (so nothing waits), but the choice stays open until `LINES_TO_DECIDE`
 * lines in a row fit it and no other producer. Until then a line that does not fit the choice
 * and fits another changes it (INPUT_FORMAT_CHANGED, told for each change, both ways): a stray
 * first line (an `npm warn` printed as a Gemini-like `error` event before a Claude stream), or
 * a stray line among the first, costs that line, not the run: the input-format stage keeps
 * each producer's reader, so the lines after a stray one go on where they left off. After
 * `MAX_CHANGES` changes the choice is final. Once final, or when the format was given, the
 * first line that fits another producer and not the chosen one is told once
 * (INPUT_FORMAT_MISMATCH); then lines are no longer looked at.
 */
export class ProducerDetector {
  private producer: Producer | null;
  /** The format was given (`--input-format`), not decided from the lines. */
  private readonly given: boolean;
  /** The choice will not change: a line that does not fit it is only told. */
  final: boolean;
  private since = 0;
  private support = 0;
  private changes = 0;
  /** The producers read before, each with the last line read as it. */
  private readonly left = new Map<Producer, number>();
  private lastLineNo = 0;
  /** How many lines were read as each producer while the choice was open. */
  private readonly linesAs = new Map<Producer, number>();
  watching = true;

  constructor(given: Producer | null) {
    this.producer = given;
    this.given = given !== null;
    this.final = given !== null;
  }

  observe(value: JsonObject, lineNo: number): { producer: Producer; warning: DetectorWarning | null } {
    // Once final, a line that fits the choice is all there is to know (the usual case, quickly).
    if (this.final && SHAPE_OF.get(this.producer!)!(value))
      return { producer: this.producer!, warning: null };
    const fits = producersFitting(value);
    let warning: DetectorWarning | null = null;
    if (this.producer === null) {
      this.producer = detectProducer(value);
      this.since = lineNo;
    } else if (fits.length > 0 && !fits.includes(this.producer)) {
      if (!this.final && this.changes >= MAX_CHANGES) this.final = true;
      if (this.final) {
        this.watching = false;
        // Someone who gave the format is told which one the line fits, not to give one.
        const hint = this.given
          ? `, as --input-format ${this.producer} says; if the input is ${fits[0]}'s, pass ` +
            `--input-format ${fits[0]} or leave the option out`
          : (this.changes >= MAX_CHANGES ? ` (the input changed producer ${this.changes} times)` : '') +
            '; pass --input-format to choose';
        warning = {
          code: 'INPUT_FORMAT_MISMATCH',
          message:
            `line ${lineNo} looks like a ${fits[0]} event, not ${this.producer}: it was read as ` +
            `${this.producer}${hint}`,
        };
        return { producer: this.producer, warning };
      }
      warning = this.change(fits[0], lineNo);
    }
    this.lastLineNo = lineNo;
    if (!this.final) this.linesAs.set(this.producer, (this.linesAs.get(this.producer) ?? 0) + 1);
    if (!this.final && fits.length === 1 && fits[0] === this.producer && ++this.support >= LINES_TO_DECIDE)
      this.final = true;
    return { producer: this.producer, warning };
  }

  /**
   * At the end of an input whose choice is still open: the producer most of its lines were
   * read as, when that is not the one chosen last (a stray last line of a short run).
   */
  atEnd(): { producer: Producer; warning: DetectorWarning } | null {
    if (this.final || this.producer === null) return null;
    const now = this.producer;
    let best = now;
    for (const [p, n] of this.linesAs) if (n > this.linesAs.get(best)!) best = p;
    if (best === now) return null;
    this.producer = best;
    this.final = true;
    const lines = (n: number) => `${n} line${n === 1 ? '' : 's'}`;
    const message =
      `the input ended read as ${now} from line ${this.since} (${lines(this.linesAs.get(now)!)}); ` +
      `${lines(this.linesAs.get(best)!)} were read as ${best}: the run is ${best}'s; ` +
      'pass --input-format to choose';
    return { producer: best, warning: { code: 'INPUT_FORMAT_CHANGED', message, subject: 'end' } };
  }

  private change(to: Producer, lineNo: number): DetectorWarning {
    const from = this.producer!;
    const before = this.left.get(to);
    this.left.set(from, this.lastLineNo);
    const read = `line ${lineNo} fits ${to}, not ${from} (read as ${from} from line ${this.since}): `;
    const message =
      before === undefined
        ? `${read}read as ${to} from there on, the lines before as ${from}`
        : `${read}read as ${to} again from there on, going on from line ${before}`;
    this.producer = to;
    this.since = lineNo;
    this.support = 0;
    this.changes++;
    return {
      code: 'INPUT_FORMAT_CHANGED',
      message: `${message}; pass --input-format to choose`,
      subject: `line ${lineNo}`,
    };
  }
}

/**
 * A new record of the same line standing for `value`, marked `mapped`: its bytes kept (frozen).
 * A line too long to hold stands for its line as a held one does: one record, its bytes in the
 * spool, its value what was mapped from its top-level members.
 */
function withValue(rec: LineRecord | SpooledRecord, value: JsonObject): SubteeRecord {
  if (rec.kind === 'spooled') return Object.freeze({ ...rec, value, mapped: true });
  return Object.freeze({ kind: 'line', lineNo: rec.lineNo, raw: rec.raw, value, mapped: true });
}

/**
 * A LangGraph protocol event, kept as the coding agents' events are: its bytes in main's
 * `.jsonl` as they came, under a placeholder (routed to main, shown nowhere), the lines it
 * maps to (none for checkpoints, state values, deltas) routed and shown as `derived` records.
 * Main's `.jsonl` is thus the run's events in order, a recording the CLI replays.
 */
function keepProtocolEvent(rec: LineRecord, mapper: LangGraphMapper, out: RecordBatch): void {
  for (const line of shareRepeatedText(mapper.map(rec.value), rec.raw.length))
    out.push(derivedRecord(rec.lineNo, line));
  out.push(withValue(rec, eventLine('langgraph', {}, null)));
}

/** `value` carrying the run's id as its `uuid`, where Claude Code's lines carry theirs (see `runIdOf`). */
const withRunId = (value: JsonObject, runId: string): JsonObject => ({ ...value, uuid: runId });

/**
 * A coding agent's events through its mapper. Each input line stays one record with its own
 * bytes (so its channel's `.jsonl` keeps it byte for byte), its value the mapped line that
 * stands for it, or a placeholder routed to its channel when none does; the other mapped
 * lines follow as `derived` records, which are routed and shown but never written to a file.
 * The first record of an input line after the stream named its run (see RunIdReader) carries
 * that id as its `uuid`, so the tree, `index.json` and every sink key the run on it. Lines never
 * wait for it: a Codex stream's first lines (its `turn.started`, which the watchdog reads as a
 * model request) go on at once, and the line that names the run carries its id (a run whose
 * input ends first is named at the end, on a placeholder).
 */
export class AgentEvents {
  readonly mapper: StreamMapper;
  /** The mapper's `transcriptOf`, and nothing else of it, for the run's readers. */
  private readonly transcripts: TranscriptKinds = Object.freeze({
    transcriptOf: (channel: string | null) => this.mapper.transcriptOf(channel),
  });
  private lastLineNo = 0;
  /** The version the producer's stream stated, once it has. */
  private version: string | null = null;
  /** The run's id once the stream named it; `stamped` once a record carried it. */
  private readonly runId: RunIdReader;
  private stamped = false;

  constructor(
    private readonly run: Session,
    private readonly producer: AgentProducer,
  ) {
    this.mapper = createAgentMapper(producer, (code, message) => run.warn(code, message));
    this.runId = new RunIdReader(producer);
    this.attach();
  }

  /**
   * The run's lines are this producer's (again): it states the producer, with its version and
   * how much of each channel its stream shows (read through the mapper, which learns it).
   */
  attach(): void {
    this.run.stateProducer(this.producer, { version: this.version, transcripts: this.transcripts });
  }


  /**
   * `auto` read a line as another producer: what this one stated stays here for when its
   * lines come back; a pending run id is named by what came.
   */
  detach(): void {
    this.runId.settle();
  }

  push(rec: SubteeRecord, out: RecordBatch): void {
    const event = rec.kind === 'quarantine' ? null : rec.value;
    // A line too long to hold (spooled), or a piece of a line, is not held as bytes.
    const whole = rec.kind === 'line' || (rec.kind === 'quarantine' && rec.final);
    this.runId.see(event, whole ? rec.raw : null);
    this.map(rec, out);
  }

  private map(rec: SubteeRecord, out: RecordBatch): void {
    this.lastLineNo = rec.lineNo;
    if (rec.kind === 'quarantine' || (rec.kind === 'spooled' && rec.value === null)) {
      out.push(rec);
      return;
    }
    let mapped;
    try {
      mapped = this.mapper.map(rec.value!);
    } catch (err) {
      // Kept on main's channel as it came: a mapper bug must not cost the line or the run.
      this.run.recordFailed('input-format', rec.lineNo, err);
      out.push(rec.kind === 'line' ? withValue(rec, eventLine(this.producer, {}, null)) : rec);
      return;
    }
    if (this.version === null && this.mapper.version !== null) {
      this.version = this.mapper.version;
      // The run's producer is this one (it maps the lines): stated again, with the version.
      this.attach();
    }
    // The record that carries the line's own bytes takes the id (a derived one would show it).
    const own = (value: JsonObject) => this.withId(value);
    // One event may name a long text on many lines: the copies are bounded by the event's size.
    const lines = shareRepeatedText(mapped.lines, rec.kind === 'line' ? rec.raw.length : 0);
    for (let i = 0; i < lines.length; i++) {
      if (i !== mapped.own) {
        out.push(derivedRecord(rec.lineNo, lines[i]));
      } else {
        out.push(withValue(rec, own(lines[i])));
      }
    }
    if (mapped.own < 0 || mapped.own >= lines.length) {
      // No mapped line stands for the event: a placeholder after them carries its bytes to its
      // channel (a spawn among them comes first).
      const placeholder = own(eventLine(this.producer, rec.value!, mapped.channel));
      out.push(withValue(rec, placeholder));
    }
  }

  /** `value` with the run's id, if it is the first record to carry it. */
  private withId(value: JsonObject): JsonObject {
    if (this.stamped || this.runId.id === null) return value;
    this.stamped = true;
    return withRunId(value, this.runId.id);
  }

  end(out: RecordBatch): void {
    // A run cut while its id was pending (a Codex stream before its first turn's first item)
    // is named by the lines read; no line of its own is left to carry the id, so a
    // placeholder, shown nowhere, does.
    this.runId.settle();
    const named = this.withId(eventLine(this.producer, {}, null));
    if (named.uuid !== undefined) out.push(derivedRecord(this.lastLineNo, named));
    const lines = shareRepeatedText(this.mapper.end(), 0);
    for (const line of lines) out.push(derivedRecord(this.lastLineNo, line));
  }
}

function derivedRecord(lineNo: number, value: JsonObject): LineRecord {
  // A mapped line holds what the event held (a tool's input), as deep as the stream chose.
  const raw = Buffer.from(jsonText(value) ?? '{}');
  return Object.freeze({ kind: 'line', lineNo, raw, value, derived: true });
}

export const inputFormatPlugin = defineBuiltin<Omit<InputFormatOptions, 'session'>>({
  name: 'input-format',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    format: {
      type: 'string',
      choices: INPUT_FORMATS,
      default: INPUT_FORMAT_DEFAULTS.format,
      description:
        'claude (stream-json, Agent SDK messages), langgraph (protocol events), copilot, codex, gemini, ' +
        'opencode (their JSON streams), or auto: decided from the first line',
    },
    spawnTools: {
      type: 'array',
      default: INPUT_FORMAT_DEFAULTS.spawnTools,
      description: 'langgraph: tools whose calls start subagents',
    },
  },
  create: (o, ctx) => createInputFormat({ ...o, session: ctx.session }),
});
