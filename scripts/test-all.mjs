#!/usr/bin/env node
// `npm test`'s runner, after its clean build: every test file, two at once, the longest first
// (LONGEST_OF_ALL in scripts/test-lanes.mjs; `node --test` would order them by name).
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { run } from 'node:test';
import { spec, tap } from 'node:test/reporters';
import { allFiles, failsTheLane } from './test-lanes.mjs';

// The tests' folders go under a memory-backed folder when the machine has one and TMPDIR is not
// set: on a virtual machine's disk each file created costs about a millisecond, and a test of
// 12,000 subagents creates 24,000 of them (that test alone ran in 31 s on disk, 18 s in memory).
const MEMORY = '/dev/shm';
if (process.env.TMPDIR === undefined && statSync(MEMORY, { throwIfNoEntry: false })?.isDirectory()) {
  const folder = mkdtempSync(`${MEMORY}/subtee-tests-`);
  process.env.TMPDIR = folder;
  process.on('exit', () => {
    try {
      rmSync(folder, { recursive: true, force: true });
    } catch (err) {
      process.stderr.write(`npm test: could not remove ${folder}: ${err.message}\n`);
    }
  });
}

// Two at once, as `node --test --test-concurrency=2` ran them: the end-to-end files run agent
// CLIs, Chromium and ClickHouse, whose timings a busier machine would stretch.
run({ files: allFiles(), concurrency: 2 })
  .on('test:fail', (event) => {
    if (failsTheLane(event)) process.exitCode = 1;
  })
  .compose(process.stdout.isTTY ? new spec() : tap)
  .pipe(process.stdout);
