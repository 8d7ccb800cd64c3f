import type { Db } from '../../src/store/db.js'
import type { OpenStore } from '../../plugins/db.js'
import type { CreateOutcome, PlantRecord, PlantStore, StoreObserver } from '../../src/store/plant-store.js'

// A stand-in for the database and the plant store, for tests of what a
// request meets before a stored row matters (routing, authentication, media
// type, body, validation, errors, docs, request ids): no database is opened.
// It records every create the route asks for, so "nothing stored" is shown
// as "the store was never asked". What the real store does with a create is
// tested on both real databases (test/api/plants.test.ts and others).
export interface StubStore extends OpenStore {
  // Every create the route asked for, in order.
  readonly creates: PlantRecord[]
  // What a create answers; by default what the real store answers on an
  // empty database: created, then replayed for the same plant, a conflict
  // for a different one (absent tag equals absent tag).
  answer: (plant: PlantRecord) => Promise<CreateOutcome>
  // What the readiness probe says.
  ready: boolean
}

const noDatabase = async (): Promise<never> => {
  throw new Error('a stub store holds no database: a test that reads rows builds its app with buildTestApp')
}

function likeAnEmptyStore (): (plant: PlantRecord) => Promise<CreateOutcome> {
  const held = new Map<bigint, PlantRecord>()
  return async (plant) => {
    const stored = held.get(plant.id)
    if (stored === undefined) held.set(plant.id, plant)
    if (stored === undefined) return { kind: 'created', plant }
    return { kind: stored.name === plant.name && stored.tag === plant.tag ? 'replayed' : 'conflict', plant: stored }
  }
}

export function stubStore (): StubStore {
  const creates: PlantRecord[] = []
  // Told as the real store tells them (the metrics and tracing count on it).
  const observers: StoreObserver[] = []
  const db: Db = { kind: 'pglite', writers: 1, query: noDatabase, exec: noDatabase, writeBefore: noDatabase, transaction: noDatabase, close: async () => {} }
  const stub: StubStore = {
    creates,
    answer: likeAnEmptyStore(),
    ready: true,
    db,
    plants: {
      observe: (observer: StoreObserver) => { observers.push(observer) },
      stats: () => ({ queueDepth: 0, inFlight: 0 }),
      isMigrated: () => true,
      markMigrated: () => {},
      create: async (plant: PlantRecord) => {
        creates.push(plant)
        for (const o of observers) o.queued?.(plant)
        const outcome = await stub.answer(plant)
        for (const o of observers) o.answered?.(outcome.kind)
        return outcome
      },
      isReady: async () => stub.ready
    } satisfies PlantStore
  }
  return stub
}
