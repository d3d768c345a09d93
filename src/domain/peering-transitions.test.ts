import assert from 'node:assert/strict';
import { test } from 'node:test';
import { failPeering, settlePeering } from './peering-transitions.js';
import type { Peering } from './types.js';

const peering = (status: Peering['status']) =>
  ({ id: '1', status, provisionedId: null, errorMessage: null }) as Peering;

test('a pending peering settles as the provisioner says, or fails with the reason', () => {
  const active = { status: 'active', provisionedId: 'pcx-1', errorMessage: null } as const;
  assert.deepEqual(settlePeering(peering('pending'), active), { ...peering('pending'), ...active });
  assert.deepEqual(failPeering(peering('pending'), 'no route'), {
    ...peering('pending'),
    status: 'failed',
    errorMessage: 'no route',
  });
});

test('only a pending peering moves', () => {
  for (const status of ['active', 'failed'] as const) {
    assert.equal(failPeering(peering(status), 'x'), undefined);
    assert.equal(
      settlePeering(peering(status), { status: 'active', provisionedId: 'p', errorMessage: null }),
      undefined,
    );
  }
});

test('an active peering keeps the private IPv4 blocks the provisioner reported; a failed one none', () => {
  const p = peering('pending');
  const outcome = {
    status: 'active' as const,
    provisionedId: 'pcx-1',
    errorMessage: null,
    peerCidrs: ['10.50.0.0/16', '8.8.8.0/24', '10.60.0.1/16', '0.0.0.0/0', 'nonsense'],
  };
  assert.deepEqual(settlePeering(p, outcome)?.peerCidrs, ['10.50.0.0/16']);
  assert.equal(settlePeering(p, { ...outcome, peerCidrs: ['8.8.8.0/24'] })?.peerCidrs, undefined);
  const failed = settlePeering(p, { ...outcome, status: 'failed', errorMessage: 'no' });
  assert.equal(failed?.peerCidrs, undefined);
});
