import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';

/**
 * The young generation the command line lets V8 grow to: two semi-spaces of 8 MiB.
 *
 * Under steady allocation V8 doubles its semi-spaces from 1 MiB up to 16 MiB each, and the
 * two 16 MiB spaces stay committed for the rest of the process: with 10,000 subagents that
 * was 32 MB of a peak of 146–155 MB, while what lives in them between two scavenges is a few
 * MB (`npm run bench -- --only fanout`). Two 8 MiB spaces (what `--max-semi-space-size=8`
 * gives) brought that peak to 130–133 MB at the same speed on every bench input; 1 MiB ones
 * promote so much that the old generation grows more than the young one shrinks (176–180 MB).
 * A process cannot set its own `--max-semi-space-size` once it runs, and a shebang cannot
 * pass it portably (`env -S`), so the cap is kept from inside: V8 reads its growth factor
 * each time it grows the young generation, so it is 1 while the young generation is at the
 * cap and 2 below it (V8 shrinks it again after an idle spell, and it must be able to grow).
 */
export const YOUNG_GENERATION_CAP_BYTES = 16 * 1024 * 1024;

/** How often the size is looked at: growth is by doubling, a few times per process. */
const CHECK_EVERY_MS = 20;

/** The growth factor set last (V8's own is 2). */
let growthFactor = 2;

/**
 * One look at the young generation's size (both semi-spaces), setting V8's growth factor to
 * match: what the timer of `capYoungGeneration` does, for work that holds the event loop
 * (`subtee report`).
 */
export function keepYoungGenerationCapped(): void {
  const young = getHeapSpaceStatistics().find((space) => space.space_name === 'new_space');
  if (young === undefined) return;
  const wanted = young.space_size >= YOUNG_GENERATION_CAP_BYTES ? 1 : 2;
  if (wanted === growthFactor) return;
  growthFactor = wanted;
  setFlagsFromString(`--semi-space-growth-factor=${wanted}`);
}

/**
 * Keeps this process's young generation at YOUNG_GENERATION_CAP_BYTES, for the command line
 * only: a program that embeds subtee chooses its own heap, and so does a user who gives a
 * semi-space flag to Node. The timer never keeps the process alive; work that holds the
 * event loop longer than it (the `--html` page at a run's end) is not covered by it.
 */
export function capYoungGeneration(): void {
  // Whoever sized the young generation themselves keeps their size.
  const given = [...process.execArgv, process.env.NODE_OPTIONS ?? ''].join(' ');
  if (/--(?:max-|min-)?semi[-_]space[-_]/.test(given)) return;
  setInterval(keepYoungGenerationCapped, CHECK_EVERY_MS).unref();
}
