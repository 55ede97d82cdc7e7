import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { WARNINGS_TOLD_PER_CODE } from '../src/model/run-model.js';
import { BIN, tmpDir } from './helpers/helpers.js';

test('a stream naming thousands of unpriced models gets a bounded number of warnings on stderr, ' +
  'in pino and in index.json, which counts the rest exactly', () => {
  const models = 3000;
  const lines = Array.from({ length: models }, (_, i) =>
    JSON.stringify({
      type: 'assistant',
      message: {
        id: `m${i}`,
        model: `model-${i}`,
        content: [{ type: 'text', text: 'x' }],
        usage: { input_tokens: 1, output_tokens: 1 },
      },
      parent_tool_use_id: null,
    }),
  );
  const dir = tmpDir();
  const out = join(dir, 'o');
  const log = join(dir, 'p.log');
  const r = spawnSync(process.execPath, [BIN, '--out', out, '--stdout', 'none', '--pino', log, '-q'], {
    input: lines.join('\n') + '\n',
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr.slice(-2000));
  const told = r.stderr.split('\n').filter((l) => l.startsWith('subtee: warning '));
  const priced = told.filter((l) => l.startsWith('subtee: warning UNKNOWN_MODEL_PRICE: '));
  assert.equal(priced.length, WARNINGS_TOLD_PER_CODE);
  assert.deepEqual(
    told.filter((l) => l.startsWith('subtee: warning WARNINGS_OMITTED: ')),
    [
      `subtee: warning WARNINGS_OMITTED: more than ${WARNINGS_TOLD_PER_CODE} UNKNOWN_MODEL_PRICE ` +
        "warnings: the rest are not told one by one; index.json's warnings_omitted counts them",
    ],
  );
  const index = JSON.parse(readFileSync(join(out, 'index.json'), 'utf8'));
  const listed = index.warnings.filter((w: { code: string }) => w.code === 'UNKNOWN_MODEL_PRICE');
  assert.equal(listed.length, WARNINGS_TOLD_PER_CODE);
  assert.deepEqual(index.warnings_omitted, { UNKNOWN_MODEL_PRICE: models - WARNINGS_TOLD_PER_CODE });
  // Every view tells the same warnings: stderr's lines are index.json's, and so are pino's.
  assert.deepEqual(
    told,
    index.warnings.map((w: { code: string; message: string }) => `subtee: warning ${w.code}: ${w.message}`),
  );
  const logged = readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((e) => e.kind === 'warning')
    .map((e) => [e.code, e.content]);
  assert.deepEqual(
    logged,
    index.warnings.map((w: { code: string; message: string }) => [w.code, w.message]),
  );
});
