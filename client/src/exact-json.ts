// The NewPlant body with the id written exactly. JSON.stringify cannot take a
// bigint, and a `number` past 2^53-1 is already rounded before it is written
// (9007199254740993 becomes …992: another plant). So the id's decimal digits
// are written by hand as a bare JSON number; name and tag go through
// JSON.stringify, which escapes strings correctly.

export type PlantId = bigint | number

export interface NewPlantInput {
  id: PlantId
  name: string
  tag?: string
}

// The id's exact decimal digits, or a TypeError for a number that may
// already have been rounded (or is not a whole number at all).
export function idDigits (id: PlantId): string {
  if (typeof id === 'bigint') return id.toString()
  if (typeof id === 'number' && Number.isSafeInteger(id)) return String(id)
  throw new TypeError(
    `plant id ${String(id)} is not a safe integer: a number is exact only up to 2^53-1 ` +
    '(9007199254740991); pass larger ids as a bigint, e.g. 9007199254740993n'
  )
}

export function newPlantJson ({ id, name, tag }: NewPlantInput): string {
  const digits = idDigits(id)
  // `{"name":…}` or `{"name":…,"tag":…}`: the id goes in front of its first key.
  const rest = JSON.stringify(tag === undefined ? { name } : { name, tag })
  return `{"id":${digits},${rest.slice(1)}`
}
