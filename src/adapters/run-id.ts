/**
 * A coding agent's run identity, from what its stream carries, so that a replay of the same
 * recording lands on the same key as the original run (in `index.json`, ClickHouse and the
 * OTLP trace), as Claude Code's first `uuid` does. Pure: no I/O, no clock, no randomness.
 *
 * - Codex: a UUID named by the `thread_id` of `thread.started` and the bytes of the stream up
 *   to the first event of its first turn (see RunIdReader).
 * - GitHub Copilot CLI: the `id` of its first event (a fresh UUID per event, as Claude Code's).
 * - Gemini CLI: the `session_id` of its `init` event with that event's `timestamp`.
 * - opencode: the `sessionID` of its first event that has one, with that event's `timestamp`.
 *
 * A session id alone would give a resumed session the key of its first run: where the stream
 * carries the start time, the id is a name-based UUID of both (and of the producer). Codex's
 * carries none, and `codex exec resume` continues a thread under its `thread_id`: what tells
 * two runs of a thread apart is what each was asked and began to answer.
 */
import { createHash } from 'node:crypto';
import { nonEmpty, type JsonObject } from '../model/message.js';
import type { AgentProducer } from '../model/session.js';

/** Longest id taken as it is (the bound `runIdOf` holds a line's `uuid` to); a longer one is hashed. */
const MAX_RUN_ID_CHARS = 200;

/**
 * A UUID (version 8, RFC 9562's custom layout) named by its parts: the same parts, the same
 * UUID.
 */
function nameBasedUuid(parts: readonly string[]): string {
  const h = createHash('sha256').update(`subtee-run\0${parts.join('\0')}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x80;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.toString('hex', 0, 16);
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

function asIs(producer: AgentProducer, id: string | null): string | null {
  if (id === null) return null;
  return id.length <= MAX_RUN_ID_CHARS ? id : nameBasedUuid([producer, id]);
}

function timeOf(value: unknown): string {
  if (typeof value === 'string') return value;
  return typeof value === 'number' && Number.isFinite(value) ? String(value) : '';
}

/**
 * The run id one event of `producer`'s stream names, or null when it names none (the first
 * event that names one is the run's).
 */
export function agentRunIdOf(producer: Exclude<AgentProducer, 'codex'>, event: JsonObject): string | null {
  switch (producer) {
    case 'copilot':
      return asIs(producer, nonEmpty(event.id));
    case 'gemini': {
      const session = event.type === 'init' ? nonEmpty(event.session_id) : null;
      return session === null ? null : nameBasedUuid([producer, session, timeOf(event.timestamp)]);
    }
    case 'opencode': {
      const session = nonEmpty(event.sessionID);
      return session === null ? null : nameBasedUuid([producer, session, timeOf(event.timestamp)]);
    }
  }
}

/**
 * How long a Codex run's id waits for the first event of its first turn: at most this many
 * lines in all, of at most this many bytes; then it is named by what came.
 */
export const CODEX_RUN_ID_WAIT = Object.freeze({ lines: 64, bytes: 1024 * 1024 });

/**
 * A run's id as its stream names it, one input line at a time: for most producers the first
 * event that names one (`agentRunIdOf`). For Codex, from its `thread.started` on the id is
 * `pending` until the first event after the first `turn.started` (the turn's first item, or
 * its end) has come, and is then a UUID named by the thread and the bytes of every line from
 * `thread.started` to that event: a replay of a recording gets its id again, and a resumed
 * thread (`codex exec resume`, the same `thread_id`) gets another for each run that was asked
 * or answered anything else. A line not held as bytes (one too long to hold, a quarantined
 * piece) ends the wait before it; so do the CODEX_RUN_ID_WAIT bounds and another producer's
 * line (`settle`), and the input's end (`settle`: a run cut before its first turn's first
 * event is named by the lines it has). The lines go on meanwhile: the caller stamps the id on
 * the first record after, or at the end on a record of its own.
 */
export class RunIdReader {
  id: string | null = null;
  pending = false;
  private thread: string | null = null;
  private readonly bytesSeen = createHash('sha256');
  private lines = 0;
  private bytes = 0;
  private turnStarted = false;

  constructor(private readonly producer: AgentProducer) {}

  /** The next input line: its event (null: not an object) and its bytes (null: not held). */
  see(event: JsonObject | null, raw: Uint8Array | null): void {
    if (this.id !== null) return;
    if (this.producer !== 'codex') {
      if (event) this.id = agentRunIdOf(this.producer, event);
      return;
    }
    if (!this.pending) {
      this.thread = event?.type === 'thread.started' ? nonEmpty(event.thread_id) : null;
      if (this.thread === null) return;
      this.pending = true;
    }
    if (raw === null) return this.settle();
    this.lines++;
    this.bytes += raw.length;
    this.bytesSeen.update(raw).update('\n');
    const turnBegun = this.turnStarted && event?.type !== 'turn.started';
    if (event?.type === 'turn.started') this.turnStarted = true;
    const waitOver = this.lines >= CODEX_RUN_ID_WAIT.lines || this.bytes >= CODEX_RUN_ID_WAIT.bytes;
    if (turnBegun || waitOver) this.settle();
  }

  /** Names a pending run by the lines that came (the input ended, or the wait is over). */
  settle(): void {
    if (!this.pending) return;
    this.pending = false;
    this.id = nameBasedUuid([this.producer, this.thread!, this.bytesSeen.digest('hex')]);
  }
}
