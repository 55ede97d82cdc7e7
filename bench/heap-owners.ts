/**
 * Where a heap's new objects belong: given V8 heap snapshots taken before and during a run
 * (`v8.writeHeapSnapshot`), the bytes of every object the second has and the first had not,
 * by owner. An object's owner is the nearest of the named structures (the tree, the cost
 * ledger, the files sink…) on its shortest path from the heap's roots; objects below none of
 * them are `other` (the chain's buffers, compiled code, V8's own caches).
 */
import { readFileSync } from 'node:fs';

/** The structures a subagent's live state is kept in, by the class name V8 records for them. */
export const OWNER_CLASSES: Readonly<Record<string, string>> = Object.freeze({
  ChannelTree: 'tree',
  CostLedger: 'cost ledger',
  InFlight: 'in-flight',
  ThinkingCounts: 'thinking counts',
  FilesSink: 'files sink',
  FileChannelStore: 'files sink',
  AppendFiles: 'files sink',
  Session: 'run model (other)',
});

export const OTHER_OWNER = 'other';

interface SnapshotMeta {
  node_fields: string[];
  edge_fields: string[];
  node_types: [string[]];
  edge_types: [string[]];
}

interface Snapshot {
  snapshot: { meta: SnapshotMeta };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** The ids of a snapshot's objects. */
export function snapshotIds(path: string): Set<number> {
  const snap = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const at = fields.indexOf('id');
  const ids = new Set<number>();
  for (let i = 0; i < snap.nodes.length; i += width) ids.add(snap.nodes[i + at]);
  return ids;
}

/**
 * Bytes (V8's `self_size`) of the objects in the snapshot at `path` whose ids `before` lacks,
 * by owner; `total` is their sum, so the owners add up to it.
 */
export function newBytesByOwner(
  path: string,
  before: Set<number>,
): { total: number; owners: Map<string, number> } {
  const snap = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
  const meta = snap.snapshot.meta;
  const nodeWidth = meta.node_fields.length;
  const edgeWidth = meta.edge_fields.length;
  const [nameAt, idAt, sizeAt, edgeCountAt] = ['name', 'id', 'self_size', 'edge_count'].map((f) =>
    meta.node_fields.indexOf(f),
  );
  const [edgeTypeAt, toAt] = ['type', 'to_node'].map((f) => meta.edge_fields.indexOf(f));
  const weak = meta.edge_types[0].indexOf('weak');
  const { nodes, edges, strings } = snap;
  const count = nodes.length / nodeWidth;
  const firstEdge = new Uint32Array(count + 1);
  for (let n = 0; n < count; n++) firstEdge[n + 1] = firstEdge[n] + nodes[n * nodeWidth + edgeCountAt];
  // Breadth first from the root (node 0): each object takes the owner of the path that first
  // reaches it, changed by passing through a named structure.
  const ownerNames = [OTHER_OWNER];
  const ownerOf = new Int32Array(count).fill(-1);
  ownerOf[0] = 0;
  const queue = new Uint32Array(count);
  let head = 0;
  let tail = 0;
  queue[tail++] = 0;
  while (head < tail) {
    const n = queue[head++];
    const className = strings[nodes[n * nodeWidth + nameAt]];
    let owner = ownerOf[n];
    if (Object.hasOwn(OWNER_CLASSES, className)) {
      const named = OWNER_CLASSES[className];
      owner = ownerNames.indexOf(named);
      if (owner < 0) owner = ownerNames.push(named) - 1;
    }
    for (let e = firstEdge[n]; e < firstEdge[n + 1]; e++) {
      if (edges[e * edgeWidth + edgeTypeAt] === weak) continue;
      const to = edges[e * edgeWidth + toAt] / nodeWidth;
      if (ownerOf[to] !== -1) continue;
      ownerOf[to] = owner;
      queue[tail++] = to;
    }
  }
  const owners = new Map<string, number>();
  let total = 0;
  for (let n = 0; n < count; n++) {
    if (before.has(nodes[n * nodeWidth + idAt])) continue;
    const size = nodes[n * nodeWidth + sizeAt];
    const name = ownerNames[Math.max(0, ownerOf[n])];
    owners.set(name, (owners.get(name) ?? 0) + size);
    total += size;
  }
  return { total, owners };
}
