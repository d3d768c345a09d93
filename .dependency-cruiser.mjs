// Import cycles, refused (docs/architecture.md §1): `npm run check` runs
// `depcruise` with this file, and test/lint/cycles.test.ts proves it refuses
// one. dependency-cruiser follows TypeScript's own resolution and counts
// type-only imports too: a cycle of types is still two modules that cannot be
// read, or moved, one without the other. (The layer rules are eslint's:
// eslint.config.js.)
//
// The one exception, for now: the local driver (src/drivers/local/), whose
// files still import each other through DriverContext in local-driver.ts.
// Issue 19 moves it into sub-folders with a DriverContext module of its own,
// which removes those cycles; that change lifts this exception. Nothing else
// is excepted.
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'This import closes a cycle: move what both modules need into a module of its own (docs/architecture.md §1).',
      from: { path: '^(src|bench|test)/', pathNot: '^src/drivers/local/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
