#!/usr/bin/env node
import { main } from '../dist/src/cli/main.js';
import { capYoungGeneration } from '../dist/src/cli/young-generation.js';

capYoungGeneration();
process.exitCode = await main(process.argv.slice(2));
