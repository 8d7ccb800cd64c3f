import assert from 'node:assert/strict'
import t from 'tap'
import fc from 'fast-check'
import { parseJsonBody } from '../../src/json-body.js'
import * as oracle from './json-oracle.js'
import { fuzzRuns } from '../support/fuzz.js'

// The body parser (JSON.parse, a counting pass and a reviver) against the
// hand-written parser it replaced (json-oracle.ts), on crafted and generated
// documents, valid and not: the same value, or the same refusal.

type Outcome = { value: unknown } | { kind: string, message: string }

const KINDS: Array<[RegExp, string]> = [
  [/^Body is not valid UTF-8$/, 'utf8'], [/^Body is empty$/, 'empty'], [/^Duplicate key /, 'duplicate'],
  [/^Body nests deeper than 1000 levels at position \d+$/, 'depth'], [/^Body is not valid JSON: /, 'syntax']
]

function outcome (parse: (bytes: Buffer) => unknown, bytes: Buffer): Outcome {
  try {
    return { value: parse(bytes) }
  } catch (err) {
    const message = (err as Error).message
    assert.equal((err as { statusCode?: number }).statusCode, 400, message)
    const kind = KINDS.find(([pattern]) => pattern.test(message))?.[1]
    assert.ok(kind !== undefined, `a refusal of an unknown kind: ${message}`)
    return { kind, message }
  }
}

// The refusals that may differ: the old parser reported the first problem in
// the text, the new one checks depth before grammar and grammar before keys.
const ALLOWED = new Set(['syntax>depth', 'duplicate>syntax', 'duplicate>depth'])

// Why the two outcomes differ, or undefined when they agree.
function difference (want: Outcome, got: Outcome): string | undefined {
  if ('value' in want) {
    if (!('value' in got)) return `accepted by the old parser, refused: ${got.message}`
    try {
      assert.deepStrictEqual(got.value, want.value)
    } catch (err) {
      return (err as Error).message.slice(0, 500)
    }
    return undefined
  }
  if (!('kind' in got)) return `refused by the old parser (${want.message}), accepted`
  // JSON.parse words its own syntax errors; every other message is ours.
  if (got.kind === want.kind) return got.kind === 'syntax' || got.message === want.message ? undefined : `${want.message} / ${got.message}`
  return ALLOWED.has(`${want.kind}>${got.kind}`) ? undefined : `${want.message} / ${got.message}`
}

const deep = (levels: number, inner = '1'): string => '{"a":['.repeat(levels / 2) + inner + ']}'.repeat(levels / 2)

const CRAFTED: Array<string | Buffer> = [
  // every id case of the contract
  ...['7', '7.0', '7e2', '-0', '1e-400', '9007199254740993.5', '1e400', '-1e400', '9007199254740993', '9223372036854775807',
    '-9223372036854775808', '9223372036854775808', '-9223372036854775809', '18446744073709551616', '1e19', '1.5', '"7"', 'null', 'true'
  ].map(id => `{"id": ${id}, "name": "a"}`),
  '{"a":1,"\\u0061":2}', '{"\\u0061":1,"a":1}', '{"__proto__":1,"__proto__":1}', '{"__proto__":{"x":1},"constructor":{"prototype":1}}',
  '{"a:b":1,"c":":","d":"\\":"}', '{"a\\\\":1,"b":"\\\\"}', '{"a\\\\":1,"a\\\\":1}', '["[{", "}]", ":", "\\"["]',
  '{"k":{"a":1,"a":2},"k":1}', '[{"a":1},{"a":1}]', deep(1000), deep(1002), deep(998, '{"a":1,"a":1}'), '[' + deep(1000) + ']',
  '\ufeff{"a":1}', '\ufeff', '\ufeff\ufeff{}', ' \t\r\n', '', '{"a":1} x', '{"a":1,}',
  Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22]), Buffer.from([0xef, 0xbb])
]

// Bodies that make V8 in Node 24 (and 26 before 26.12) misread an escaped
// key once similar keys were parsed: a valid create with unknown properties,
// each key and value as the oracle reads them, on every Node the service runs on.
const MISREAD_BAIT = Array.from({ length: 300 }, (_, i) => [
  `{"id":${i},"name":"F${i}","tag":"g","\\"":1,"x\\u0061":3}`,
  `{"id":${i},"name":"F","\\u0074ag":"t${i}","\\u0022":2}`,
  `{"rule10":${i},"\\u005c":1}`,
  `{"rule10":${i},"\\u0041":3,"b":{"\\u0041":[${i}]}}`
]).flat()

