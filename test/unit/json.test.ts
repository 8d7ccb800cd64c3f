import assert from 'node:assert/strict'
import t from 'tap'
import fc from 'fast-check'
import { BEYOND_INT64, JsonBodyError, MAX_DEPTH, parseJsonBody, syntaxFault } from '../../src/json-body.js'
import { fuzzRuns } from '../support/fuzz.js'

// The type of the t a subtest callback receives.
type Test = Parameters<Parameters<typeof t.test>[0]>[0]

const parse = (input: string | Buffer): unknown =>
  parseJsonBody(typeof input === 'string' ? Buffer.from(input) : input)

// Returns the error parse threw, failing the test unless it is a JsonBodyError.
function rejection (t: Test, input: string | Buffer, message: RegExp): JsonBodyError | undefined {
  const label = typeof input === 'string' ? JSON.stringify(input.slice(0, 40)) : `bytes ${input.toString('hex').slice(0, 40)}`
  try {
    const value = parse(input)
    t.fail(`${label} should be rejected`, { value })
    return undefined
  } catch (err) {
    if (!(err instanceof JsonBodyError)) {
      t.fail(`${label} threw something other than JsonBodyError`, { err })
      return undefined
    }
    t.match(err.message, message, `${label}: ${err.message}`)
    return err
  }
}

// Runs a fast-check property, `runs` cases under the full fuzz budget; a failure reports the shrunk counterexample.
function property (t: Test, name: string, prop: fc.IProperty<any>, runs = 300): void {
  t.doesNotThrow(() => fc.assert(prop, { numRuns: fuzzRuns(runs) }), name)
}

// Nesting depth of a parsed value, walked without recursion.
function depthOf (value: unknown): number {
  let depth = 0
  let level: unknown[] = [value]
  for (;;) {
    const containers = level.filter(v => v !== null && typeof v === 'object')
    if (containers.length === 0) return depth
    depth++
    level = containers.flatMap(v => Object.values(v as object))
  }
}

t.test('the error type carries a 400 status', async t => {
  const err = rejection(t, '{', /^Body is not valid JSON: /)
  t.ok(err instanceof Error)
  t.equal(err?.statusCode, 400)
  t.equal(err?.name, 'JsonBodyError')
})

