// Issue 18, item 7 (guessing passwords), tried against Basin as shipped
// (`node dist/main.js`, local driver). Before, 200 wrong passwords for
// another tenant's service took 31 s, without delay, at its server and at
// its pooler. Now:
// - at the server, auth_delay answers each failed login after a second:
//   a client guessing one login after another gets a handful of tries in
//   the seconds that allowed it dozens, and the right password still works;
// - at the pooler (PgBouncer checks passwords itself, so the server's
//   delay never applies there), an address that fails 20 logins within a
//   minute is refused by that pooler, the right password too, while
//   another address logs in through it, and both still reach the server.
// The guesser holds no more than a client does: the service's address and
// port. What is counted is tries, not how long anything took.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { installation } from './basin-process.js';
import { loopbackAddresses, pgClient } from './clients.js';
import { bootstrapTenant, TenantApi } from './tenants.js';

/** The guesser's address, and a client's beside it (on lo, for this test only). */
const GUESSER = '10.213.85.1';
const BYSTANDER = '10.213.85.2';

/** One login as tsdbadmin to `host`:`port` (from that address); the error's message, or 'ok'. */
async function login(host: string, port: number, password: string): Promise<string> {
  try {
    const client = await pgClient(port, password, { rejectUnauthorized: false }, { host });
    await client.query('SELECT 1');
    await client.end();
    return 'ok';
  } catch (err) {
    return (err as Error).message;
  }
}

test(
  'failed logins: slowed at the server (auth_delay), the guessing address refused at the pooler',
  { timeout: 300_000 },
  async (t) => {
    loopbackAddresses(t, GUESSER, BYSTANDER);
    const inst = await installation(t);
    const b = await inst.start();
    const api = new TenantApi(b, bootstrapTenant(b));
    const svc = await api.create('guarded');
    const id = svc.service_id;
    const password = svc.initial_password;
    await api.waitForStatus(id, 'READY');
    const port = svc.endpoint.port;

    await t.test('the server answers each failed login after auth_delay (1 s)', async () => {
      // The tenant may read the settings once it grants itself the role to.
      const own = await pgClient(port, password);
      await own.query('GRANT pg_read_all_settings TO tsdbadmin');
      const [settings] = (
        await own.query(
          "SELECT current_setting('shared_preload_libraries') AS libs, current_setting('auth_delay.milliseconds') AS ms",
        )
      ).rows;
      await own.end();
      assert.match(settings.libs, /\bauth_delay\b/);
      assert.equal(settings.ms, '1s');
      // One guess after another for three seconds.
      const deadline = Date.now() + 3_000;
      let tries = 0;
      while (Date.now() < deadline) {
        const said = await login(GUESSER, port, `guess-${tries}`);
        assert.match(said, /password authentication failed/);
        tries++;
      }
      assert.ok(
        tries >= 1 && tries <= 4,
        `${tries} guesses in 3 s (a second each at most 3, plus one begun)`,
      );
      assert.equal(await login(GUESSER, port, password), 'ok', 'the right password still works');
    });

    await t.test(
      'the pooler refuses an address after 20 failed logins; others log in',
      async () => {
        const on = await api.call('POST', `${api.path(id)}/enablePooler`);
        assert.equal(on.status, 200, on.text);
        const ready = await b.waitFor(async () => {
          const res = await api.call('GET', api.path(id));
          return res.body?.connection_pooler?.endpoint ? res.body : undefined;
        }, 'the pooler endpoint');
        const pooler: number = ready.connection_pooler.endpoint.port;
        await b.waitFor(
          async () => (await login(BYSTANDER, pooler, password)) === 'ok',
          'a login through the pooler',
        );

        // The guesser tries until the pooler stops asking for its password.
        let guesses = 0;
        let said = '';
        for (; guesses < 500; guesses++) {
          said = await login(GUESSER, pooler, `guess-${guesses}`);
          if (!/authentication failed/.test(said)) break;
        }
        assert.match(said, /login rejected/, `after ${guesses} guesses: ${said}`);
        assert.ok(guesses >= 20, `refused only past the limit (after ${guesses} failed logins)`);
        // Refused with the right password too, while another address gets in.
        assert.match(await login(GUESSER, pooler, password), /login rejected/);
        assert.equal(await login(BYSTANDER, pooler, password), 'ok');
        // The pooler's block is the pooler's: the server still takes the guesser's right password.
        assert.equal(await login(GUESSER, port, password), 'ok');
      },
    );
  },
);
