// The web console (console/, built by Vite into dist/console/): its files
// served at `/` on the API's own port, beside `/v1`, with the headers that
// keep a page holding a project's key safe (docs/security.md, The web console).
//
// The built files are read once, when the app is built, and answered from
// memory: a handful of small files, fixed until the next build. Nothing here
// touches the API: the page calls `/v1` through basin/client like any other
// client. Beside the files, two things the API does not serve: the
// installation's catalogue (sizes, regions, the recovery window), which the
// Create form offers, and the CA certificate services' connections are
// checked against. Both are configuration, the same for every project, and
// neither is secret.
//
// The routes are hidden from the OpenAPI document: they are not the API.

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { sendError } from './errors.js';

/** What the console's form needs to know of the installation. */
export interface ConsoleInstallation {
  regions: readonly string[];
  defaultRegion: string;
  /** The size catalogue: `shared` or `<cpu_millis>m/<memory_gbs>GB`, as --sizes writes them. */
  sizes: readonly string[];
  /** How far back a point-in-time fork reaches, in ms. */
  pitrWindowMs: number;
  /** The driver (`local`, `sim`): the sim has no CA and no real databases. */
  driver: string;
}

export interface ConsoleOptions {
  /** The built console (dist/console/); a missing one is answered 404 saying so. */
  dir: string;
  installation: ConsoleInstallation;
  /** The installation's CA certificate (local driver); null when there is none. */
  caCertificatePath: string | null;
}

/**
 * The page's policy: its own scripts, styles, images and API only; no inline
 * script, no eval, no framing, no plugins, forms only to itself. uPlot and
 * React set styles through the CSSOM, which style-src does not govern.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
};

interface File {
  body: Buffer;
  type: string;
}

export function consoleRoutes(app: FastifyInstance, options: ConsoleOptions): void {
  const files = readBuilt(options.dir);
  const index = files.get('index.html');
  const installation = JSON.stringify(options.installation);

  const send = (reply: FastifyReply, file: File, cache: string) =>
    secure(reply).header('cache-control', cache).type(file.type).send(file.body);
  const missing = (reply: FastifyReply, what: string) => sendError(reply, 'NOT_FOUND', what);

  app.get('/', { schema: { hide: true } }, async (_req, reply) =>
    index
      ? send(reply, index, 'no-cache')
      : missing(
          reply,
          'The console is not built here (run `npm run build`); the API is at /v1, see /v1/openapi.json.',
        ),
  );
  // Vite names every asset after a hash of its content: a new build is a new URL.
  app.get('/assets/*', { schema: { hide: true } }, async (req, reply) => {
    const name = (req.params as { '*': string })['*'];
    const file = files.get(`assets/${name}`);
    if (!file) return missing(reply, `No console asset ${name}.`);
    return send(reply, file, 'public, max-age=31536000, immutable');
  });
  app.get('/console/installation.json', { schema: { hide: true } }, async (_req, reply) =>
    secure(reply)
      .header('cache-control', 'no-cache')
      .type('application/json; charset=utf-8')
      .send(installation),
  );
  app.get('/console/ca.crt', { schema: { hide: true } }, async (_req, reply) => {
    const pem = options.caCertificatePath ? readIfThere(options.caCertificatePath) : null;
    if (!pem) return missing(reply, 'This installation has no CA certificate (sim driver).');
    return secure(reply)
      .header('cache-control', 'no-cache')
      .header('content-disposition', 'attachment; filename="basin-ca.crt"')
      .type('application/x-pem-file')
      .send(pem);
  });
}

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', CONSOLE_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-opener-policy', 'same-origin')
    .header('cross-origin-resource-policy', 'same-origin');
}

/** Every file of the build, by its path under the folder ('assets/index-3f2a.js'). */
function readBuilt(dir: string): Map<string, File> {
  const files = new Map<string, File>();
  if (!existsSync(dir)) return files;
  const walk = (at: string) => {
    for (const name of readdirSync(at)) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) walk(path);
      else {
        const type = TYPES[extname(name)];
        // Only what a page loads: no source maps, nothing unexpected.
        if (type) files.set(relative(dir, path), { body: readFileSync(path), type });
      }
    }
  };
  walk(dir);
  return files;
}

function readIfThere(path: string): Buffer | null {
  try {
    return readFileSync(path);
  } catch {
    return null;
  }
}
