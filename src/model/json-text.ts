/**
 * A value as JSON text, what JSON.stringify gives, at any depth. JSON.stringify recurses once a
 * level and overflows the stack some 5,000 levels down; the stream chooses how deep a value is,
 * so past that the text is written by a loop with its own stack.
 */
export function jsonText(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch (err) {
    // A cycle or a BigInt is a TypeError, as it would be below: only depth is handled here.
    if (!(err instanceof RangeError)) throw err;
  }
  return jsonTextByLoop(value);
}

type Frame =
  | { value: readonly unknown[]; keys: null; at: number; wrote: boolean }
  | { value: Record<string, unknown>; keys: string[]; at: number; wrote: boolean };

/** JSON.stringify as a loop: `toJSON`, and what JSON has no text for, as JSON.stringify treats them. */
export function jsonTextByLoop(root: unknown): string | undefined {
  const parts: string[] = [];
  const stack: Frame[] = [];
  const onStack = new Set<object>();
  /** Writes a scalar, or opens a container; false when the value has no JSON text (undefined, a function). */
  const write = (raw: unknown, key: string): boolean => {
    let value = raw;
    if (value !== null && (typeof value === 'object' || typeof value === 'bigint')) {
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') value = toJSON.call(value, key);
    }
    if (value === null || typeof value !== 'object') {
      const text = JSON.stringify(value);
      if (text === undefined) return false;
      parts.push(text);
      return true;
    }
    // Boxed strings, numbers and booleans are written as their primitive.
    if (value instanceof String || value instanceof Number || value instanceof Boolean) {
      parts.push(JSON.stringify(value));
      return true;
    }
    if (onStack.has(value)) throw new TypeError('Converting circular structure to JSON');
    onStack.add(value);
    if (Array.isArray(value)) {
      parts.push('[');
      stack.push({ value, keys: null, at: 0, wrote: false });
    } else {
      parts.push('{');
      const object = value as Record<string, unknown>;
      stack.push({ value: object, keys: Object.keys(object), at: 0, wrote: false });
    }
    return true;
  };
  if (!write(root, '')) return undefined;
  while (stack.length > 0) {
    const top = stack[stack.length - 1];
    if (top.keys === null) {
      if (top.at === top.value.length) {
        parts.push(']');
        onStack.delete(top.value);
        stack.pop();
        continue;
      }
      const at = top.at++;
      if (at > 0) parts.push(',');
      // An element with no JSON text is `null`, as JSON.stringify writes it.
      if (!write(top.value[at], String(at))) parts.push('null');
      continue;
    }
    if (top.at === top.keys.length) {
      parts.push('}');
      onStack.delete(top.value);
      stack.pop();
      continue;
    }
    const key = top.keys[top.at++];
    const comma = top.wrote ? ',' : '';
    const before = parts.length;
    parts.push(`${comma}${JSON.stringify(key)}:`);
    // A member with no JSON text is left out, its key with it.
    if (write(top.value[key], key)) top.wrote = true;
    else parts.length = before;
  }
  return parts.join('');
}
