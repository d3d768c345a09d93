// Builds the console into dist/console/, beside the server that serves it
// (src/api/console.ts). No plugin: esbuild compiles the JSX; no inline
// script or style and no data: URL in the output, so the page runs under the
// strict Content-Security-Policy Basin sends with it.
import { defineConfig } from 'vite';

const here = new URL('.', import.meta.url).pathname;

export default defineConfig({
  root: here,
  base: '/',
  esbuild: { jsx: 'automatic' },
  build: {
    outDir: `${here}../dist/console`,
    emptyOutDir: true,
    // Vite's preload polyfill would be one more script to trust; every browser the console supports has modulepreload.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    sourcemap: false,
    reportCompressedSize: true,
    target: 'es2022',
    rollupOptions: {
      // TanStack Query's "use client" lines are for server components; a page has none.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
});