// Generated documents, printed from pieces so that they hit what matters:
// keys from a few (often repeated, often escaped) spellings, numbers in every
// grammar shape, strings with quotes, colons, backslashes and surrogates.
const escape = (text: string): string => [...text].map(ch => [...ch].map(u => '\\u' + (u.codePointAt(0) ?? 0).toString(16).padStart(4, '0')).join('')).join('')
const stringText = fc.tuple(fc.oneof(fc.constantFrom('a', 'b', ':', '"', '\\', '__proto__', 'constructor', '{[', '\ud800', ''), fc.string({ unit: 'binary', maxLength: 8 })), fc.boolean())
  .map(([text, escaped]) => escaped ? `"${escape(text)}"` : JSON.stringify(text))
const digits = (min: number, max: number): fc.Arbitrary<string> => fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max })
const numberText = fc.oneof(
  fc.tuple(fc.constantFrom('', '-'), fc.oneof(fc.constant('0'), fc.tuple(fc.constantFrom(...'123456789'), digits(0, 22)).map(([a, b]) => a + b)),
    fc.option(digits(1, 22).map(d => '.' + d)), fc.option(fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), digits(1, 4)).map(p => p.join(''))))
    .map(([sign, whole, fraction, exponent]) => sign + whole + (fraction ?? '') + (exponent ?? '')),
  fc.double().filter(Number.isFinite).map(String), fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String)
)
const ws = fc.constantFrom('', '', ' ', '\n\t ', '\r\n')
const { doc } = fc.letrec<{ doc: string, value: string, array: string, object: string }>(tie => ({
  doc: fc.tuple(ws, tie('value'), ws).map(parts => parts.join('')),
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true },
    numberText, stringText, fc.constantFrom('true', 'false', 'null'), tie('array'), tie('object')),
  array: fc.array(fc.tuple(ws, tie('value'), ws), { maxLength: 5 }).map(items => '[' + items.map(p => p.join('')).join(',') + ']'),
  object: fc.array(fc.tuple(ws, stringText, ws, ws, tie('value'), ws), { maxLength: 5 })
    .map(members => '{' + members.map(([a, key, b, c, value, d]) => `${a}${key}${b}:${c}${value}${d}`).join(',') + '}')
}))

// A valid document edited a few times: most edits break it, some do not.
const mutated = fc.tuple(doc, fc.array(fc.tuple(fc.nat(), fc.constantFrom('insert', 'delete', 'replace'),
  fc.constantFrom(...'{}[],:"\\0.e-1 x'.split(''), '\u0000', '\ufeff', 'true')), { minLength: 1, maxLength: 3 }))
  .map(([text, edits]) => edits.reduce((out, [at, op, piece]) => {
    const i = at % (out.length + 1)
    return out.slice(0, i) + (op === 'delete' ? '' : piece) + out.slice(op === 'insert' ? i : i + 1)
  }, text))

// Bytes that may not be UTF-8: a document with bytes spliced in.
const spliced = fc.tuple(doc, fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 4 }))
  .map(([text, at, bytes]) => {
    const buffer = Buffer.from(text)
    const i = at % (buffer.length + 1)
    return Buffer.concat([buffer.subarray(0, i), bytes, buffer.subarray(i)])
  })

t.test('the new parser agrees with the old one', async t => {
  const seed = Date.now()
  const sample = <T>(arbitrary: fc.Arbitrary<T>, numRuns: number): T[] => fc.sample(arbitrary, { numRuns, seed })
  const documents = [
    ...[...CRAFTED, ...MISREAD_BAIT].map(input => typeof input === 'string' ? Buffer.from(input) : input),
    ...sample(doc, fuzzRuns(8000)).map(text => Buffer.from(text)),
    ...sample(fc.jsonValue(), fuzzRuns(2000)).map(value => Buffer.from(JSON.stringify(value))),
    ...sample(mutated, fuzzRuns(8000)).map(text => Buffer.from(text)),
    ...sample(spliced, fuzzRuns(2000))
  ]
  const got = documents.map(bytes => outcome(parseJsonBody, bytes))
  const want = documents.map(bytes => outcome(oracle.parseJsonBody, bytes))
  const differences = documents.flatMap((bytes, i) => {
    const why = difference(want[i] as Outcome, got[i] as Outcome)
    return why === undefined ? [] : [`${why}: ${bytes.toString('utf8').slice(0, 300)}`]
  })
  t.same(differences.slice(0, 5), [], `seed ${seed}: ${differences.length} of ${documents.length} documents differ`)
  const reordered = want.filter((o, i) => 'kind' in o && 'kind' in (got[i] as Outcome) && o.kind !== (got[i] as { kind: string }).kind).length
  // The generators make both kinds of document, each at least a quarter of what they made.
  const generated = want.slice(CRAFTED.length + MISREAD_BAIT.length)
  const accepted = generated.filter(o => 'value' in o).length
  t.ok(accepted > generated.length / 4 && generated.length - accepted > generated.length / 4,
    `${accepted} accepted, ${generated.length - accepted} refused of ${generated.length} generated (${reordered} for another reason first)`)
})
