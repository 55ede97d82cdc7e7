import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { LineSpool, releaseLiveSpools } from '../src/chain/stages/line-spool.js';
import { tmpDir } from './helpers/helpers.js';

const spoolFiles = (dir: string) => readdirSync(dir).filter((name) => name.startsWith('.subtee-spool-'));

test('releaseLiveSpools deletes only the live spools in the folder it is given', () => {
  const mine = tmpDir();
  const other = tmpDir();
  const inMine = new LineSpool(mine, 7);
  inMine.push(Buffer.from('{"a":"' + 'x'.repeat(1000)));
  const inOther = new LineSpool(other, 9);
  inOther.push(Buffer.from('{"b":"' + 'y'.repeat(1000)));
  const otherRecord = inOther.finish(false);
  assert.equal(spoolFiles(mine).length, 1);
  assert.equal(spoolFiles(other).length, 1);

  // A trailing separator or a relative form names the same folder.
  assert.equal(releaseLiveSpools(join(mine, '.', '/')), 1);
  assert.deepEqual(spoolFiles(mine), []);
  assert.equal(spoolFiles(other).length, 1, 'the other run keeps its spool');
  assert.ok(existsSync(otherRecord.spool.path));
  let copied = 0;
  otherRecord.spool.copy((bytes) => (copied += bytes.length));
  assert.equal(copied, 6 + 1000);
  assert.equal(releaseLiveSpools(mine), 0, 'nothing left there');

  assert.equal(releaseLiveSpools(other), 1);
  assert.deepEqual(spoolFiles(other), []);
  inMine.discard();
});
