import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Peering, PeeringStatus, Vpc } from './types.js';
import { vpcNetwork } from './vpc-network.js';

const vpc = { id: '1', cidr: '10.0.0.0/16' } as Vpc;
const peering = (status: PeeringStatus, peerCidrs?: string[], vpcId = '1') =>
  ({ vpcId, status, ...(peerCidrs ? { peerCidrs } : {}) }) as Peering;

test("a VPC's network: its block, then its active peerings' peer blocks, once each", () => {
  assert.deepEqual(vpcNetwork(vpc, []), ['10.0.0.0/16']);
  assert.deepEqual(
    vpcNetwork(vpc, [
      peering('active', ['10.50.0.0/16']),
      peering('active', ['10.50.0.0/16', '10.0.0.0/16']),
      peering('active'),
      peering('pending', ['10.60.0.0/16']),
      peering('failed', ['10.70.0.0/16']),
      peering('active', ['10.80.0.0/16'], '2'),
    ]),
    ['10.0.0.0/16', '10.50.0.0/16'],
  );
});
