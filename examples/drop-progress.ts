// A stage plugin: leaves `task_progress` lines out of every sink.
import { definePlugin } from 'subtee';

export default definePlugin<Record<string, never>>({
  name: 'drop-progress',
  kind: 'stage', // or 'sink': it only looks, and records pass on unchanged
  kit: '^0.1.0', // the subtee versions it supports
  reads: ['system'], // the line types it is called for; every other record passes untouched
  options: {}, // accepted options (unknown keys are refused)
  // Called once per record, in order: return it (or another) to hand on, null to drop it.
  create: () => (rec) => (rec.kind === 'line' && rec.value.subtype === 'task_progress' ? null : rec),
});
