// What the store keeps and what a create ends as. A create that does not end
// in one of these was refused as unavailable (StoreUnavailableError, 503).

// A plant as the store keeps it: the exact int64 id, tag absent as undefined.
export interface PlantRecord {
  id: bigint
  name: string
  tag?: string
}

// created: stored now; replayed: the same plant was already stored;
// conflict: a different plant was (nothing overwritten).
export type CreateOutcome =
  | { kind: 'created', plant: PlantRecord }
  | { kind: 'replayed', plant: PlantRecord }
  | { kind: 'conflict', plant: PlantRecord }
