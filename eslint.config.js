import js from '@eslint/js';
import { builtinRules } from 'eslint/use-at-your-own-risk';
import tseslint from 'typescript-eslint';

// The layers of docs/architecture.md §1, enforced: imports flow
//   api → commands → domain ← engine → drivers,
// the store sits behind the interfaces of store/store.ts, lib/ imports nothing
// of Basin, cli/ uses client/ and commands/, and only the composition roots
// (basin.ts, main.ts, open-store.ts and the scripts) know the concrete store
// and drivers. (Import cycles are dependency-cruiser's: .dependency-cruiser.mjs.)
// Each entry: the files of a layer and the imports they may not make, as path
// patterns.
const ROOTS = [
  '**/basin.js',
  '**/main.js',
  '**/config.js',
  '**/openapi-document.js',
  '**/open-store.js',
  '**/local-driver-options.js',
];
const LAYERS = [
  { files: ['src/lib/**/*.ts'], forbid: ['../*', '../**'], why: 'lib/ imports nothing of Basin' },
  {
    files: ['src/client/**/*.ts'],
    forbid: ['../*', '../**', 'node:*'],
    why: 'client/ (basin/client, shipped to users) imports nothing of Basin and nothing of Node',
  },
  {
    files: ['src/domain/**/*.ts'],
    ignores: ['src/domain/**/*.test.ts'],
    // Anything up and out of domain/ but into lib/, and Node's modules.
    regex: '^(\\.\\./(?!lib/)|node:)',
    forbid: ROOTS,
    why: 'domain/ is pure: it imports only domain/ and lib/, nothing from Node',
  },
  {
    files: ['src/store/**/*.ts'],
    forbid: ['**/api/**', '**/commands/**', '**/engine/**', '**/drivers/**', '**/cli/**', ...ROOTS],
    why: 'store/ knows only domain/ and lib/',
  },
  {
    files: ['src/commands/**/*.ts'],
    forbid: ['**/api/**', '**/engine/**', '**/drivers/**', '**/store/*/**', '**/cli/**', ...ROOTS],
    why: 'commands/ use domain/ and the store interfaces; the driver only through Ctx.driver',
  },
  {
    files: ['src/api/**/*.ts'],
    forbid: ['**/engine/**', '**/drivers/**', '**/store/*/**', '**/cli/**', ...ROOTS],
    why: 'api/ calls commands/; it never reaches the engine, a driver or a concrete store',
  },
  {
    files: ['src/engine/**/*.ts'],
    forbid: [
      '**/api/**',
      '**/commands/**',
      '**/drivers/*/**',
      '**/store/*/**',
      '**/cli/**',
      ...ROOTS,
    ],
    why: 'engine/ drives the Driver interface (drivers/driver.ts) over the store interfaces',
  },
  {
    files: ['console/src/**/*.{ts,tsx}'],
    // Up and into src/ anywhere but client/.
    regex: '^(\\.\\./)+src/(?!client/)',
    forbid: ['node:*'],
    why: 'the console (a browser page) calls Basin only through basin/client, and uses nothing of Node',
  },
  {
    files: ['src/cli/**/*.ts'],
    forbid: [
      '**/api/**',
      '**/engine/**',
      '**/drivers/**',
      '**/store/*/**',
      '../basin.js',
      '../main.js',
      '../app.js',
      '../openapi-document.js',
    ],
    why: 'cli/ talks HTTP through client/ and administers through commands/ over the store interfaces (opened by open-store.ts); it never reaches the api, the engine, a driver or a concrete store',
  },
  {
    files: ['src/hosts/**/*.ts'],
    forbid: [
      '**/api/**',
      '**/commands/**',
      '**/engine/**',
      '**/drivers/**',
      '**/store/*/**',
      '**/cli/**',
      '**/agent/**',
      ...ROOTS,
    ],
    why: "hosts/ (the control plane's side of its hosts) knows domain/, lib/ and the store interfaces; never a host agent's code",
  },
  {
    files: ['src/agent/**/*.ts'],
    forbid: [
      '**/api/**',
      '**/commands/**',
      '**/engine/**',
      '**/store/**',
      '**/cli/**',
      '**/hosts/**',
      '**/drivers/sim/**',
      '**/drivers/hosts/**',
      '**/basin.js',
      '**/main.js',
      '**/openapi-document.js',
      '**/open-store.js',
    ],
    why: "agent/ (`basin host run`, a host's composition root) wires the local driver from the configuration; never the store, the engine or the control plane's side",
  },
  ...[
    ['src/drivers/*.ts', []],
    ['src/drivers/local/**/*.ts', ['**/sim/**', '**/hosts/**']],
    ['src/drivers/sim/**/*.ts', ['**/local/**', '**/hosts/**']],
    ['src/drivers/hosts/**/*.ts', ['**/local/**', '**/sim/**']],
  ].map(([glob, other]) => ({
    files: [glob],
    forbid: [
      '**/api/**',
      '**/commands/**',
      '**/engine/**',
      '**/store/**',
      '**/cli/**',
      ...ROOTS,
      ...other,
    ],
    why: 'drivers/ know domain/ and lib/ only (the engine hands them specs), and not each other',
  })),
];

// A module loaded when first needed (`await import('…')`, docs/architecture.md
// §6) crosses the same boundaries as one imported at the top: the same
// patterns, through ESLint's own no-restricted-imports, for `import()` of a
// literal path too (the core rule checks only import declarations).
const noRestricted = builtinRules.get('no-restricted-imports');
const layersPlugin = {
  rules: {
    'no-restricted-dynamic-imports': {
      meta: noRestricted.meta,
      create(context) {
        const check = noRestricted.create(context).ImportDeclaration;
        return {
          ImportExpression(node) {
            if (node.source.type === 'Literal' && typeof node.source.value === 'string')
              check(node);
          },
        };
      },
    },
  },
};

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.test-js/', 'scripts/*.mjs', 'src/client/generated/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-console': 'off',
    },
  },
  {
    // Tests read JSON bodies loosely; the assertions are what check their shape.
    files: ['test/**/*.ts', 'src/**/*.test.ts', 'bench/**/*.test.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  ...LAYERS.map(({ files, ignores, forbid, regex, why }) => {
    const message = `Layer rule (docs/architecture.md §1): ${why}.`;
    const patterns = [{ group: forbid, message }, ...(regex ? [{ regex, message }] : [])];
    return {
      files,
      ...(ignores ? { ignores } : {}),
      plugins: { layers: layersPlugin },
      rules: {
        'no-restricted-imports': ['error', { patterns }],
        'layers/no-restricted-dynamic-imports': ['error', { patterns }],
      },
    };
  }),
);
