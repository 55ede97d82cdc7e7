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

