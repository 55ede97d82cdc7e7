// Codex streams that name many threads in one line, for the tests of what a line expands to.
/** A spawn naming `threads` agents with one prompt of `chars`, as `codex exec --json` prints it. */
export function codexFanOut(threads: number, chars: number): object[] {
  const ids = Array.from({ length: threads }, (_, i) => `thread-${i}`);
  const prompt = `${'do the part you are given. '.repeat(Math.ceil(chars / 27))}`.slice(0, chars);
  const item = { id: 'c1', type: 'collab_tool_call', tool: 'spawn_agent', receiver_thread_ids: ids, prompt };
  return [
    { type: 'thread.started', thread_id: 'main' },
    { type: 'item.completed', item: { ...item, status: 'completed' } },
  ];
}
