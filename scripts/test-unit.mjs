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
// Two files more than cores: a file waiting on a child process, a server or a timer leaves
// its core to another (on 2 cores, with the longest files first, 4 at once took about 3 s
// less than 3, in each of two pairs of runs).
const concurrency = availableParallelism() + 2;
// run() starts the files in the order given, the longest first (`node --test` sorts them by
// name); the report is the one `node --test` prints: spec on a terminal, else TAP.
run({ files, concurrency })
  .on('test:fail', () => {
    process.exitCode = 1;
  })
  .compose(process.stdout.isTTY ? new spec() : tap)
  .pipe(process.stdout);