t.test('rule 1: the body must be valid UTF-8', async t => {
  const invalid: Array<[string, number[]]> = [
    ['stray continuation byte', [0x22, 0x80, 0x22]],
    ['0xff', [0x22, 0xff, 0x22]],
    ['truncated sequence', [0x22, 0xc3, 0x22]],
    ['overlong encoding of /', [0x22, 0xc0, 0xaf, 0x22]],
    ['UTF-8 encoded surrogate', [0x22, 0xed, 0xa0, 0x80, 0x22]],
    ['code point above U+10FFFF', [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22]],
    ['invalid byte outside strings', [0x7b, 0xfe, 0x7d]]
  ]
  for (const [what, bytes] of invalid) {
    t.test(what, async t => { rejection(t, Buffer.from(bytes), /^Body is not valid UTF-8$/) })
  }
  t.equal(parse('"é€🌱"'), 'é€🌱', 'multi-byte characters decode')
  t.same(parse(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}')])), { a: 1 }, 'a leading BOM is ignored')
})

t.test('rule 2: strict RFC 8259 grammar', async t => {
  t.test('empty bodies', async t => {
    for (const input of ['', ' ', ' \n\t\r ', '\ufeff']) rejection(t, input, /^Body is empty$/)
  })

  t.test('every JSON value is accepted at the top level', async t => {
    t.equal(parse('1'), 1)
    t.equal(parse('"x"'), 'x')
    t.equal(parse('true'), true)
    t.equal(parse('false'), false)
    t.equal(parse('null'), null)
    t.same(parse('[]'), [])
    t.same(parse('{}'), {})
    t.same(parse(' \t\r\n[ 1 , "a" , { "b" : [ ] , "c" : { } } , null ]\n'), [1, 'a', { b: [], c: {} }, null])
    t.same(parse('{"a":[true,false,null,-1.25e+2,"\\u007f\u2028"]}'), { a: [true, false, null, -125, '\u007f\u2028'] })
  })

  const invalid = [
    '{"a":1} x', '{"a":1}}', '[1]]', '1 2', '{"a":1}{', '"a""b"',
    '01', '-01', '00', '.5', '-.5', '1.', '1.e5', '+1', '-', '--1', '1e', '1e+', '1E-', '0x10', '1e5.5', '.e1',
    'NaN', 'Infinity', '-Infinity', 'True', 'nul', 'tru', 'fals', 'undefined',
    "'a'", "{'a':1}", '{a:1}', '{"a"}', '{"a" 1}', '{"a":}', '{1:1}', '[1 2]', '{"a":1 "b":2}',
    '{"a":1 /* c */}', '// c\n1', '# c\n1', '[1,]', '{"a":1,}', '[,1]', '{,}', '[,]',
    '"a\tb"', '"a\nb"', '"\u0000"', '"\u001f"', '"\\x41"', '"\\u12"', '"\\u12G4"', '"\\U0041"', '"\\a"', '"\\\'"', '"\\',
    '"abc', '"', '[', '{', '{"a":', '["a"', '{"a":1', '[1,',
    '\u00a01', '\f1', '\v1', '1\u00a0'
  ]
  for (const input of invalid) {
    t.test(JSON.stringify(input), async t => { rejection(t, input, /^Body is not valid JSON: /) })
  }
})

t.test('rule 3: duplicate keys are rejected, whatever their values', async t => {
  rejection(t, '{"a":1,"a":1}', /^Duplicate key "a" in object at position 7$/)
  rejection(t, '{"a":1,"a":2}', /Duplicate key "a" in object/)
  rejection(t, '{"a":{"b":1},"a":{"b":1}}', /Duplicate key "a" in object/)
  rejection(t, '{"a":1,"\\u0061":2}', /Duplicate key "a" in object/)
  rejection(t, '{"\\u00e9":1,"é":2}', /Duplicate key "é" in object/)
  rejection(t, '{"x":{"b":1,"b":2}}', /Duplicate key "b" in object/)
  rejection(t, '[{"a":1},{"c":1,"c":1}]', /Duplicate key "c" in object/)
  rejection(t, '{"__proto__":1,"__proto__":1}', /Duplicate key "__proto__" in object/)
  rejection(t, '{"constructor":1,"constructor":1}', /Duplicate key "constructor" in object/)
  rejection(t, '{"toString":1,"toString":1}', /Duplicate key "toString" in object/)
  rejection(t, '{"":1,"":1}', /Duplicate key "" in object/)
  t.same(parse('[{"a":1},{"a":1}]'), [{ a: 1 }, { a: 1 }], 'the same key in two objects is fine')
  t.same(parse('{"a":{"a":1}}'), { a: { a: 1 } }, 'the same key at two levels is fine')
  t.same(parse('{"toString":1}'), { toString: 1 }, 'keys of Object.prototype are not duplicates')
  t.same(parse('{"a:b":1,"c":":","d":"\\":"}'), { 'a:b': 1, c: ':', d: '":' }, 'colons in strings are not members')
  t.same(parse('{"a\\\\":1,"b":"\\\\"}'), { 'a\\': 1, b: '\\' }, 'a string may end in an escaped backslash')

  const key = 'k'.repeat(100_000)
  const err = rejection(t, `{"${key}":1,"${key}":1}`, /^Duplicate key "k{20}…" in object at position 100006$/)
  t.ok((err?.message.length ?? Infinity) < 100, 'a huge key is not echoed')
})

t.test('rule 4: __proto__ and constructor are ordinary own properties', async t => {
  const proto = parse('{"__proto__":{"polluted":1},"x":2}') as Record<string, unknown>
  t.equal(Object.getPrototypeOf(proto), Object.prototype, 'the result is a plain object')
  t.ok(Object.hasOwn(proto, '__proto__'), '__proto__ is an own property')
  t.ok(Object.prototype.propertyIsEnumerable.call(proto, '__proto__'), 'and enumerable')
  t.same(Object.keys(proto), ['__proto__', 'x'])
  t.same(Object.getOwnPropertyDescriptor(proto, '__proto__'), { value: { polluted: 1 }, enumerable: true, writable: true, configurable: true })
  t.equal((proto as { polluted?: unknown }).polluted, undefined, 'the prototype was not replaced')

  const nested = parse('[{"a":{"__proto__":[1]}}]') as Array<{ a: object }>
  t.equal(Object.getPrototypeOf(nested[0]?.a), Object.prototype, 'nested objects too')
  t.same(Object.getOwnPropertyDescriptor(nested[0]?.a, '__proto__')?.value, [1])

  const ctor = parse('{"constructor":{"prototype":{"polluted":1}}}') as Record<string, unknown>
  t.ok(Object.hasOwn(ctor, 'constructor'))
  t.same(ctor.constructor, { prototype: { polluted: 1 } })
  t.equal(Object.getPrototypeOf(ctor), Object.prototype)

  t.same(parse('{"\\u005f_proto__":5}'), JSON.parse('{"__proto__":5}'), 'an escaped __proto__ key is the same own property')
  t.equal(({} as { polluted?: unknown }).polluted, undefined, 'Object.prototype is untouched')
  t.equal(Object.prototype.constructor, Object)
})

t.test('rule 5: nesting is iterative and limited to MAX_DEPTH', async t => {
  t.equal(MAX_DEPTH, 1000)
  const deep = 100_000
  rejection(t, '['.repeat(deep) + ']'.repeat(deep), /^Body nests deeper than 1000 levels at position 1000$/)
  rejection(t, '{"a":'.repeat(deep) + '1' + '}'.repeat(deep), /^Body nests deeper than 1000 levels at position 5000$/)
  rejection(t, '[{"a":'.repeat(deep), /^Body nests deeper than 1000 levels/)
  rejection(t, '['.repeat(MAX_DEPTH + 1) + ']'.repeat(MAX_DEPTH + 1), /deeper than 1000 levels/)
  rejection(t, '['.repeat(MAX_DEPTH) + '{}' + ']'.repeat(MAX_DEPTH), /deeper than 1000 levels/)

  const arrays = parse('['.repeat(MAX_DEPTH) + ']'.repeat(MAX_DEPTH))
  t.equal(depthOf(arrays), MAX_DEPTH, 'exactly MAX_DEPTH arrays parse')
  const objects = parse('{"a":'.repeat(MAX_DEPTH - 1) + '{}' + '}'.repeat(MAX_DEPTH - 1))
  t.equal(depthOf(objects), MAX_DEPTH, 'exactly MAX_DEPTH objects parse')
  const mixed = parse('[{"a":'.repeat(MAX_DEPTH / 2) + 'null' + '}]'.repeat(MAX_DEPTH / 2))
  t.equal(depthOf(mixed), MAX_DEPTH)
  t.same(parse('["' + '[{'.repeat(MAX_DEPTH) + '"]'), ['[{'.repeat(MAX_DEPTH)], 'brackets in strings do not nest')
  t.same(parse('[[1,[2]],{"a":[{"b":3}],"c":4},5]'), [[1, [2]], { a: [{ b: 3 }], c: 4 }, 5], 'containers close back to the right parent')
})

t.test('rule 6: numbers keep their exact value', async t => {
  const cases: Array<[string, unknown]> = [
    // whole and safe: number
    ['7', 7], ['7.0', 7], ['7e2', 700], ['7E+2', 700], ['70e-1', 7], ['1.5e1', 15], ['0', 0], ['-0', 0], ['-0.0', 0],
    ['0e999', 0], ['-0e-99999999999999999999', 0], ['0.000', 0], ['123456', 123456], ['-42', -42],
    ['9007199254740991', 9007199254740991], ['-9007199254740991', -9007199254740991],
    ['9007199254740991.000', 9007199254740991], ['900719925474099.1e1', 9007199254740991],
    ['1' + '0'.repeat(15), 1e15], ['1.' + '0'.repeat(100_000), 1], ['1e15', 1e15],
    // whole, int64 but not safe: bigint
    ['9007199254740992', 9007199254740992n], ['9007199254740993', 9007199254740993n], ['-9007199254740993', -9007199254740993n],
    ['9223372036854775807', 9223372036854775807n], ['-9223372036854775808', -9223372036854775808n],
    ['9.223372036854775807e18', 9223372036854775807n], ['92233720368547758070e-1', 9223372036854775807n],
    ['1e18', 1000000000000000000n], ['100000000000000000000e-2', 1000000000000000000n], ['1e16', 10000000000000000n],
    ['0.' + '0'.repeat(28) + '9007199254740993e44', 9007199254740993n],
    // whole, outside int64: +-BEYOND_INT64
    ['9223372036854775808', BEYOND_INT64], ['-9223372036854775809', -BEYOND_INT64], ['1e19', BEYOND_INT64], ['1e22', BEYOND_INT64], ['1e23', BEYOND_INT64],
    ['1e300', BEYOND_INT64], ['1.5e300', BEYOND_INT64], ['1e400', BEYOND_INT64], ['-1e400', -BEYOND_INT64], ['1e1000000000', BEYOND_INT64],
    ['1e' + '9'.repeat(1000), BEYOND_INT64], ['-1' + '0'.repeat(1_000_000), -BEYOND_INT64], ['92233720368547758080e-1', BEYOND_INT64],
    // not whole, finite non-integer double
    ['1.5', 1.5], ['-1.5', -1.5], ['0.1', 0.1], ['1e-5', 1e-5], ['1.5e-30', 1.5e-30], ['123.456e-2', 1.23456],
    ['3.141592653589793238462643383279', 3.141592653589793], ['1e-300', 1e-300], ['-4.9e-324', -5e-324],
    ['12345678901234.5', 12345678901234.5], ['0.30000000000000004', 0.30000000000000004],
    // not whole, but the double is whole, 0 or infinite: NaN
    ['9007199254740993.5', NaN], ['1e-400', NaN], ['-1e-400', NaN], ['1.0000000000000000001', NaN],
    ['1.5e-1000000000', NaN], ['0.' + '0'.repeat(1000) + '1', NaN], ['1' + '0'.repeat(400) + '.5', NaN],
    ['9223372036854775807.5', NaN], ['-99999999999999999999.9', NaN]
  ]
  for (const [text, want] of cases) {
    const got = parse(text)
    const label = `${text.length > 40 ? text.slice(0, 40) + '…' : text} -> ${String(want)}`
    t.equal(typeof got, typeof want, `${label} (type)`)
    t.ok(Object.is(got, want), `${label} (value ${String(got)})`)
    t.same(parse(`{"n":${text}}`), { n: want }, `${label} (in an object)`)
  }
})

t.test('rule 7: strings and escapes', async t => {
  t.equal(parse('"\\"\\\\\\/\\b\\f\\n\\r\\t"'), '"\\/\b\f\n\r\t')
  t.equal(parse('"\\u0041\\u00e9\\u00C9\\u20AC"'), 'AéÉ€')
  t.equal(parse('"\\ud83c\\udf31"'), '🌱', 'an escaped surrogate pair is one character')
  t.equal(parse('"a\\ud83c\\udf31b🌱"'), 'a🌱b🌱')
  const lone = parse('"\\ud800"')
  t.equal(lone, '\ud800', 'a lone surrogate is returned as is')
  t.equal((lone as string).length, 1)
  t.equal(parse('"\\udc00\\ud800"'), '\udc00\ud800', 'reversed halves stay two lone surrogates')
  t.equal(parse('"x\\u0000y"'), 'x\u0000y', '\\u0000 is returned as is')
  t.same(parse('{"\\ud800":1,"k\\ty":"v\\n"}'), { '\ud800': 1, 'k\ty': 'v\n' }, 'keys are unescaped too')
  // An escaped key is written again plainly where it can be, else as a placeholder no key starts with.
  t.same(parse('{"@0":1,"\\u0040\\u0030x":2,"\\"":3,"\\u0061":4,"b":{"\\u0062":[5],"\\\\":6}}'),
    { '@0': 1, '@0x': 2, '"': 3, a: 4, b: { b: [5], '\\': 6 } }, 'plain and placeholder keys side by side')
  t.equal(parse('"\u007f\u0080\u2028\u2029\ufffd"'), '\u007f\u0080\u2028\u2029\ufffd', 'only characters below U+0020 need escaping')

  // Long strings, escaped quotes and backslashes: the counting pass must find
  // each string's end as JSON.parse does.
  const samples = [
    'x'.repeat(1 << 20),
    'é🌱'.repeat(50_000),
    'a"b\\c\n'.repeat(10_000),
    '\u0001'.repeat(5000) + 'tail',
    ('lorem ipsum dolor sit amet '.repeat(3) + '\t').repeat(1000),
    'z'.repeat(5000) + '"' + 'z'.repeat(31) + '\n' + 'z'.repeat(32) + '\\' + 'z'.repeat(33),
    '\ud800'.repeat(5000) + 'x'
  ]
  for (const s of samples) {
    const json = JSON.stringify({ s, after: 1 })
    assert.deepEqual(parse(json), JSON.parse(json))
    t.pass(`round trip of ${s.length} code units`)
  }
  rejection(t, '"' + 'x'.repeat(100) + '\n"', /^Body is not valid JSON: .*position 101\b/)
  rejection(t, '"' + 'x'.repeat(100) + '\\n' + 'y'.repeat(100) + '\u0001"', /^Body is not valid JSON: .*position 203\b/)
  rejection(t, '"' + 'x'.repeat(10_000), /^Body is not valid JSON: .*position 10001\b/)
  rejection(t, '"' + 'x'.repeat(10_000) + '\\n' + 'x'.repeat(10_000), /^Body is not valid JSON: .*position 20003\b/)
})

t.test('rule 9: errors name the position where JSON.parse gives one, and never echo much input', async t => {
  rejection(t, '{"a":1} garbage', /^Body is not valid JSON: .*position 8\b/)
  rejection(t, '[1,2', /^Body is not valid JSON: .*position 4\b/)
  rejection(t, '[\u0007]', /^Body is not valid JSON: /)
  rejection(t, '[🌱]', /^Body is not valid JSON: /)
  rejection(t, '"\\x41"', /^Body is not valid JSON: .*position 2\b/)
  const huge = 'x'.repeat(1_000_000)
  for (const input of [huge, `["${huge}" ${huge}]`, `"\\u${huge}"`, `{"${huge}" ${huge}}`, `"${huge}`]) {
    const err = rejection(t, input, /^Body is not valid JSON: /)
    t.ok((err?.message.length ?? Infinity) < 160, `short message: ${err?.message ?? ''}`)
  }
  t.same(parse('{"ok":true}'), { ok: true }, 'the parser recovers after an error')
})

t.test('rule 10: a key V8 misreads is read right all the same', async t => {
  // On Node 24 and 26 before 26.12, once an object whose next key after
  // "rule10" is one backslash has been parsed, V8 reads a one-character
  // escaped key in that place as the backslash too; Node 22 reads it right.
  t.same(parse('{"rule10":1,"\\u005c":1}'), { rule10: 1, '\\': 1 })
  for (let i = 0; i < 50; i++) {
    t.same(parse(`{"rule10":${i},"\\u0022":2}`), { rule10: i, '"': 2 })
    t.same(parse(`{"rule10":${i},"\\u0041":3,"n":{"\\u0041":[${i}]}}`), { rule10: i, A: 3, n: { A: [i] } })
    t.same(parse(`{"id":${i},"name":"F","\\u0074ag":"t","\\"":1,"x\\u0061":9007199254740993}`), { id: i, name: 'F', tag: 't', '"': 1, xa: 9007199254740993n })
  }
})

// JSON.parse's result mapped to what parseJsonBody promises for the same
// text. JSON.stringify prints integers below 1e21 in full and larger ones
// in exponent form (which are beyond int64 anyway).
function expected (value: unknown): unknown {
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || Number.isSafeInteger(value)) return value
    const text = String(value)
    if (text.includes('e')) return value > 0 ? BEYOND_INT64 : -BEYOND_INT64
    const big = BigInt(text)
    if (big > 9223372036854775807n) return BEYOND_INT64
    if (big < -9223372036854775808n) return -BEYOND_INT64
    return big
  }
  if (Array.isArray(value)) return value.map(expected)
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) {
      Object.defineProperty(out, k, { value: expected(v), enumerable: true, writable: true, configurable: true })
    }
    return out
  }
  return value
}

