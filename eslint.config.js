import neostandard from 'neostandard'

export default [
  ...neostandard({
    ts: true,
    ignores: ['dist/**', 'coverage/**', '.data/**', '.tap/**', 'test/artifacts/**']
  }),
  {
    // TypeBox's idiom names a schema and its static type alike
    // (`const Plant = Type.Object(…); type Plant = Static<typeof Plant>`);
    // TypeScript itself rejects real redeclarations.
    files: ['**/*.ts'],
    rules: { '@typescript-eslint/no-redeclare': 'off' }
  }
]
