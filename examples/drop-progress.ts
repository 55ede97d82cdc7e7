// A stage plugin: leaves `task_progress` lines out of every sink.
import { createBatchTransform, definePlugin, type RecordBatch } from 'subtee';

export default definePlugin<Record<string, never>>({
  name: 'drop-progress',
  kind: 'stage', // or 'sink': a pass-through stage that also writes somewhere
  kit: '^0.1.0', // the subtee versions it supports
  options: {}, // accepted options (unknown keys are refused)
  // Records arrive in batches (arrays, one per input chunk); return the batch to pass on.
  create: () =>
    createBatchTransform({
      transformBatch: (batch: RecordBatch) =>
        batch.filter((rec) => !(rec.kind === 'line' && rec.value.subtype === 'task_progress')),
    }),
});
