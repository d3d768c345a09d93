// Every route of the API once, through Basin as shipped (`node dist/main.js`,
// sim driver): each endpoint's main behaviour is proven by the program users
// run, not only by the in-process tests of test/api. The walk is checked
// against the OpenAPI document the server itself serves, so a new route
// that this file does not call fails it. Also: both credential schemes, the
// 401s, a 400's body, and a credential made by the shipped CLI.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { API_KEY } from '../helpers.js';
import { type BasinProcess, type HttpResult, type RequestOptions } from '../harness/basin-api.js';
import { installation } from './basin-process.js';

/** `{code, message}` and nothing else, with a message a person can act on. */
function assertError(res: HttpResult, status: number, code: string, message?: RegExp): void {
  assert.equal(res.status, status, `expected ${status} ${code}, got ${res.status} ${res.text}`);
  assert.deepEqual(Object.keys(res.body ?? {}).sort(), ['code', 'message']);
  assert.equal(res.body.code, code);
  assert.ok(res.body.message.length > 10, `a helpful message: ${res.body.message}`);
  if (message) assert.match(res.body.message, message);
}

const basicHeader = (user: string, secret: string) =>
  `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;

/** The operations of an OpenAPI document, as `METHOD /path/{param}` with a matcher each. */
function operations(doc: { paths: Record<string, Record<string, unknown>> }) {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.keys(ops).map((method) => ({
      name: `${method.toUpperCase()} ${path}`,
      method: method.toUpperCase(),
      pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
    })),
  );
}

test(
  'every route of the API, through dist/main.js on the sim driver',
  { timeout: 120_000 },
  async (t) => {
    const inst = await installation(t, { driver: 'sim', env: { BASIN_SIM_DELAY_MS: '50' } });
    const b = await inst.start({ args: ['--series-interval-ms', '1000'] });
    const P = `/projects/${b.projectId}`;

    // Every request of the walk is recorded, to be matched against the OpenAPI document.
    const called: { method: string; path: string }[] = [];
    const api = (method: string, path: string, options?: RequestOptions) => {
      called.push({ method, path: `/v1${path.split('?')[0]}` });
      return b.request(method, path, options);
    };
    const call = (method: string, path: string, body?: unknown) => api(method, path, { body });
    // Every secret the walk sends or receives, to look for in Basin's output at the end.
    const secrets: string[] = [API_KEY];
    const basic = (user: string, secret: string) => {
      const header = basicHeader(user, secret);
      secrets.push(secret, header.slice('Basic '.length));
      return header;
    };
    const status = async (b: BasinProcess, path: string, want: string) =>
      b.waitFor(async () => {
        const res = await b.call('GET', path);
        return res.body?.status === want ? res.body : undefined;
      }, `${path} ${want}`);

    await t.test(
      'projects: Bearer and Basic see the same project; no or bad credentials get 401',
      async () => {
        const bearer = await call('GET', '/projects');
        assert.equal(bearer.status, 200, bearer.text);
        assert.deepEqual(bearer.body, [{ id: b.projectId, name: 'default' }]);
        // The access and secret keys Basin printed when it bootstrapped the data directory.
        assert.ok(b.printed, `Basin printed a credential:\n${b.output()}`);
        const viaBasic = await api('GET', '/projects', {
          authorization: basic(b.printed.accessKey, b.printed.secretKey),
        });
        assert.equal(viaBasic.status, 200, viaBasic.text);
        assert.deepEqual(viaBasic.body, bearer.body);
        for (const authorization of [
          null,
          'Bearer bsn_not-a-key-of-this-basin',
          basic(b.printed.accessKey, `${b.printed.secretKey}x`),
        ]) {
          assertError(await api('GET', '/projects', { authorization }), 401, 'UNAUTHORIZED');
        }
      },
    );

    await t.test('auth/info: who a credential is, by either scheme; 401 without one', async () => {
      const info = await call('GET', '/auth/info');
      assert.equal(info.status, 200, info.text);
      assert.equal(info.body.type, 'apiKey');
      assert.deepEqual(info.body.api_key.project, {
        id: b.projectId,
        name: 'default',
        plan_type: 'SELF_HOSTED',
      });
      assert.equal(info.body.api_key.public_key, b.printed?.accessKey);
      assert.equal(info.body.api_key.issuing_user.email, 'admin@basin.localhost');
      const viaBasic = await api('GET', '/auth/info', {
        authorization: basic(b.printed?.accessKey as string, b.printed?.secretKey as string),
      });
      assert.deepEqual(viaBasic.body, info.body);
      assertError(await api('GET', '/auth/info', { authorization: null }), 401, 'UNAUTHORIZED');
    });

    await t.test('bad requests get a 4xx {code, message} that says what to fix', async () => {
      const wrongType = await call('POST', `${P}/services`, { name: 'x', cpu_millis: 1000 });
      assertError(wrongType, 400, 'INVALID_REQUEST', /cpu_millis/);
      const typo = await call('POST', `${P}/vpcs`, {
        name: 'n',
        cidr: '10.0.0.0/16',
        region_code: 'us-east-1',
        regoin: 'x',
      });
      assertError(typo, 400, 'INVALID_REQUEST', /regoin/);
      const json = { 'content-type': 'application/json' };
      const notJson = await api('POST', `${P}/vpcs`, { headers: json, rawBody: '{"name":' });
      assertError(notJson, 400, 'INVALID_REQUEST');
      const text = await api('POST', `${P}/vpcs`, {
        headers: { 'content-type': 'text/plain' },
        rawBody: 'name=n',
      });
      assertError(text, 415, 'UNSUPPORTED_MEDIA_TYPE');
      // Over the default --body-limit of 64 KiB.
      const big = await call('POST', `${P}/vpcs`, { name: 'x'.repeat(70_000) });
      assertError(big, 413, 'PAYLOAD_TOO_LARGE');
      assertError(await call('GET', `${P}/nothing-here`), 404, 'NOT_FOUND');
      assertError(await call('GET', `${P}/services/nosuchsvc0`), 404, 'NOT_FOUND');
    });

    let vpcId = '';
    await t.test('VPCs: create, list, read, rename', async () => {
      const created = await call('POST', `${P}/vpcs`, {
        name: 'prod-net',
        cidr: '10.10.0.0/16',
        region_code: 'us-east-1',
      });
      assert.equal(created.status, 201, created.text);
      assert.match(created.body.id, /^[0-9]+$/);
      assert.deepEqual(
        { ...created.body, id: undefined },
        { id: undefined, name: 'prod-net', cidr: '10.10.0.0/16', region_code: 'us-east-1' },
      );
      vpcId = created.body.id;
      assert.deepEqual((await call('GET', `${P}/vpcs`)).body, [created.body]);
      assert.deepEqual((await call('GET', `${P}/vpcs/${vpcId}`)).body, created.body);
      const renamed = await call('POST', `${P}/vpcs/${vpcId}/rename`, { name: 'renamed' });
      assert.equal(renamed.status, 200, renamed.text);
      assert.equal(renamed.body.name, 'renamed');
      assert.equal((await call('GET', `${P}/vpcs/${vpcId}`)).body.name, 'renamed');
    });

    await t.test('peerings: create, list, read until active, delete', async () => {
      const base = `${P}/vpcs/${vpcId}/peerings`;
      const created = await call('POST', base, {
        peer_account_id: '123456789012',
        peer_region_code: 'us-east-1',
        peer_vpc_id: 'vpc-0abc',
      });
      assert.equal(created.status, 201, created.text);
      const id = created.body.id;
      assert.deepEqual(
        (await call('GET', base)).body.map((p: { id: string }) => p.id),
        [id],
      );
      const active = await b.waitFor(async () => {
        const res = await call('GET', `${base}/${id}`);
        return res.body.status === 'active' ? res.body : undefined;
      }, 'the peering to be active');
      assert.match(active.provisioned_id, /^pcx-/);
      const del = await call('DELETE', `${base}/${id}`);
      assert.equal(del.status, 204, del.text);
      assert.equal(del.text, '');
      assert.equal((await b.call('GET', `${base}/${id}`)).status, 404);
    });

    let sid = '';
    await t.test('services: create, list, read until READY', async () => {
      const created = await call('POST', `${P}/services`, {
        name: 'walk',
        addons: ['time-series'],
        cpu_millis: '500',
        memory_gbs: '2',
        environment_tag: 'DEV',
      });
      assert.equal(created.status, 202, created.text);
      assert.equal(created.body.status, 'QUEUED');
      assert.equal(typeof created.body.initial_password, 'string');
      secrets.push(created.body.initial_password);
      sid = created.body.service_id;
      const listed = await call('GET', `${P}/services`);
      assert.deepEqual(
        listed.body.map((s: { service_id: string }) => s.service_id),
        [sid],
      );
      const ready = await status(b, `${P}/services/${sid}`, 'READY');
      assert.equal((await call('GET', `${P}/services/${sid}`)).body.service_id, sid);
      assert.equal(ready.service_type, 'TIMESERIESDB');
      assert.equal(ready.initial_password, undefined);
    });

    await t.test('services: stop, start, resize, rename, setHA', async () => {
      const s = `${P}/services/${sid}`;
      const stop = await call('POST', `${s}/stop`);
      assert.equal(stop.status, 202, stop.text);
      assert.equal(stop.body.status, 'PAUSING');
      await status(b, s, 'PAUSED');
      assertError(await call('POST', `${s}/stop`), 409, 'CONFLICT', /PAUSED/);
      const start = await call('POST', `${s}/start`);
      assert.equal(start.status, 202, start.text);
      assert.equal(start.body.status, 'RESUMING');
      await status(b, s, 'READY');
      const resize = await call('POST', `${s}/resize`, { cpu_millis: '1000', memory_gbs: '4' });
      assert.equal(resize.status, 202, resize.text);
      assert.equal(resize.body.status, 'CONFIGURING');
      const resized = await status(b, s, 'READY');
      assert.deepEqual(
        resized.resources.map((r: any) => [r.spec.cpu_millis, r.spec.memory_gbs]),
        [[1000, 4]],
      );
      const renamed = await call('POST', `${s}/rename`, { name: 'walk-renamed' });
      assert.equal(renamed.status, 200, renamed.text);
      assert.equal(renamed.body.name, 'walk-renamed');
      assertError(await call('POST', `${s}/rename`, { name: '' }), 400, 'INVALID_REQUEST', /name/);
      await call('POST', `${s}/rename`, { name: 'walk' });
      const ha = await call('POST', `${s}/setHA`, { replica_count: 2, sync_replica_count: 1 });
      assert.equal(ha.status, 202, ha.text);
      const withHa = await status(b, s, 'READY');
      assert.deepEqual(withHa.ha_replicas, { replica_count: 2, sync_replica_count: 1 });
    });

    await t.test(
      'services: pooler, password, environment, VPC attach and detach, logs',
      async () => {
        const s = `${P}/services/${sid}`;
        const on = await call('POST', `${s}/enablePooler`);
        assert.equal(on.status, 200, on.text);
        assert.equal(typeof on.body.message, 'string');
        const pooled = (await b.call('GET', s)).body;
        assert.equal(typeof pooled.connection_pooler?.endpoint?.port, 'number');
        assert.equal((await call('POST', `${s}/disablePooler`)).status, 200);
        assert.equal((await b.call('GET', s)).body.connection_pooler, undefined);

        secrets.push('a-new-long-password');
        const pw = await call('POST', `${s}/updatePassword`, { password: 'a-new-long-password' });
        assert.equal(pw.status, 204, pw.text);
        assertError(
          await call('POST', `${s}/updatePassword`, { password: 'short' }),
          400,
          'INVALID_REQUEST',
        );

        const env = await call('POST', `${s}/setEnvironment`, { environment: 'PROD' });
        assert.equal(env.status, 200, env.text);
        assert.equal((await b.call('GET', s)).body.metadata.environment, 'PROD');

        const attach = await call('POST', `${s}/attachToVPC`, { vpc_id: vpcId });
        assert.equal(attach.status, 202, attach.text);
        assert.equal(typeof attach.body.message, 'string');
        const attached = await b.waitFor(async () => {
          const body = (await b.call('GET', s)).body;
          return body.vpcEndpoint?.vpc_id === vpcId ? body : undefined;
        }, 'the vpcEndpoint');
        assert.equal(typeof attached.vpcEndpoint.port, 'number');
        const detach = await call('POST', `${s}/detachFromVPC`, { vpc_id: vpcId });
        assert.equal(detach.status, 202, detach.text);
        await b.waitFor(
          async () => (await b.call('GET', s)).body.vpcEndpoint === undefined,
          'the vpcEndpoint to go',
        );
        // Attach and detach reconfigure it: CONFIGURING, then READY again.
        await status(b, s, 'READY');

        const logs = await call('GET', `${s}/logs?severities=LOG&severities=ERROR`);
        assert.equal(logs.status, 200, logs.text);
        assert.ok(logs.body.entries.length > 0, 'the sim writes logs');
        assert.deepEqual(
          logs.body.logs,
          logs.body.entries.map((e: { message: string }) => e.message),
        );
        for (const e of logs.body.entries) assert.ok(['LOG', 'ERROR'].includes(e.severity));
      },
    );

    await t.test('forkService makes a new service from the parent', async () => {
      const fork = await call('POST', `${P}/services/${sid}/forkService`, {
        fork_strategy: 'NOW',
      });
      assert.equal(fork.status, 202, fork.text);
      assert.equal(fork.body.name, 'walk-fork');
      assert.deepEqual(fork.body.forked_from, {
        project_id: b.projectId,
        service_id: sid,
        is_standby: false,
      });
      assert.equal(typeof fork.body.initial_password, 'string');
      secrets.push(fork.body.initial_password);
      await status(b, `${P}/services/${fork.body.service_id}`, 'READY');
      assert.equal((await call('DELETE', `${P}/services/${fork.body.service_id}`)).status, 202);
      await b.waitGone(fork.body.service_id);
    });

    await t.test(
      'read replica sets: create, list, resize, pooler, environment, delete',
      async () => {
        const base = `${P}/services/${sid}/replicaSets`;
        const created = await call('POST', base, {
          name: 'reporting',
          nodes: 2,
          cpu_millis: 1000,
          memory_gbs: 4,
        });
        assert.equal(created.status, 202, created.text);
        assert.equal(created.body.status, 'creating');
        const rs = created.body.id;
        const active = async () =>
          b.waitFor(async () => {
            const list = (await call('GET', base)).body as { id: string; status: string }[];
            return list.find((r) => r.id === rs && r.status === 'active');
          }, 'the replica set to be active');
        await active();
        const resize = await call('POST', `${base}/${rs}/resize`, {
          cpu_millis: '2000',
          memory_gbs: '8',
        });
        assert.equal(resize.status, 202, resize.text);
        const resized: any = await active();
        assert.deepEqual([resized.cpu_millis, resized.memory_gbs], [2000, 8]);
        assert.equal((await call('POST', `${base}/${rs}/enablePooler`)).status, 200);
        assert.equal((await call('POST', `${base}/${rs}/disablePooler`)).status, 200);
        const env = await call('POST', `${base}/${rs}/setEnvironment`, { environment: 'PROD' });
        assert.equal(env.status, 200, env.text);
        const del = await call('DELETE', `${base}/${rs}`);
        assert.equal(del.status, 202, del.text);
        await b.waitFor(
          async () => (await b.call('GET', base)).body.length === 0,
          'the replica set to be gone',
        );
      },
    );

    await t.test('metrics: the series names, one series, and a bad request', async () => {
      const names = await b.waitFor(async () => {
        const res = await call('GET', `${P}/services/${sid}/metrics/available-series`);
        assert.equal(res.status, 200, res.text);
        return (res.body as string[]).includes('basin_database_xact_commit_total')
          ? res.body
          : undefined;
      }, 'the sim to give the service series');
      assert.ok(names.length >= 4, names.join());
      const now = Date.now();
      const window = {
        from: new Date(now - 3_600_000).toISOString(),
        to: new Date(now + 60_000).toISOString(),
        bucket_seconds: 60,
      };
      const series = await call('POST', `${P}/services/${sid}/metrics/series`, {
        name: 'basin_database_xact_commit_total',
        fn: 'RATE',
        filters: [{ key: 'role', value: 'primary' }],
        ...window,
      });
      assert.equal(series.status, 200, series.text.slice(0, 300));
      assert.deepEqual(
        series.body.map((s: { labels: unknown }) => s.labels),
        [{ node: '0', role: 'primary' }],
      );
      assert.equal(series.body[0].data.length, 61);
      assertError(
        await call('POST', `${P}/services/${sid}/metrics/series`, {
          name: 'no_such_series',
          ...window,
        }),
        400,
        'INVALID_REQUEST',
        /Unknown metric series/,
      );
    });

    await t.test('delete: the service goes, then its VPC', async () => {
      const del = await call('DELETE', `${P}/services/${sid}`);
      assert.equal(del.status, 202, del.text);
      await b.waitGone(sid);
      assert.deepEqual((await b.call('GET', `${P}/services`)).body, []);
      const vpc = await call('DELETE', `${P}/vpcs/${vpcId}`);
      assert.equal(vpc.status, 204, vpc.text);
      assertError(await b.call('GET', `${P}/vpcs/${vpcId}`), 404, 'NOT_FOUND');
    });

    await t.test(
      'logout: a user token made by the shipped CLI is revoked; the project key is kept',
      async () => {
        const user = await inst.cli('--json', 'user', 'create', 'carol');
        assert.equal(user.code, 0, user.stderr);
        const userId = JSON.parse(user.stdout).id as string;
        const added = await inst.cli('user', 'add', userId, '--project', b.projectId);
        assert.equal(added.code, 0, added.stderr);
        const made = await inst.cli('--json', 'credential', 'create', '--user', userId);
        assert.equal(made.code, 0, made.stderr);
        const token = `Bearer ${JSON.parse(made.stdout).bearer_key as string}`;
        secrets.push(token.slice('Bearer '.length));
        assert.equal((await api('GET', '/projects', { authorization: token })).status, 200);

        const out = await api('POST', '/auth/logout', {
          authorization: token,
          body: { refresh_token: 'held-by-the-client' },
        });
        assert.equal(out.status, 204, out.text);
        assert.equal(out.text, '');
        assertError(await api('GET', '/projects', { authorization: token }), 401, 'UNAUTHORIZED');

        // The project key: 204, and it still works (it is not a session).
        assert.equal((await api('POST', '/auth/logout')).status, 204);
        assert.equal((await call('GET', '/projects')).status, 200);
      },
    );

    await t.test("the vendor CLI's telemetry: accepted, checked, kept nowhere", async () => {
      const identify = await call('POST', '/analytics/identify', {
        properties: { email: 'user@example.com' },
      });
      assert.equal(identify.status, 200, identify.text);
      assert.deepEqual(identify.body, { status: 'success' });
      const track = await call('POST', '/analytics/track', { event: 'service_created' });
      assert.deepEqual([track.status, track.body], [200, { status: 'success' }]);
      assertError(
        await call('POST', '/analytics/track', { properties: {} }),
        400,
        'INVALID_REQUEST',
      );
      assertError(
        await api('POST', '/analytics/track', { authorization: null, body: { event: 'x' } }),
        401,
        'UNAUTHORIZED',
      );
    });

    await t.test('the walk called every operation of the served OpenAPI document', async () => {
      const doc = await b.request('GET', '/openapi.json');
      assert.equal(doc.status, 200, doc.text);
      const ops = operations(doc.body);
      assert.ok(ops.length > 30, `the document lists ${ops.length} operations`);
      const missed = ops.filter(
        (op) => !called.some((c) => c.method === op.method && op.pattern.test(c.path)),
      );
      assert.deepEqual(
        missed.map((op) => op.name),
        [],
      );
    });

    await t.test(
      'a credential made by the shipped CLI works against the running server',
      async () => {
        const made = await inst.cli('--json', 'credential', 'create', '--project', b.projectId);
        assert.equal(made.code, 0, made.stderr);
        const cred = JSON.parse(made.stdout);
        secrets.push(cred.bearer_key);
        for (const authorization of [
          `Bearer ${cred.bearer_key}`,
          basic(cred.access_key, cred.secret_key),
        ]) {
          const res = await b.request('GET', '/projects', { authorization });
          assert.equal(res.status, 200, res.text);
          assert.deepEqual(res.body, [{ id: b.projectId, name: 'default' }]);
        }
        const revoked = await inst.cli('credential', 'revoke', cred.id);
        assert.equal(revoked.code, 0, revoked.stderr);
        assertError(
          await b.request('GET', '/projects', { authorization: `Bearer ${cred.bearer_key}` }),
          401,
          'UNAUTHORIZED',
        );
      },
    );

    await t.test(
      'SIGTERM: Basin drains and exits 0, and no secret reached its output',
      async () => {
        assert.deepEqual(await b.stop(), { code: 0, signal: null });
        const out = b.output();
        assert.ok(out.includes('/v1/projects'), 'the access log was written');
        // The bootstrap secret key is printed once, on purpose; nothing else ever is.
        const printed = b.printed?.secretKey as string;
        assert.equal(out.split(printed).length - 1, 1, 'the printed secret key, once');
        for (const secret of secrets.filter((x) => x !== printed)) {
          assert.equal(
            out.includes(secret),
            false,
            `a secret (${secret.slice(0, 4)}…) in the output`,
          );
        }
      },
    );
  },
);
