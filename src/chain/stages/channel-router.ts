import type { Transform } from 'node:stream';
import {
  RoutedLine,
  routedSpooled,
  type LineRecord,
  type RecordBatch,
  type SubteeRecord,
} from '../../model/record.js';
import { systemReason, UsageError } from '../../errors.js';
import { readSmallText, SmallFileRefused } from '../../small-file.js';
import { overridePrices } from '../../model/prices.js';
import { requireSession, type Session } from '../../model/session.js';
import { viewOf } from '../../model/line-view.js';
import { escapeOneLine } from '../../views/escape.js';
import { descriptionLabel } from '../../views/text.js';
import { cutText } from '../../model/display.js';
import { createBatchTransform } from '../batch-transform.js';
import { EndedTranscripts, readTranscripts } from '../transcripts.js';
import { BUILTIN_KIT, defineBuiltin } from '../plugin.js';

export interface ChannelRouterOptions {
  /**
   * A price file (JSON, USD per million tokens per model, see `overridePrices`) laid over the
   * shipped table, for runs whose models or prices it lacks.
   */
  prices?: string;
  /**
   * Claude Code's config folder (or its `projects` folder): at the end of the run each
   * channel's transcript there gives its exact output tokens (see chain/transcripts.ts).
   */
  transcripts?: string;
  /** The run's working directory, where its transcripts' project folder is looked for first. */
  transcriptsCwd?: string;
  /** The chain's session, shared by every stage (required). */
  session: Session;
}

/** The largest price file read: a table of every model is a few kilobytes. */
export const MAX_PRICES_BYTES = 1024 * 1024;

/**
 * Why a price file is not JSON, in words and a position: the parser's own message quotes the
 * file's bytes, which may be anything.
 */
function notJson(err: unknown): string {
  if (!(err instanceof SyntaxError)) return systemReason(err);
  const at = /position (\d+)/.exec(err.message);
  return at ? `not valid JSON at character ${at[1]}` : 'not valid JSON';
}

/** The session's price table with the file at `path` laid over it; a UsageError when it is not one. */
function loadPrices(session: Session, path: string): void {
  let data: unknown;
  try {
    data = JSON.parse(readSmallText(path, MAX_PRICES_BYTES, 'a price file'));
  } catch (err) {
    if (err instanceof SmallFileRefused)
      throw new UsageError('ERR_PRICES', `prices ${escapeOneLine(path)}: ${err.message}`, err.cause ?? err);
    const message = `prices ${escapeOneLine(path)}: cannot read it as JSON (${notJson(err)})`;
    throw new UsageError('ERR_PRICES', message, err);
  }
  const table = overridePrices(session.cost.prices, data);
  if (typeof table === 'string')
    throw new UsageError('ERR_PRICES', `prices ${escapeOneLine(path)}: ${table}`);
  session.statePrices(table);
}

/** An id the stream chose, as a warning shows it: one line, cut as a preview. */
const shownId = (id: string): string => escapeOneLine(cutText(id, 'preview').text);

/**
 * Channel router: record batches in, each routed line out as a new, frozen envelope with its
 * `channel` and `events` (RoutedLine; a spooled line's record copied the same way).
 * Object mode on both sides. The stream adapter over the run model (`RunModel.take`: the
 * tree, the costs), which says what each line did.
 * Quarantine records pass through untouched. A line the tree cannot take (a bug, or a value
 * an earlier stage made unreadable) is not lost: it goes on as a quarantine record (reason
 * `failed`), so its bytes land in quarantine.log, and the session counts it.
 */
