import neostandard from 'neostandard'

export default [
  ...neostandard({
    ts: true,
    // client/src/generated/ is openapi-typescript's output, kept as written.
    ignores: ['dist/**', 'client/dist/**', 'client/src/generated/**', 'coverage/**', '.data/**', '.tap/**', 'test/artifacts/**']
  }),
  {
    // TypeBox's idiom names a schema and its static type alike
    // (`const Plant = Type.Object(…); type Plant = Static<typeof Plant>`);
    // TypeScript itself rejects real redeclarations.
    files: ['**/*.ts'],
    rules: { '@typescript-eslint/no-redeclare': 'off' }
  },
  {
    // Service code reads one function at a time: past a screen, split it
    // along a concern.
    files: ['app.ts', 'server.ts', 'src/**', 'plugins/**', 'routes/**'],
    rules: { 'max-lines-per-function': ['error', { max: 60 }] }
  }
]