t.test('property: agrees with JSON.parse on generated documents', async t => {
  property(t, 'fc.jsonValue', fc.property(fc.jsonValue(), fc.constantFrom(0, 2, '\t'), (value, indent) => {
    const text = JSON.stringify(value, null, indent)
    assert.deepStrictEqual(parse(text), expected(JSON.parse(text)))
  }), 1000)
  property(t, 'fc.json with big and tiny numbers', fc.property(
    fc.array(fc.oneof(fc.double(), fc.integer(), fc.bigInt().map(Number), fc.double({ min: -1e25, max: 1e25 }))),
    numbers => {
      const text = JSON.stringify(numbers)
      assert.deepStrictEqual(parse(text), expected(JSON.parse(text)))
    }), 1000)
  property(t, 'non-integer doubles come back unchanged', fc.property(
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter(d => !Number.isInteger(d)),
    d => {
      assert.ok(Object.is(parse(String(d)), d))
      assert.ok(Object.is(parse(d.toExponential(20)), Number(d.toExponential(20))) || Number.isInteger(Number(d.toExponential(20))))
    }), 1000)
})

t.test('property: int64 values come back exactly', async t => {
  const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
  const want = (n: bigint): number | bigint =>
    n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n
  const spellings = (n: bigint): string[] => {
    const sign = n < 0n ? '-' : ''
    const digits = (n < 0n ? -n : n).toString()
    const exp = digits.length - 1
    const mantissa = digits[0] + (digits.length > 1 ? '.' + digits.slice(1) : '')
    return [
      n.toString(), `${n}.000`, `${sign}${mantissa}e${exp}`, `${sign}${mantissa}E+${exp}`,
      `${sign}0.${digits}e${digits.length}`, `${sign}${digits}.0e0`,
      // digits * 1000 / 1000; "0000e-3" would be a leading zero
      n === 0n ? '0e-3' : `${sign}${digits}000e-3`
    ]
  }
  property(t, 'int64 in every spelling', fc.property(fc.oneof(int64, fc.bigInt({ min: -(2n ** 53n) - 5n, max: 2n ** 53n + 5n })), n => {
    for (const text of spellings(n)) {
      const got = (parse(`{"id":${text}}`) as { id: unknown }).id
      assert.equal(got, want(n), text)
    }
  }), 1000)
  property(t, 'beyond int64 is BEYOND_INT64 by sign', fc.property(
    fc.oneof(fc.bigInt({ min: 2n ** 63n, max: 2n ** 80n }), fc.bigInt({ min: -(2n ** 80n), max: -(2n ** 63n) - 1n })),
    n => {
      for (const text of spellings(n)) {
        assert.equal((parse(`{"id":${text}}`) as { id: unknown }).id, n > 0n ? BEYOND_INT64 : -BEYOND_INT64, text)
      }
    }), 500)
  property(t, 'a fraction that does not vanish makes NaN or a double, never a whole number', fc.property(
    int64, fc.integer({ min: 1, max: 9 }), (n, f) => {
      const got = parse(`${n}.${'0'.repeat(20)}${f}`)
      assert.ok(typeof got === 'number' && (Number.isNaN(got) || !Number.isInteger(got)))
    }))
})

