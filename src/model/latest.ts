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
 * How many of a channel's latest API messages it remembers, the one its lines are arriving
 * for among them: a message whose lines resume after another message's (A, B, A) within these
 * is not counted again; one older than these is. A fixed few, so a channel's state does not
 * grow with its messages.
 */
export const MESSAGES_REMEMBERED = 4;

/**
 * A channel's lines turn from the message `id` to another: `earlier` (the ids of the messages
 * before the current one, newest first, at most MESSAGES_REMEMBERED − 1) takes it first,
 * dropping the oldest. Only ids are kept (the strings the lines' values already hold): a
 * resumed message's lines add nothing, each repeating the usage its first lines stated.
 */
export function rememberEarlier(earlier: string[], id: string): void {
  earlier.unshift(id);
  if (earlier.length >= MESSAGES_REMEMBERED) earlier.pop();
}
