import type { Transform } from 'node:stream';
import { withDefaults } from '../../defaults.js';
import { EXIT, SubteeError } from '../../errors.js';
import type { RecordBatch, SubteeRecord } from '../../model/record.js';
import { agentNameOf, requireSession, type Session } from '../../model/session.js';
import { compareVersions, isValidRange, parseVersion, satisfies } from '../../semver.js';
import {
  channelIdOf,
  contentBlocks,
  lineTypeOf,
  systemSubtypeOf,
  type ContentBlock,
} from '../../model/message.js';
import { viewOf } from '../../model/line-view.js';
import { createBatchTransform } from '../batch-transform.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';

export const VERSION_GUARD_DEFAULTS = Object.freeze({
  /** A semver range the agent's version must satisfy, or null for warnings only. */
  requireVersion: null as string | null,
});

export interface VersionGuardOptions {
  requireVersion?: string | null;
  /** The chain's session, shared by every stage (required). */
  session: Session;
  /**
   * The chain's stop (`PluginContext.stopInput`): a refused version stops the input, every line
   * read (the refused `system/init` included) still reaches the sinks, and the run then fails
   * with the refusal. Without it the refusal destroys the chain at once.
   */
  stopInput?: (reason: Error) => void;
}

export interface GuardWarning {
  code: string;
  message: string;
}

const FORWARD_HINT =
  'pass --forward-subagent-text or set CLAUDE_CODE_FORWARD_SUBAGENT_TEXT=1 (Claude Code 2.1.211 or later)';

/**
 * What Claude Code's version timeline says about a version (a plain semver version, as
 * `parseVersion` gives it; a prerelease comes before its release: `2.1.211-beta.1` is older
 * than 2.1.211).
 */
export const VERSION_NOTES: ReadonlyArray<{
  code: string;
  applies: (v: string) => boolean;
  message: (v: string) => string;
}> = [
  {
    code: 'VERSION_PIPE_TRUNCATION',
    applies: (v) => compareVersions(v, '2.1.208') < 0,
    message: (v) => `Claude Code ${v} can lose the last line and the result when piped (fixed in 2.1.208)`,
  },
  {
    code: 'VERSION_NO_SUBAGENT_TEXT',
    applies: (v) => compareVersions(v, '2.1.211') < 0,
    message: (v) =>
      `Claude Code ${v} does not forward subagent text or thinking (added in 2.1.211): ` +
      'transcripts will hold tool calls only',
  },
  {
    code: 'VERSION_NO_NESTING',
    applies: (v) => compareVersions(v, '2.1.217') >= 0 && compareVersions(v, '2.1.218') <= 0,
    message: (v) =>
      `Claude Code ${v} spawns no nested subagents by default: ` +
      'set CLAUDE_CODE_MAX_SUBAGENT_SPAWN_DEPTH to allow them',
  },
  {
    code: 'VERSION_NO_NESTED_FORWARDING',
    applies: (v) => compareVersions(v, '2.1.219') < 0,
    message: (v) =>
      `Claude Code ${v} does not forward nested subagents (depth 2 and deeper; added in 2.1.219)`,
  },
];

export class VersionRefused extends SubteeError {
  constructor(message: string) {
    super('ERR_VERSION', message, { exitCode: EXIT.VERSION });
    this.name = 'VersionRefused';
  }
}

/** Checks a version against the timeline and an optional required range. */
export function versionWarnings(version: string): GuardWarning[] {
  const v = parseVersion(version);
  if (!v) return [{ code: 'VERSION_UNKNOWN', message: `cannot read the agent's version "${version}"` }];
  return VERSION_NOTES.filter((n) => n.applies(v)).map((n) => ({
    code: n.code,
    message: n.message(version),
  }));
}

export function checkRequiredVersion(
  version: string | null,
  range: string | null,
  agent = 'Claude Code',
  unknownBecause: string | null = null,
): void {
  if (range === null) return;
  if (version === null || !parseVersion(version)) {
    const why = unknownBecause ? ` (${unknownBecause})` : '';
    throw new VersionRefused(`the agent's version is unknown${why} and --require-version ${range} is set`);
  }
  if (!satisfies(version, range))
    throw new VersionRefused(`${agent} ${version} does not satisfy --require-version ${range}`);
}

const NO_WARNINGS: GuardWarning[] = [];
Object.freeze(NO_WARNINGS);
const NO_BLOCKS: readonly ContentBlock[] = [];
const VERBOSE_HINT = Buffer.from('requires --verbose');
const UNKNOWN_OPTION_HINT = Buffer.from("unknown option '");

