import type { Db } from './db.js'
import { createBatchWriter, type BatchWriterOptions } from './batch-writer.js'

export { samePlant } from './batch-writer.js'
export type { BatchWriterOptions } from './batch-writer.js'

// A plant as the store keeps it: the exact int64 id, tag absent as undefined.
export interface PlantRecord {
  id: bigint
  name: string
  tag?: string
}

export type CreateOutcome =
  | { kind: 'created', plant: PlantRecord }
  | { kind: 'replayed', plant: PlantRecord }
  | { kind: 'conflict', plant: PlantRecord }

export interface PlantStore {
  // Stores a new plant, or recognises a retry of the same plant, or refuses
  // one that would overwrite a different plant. Resolves only once the row is
  // committed.
  create(plant: PlantRecord): Promise<CreateOutcome>
}

// Creates go through the batching writer: the creates that arrive while a
// write is in flight share the next statement, and each still gets its own
// answer (see batch-writer.ts).
export function createPlantStore (db: Db, options: BatchWriterOptions = {}): PlantStore {
  return createBatchWriter(db, options)
}
