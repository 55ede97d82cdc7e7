/**
 * A coding agent's run identity, from what its stream carries, so that a replay of the same
 * recording lands on the same key as the original run (in `index.json`, ClickHouse and the
 * OTLP trace), as Claude Code's first `uuid` does. Pure: no I/O, no clock, no randomness.
 *
 * - Codex: the `thread_id` of `thread.started` (its stream carries nothing else of the run).
 * - GitHub Copilot CLI: the `id` of its first event (a fresh UUID per event, as Claude Code's).
 * - Gemini CLI: the `session_id` of its `init` event with that event's `timestamp`.
 * - opencode: the `sessionID` of its first event that has one, with that event's `timestamp`.
 *
 * A session id alone would give a resumed session the key of its first run: where the stream
 * carries the start time, the id is a name-based UUID of both (and of the producer).
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
export function agentRunIdOf(producer: AgentProducer, event: JsonObject): string | null {
  switch (producer) {
    case 'codex':
      return event.type === 'thread.started' ? asIs(producer, nonEmpty(event.thread_id)) : null;
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
