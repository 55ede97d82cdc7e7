/** The values freezeDeep has frozen through: each is walked once, whoever hands it on again. */
const frozenThrough = new WeakSet<object>();

/** An object or array to freeze: a Buffer or typed array cannot be (its bytes stay writable). */
const isContainer = (value: unknown): value is object =>
  value !== null && typeof value === 'object' && !ArrayBuffer.isView(value);

/**
 * Freezes a value and every object and array in it, so a write anywhere inside (`b.text = …`
 * on a content block, a `push` on `message.content`) throws a TypeError in strict code. A loop
 * with its own stack, not recursion: the stream chooses how deep a value is. A part already
 * frozen is taken as frozen through (a parsed value has none but what this froze), which also
 * ends a cycle in a value a plugin made.
 */
export function freezeDeep(root: unknown): void {
  if (!isContainer(root) || frozenThrough.has(root)) return;
  frozenThrough.add(root);
  const pending: object[] = [root];
  while (pending.length > 0) {
    const node = pending.pop()!;
    Object.freeze(node);
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i];
        if (isContainer(child) && !Object.isFrozen(child)) pending.push(child);
      }
      continue;
    }
    // `for…in`, not Object.keys: no list made per object (a parsed object's keys are all its
    // own), half the time on small lines.
    for (const key in node) {
      const child: unknown = (node as Record<string, unknown>)[key];
      if (isContainer(child) && !Object.isFrozen(child)) pending.push(child);
    }
  }
}
