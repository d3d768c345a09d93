// A killed installation's nftables table that outlived its veths is removed
// by the next claim of its block (remove-installation.ts, removeNetworksIn);
// a table that only names a wider block in its rules is left alone.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { removeNetworksIn } from '../../src/drivers/local/network/remove-installation.js';

const STALE = 'basin-00000000000000aa';
const WIDE = 'basin-00000000000000bb';
const table = (name: string, body: string) =>
  execFileSync('nft', ['-f', '-'], { input: `table ip ${name} {\n${body}\n}\n` });
const tables = () => execFileSync('nft', ['list', 'tables', 'ip'], { encoding: 'utf8' });

test('a stale table reserving an address of a claimed block goes; one naming a wider block stays', (t) => {
  t.after(() => {
    for (const name of [STALE, WIDE]) {
      execFileSync('nft', ['-f', '-'], { input: `table ip ${name} {}\ndelete table ip ${name}\n` });
    }
  });
  table(
    STALE,
    '\tset reserved {\n\t\ttype ipv4_addr . inet_service\n\t\telements = { 198.19.250.0 . 8432 }\n\t}',
  );
  table(
    WIDE,
    '\tchain postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n\t\tip saddr 198.19.250.0/23 masquerade\n\t}',
  );
  const removed = removeNetworksIn('198.19.250.0/24');
  assert.deepEqual(removed, ['00000000000000aa']);
  assert.doesNotMatch(tables(), new RegExp(STALE));
  assert.match(tables(), new RegExp(WIDE));
});
