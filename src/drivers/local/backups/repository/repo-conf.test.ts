import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderBackupConf, renderServerConf, renderServiceConf } from './repo-conf.js';

const identity = { cert: '/r/server.crt', key: '/r/server.key', ca: '/r/ca.crt' };

test("a repository host's server: its own port, its stanza's client alone, encrypted", () => {
  const conf = renderServerConf({
    repo: '/r/repo',
    dirs: { lock: '/r/lock', log: '/r/log' },
    listen: '10.0.0.20',
    port: 26001,
    identity,
    cipherPass: 'a'.repeat(64),
    authorized: [{ client: 'basin-service-abc', stanza: 'abc' }],
  });
  assert.match(conf, /^tls-server-port=26001$/m);
  assert.match(conf, /^tls-server-auth=basin-service-abc=abc$/m);
  assert.match(conf, /^repo1-cipher-type=aes-256-cbc$/m);
  assert.match(conf, new RegExp(`^repo1-cipher-pass=${'a'.repeat(64)}$`, 'm'));
  assert.equal((conf.match(/tls-server-auth/g) ?? []).length, 1);
});

test('one machine: no cipher, the one port', () => {
  const conf = renderServerConf({
    repo: '/r/repo',
    dirs: { lock: '/r/lock', log: '/r/log' },
    listen: '198.18.0.0',
    identity,
    authorized: [{ client: 'basin-service-abc', stanza: 'abc' }],
  });
  assert.match(conf, /^tls-server-port=8432$/m);
  assert.doesNotMatch(conf, /cipher/);
});

test('a cipher pass that would break the file is refused', () => {
  for (const pass of ['short', `${'a'.repeat(40)}\nrepo1-path=/`, `${'a'.repeat(40)} x`]) {
    assert.throws(() =>
      renderBackupConf({
        stanza: 'abc',
        repo: '/r/repo',
        dirs: { lock: '/r/lock', log: '/r/log' },
        processMax: 1,
        cipherPass: pass,
        pg: {
          host: '10.0.0.11',
          port: 26001,
          cert: '/c',
          key: '/k',
          ca: '/ca',
          config: '/pg.conf',
          path: '/pgdata',
          socketDir: '/s',
          pgPort: 16001,
        },
      }),
    );
  }
});

test("the database host's side names the repository host's port and no cipher", () => {
  const conf = renderServiceConf({
    stanza: 'abc',
    dirs: { spool: '/b/spool', lock: '/b/lock', log: '/b/log' },
    repo: {
      host: '10.0.0.20',
      port: 26001,
      cert: '/b/client.crt',
      key: '/b/client.key',
      ca: '/b/ca.crt',
      config: '/r/server.conf',
    },
    pgdata: '/pgdata',
    socketDir: '/s',
    port: 16001,
  });
  assert.match(conf, /^repo1-host=10\.0\.0\.20$/m);
  assert.match(conf, /^repo1-host-port=26001$/m);
  assert.match(conf, /^repo1-host-config=\/r\/server\.conf$/m);
  assert.doesNotMatch(conf, /cipher/);
});
