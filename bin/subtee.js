#!/usr/bin/env node
import { setFlagsFromString } from 'node:v8';
import { main } from '../dist/src/cli/main.js';

// V8 may decide, from one young collection's survivors, to allocate an object literal's later
// objects straight in the old generation. With 10,000 subagents it now and then chose a site
// whose objects die young, and the input chunks they point at then waited for a full
// collection: one run in three peaked near 178 MB instead of 148 MB, at the same speed.
// Without these decisions no run did (and no input measured ran slower); see bench/README.md.
setFlagsFromString('--no-allocation-site-pretenuring');

process.exitCode = await main(process.argv.slice(2));
