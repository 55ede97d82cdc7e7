/**
 * `map` as a memory of the latest `max` keys: `key` is set as the newest (an old entry of it
 * moves up), and the oldest key goes once there are more than `max`. For the state a run keeps
 * per id it has seen (calls, agents) that a stream of any length must not grow without bound.
 */
export function rememberLatest<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) map.delete(map.keys().next().value as K);
}

/**
 * How many of a channel's latest API messages its usage is remembered for, the one its lines
 * are arriving for among them: a message whose lines resume after another message's (A, B, A)
 * within these is counted once; one older than these is counted again. A fixed few, so a
 * channel's state does not grow with its messages.
 */
export const MESSAGES_REMEMBERED = 4;

/**
 * A channel's lines turn from the message `current` to another: `earlier` (newest first, at
 * most MESSAGES_REMEMBERED − 1) takes `current` first, dropping the oldest, and gives back the
 * one `is` finds among those before, if any, to be the current one again.
 */
export function resumeMessage<T>(earlier: T[], current: T | null, is: (message: T) => boolean): T | null {
  const at = earlier.findIndex(is);
  const found = at < 0 ? null : earlier.splice(at, 1)[0];
  if (current !== null) {
    earlier.unshift(current);
    if (earlier.length >= MESSAGES_REMEMBERED) earlier.pop();
  }
  return found;
}
