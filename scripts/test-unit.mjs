#!/usr/bin/env node
// `npm run test:unit`: the quick lane (scripts/test-lanes.mjs says which files), after an
// incremental build; `npm test` builds from clean and runs everything.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { failsTheLane, missingOutputs, testFoldersInMemory, unitFiles } from './test-lanes.mjs';

// Every build keeps dist/.tsbuildinfo current (tsconfig.json), and `npm run build` removes it
// with dist/; an output gone since the last build makes this build a full one.
if (missingOutputs().length > 0) rmSync(join('dist', '.tsbuildinfo'), { force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const build = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { stdio: 'inherit' });
if (build.status !== 0) process.exit(build.status ?? 1);

testFoldersInMemory();
const files = unitFiles('test', join('dist', 'test'));
// Two files more than cores: a file waiting on a child process, a server or a timer leaves
// its core to another (on 2 cores, with the longest files first, 4 at once took about 3 s
// less than 3, in each of two pairs of runs).
const concurrency = availableParallelism() + 2;
// run() starts the files in the order given, the longest first (`node --test` sorts them by
// name); the report is the one `node --test` prints: spec on a terminal, else TAP.
run({ files, concurrency })
  .on('test:fail', (event) => {
    if (failsTheLane(event)) process.exitCode = 1;
  })
  .compose(process.stdout.isTTY ? new spec() : tap)
  .pipe(process.stdout);
