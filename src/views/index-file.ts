import type { Session } from '../model/session.js';
import type { Channel } from '../model/tree.js';

export const INDEX_FORMAT = 'subtee-index/1';

export interface ChannelPaths {
  log: string;
  jsonl: string;
  thinking_log?: string;
}

/** The `index.json` document (format documented in the README). Plain data, no I/O. */
export function buildIndex(
  run: Session,
  paths: (ch: Channel) => ChannelPaths | undefined,
  quarantine: string | null,
): Record<string, unknown> {
  const tree = run.tree;
  return {
    format: INDEX_FORMAT,
    session_id: tree.sessionId,
    claude_code_version: tree.version,
    producer: run.producer,
    interrupted: run.interrupted,
    stalled: run.stalled,
    stall: run.stall,
    input: {
      lines: run.input.lines,
      bytes: run.input.bytes,
      quarantined: run.input.quarantined,
      blank_lines: run.input.blankLines,
      failed: run.input.failed,
    },
    quarantine,
    quarantine_lines: run.quarantineLines.listed,
    quarantine_lines_omitted: run.quarantineLines.omitted,
    warnings: run.warnings,
    channels: tree.channels().map((ch) => ({
      id: ch.id,
      parent: ch.parent,
      orphan: ch.orphan,
      depth: ch.depth,
      agent: ch.id === null ? null : ch.agent,
      description: ch.description,
      status: ch.status,
      background: ch.background,
      summary: ch.summary,
      log: paths(ch)?.log ?? null,
      jsonl: paths(ch)?.jsonl ?? null,
      ...(paths(ch)?.thinking_log ? { thinking_log: paths(ch)!.thinking_log } : {}),
      lines: ch.lines,
      counts: ch.counts,
      usage: ch.usage,
      first_seen: ch.firstSeen,
      last_seen: ch.lastSeen,
      ...Object.assign({}, ...run.channelFields.map((f) => f(ch))),
    })),
  };
}
