#!/usr/bin/env node
// `npm run test:unit`: the quick lane (scripts/test-lanes.mjs says which files), after an
// incremental build (dist/.tsbuildinfo, gone with dist/ when `npm run build` cleans it);
// `npm test` builds from clean and runs everything.
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { unitFiles } from './test-lanes.mjs';

const files = unitFiles('test', join('dist', 'test'));
// One file more than cores: a file waiting on a child process or a timer leaves its core to
// another (on 2 cores, 3 at once took the lane from 76 s to 65 s; 4 were no faster).
const concurrency = availableParallelism() + 1;
// run() starts the files in the order given, the longest first (`node --test` sorts them by
// name); the report is the one `node --test` prints: spec on a terminal, else TAP.
run({ files, concurrency })
  .on('test:fail', () => {
    process.exitCode = 1;
  })
  .compose(process.stdout.isTTY ? new spec() : tap)
  .pipe(process.stdout);
