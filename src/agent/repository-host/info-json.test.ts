import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseInfoJson, stanzaSystemIdOfInfo } from './info-json.js';

const backup = (label: string, o: Record<string, unknown> = {}) => ({
  label,
  type: 'full',
  error: false,
  timestamp: { start: 1_800_000_000, stop: 1_800_000_006 },
  archive: { start: '000000010000000000000002', stop: '000000010000000000000002' },
  ...o,
});

test("the stanza's complete full backups, oldest first; the rest skipped", () => {
  const text = JSON.stringify([
    { name: 'other', backup: [backup('20270101-000000F')] },
    {
      name: 'abc',
      backup: [
        backup('20270102-000000F'),
        backup('20270101-000000F'),
        backup('20270103-000000F', { error: true }),
        backup('20270104-000000F', { type: 'diff' }),
        backup('20270105-000000F', { archive: { start: 'x', stop: 'y' } }),
        backup('not a label'),
      ],
    },
  ]);
  const list = parseInfoJson(text, 'abc');
  assert.deepEqual(
    list.map((b) => b.label),
    ['20270101-000000F', '20270102-000000F'],
  );
  assert.equal(list[0]?.startedAt, new Date(1_800_000_000_000).toISOString());
  // The second after its end: a restore cannot be consistent before it.
  assert.equal(list[0]?.stoppedAt, new Date(1_800_000_007_000).toISOString());
});

test('no stanza, no backups, or no JSON: nothing', () => {
  assert.deepEqual(parseInfoJson('[]', 'abc'), []);
  assert.deepEqual(parseInfoJson(JSON.stringify([{ name: 'abc', backup: [] }]), 'abc'), []);
  assert.deepEqual(parseInfoJson('not json', 'abc'), []);
});

test("the stanza's current system identifier, exactly (past a JSON number's precision)", () => {
  const text =
    '[{"name":"other","db":[{"id":1,"repo-key":1,"system-id":7000000000000000001,"version":"15"}]},' +
    '{"name":"abc","db":[{"id":2,"repo-key":1,"system-id":7312345678901234567,"version":"15"},' +
    '{"id":1,"repo-key":1,"system-id":7000000000000000003,"version":"15"}],"backup":[]}]';
  assert.equal(stanzaSystemIdOfInfo(text, 'abc'), '7312345678901234567');
  assert.equal(stanzaSystemIdOfInfo(text, 'none'), undefined);
  assert.equal(stanzaSystemIdOfInfo('not json', 'abc'), undefined);
});