t.test('property: duplicate keys are found however they are spelled', async t => {
  const escapeAll = (key: string): string =>
    '"' + [...key].map(ch => [...ch].map(u => '\\u' + (u.codePointAt(0) ?? 0).toString(16).padStart(4, '0')).join('')).join('') + '"'
  property(t, 'a repeated key is rejected', fc.property(
    fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }), fc.nat(), fc.boolean(), (dict, pick, escaped) => {
      const text = JSON.stringify(dict)
      const keys = Object.keys(dict)
      const key = keys[pick % keys.length] as string
      const dup = text.slice(0, -1) + ',' + (escaped ? escapeAll(key) : JSON.stringify(key)) + ':' + JSON.stringify(dict[key]) + '}'
      assert.throws(() => parse(dup), (err: unknown) => err instanceof JsonBodyError && err.message.startsWith('Duplicate key '))
    }), 500)
})

// Anything either parses or throws JsonBodyError; when JSON.parse accepts the
// same text we accept it too, unless it repeats a key, and the reverse.
function agreesOnAcceptance (bytes: Buffer): void {
  let ours: unknown
  try {
    parseJsonBody(bytes)
    ours = true
  } catch (err) {
    if (!(err instanceof JsonBodyError)) throw err
    ours = err
  }
  const text = bytes.toString('utf8')
  let theirs = true
  try {
    JSON.parse(text)
  } catch {
    theirs = false
  }
  if (!Buffer.from(text).equals(bytes)) {
    assert.ok(ours instanceof JsonBodyError && ours.message === 'Body is not valid UTF-8', 'invalid UTF-8 is rejected as such')
    return
  }
  if (text.startsWith('\ufeff')) return // we skip a BOM, JSON.parse does not
  if (ours === true) assert.ok(theirs, 'accepted text JSON.parse rejects')
  else if (theirs) assert.match((ours as Error).message, /^Duplicate key |^Body nests deeper/, 'rejected valid JSON')
}

