/** The longest delay a Node timer takes (2^31 - 1 ms, about 24.8 days); a longer one fires at once. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A delay for setTimeout: `ms` within what a Node timer takes (a longer wait is re-armed). */
export const timerMs = (ms: number): number => Math.min(Math.max(0, ms), MAX_TIMER_MS);