export function createChannelRouter(options: ChannelRouterOptions): Transform {
  const session = requireSession(options, 'createChannelRouter');
  if (options.prices !== undefined) loadPrices(session, options.prices);
  const tree = session.tree;
  const ended = options.transcripts === undefined ? null : new EndedTranscripts({ dir: options.transcripts });
  // A subagent that ends: its transcript, when there are transcripts to read, is taken before
  // the model freezes the subagent's figures into its status event.
  const onEnd = ended === null ? undefined : (id: string) => takeEnded(session, ended, id, options);
  // What the tree counted so far of what it tells once a run.
  let cyclesSeen = 0;
  let repeatsSeen = 0;
  let sessionChangesSeen = 0;
  return createBatchTransform({
    transformBatch(batch: RecordBatch) {
      // A batch of its own: the one it was given is not written on either.
      const out = batch.slice();
      for (let i = 0; i < batch.length; i++) {
        const rec = batch[i];
        if (rec.kind === 'quarantine' || (rec.kind === 'spooled' && rec.value === null)) continue;
        try {
          const value = rec.kind === 'spooled' ? rec.value! : viewOf(rec);
          const routed = session.take(value, rec.lineNo, onEnd);
          // A new, frozen envelope: nothing is written on the record it was given.
          out[i] = rec.kind === 'spooled' ? routedSpooled(rec, routed) : new RoutedLine(rec, routed);
        } catch (err) {
          session.recordFailed('channel-router', rec.lineNo, err);
          // A spooled line has no bytes in memory to quarantine: it stays on main's channel.
          if (rec.kind === 'line') out[i] = unroutable(session, rec);
        }
        if (tree.spawnCycles !== cyclesSeen) {
          cyclesSeen = tree.spawnCycles;
          const c = tree.firstCycle!;
          session.warn(
            'SPAWN_CYCLE',
            `input line ${rec.lineNo} spawns ${escapeOneLine(c.id)} on ` +
              (c.on === c.id
                ? 'its own channel'
                : `the channel of ${escapeOneLine(String(c.on))}, which descends from it`) +
              ' (a spawn cycle): that spawn is ignored, the channel keeps its place (an orphan stays ' +
              'one, depth unknown)',
          );
        }
        if (tree.spawnRepeats !== repeatsSeen) {
          repeatsSeen = tree.spawnRepeats;
          const r = tree.firstRepeat!;
          const named = (d: string | null) => (d === null ? 'no description' : `"${descriptionLabel(d)}"`);
          session.warn(
            'SPAWN_REPEATED',
            `input line ${rec.lineNo} spawns ${shownId(r.id)} again (${named(r.again)}; first ` +
              `${named(r.first)}): the id keeps its first spawn's place, and its lines and its end ` +
              "are that channel's",
          );
        }
        if (tree.sessionChanges !== sessionChangesSeen) {
          sessionChangesSeen = tree.sessionChanges;
          const c = tree.firstSessionChange!;
          session.warn(
            'SESSION_CHANGED',
            `input line ${rec.lineNo} starts session ${shownId(c.to)} after ${shownId(c.from)}: ` +
              "the stream holds more than one run; index.json's session_id and the run's cost are the " +
              "last session's",
          );
        }
      }
      return out;
    },
    flushAtEnd() {
      if (options.transcripts !== undefined) takeTranscripts(session, options);
      return undefined;
    },
  });
}

/**
 * A subagent that ended: its transcript read now, so the live views show its exact figures
 * from here on. One not there yet, partial or disagreeing is left, without a word, to the
 * run's end, which reads every transcript again and warns as it does without this.
 */
function takeEnded(
  session: Session,
  ended: EndedTranscripts,
  id: string,
  options: ChannelRouterOptions,
): void {
  if (!session.cost.seenUsage || !fromClaudeCode(session)) return;
  const t = ended.channel(id, session.tree.sessionId, options.transcriptsCwd ?? session.cost.runCwd);
  if (t !== null) session.cost.takeChannelTranscript(id, t);
}

/**
 * Whether the stream is Claude Code's (the CLI's or the Agent SDK's), whose transcripts are
 * read: not another agent's (Codex, Gemini CLI …) nor a LangGraph run's, whatever command
 * wrapped it under `subtee run`. A chain without the input-format stage states no producer:
 * its lines are Claude Code's.
 */
function fromClaudeCode(session: Session): boolean {
  return session.producer === null || session.producer === 'claude';
}

/** Each channel's transcript usage, read once the stream has ended (see chain/transcripts.ts). */
function takeTranscripts(session: Session, options: ChannelRouterOptions): void {
  const dir = options.transcripts!;
  // A stream that states no usage (an agent that printed nothing, a run stalled before its
  // first answer) has nothing a transcript could make exact: no reading, no warning.
  if (!session.cost.seenUsage || !fromClaudeCode(session)) return;
  try {
    const found = readTranscripts({
      dir,
      sessionId: session.tree.sessionId,
      cwd: options.transcriptsCwd ?? session.cost.runCwd,
    });
    session.cost.takeTranscripts(found, (id) => session.tree.get(id) !== undefined);
  } catch (err) {
    const why = systemReason(err);
    const shown = escapeOneLine(dir);
    const message = `transcripts in ${shown}: ${why}; figures as the stream states them`;
    session.warn('TRANSCRIPT_UNREADABLE', message);
  }
}

function unroutable(session: Session, rec: LineRecord): SubteeRecord {
  session.countQuarantined(rec.lineNo);
  const { lineNo, raw } = rec;
  return Object.freeze({ kind: 'quarantine', lineNo, raw, reason: 'failed', final: true });
}

export const channelRouterPlugin = defineBuiltin<Omit<ChannelRouterOptions, 'session'>>({
  name: 'channel-router',
  kind: 'stage',
  kit: BUILTIN_KIT,
  options: {
    prices: {
      type: 'string',
      minLength: 1,
      description: 'JSON price file (USD per million tokens per model) laid over the shipped, dated table',
    },
    transcripts: {
      type: 'string',
      minLength: 1,
      description:
        "Claude Code's config or projects folder: exact output tokens per agent from its transcripts",
    },
    transcriptsCwd: {
      type: 'string',
      minLength: 1,
      description: "the run's working directory (its transcripts' project folder is looked for first)",
    },
  },
  create: (o, ctx) => createChannelRouter({ ...o, session: ctx.session }),
});
