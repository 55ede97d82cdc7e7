import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { linkSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { BIN, ROOT, tmpDir } from './helpers.js';

const recording = readFileSync(join(ROOT, 'test', 'fixtures', 'nested-depth-3.jsonl'));

/** The real CLI, bounded: a run that blocks is killed and shows up as `error`. */
function subtee(args: string[], input: Buffer | string = recording) {
  return spawnSync(process.execPath, [BIN, ...args], {
    input,
    encoding: 'utf8',
    timeout: 30_000,
    killSignal: 'SIGKILL',
  });
}

/** A loopback port nothing listens on: connections to it are refused at once. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test('--force never appends through a hard link planted at clickhouse-spool.jsonl or events.pino.log', async () => {
  const url = `http://127.0.0.1:${await closedPort()}`;
  const cases = [
    { name: 'clickhouse-spool.jsonl', flags: ['--clickhouse', url] },
    { name: 'events.pino.log', flags: ['--pino'] },
  ];
  for (const c of cases) {
    const precious = join(tmpDir('subtee-victim-'), 'precious');
    writeFileSync(precious, 'precious\n');
    const out = tmpDir();
    linkSync(precious, join(out, c.name));
    const r = subtee(['--out', out, '--force', '-q', '--stdout', 'none', ...c.flags]);
    assert.equal(r.error, undefined, `${c.name}: the run finished`);
    assert.equal(r.status, 3, `${c.name}: ${r.stderr}`);
    assert.match(r.stderr, /\[ERR_WRITE\]\n$/, c.name);
    assert.equal(readFileSync(precious, 'utf8'), 'precious\n', `${c.name}: the outside file is untouched`);
  }
});
