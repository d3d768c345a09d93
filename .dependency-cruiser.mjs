// Import cycles, refused (docs/architecture.md §1): `npm run check` runs
// `depcruise` with this file, and test/lint/cycles.test.ts proves it refuses
// one. dependency-cruiser follows TypeScript's own resolution and counts
// type-only imports too: a cycle of types is still two modules that cannot be
// read, or moved, one without the other. (The layer rules are eslint's:
// eslint.config.js.) Nothing is excepted.
//
// And the local driver's seam between what one host runs and what decides
// for a service (docs/architecture.md §9), which test/lint/cycles.test.ts
// also proves.
//
// And the benchmarks' distance from the local driver: they read what a
// service keeps on the host through test/harness/installation-paths.ts, so a
// move inside the driver changes the harness, not every benchmark.
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'This import closes a cycle: move what both modules need into a module of its own (docs/architecture.md §1).',
      from: { path: '^(src|bench|test)/' },
      to: { circular: true },
    },
    {
      name: 'host-side-decides-nothing',
      severity: 'error',
      comment:
        "What a host runs (the local driver's host/, node/, network/, storage/, logs/, metrics/ and the pure config/) imports nothing of what decides for a service (converge/, replication/, endpoints/, backups/, the driver and its context): a host agent must be able to run it alone (docs/architecture.md §9).",
      from: { path: '^src/drivers/local/(host|node|network|storage|logs|metrics|config)/' },
      to: {
        path: '^src/drivers/local/((converge|replication|endpoints|backups)/|(local-driver|context)[.]ts$)',
      },
    },
    {
      name: 'bench-through-harness',
      severity: 'error',
      comment:
        "A benchmark imports nothing of the local driver: where a service's files, namespace or cgroup are comes from test/harness/installation-paths.ts (docs/architecture.md §6).",
      from: { path: '^bench/' },
      to: { path: '^src/drivers/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
