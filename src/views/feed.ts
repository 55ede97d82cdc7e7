import { EventEmitter, once } from 'node:events';
import { SubteeError } from '../errors.js';

/** What a feed's `value` event carries when the feed ends or is released, instead of a value. */
const END: unique symbol = Symbol('end');

/**
 * One consumer's queue of values, read with `for await`. Values are pushed by the projection
 * as lines are routed; the reader pulls them. `break` (the iterator's `return`) releases the
 * queue at once. A feed ends when `end()` is called and its queue is drained, or fails at
 * the point `fail()` was called, after the values before it.
 */
export class Feed<T> implements AsyncIterableIterator<T> {
  private queue: T[] = [];
  private head = 0;
  private ended = false;
  private error: unknown = null;
  private released = false;
  /**
   * A reader waiting in `next` listens for `value` (a value handed straight to it, or END) and
   * `error` (the failure); `room` listens for `pulled`, emitted as a value is read or the
   * reader goes.
   */
  private readonly events = new EventEmitter();

  constructor(
    private readonly onPull: () => void = () => {},
    private readonly onRelease: () => void = () => {},
  ) {}

  /** Values queued and not yet read. */
  get backlog(): number {
    return this.queue.length - this.head;
  }

  get closed(): boolean {
    return this.released || this.ended;
  }

  /** Queues a value; true when it went straight to a consumer waiting for it. */
  push(value: T): boolean {
    if (this.released || this.ended) return false;
    if (this.events.emit('value', value)) return true;
    this.queue.push(value);
    return false;
  }

  /** The values queued and not yet read, oldest first. */
  queued(): readonly T[] {
    return this.queue.slice(this.head);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    // A reader waits only on an empty queue.
    this.events.emit('value', END);
  }

  fail(error: SubteeError): void {
    if (this.ended) return;
    if (this.events.listenerCount('value') > 0) {
      this.ended = true;
      this.events.emit('error', error);
      return;
    }
    this.error = error;
    this.end();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.backlog > 0) {
      const value = this.queue[this.head];
      this.queue[this.head++] = undefined as T;
      // Compact now and then so a long-lived feed does not keep a growing array.
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      this.onPull();
      this.events.emit('pulled');
      return Promise.resolve({ value, done: false });
    }
    if (this.ended || this.released) {
      const error = this.released ? null : this.error;
      // Read to the end: nothing more will be queued, so let go of it as `break` would.
      this.release();
      return error ? Promise.reject(error) : Promise.resolve({ value: undefined, done: true });
    }
    this.onPull();
    return once(this.events, 'value').then((args) => {
      const value = args[0] as T | typeof END;
      return value === END ? { value: undefined, done: true } : { value, done: false };
    });
  }

  /** Resolves once at most `limit` values wait to be read (or the reader has gone). */
  async room(limit: number): Promise<void> {
    while (this.backlog > limit && !this.released) await once(this.events, 'pulled');
  }

  return(): Promise<IteratorResult<T>> {
    this.release();
    return Promise.resolve({ value: undefined, done: true });
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.queue = [];
    this.head = 0;
    this.events.emit('pulled');
    this.events.emit('value', END);
    this.onRelease();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

/** Freezes a parsed JSON value and everything in it, with an explicit stack (no recursion). */
export function deepFreeze<T>(value: T): T {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item !== 'object' || item === null || Object.isFrozen(item)) continue;
    Object.freeze(item);
    for (const key of Object.keys(item)) stack.push((item as Record<string, unknown>)[key]);
  }
  return value;
}
