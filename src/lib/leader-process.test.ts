import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { test } from 'node:test';
import { fenceHolder, holderOf, leaderHolder } from './leader-process.js';

test('fenceHolder: kills the process a lease names on this host; never a stranger with its pid, another host or itself', async (t) => {
  const child = spawn('sleep', ['600'], { stdio: 'ignore' });
  t.after(() => child.kill('SIGKILL'));
  await once(child, 'spawn');
  const pid = child.pid as number;
  const name = holderOf(pid);
  assert.match(name, new RegExp(`^${hostname()}/${pid}/\\d+\\.[0-9a-f]+$`));

  // The same pid with another start time is a later process: left alone.
  const [host, , rest] = name.split('/') as [string, string, string];
  const [start, boot] = rest.split('.') as [string, string];
  assert.equal(await fenceHolder(`${host}/${pid}/${Number(start) + 1}.${boot}`), 'gone');
  const otherBoot = boot === '00000000' ? '11111111' : '00000000';
  assert.equal(
    await fenceHolder(`${host}/${pid}/${start}.${otherBoot}`),
    'elsewhere',
    'another boot',
  );
  assert.equal(await fenceHolder(`not-${host}/${pid}/${start}.${boot}`), 'elsewhere');
  assert.equal(await fenceHolder(`${host}/${pid}`), 'elsewhere', 'a name of another form');
  assert.equal(await fenceHolder(leaderHolder()), 'self');
  assert.equal(child.exitCode, null, 'still running');

  const exited = once(child, 'exit');
  assert.equal(await fenceHolder(name), 'killed');
  const [code, signal] = await exited;
  assert.deepEqual([code, signal], [null, 'SIGKILL']);
  assert.equal(await fenceHolder(name), 'gone');
});
