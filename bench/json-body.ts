// npx tsx bench/json-body.ts [rounds]: what parsing a request body costs, in
// wall µs per body (best of the rounds), for a typical create body and for
// two 100 KB bodies (the create fields plus an unknown array of small
// objects, strings and numbers, an id past 2^53 among them), one with
// escapes in its strings and one without. Run it on an idle machine;
// compare two versions of the parser by running it in each checkout.
import { parseJsonBody } from '../src/json-body.js'

const rounds = Number(process.argv[2] ?? 5)

const create = Buffer.from('{"id": 4217, "name": "Monstera deliciosa", "tag": "indoor"}')

function bigBody (bytes: number, quote: string): Buffer {
  const items: string[] = []
  let length = 0
  for (let i = 0; length < bytes; i++) {
    const item = `{"n": ${i}, "price": ${(i * 1.25).toFixed(2)}, "label": "plant ${quote}${i}${quote} é🌱", "ok": ${i % 2 === 0}, "parts": [${i}, null, "x"]}`
    items.push(item)
    length += item.length + 2
  }
  return Buffer.from(`{"id": 9007199254740993, "name": "Ficus", "tag": "big", "extra": [${items.join(', ')}]}`)
}
const escaped = bigBody(100 * 1024, '\\"')
const plain = bigBody(100 * 1024, "'")

// Best of `rounds` timings of `count` parses, so a busy moment of the machine
// does not count.
function microsPerBody (body: Buffer, count: number): number {
  for (let i = 0; i < count; i++) parseJsonBody(body)
  let best = Infinity
  for (let round = 0; round < rounds; round++) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < count; i++) parseJsonBody(body)
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1000 / count)
  }
  return best
}

console.log(`create body (${create.length} B): ${microsPerBody(create, 200_000).toFixed(2)} µs per body`)
console.log(`100 KB body with escapes (${escaped.length} B): ${microsPerBody(escaped, 300).toFixed(1)} µs per body`)
console.log(`100 KB body without (${plain.length} B): ${microsPerBody(plain, 300).toFixed(1)} µs per body`)
