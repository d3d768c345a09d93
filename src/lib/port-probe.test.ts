import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { accepts, portIsFree } from './port-probe.js';

const listening = (server: Server, to: number | string) =>
  new Promise<void>((r) =>
    typeof to === 'number' ? server.listen(to, '127.0.0.1', r) : server.listen(to, r),
  );

test('accepts: a listener is a yes, TCP and Unix socket; a closed port and a missing socket a no', async (t) => {
  const tcp = createServer((s) => s.destroy());
  await listening(tcp, 0);
  const { port } = tcp.address() as { port: number };
  const dir = mkdtempSync(join(tmpdir(), 'port-probe-'));
  const unix = createServer((s) => s.destroy());
  await listening(unix, join(dir, 's'));
  t.after(() => {
    tcp.close();
    unix.close();
    rmSync(dir, { recursive: true, force: true });
  });
  assert.equal(await accepts({ host: '127.0.0.1', port }), true);
  assert.equal(await accepts({ path: join(dir, 's') }), true);
  assert.equal(await accepts({ path: join(dir, 'none') }), false);
  assert.equal(await portIsFree(port), false);
  tcp.close();
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(await accepts({ host: '127.0.0.1', port }), false);
});