/**
 * What the guard learns from the stream as it passes: plain logic, no I/O. `observe()` returns
 * warnings (each code once) and throws VersionRefused when a required version is not met.
 */
export class VersionGuard {
  version: string | null = null;
  /** The coding agent other than Claude Code whose mapped stream this is; null for Claude Code. */
  private agent: string | null = null;
  private readonly said = new Set<string>();
  /**
   * What the forwarding check needs of the subagents' lines: their tool calls and whether any
   * of them said a word. Two numbers, not an entry per subagent: a run may have 10,000.
   */
  private subagentTools = 0;
  private subagentWords = false;

  /** What the line being observed said (NO_WARNINGS until it says something). */
  private heard: GuardWarning[] = NO_WARNINGS;

  /**
   * `run` is the chain's session: its `producer` (decided by the input-format stage) says which
   * agent this is, never a field in a line; its `checkedCommandVersion` stands for a version
   * the stream does not state. Without one the stream is Claude Code's.
   */
  constructor(
    private readonly requireVersion: string | null,
    private readonly run: Pick<Session, 'producer' | 'checkedCommandVersion'> | null = null,
  ) {}

  private say(w: GuardWarning): void {
    if (this.said.has(w.code)) return;
    this.said.add(w.code);
    if (this.heard === NO_WARNINGS) this.heard = [];
    this.heard.push(w);
  }

  observe(rec: SubteeRecord): GuardWarning[] {
    // Most lines say nothing: no list and no closure are made per line, only for a warning.
    this.heard = NO_WARNINGS;
    if (rec.kind === 'quarantine' || (rec.kind === 'spooled' && rec.value === null)) {
      const line = rec.kind === 'spooled' ? rec.head : rec.raw;
      // Both messages are ASCII: a line holding neither is not decoded (junk can be millions
      // of lines, most too short to hold either).
      if (line.length < UNKNOWN_OPTION_HINT.length) return this.heard;
      // A run of junk lines (each at most 256 bytes) is searched whole: the same bytes as
      // each of its lines' first 4096.
      const run = rec.kind === 'quarantine' && (rec.lines ?? 1) > 1;
      const bytes = line.length > 4096 && !run ? line.subarray(0, 4096) : line;
      const hinted = bytes.indexOf(VERBOSE_HINT) !== -1 || bytes.indexOf(UNKNOWN_OPTION_HINT) !== -1;
      if (!hinted) return this.heard;
      const text = bytes.toString('utf8');
      if (/requires --verbose/.test(text)) {
        this.say({
          code: 'VERBOSE_REQUIRED',
          message:
            'the agent refused to run: stream-json output needs --verbose ' +
            '(claude -p … --output-format stream-json --verbose)',
        });
      }
      const unknown = /unknown option '([^'\n]+)'/.exec(text);
      if (unknown)
        this.say({
          code: 'UNKNOWN_OPTION',
          message:
            `the agent does not know the option ${unknown[1]}: ` +
            'it is older than that option, or the option is misspelt',
        });
      return this.heard;
    }
    const v = rec.kind === 'spooled' ? rec.value! : viewOf(rec);
    const kind = lineTypeOf(v);
    const subtype = systemSubtypeOf(v);
    const agent = agentNameOf(this.run?.producer ?? null);
    if (agent !== null) {
      // Another coding agent, mapped: its version is the one its stream states, if any; the
      // notes about Claude Code versions and forwarding do not apply to it.
      this.agent = agent;
      if (subtype !== 'init') return this.heard;
      const version = typeof v.producer_version === 'string' ? v.producer_version : null;
      if (version !== null || this.version === null) {
        this.version = version;
        if (version !== null) checkRequiredVersion(version, this.requireVersion, this.agent);
      }
      return this.heard;
    }
    if (subtype === 'init') {
      const version = typeof v.claude_code_version === 'string' ? v.claude_code_version : null;
      if (version !== this.version || this.version === null) {
        this.version = version;
        // An init that states no version is not refused when `CMD --version` met the range.
        if (version !== null || (this.run?.checkedCommandVersion ?? null) === null) {
          checkRequiredVersion(version, this.requireVersion);
        }
        if (version) for (const w of versionWarnings(version)) this.say(w);
      }
    }
    const subagent = channelIdOf(v) !== null;
    for (const b of kind === 'assistant' ? contentBlocks(v) : NO_BLOCKS) {
      if (b.type === 'tool_use' && subagent) this.subagentTools++;
      if ((b.type === 'text' || b.type === 'thinking' || b.type === 'redacted_thinking') && subagent)
        this.subagentWords = true;
      if (
        b.type === 'thinking' &&
        b.thinking === '' &&
        typeof b.signature === 'string' &&
        b.signature !== ''
      ) {
        this.say({
          code: 'THINKING_OMITTED',
          message:
            'thinking blocks arrive empty (signature only): thinking text is omitted; ask for ' +
            'summarized thinking (claude --thinking-display summarized, where supported) to see it',
        });
      }
    }
    if (subtype === 'task_notification') for (const w of this.checkForwarding()) this.say(w);
    return this.heard;
  }

  /**
   * At the end of input: the forwarding check once more, and a required version never seen
   * (unless the command's own `--version` output met it: `checkedCommandVersion`).
   */
  end(checkedCommandVersion: string | null = this.run?.checkedCommandVersion ?? null): GuardWarning[] {
    if (this.version === null && checkedCommandVersion === null) {
      checkRequiredVersion(null, this.requireVersion);
    }
    if (this.agent !== null) return [];
    return this.checkForwarding().filter((w) => !this.said.has(w.code) && this.said.add(w.code));
  }

  /**
   * Forwarding is off when subagents show tool calls but none of them ever says a word. One
   * quiet subagent proves nothing (an orchestrator may only spawn), so the check is over all.
   */
  private checkForwarding(): GuardWarning[] {
    if (this.subagentWords || this.subagentTools === 0) return [];
    return [
      {
        code: 'FORWARDING_OFF',
        message:
          "subagents' text and thinking are not in the stream (only their tool calls are): " + FORWARD_HINT,
      },
    ];
  }
}

