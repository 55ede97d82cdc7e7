import { SubteeError } from '../errors.js';

/**
 * One consumer's queue of values, read with `for await`. Values are pushed by the projection
 * as lines are routed; the reader pulls them. `break` (the iterator's `return`) releases the
 * queue at once. A feed ends when `end()` is called and its queue is drained, or fails at
 * the point `fail()` was called, after the values before it.
 */
export class Feed<T> implements AsyncIterableIterator<T> {
  private queue: T[] = [];
  private head = 0;
  private waiting: ((result: IteratorResult<T>) => void) | null = null;
  private rejectWaiting: ((err: unknown) => void) | null = null;
  private ended = false;
  private error: unknown = null;
  private released = false;
  private roomWaiters: Array<{ limit: number; resolve: () => void }> = [];

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
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = this.rejectWaiting = null;
      resolve({ value, done: false });
      return true;
    }
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
    if (this.waiting && this.backlog === 0) {
      const resolve = this.waiting;
      this.waiting = this.rejectWaiting = null;
      resolve({ value: undefined, done: true });
    }
  }

  fail(error: SubteeError): void {
    if (this.ended) return;
    if (this.rejectWaiting && this.backlog === 0) {
      const reject = this.rejectWaiting;
      this.waiting = this.rejectWaiting = null;
      this.ended = true;
      reject(error);
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
      this.wakeRoom();
      return Promise.resolve({ value, done: false });
    }
    if (this.ended || this.released) {
      const error = this.released ? null : this.error;
      // Read to the end: nothing more will be queued, so let go of it as `break` would.
      this.release();
      return error ? Promise.reject(error) : Promise.resolve({ value: undefined, done: true });
    }
    this.onPull();
    return new Promise((resolve, reject) => {
      this.waiting = resolve;
      this.rejectWaiting = reject;
    });
  }

  /** Resolves once at most `limit` values wait to be read (or the reader has gone). */
  room(limit: number): Promise<void> {
    if (this.backlog <= limit || this.released) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push({ limit, resolve }));
  }

  private wakeRoom(): void {
    if (this.roomWaiters.length === 0) return;
    const still: typeof this.roomWaiters = [];
    for (const waiter of this.roomWaiters) {
      if (this.backlog <= waiter.limit || this.released) waiter.resolve();
      else still.push(waiter);
    }
    this.roomWaiters = still;
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
    this.wakeRoom();
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = this.rejectWaiting = null;
      resolve({ value: undefined, done: true });
    }
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
