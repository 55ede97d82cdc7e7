import assert from 'node:assert/strict';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createDiscard } from '../../src/chain/chain.js';
import { createChannelRouter } from '../../src/chain/stages/channel-router.js';
import { createLineParser } from '../../src/chain/stages/line-parser.js';
import type { RecordBatch } from '../../src/model/record.js';
import { Session } from '../../src/model/session.js';

/**
 * Runs `lines` through the line parser, the channel router and the sinks `sinksOf` makes for
 * the run's session: all in one chunk, or a line at a time (the next line is written once the
 * last one has passed every sink), so a test can ask whether a view depends on when it reads.
 */
export async function feedThrough(
  lines: readonly string[],
  lineByLine: boolean,
  sinksOf: (session: Session) => Transform[],
): Promise<void> {
  const session = new Session();
  const source = new Readable({ read() {} });
  let next = 0;
  const feed = () => {
    if (next < lines.length) source.push(`${lines[next++]}\n`);
    else if (next++ === lines.length) source.push(null);
  };
  if (lineByLine) feed();
  else {
    source.push(lines.map((l) => `${l}\n`).join(''));
    source.push(null);
  }
  const passed = new Transform({
    objectMode: true,
    transform(batch: RecordBatch, _enc, cb) {
      cb(null, batch);
      if (lineByLine) feed();
    },
  });
  await pipeline(
    source,
    createLineParser({ session }),
    createChannelRouter({ session }),
    ...sinksOf(session),
    passed,
    createDiscard(),
  );
  if (lineByLine) assert.equal(next, lines.length + 1, 'every line was fed, one at a time');
}

/** The subagent of `orphanFirstLines`, and its agent type. */
export const ORPHAN_FIRST = Object.freeze({ id: 'toolu_01orphanfirst', agent: 'Explore' });

/**
 * A run whose subagent says something before its spawn call arrives (line 2), then after it
 * (line 4): the line before is on a channel not yet placed in the tree.
 */
export function orphanFirstLines(): string[] {
  const session = '66666666-2222-3333-4444-555555555555';
  const { id, agent } = ORPHAN_FIRST;
  const said = (parent: string | null, text: string, uuid: string) => ({
    type: 'assistant',
    message: { id: `m_${uuid}`, role: 'assistant', content: [{ type: 'text', text }] },
    parent_tool_use_id: parent,
    session_id: session,
    uuid,
  });
  const spawn = {
    type: 'assistant',
    message: {
      id: 'm_spawn',
      role: 'assistant',
      content: [{ type: 'tool_use', id, name: 'Agent', input: { subagent_type: agent, prompt: 'go' } }],
    },
    parent_tool_use_id: null,
    session_id: session,
    uuid: 'spawn',
  };
  return [
    { type: 'system', subtype: 'init', session_id: session, uuid: 'i' },
    said(id, 'before its spawn', 'early'),
    spawn,
    said(id, 'after its spawn', 'late'),
  ].map((line) => JSON.stringify(line));
}