/** The warning that records a refused version in index.json (the CLI's error line says it). */
export const REFUSED_WARNING = 'VERSION_REFUSED';

/**
 * Version guard: records in, the same records out (object mode). Warnings go to the run
 * (stderr, index.json, pino hear them once each). A refused version is a VERSION_REFUSED
 * warning and stops the input (the chain's `stopInput`): the lines read until then are filed
 * like any others, and the run fails with VersionRefused (exit 4). Without a stop to ask, the
 * refusal fails the stream.
 */
export function createVersionGuard(options: VersionGuardOptions): Transform {
  const opts = withDefaults(VERSION_GUARD_DEFAULTS, options);
  const run = requireSession(options, 'createVersionGuard');
  const guard = new VersionGuard(opts.requireVersion, run);
  const warn = (ws: GuardWarning[]) => ws.forEach((w) => run.warn(w.code, w.message));
  /** The refusal, once the input was asked to stop for it: the lines after it are not checked. */
  let refused: VersionRefused | null = null;
  /**
   * A refusal is recorded (VERSION_REFUSED, in index.json for a reader of the folder) with where
   * it came: at line `lineNo`, where the input stops, or at the end of the input (null).
   */
  const refuse = (err: unknown, lineNo: number | null): void => {
    if (!(err instanceof VersionRefused)) throw err;
    const where =
      lineNo === null
        ? 'refused at the end of the input'
        : `refused at line ${lineNo}: reading stopped, the lines read by then are filed`;
    run.warn(REFUSED_WARNING, `${err.message}; ${where}`);
    if (!options.stopInput) throw err;
    refused = err;
    options.stopInput(err);
  };
  return createBatchTransform({
    transformBatch(batch: RecordBatch) {
      for (const rec of batch) {
        if (refused) break;
        try {
          warn(guard.observe(rec));
        } catch (err) {
          if (err instanceof VersionRefused) refuse(err, rec.lineNo);
          else run.recordFailed('version-guard', rec.lineNo, err);
        }
      }
      return batch;
    },
    flushAtEnd() {
      if (refused) return;
      try {
        warn(guard.end());
      } catch (err) {
        refuse(err, null);
      }
    },
  });
}

export const versionGuardPlugin = defineBuiltin<Omit<VersionGuardOptions, 'session' | 'stopInput'>>({
  name: 'version-guard',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    requireVersion: {
      type: 'string',
      check: (v: string) => (isValidRange(v) ? null : 'must be a version range such as ">=2.1.219"'),
      description: 'refuse an agent whose version is not in this range, e.g. ">=2.1.219" (exit 4)',
    },
  },
  create: (o, ctx) => createVersionGuard({ ...o, session: ctx.session, stopInput: ctx.stopInput }),
});
