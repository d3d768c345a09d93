// The server-state file a host's HAProxy starts from after a reload
// (haproxy-state.ts): which servers keep the running worker's state, which
// start down, and what a line carries. test/local/haproxy-reload.test.ts
// runs it with the real HAProxy.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderPatroniService } from './haproxy-patroni.js';
import { serverStateFile, statefulServers } from './haproxy-state.js';
import { renderService } from './haproxy.js';

const tls = { ca: '/x/ca.crt', crt: '/x/client.pem' };
const all = ['0.0.0.0/0', '::/0'];
const header =
  '# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port';

test("the servers of the frontends under Patroni are read from Basin's files; no other", () => {
  const patroni = renderPatroniService(
    'svca',
    17000,
    [
      { index: 1, host: '10.0.0.2', port: 16001, apiPort: 16002 },
      { index: 0, host: '2001:DB8:0:0::1', port: 16003, apiPort: 16004 },
    ],
    '*',
    all,
    tls,
  );
  const local = renderService(
    'svcl',
    17001,
    [{ index: 0, host: '127.0.0.1', port: 16005, enabled: true }],
    '*',
    all,
  ).text;
  assert.deepEqual(statefulServers([patroni, local]), [
    // Sorted as rendered; the IPv6 address as HAProxy prints it.
    { backend: 'svc_svca', server: 'node0', addr: '2001:db8::1', port: 16003, checkPort: 16004 },
    { backend: 'svc_svca', server: 'node1', addr: '10.0.0.2', port: 16001, checkPort: 16002 },
  ]);
});

test('a server checked as configured keeps its state; a new or moved one starts down, never checked', () => {
  const servers = statefulServers([
    renderPatroniService(
      'svca',
      17000,
      [
        { index: 0, host: '10.0.0.1', port: 16001, apiPort: 16002 },
        { index: 1, host: '10.0.0.2', port: 16003, apiPort: 16004 },
        { index: 2, host: '10.0.0.3', port: 16005, apiPort: 16006 }, // moved: another port
        { index: 3, host: '10.0.0.4', port: 16007, apiPort: 16008 }, // new
      ],
      '*',
      all,
      tls,
    ),
  ]);
  // What HAProxy 2.6 prints: node0 down (a standby), node1 up (the primary).
  const dump = [
    '1',
    header,
    '3 svc_svca 1 node0 10.0.0.1 0 0 1 1 40 17 2 0 6 0 0 0 - 16001 - 0 16002 - - 16002',
    '3 svc_svca 2 node1 10.0.0.2 2 0 1 1 40 15 3 2 6 0 0 0 - 16003 - 0 16004 - - 16004',
    '3 svc_svca 3 node2 10.0.0.3 2 0 1 1 40 15 3 2 6 0 0 0 - 16099 - 0 16006 - - 16006',
    '4 svc_gone 1 node0 10.0.0.9 2 0 1 1 40 15 3 2 6 0 0 0 - 16009 - 0 16010 - - 16010',
    '',
  ].join('\n');
  const file = serverStateFile(dump, servers).split('\n');
  assert.equal(file[0], '1', 'version 1, as `show servers state` prints it');
  assert.deepEqual(file.slice(2), [
    // The running states (op, admin, weights, time, check status, result,
    // health, check and agent state); the address, ports and TLS left to
    // the configuration: 20 fields, none of the optional ones.
    '0 svc_svca 0 node0 - 0 0 1 1 40 17 2 0 6 0 0 0 - 16001 -',
    '0 svc_svca 0 node1 - 2 0 1 1 40 15 3 2 6 0 0 0 - 16003 -',
    // Down (0), health 0, its check not run yet (1: INI).
    '0 svc_svca 0 node2 - 0 0 1 1 0 1 0 0 0 0 0 0 - 16005 -',
    '0 svc_svca 0 node3 - 0 0 1 1 0 1 0 0 0 0 0 0 - 16007 -',
    '',
  ]);
  for (const line of file.slice(2, -1)) assert.equal(line.split(' ').length, 20, line);

  // No worker answered: every server starts down.
  const fresh = serverStateFile('', servers).split('\n').slice(2, -1);
  assert.equal(fresh.length, 4);
  for (const line of fresh) assert.match(line, / - 0 0 1 1 0 1 0 0 0 0 0 0 - \d+ -$/);

  // A check port that changed is a server checked elsewhere: down too.
  const otherCheck = dump.replace('16004 - - 16004', '16044 - - 16044');
  assert.match(serverStateFile(otherCheck, servers), /^0 svc_svca 0 node1 - 0 0 1 1 0 1 /m);
  // A line of another shape (another version's) is not trusted.
  const short = dump.replace(/ - - 16004$/m, '');
  assert.match(serverStateFile(short, servers), /^0 svc_svca 0 node1 - 0 0 1 1 0 1 /m);
});

test('an IPv6 address is compared in the form HAProxy prints', () => {
  const servers = statefulServers([
    renderPatroniService(
      'svcb',
      17000,
      [{ index: 0, host: '2001:DB8:0:0::7', port: 16001, apiPort: 16002 }],
      '*',
      all,
      tls,
    ),
  ]);
  const dump = `1\n${header}\n5 svc_svcb 1 node0 2001:db8::7 2 0 1 1 9 15 3 2 6 0 0 0 - 16001 - 0 16002 - - 16002\n`;
  assert.match(serverStateFile(dump, servers), /^0 svc_svcb 0 node0 - 2 0 1 1 9 15 3 2 6 /m);
});
