#!/usr/bin/env node
// `npm run test:unit`: the quick lane (scripts/test-lanes.mjs says which files); `npm test`
// runs everything.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { unitFiles } from './test-lanes.mjs';

const files = unitFiles(join('dist', 'test'));
const r = spawnSync(process.execPath, ['--test', '--test-concurrency=2', ...files], { stdio: 'inherit' });
process.exit(r.status ?? 1);
