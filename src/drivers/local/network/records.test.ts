// A namespace's record is read back field by field: a torn or edited file
// does not load (its id then gets a slot anew), a good one does, exactly.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseRecord, portList } from './records.js';

test('a record round-trips; anything malformed is no record', () => {
  const r = { slot: 3, ports: [16001, 16005], streamsFrom: 'abc123', hostPorts: [8432] };
  assert.deepEqual(parseRecord(JSON.stringify(r)), r);
  assert.deepEqual(parseRecord('{"slot":0,"ports":[]}'), { slot: 0, ports: [], hostPorts: [] });
  const admitting = { slot: 2, ports: [], hostPorts: [8432], hostGuests: ['fork1'] };
  assert.deepEqual(parseRecord(JSON.stringify(admitting)), admitting);
  const parked = { slot: 4, ports: [16001], parked: [16001], hostPorts: [] };
  assert.deepEqual(parseRecord(JSON.stringify(parked)), parked);
  for (const bad of [
    '',
    '{"slot":',
    'null',
    '[]',
    '{"slot":-1,"ports":[]}',
    '{"slot":1.5,"ports":[]}',
    '{"slot":1}',
    '{"slot":1,"ports":[0]}',
    '{"slot":1,"ports":[65536]}',
    '{"slot":1,"ports":["16001"]}',
    '{"slot":1,"ports":[],"streamsFrom":"../x"}',
    '{"slot":1,"ports":[],"hostPorts":"8432"}',
    '{"slot":1,"ports":[16001],"parked":[0]}',
    '{"slot":1,"ports":[],"hostPorts":[8432],"hostGuests":["../x"]}',
    '{"slot":1,"ports":[],"hostPorts":[8432],"hostGuests":"fork1"}',
  ]) {
    assert.equal(parseRecord(bad), undefined, bad);
  }
});

test('port lists are sorted and unique', () => {
  assert.deepEqual(portList([16005, 16001, 16005]), [16001, 16005]);
  assert.equal(portList('16001'), undefined);
});
