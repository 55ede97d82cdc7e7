// npm run mutate -- src/views/projection/projection.ts [more modules…]: Stryker on each module in turn,
// against the built tests listed for it in stryker.config.mjs (or SUBTEE_MUTATE_TESTS).
import { spawnSync } from 'node:child_process';

const modules = process.argv.slice(2);
if (modules.length === 0) {
  console.error('usage: npm run mutate -- src/MODULE.ts [src/MODULE.ts …]');
  process.exit(2);
}
let failed = 0;
for (const module of modules) {
  const r = spawnSync('stryker', ['run', 'stryker.config.mjs'], {
    stdio: 'inherit',
    env: { ...process.env, SUBTEE_MUTATE: module },
  });
  if (r.error) {
    console.error(`cannot run stryker: ${r.error.message} (npm install brings @stryker-mutator/core)`);
    process.exit(2);
  }
  if (r.status !== 0) failed++;
}
process.exit(failed > 0 ? 1 : 0);
