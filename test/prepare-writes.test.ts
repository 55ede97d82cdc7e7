import assert from 'node:assert/strict';
import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { checkChainBeforeStart, defaultSpec, runPreparedChain } from '../src/chain/chain.js';
import { prepareWrites } from '../src/chain/prepare-writes.js';
import { linesOf, ROOT, tmpDir } from './helpers/helpers.js';

const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));

test('the sinks write where prepareWrites opened before the input started, opening nothing again: ' +
  'index.json is the room made ready, the pino log the file opened though its name moved', async () => {
  const dir = tmpDir();
  const out = join(dir, 'o');
  const log = join(dir, 'events.log');
  const spec = defaultSpec(out, 'none');
  spec.sinks.push({ use: 'pino', destination: log });
  const checked = await checkChainBeforeStart(spec);
  const prepared = prepareWrites(spec);
  const room = statSync(join(out, 'index.json.tmp')).ino;
  // The name now holds another file: a sink opening the log again would write to that one.
  renameSync(log, join(dir, 'opened.log'));
  writeFileSync(log, '');
  await runPreparedChain(Readable.from([recording]), checked, {}, prepared);
  assert.equal(statSync(join(out, 'index.json')).ino, room);
  assert.ok(linesOf(readFileSync(join(dir, 'opened.log'))).length > 0);
  assert.equal(readFileSync(log, 'utf8'), '');
});
