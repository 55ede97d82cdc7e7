import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Feed } from '../src/views/feed.js';

test('a producer waiting for room in a feed goes on when the reader breaks out of its loop', async () => {
  const feed = new Feed<number>();
  for (let i = 0; i < 5; i++) feed.push(i);
  let roomMade = false;
  for await (const value of feed) {
    assert.equal(value, 0);
    // The producer waits while more than one value is queued: four are.
    void feed.room(1).then(() => (roomMade = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(roomMade, false);
    break;
  }
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(roomMade, true);
});