t.test('property: arbitrary input never throws anything but JsonBodyError', async t => {
  property(t, 'random unicode', fc.property(fc.string({ unit: 'binary' }), s => agreesOnAcceptance(Buffer.from(s))), 1000)
  property(t, 'random bytes', fc.property(fc.uint8Array(), b => agreesOnAcceptance(Buffer.from(b))), 1000)
  const jsonish = fc.constantFrom(...'{}[],:"\\/0123456789.eE+-tfnrulsabu \t\n\r\u0000\u001f\u00e9\ud83c\udf31'.split(''), '\\u', '\\ud83c', 'true', 'null', '"a"', '0.5', '1e400', '9223372036854775808', 0xff)
  property(t, 'json-like bytes', fc.property(fc.array(jsonish, { maxLength: 40 }), parts => {
    agreesOnAcceptance(Buffer.concat(parts.map(p => typeof p === 'number' ? Buffer.from([p]) : Buffer.from(p))))
  }), 3000)
  property(t, 'mutated documents', fc.property(
    fc.jsonValue(), fc.array(fc.tuple(fc.nat(), fc.constantFrom('insert', 'delete', 'replace'), fc.constantFrom(...'{}[],:"\\0.e-1 x'.split(''))), { minLength: 1, maxLength: 3 }),
    (value, edits) => {
      let text = JSON.stringify(value)
      for (const [at, op, ch] of edits) {
        const i = at % (text.length + 1)
        text = op === 'insert' ? text.slice(0, i) + ch + text.slice(i) : op === 'delete' ? text.slice(0, i) + text.slice(i + 1) : text.slice(0, i) + ch + text.slice(i + 1)
      }
      agreesOnAcceptance(Buffer.from(text))
    }), 2000)
})

