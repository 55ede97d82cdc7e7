#!/usr/bin/env node
// `npm test`'s runner, after its clean build: every test file, two at once, the longest first
// (LONGEST_OF_ALL in scripts/test-lanes.mjs; `node --test` would order them by name).
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { allFiles, failsTheLane, testFoldersInMemory } from './test-lanes.mjs';

testFoldersInMemory();

// Two at once, as `node --test --test-concurrency=2` ran them: the end-to-end files run agent
// CLIs, Chromium and ClickHouse, whose timings a busier machine would stretch.
run({ files: allFiles(), concurrency: 2 })
  .on('test:fail', (event) => {
    if (failsTheLane(event)) process.exitCode = 1;
  })
  .compose(process.stdout.isTTY ? new spec() : tap)
  .pipe(process.stdout);
