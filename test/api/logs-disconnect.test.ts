// A client that leaves while its page of logs is being read stops the
// reading (issue 7, hole 3): the route hands the driver a signal that aborts
// when the request's connection closes. A driver that reads until told to
// stop stands in for a slow read of a hostile log directory.

import assert from 'node:assert/strict';
import { request } from 'node:http';
import { test } from 'node:test';
import type { LogPage, LogQuery, Target } from '../../src/domain/logs.js';
import { SimDriver } from '../../src/drivers/sim/sim-driver.js';
import { API_KEY, eventually, startBasin } from '../helpers.js';
import { readyService, serviceUrl } from './service-helpers.js';

/** The sim, except that reading logs goes on until the reader's signal aborts. */
class EndlessLogs extends SimDriver {
  started = 0;
  aborted = 0;
  endless = true;

  override async readLogs(target: Target, query: LogQuery): Promise<LogPage> {
    if (!this.endless) return super.readLogs(target, query);
    this.started++;
    const signal = query.signal;
    assert.ok(signal, 'the route passes a signal');
    return new Promise((_, reject) => {
      signal.addEventListener('abort', () => {
        this.aborted++;
        reject(signal.reason);
      });
    });
  }
}

test('a client that disconnects aborts its read of the logs; the server carries on', async (t) => {
  const driver = new EndlessLogs({ delayMs: 0 });
  const errors: unknown[] = [];
  const logger = {
    level: 'error',
    hooks: {
      logMethod(args: unknown[], _method: unknown, level: number) {
        if (level >= 50) errors.push(args); // and print nothing
      },
    },
  };
  const b = await startBasin(t, { options: { driver, logger } });
  const svc = await readyService(b);
  await b.basin.app.listen({ host: '127.0.0.1', port: 0 });
  const { port } = b.basin.app.server.address() as { port: number };

  const req = request({
    host: '127.0.0.1',
    port,
    path: `${serviceUrl(b, svc.id)}/logs`,
    headers: { authorization: `Bearer ${API_KEY}` },
  });
  req.on('error', () => {}); // the socket is destroyed on purpose
  req.end();
  await eventually(async () => driver.started === 1, 'the read started');
  assert.equal(driver.aborted, 0);
  req.destroy();
  await eventually(async () => driver.aborted === 1, 'the read aborted');
  assert.deepEqual(errors, [], "a client that left is no error of Basin's");

  // Nothing broke: the next client gets its page.
  driver.endless = false;
  const res = await b.call('GET', `${serviceUrl(b, svc.id)}/logs`);
  assert.equal(res.status, 200);
  assert.ok(res.body.entries.length > 0);
});