// V8 quotes a body of 20 characters or fewer whole in its SyntaxError ('Unexpected token 'F', "Ficus" is not valid
// JSON'), and a longer one around the fault. The messages below are V8's own on Node 22.23, 24.21 and 26.10 (the
// same on the three lines), with a body that would fool a parser of the message.
const V8_MESSAGES: Array<[string, string]> = [
  ['Ficus at position 1', 'Unexpected token \'F\', "Ficus at position 1" is not valid JSON'],
  ['Ficus', 'Unexpected token \'F\', "Ficus" is not valid JSON'],
  ['Secret at position 12 in JSON', 'Unexpected token \'S\', "Secret at "... is not valid JSON'],
  ['{"a": Secretxxxxxxxxxxxxxxxxxxxxxx}', 'Unexpected token \'S\', "{"a": Secretxxx"... is not valid JSON'],
  ['{"plant":"Secret name", "x": y}', 'Unexpected token \'y\', ..."me", "x": y}" is not valid JSON'],
  ['undefined', '"undefined" is not valid JSON'],
  ['{"a" 1}', 'Expected \':\' after property name in JSON at position 5 (line 1 column 6)'],
  ['{"a":01}', 'Unexpected number in JSON at position 6 (line 1 column 7)'],
  ['tru', 'Unexpected end of JSON input'],
  ['{"a":1} Secret', 'Unexpected non-whitespace character after JSON at position 8 (line 1 column 9)'],
  // Node 18's form, which named the unexpected character outside quotes.
  ['Secret', 'Unexpected token S in JSON at position 0']
]

t.test('a syntax error never carries the body\'s text, however V8 words it', async t => {
  for (const [body, message] of V8_MESSAGES) {
    const fault = syntaxFault(new SyntaxError(message))
    t.match(fault, /^[A-Z][A-Za-z ,':{}[\]-]*?( at position \d+)?$/, `${JSON.stringify(body)}: ${fault}`)
    for (const word of ['Ficus', 'Secret', 'undefined', 'xxx', '"']) t.notOk(fault.includes(word), `${JSON.stringify(body)}: no ${word}`)
  }
  t.equal(syntaxFault(new SyntaxError(V8_MESSAGES[6]?.[1])), 'Expected \':\' after property name at position 5', 'what and where, when V8 says it outside a quote')
  // And on this Node, through the parser: short and long bodies, each holding a word of plant data.
  for (const body of ['Ficus at position 1', 'Ficus', 'Ficus at position 12 in JSON', `{"name": Ficus${'x'.repeat(40)}}`, `{"name":"Ficus", "tag": y${'x'.repeat(40)}}`]) {
    const err = rejection(t, body, /^Body is not valid JSON: /)
    t.notOk(err?.message.includes('Ficus'), `${JSON.stringify(body.slice(0, 30))}: ${err?.message ?? ''}`)
  }
})
