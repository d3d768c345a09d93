import assert from 'node:assert/strict';
import { test } from 'node:test';
import { privateMountPoints, privateTmpBytes } from './private-tmp-usage.js';

test('the private tmpfs are found by their source name, nothing else', () => {
  const mountinfo = [
    '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
    '480 22 0:61 / /tmp rw,nosuid,nodev,relatime - tmpfs basin-private rw,size=1048576k,mode=1777',
    '481 22 0:62 / /var/tmp rw,nosuid,nodev,relatime - tmpfs basin-private rw,size=1048576k',
    '482 22 0:63 / /dev/shm rw,nosuid,nodev,relatime - tmpfs basin-private rw,size=1048576k',
    '30 22 0:25 / /run rw,nosuid,nodev - tmpfs tmpfs rw,size=2430000k,mode=755',
    '483 22 0:64 / /run/lock rw,nosuid,nodev - tmpfs basin-private rw,size=1048576k',
    '484 22 0:65 / /home/x rw - ext4 basin-private rw',
    '',
  ].join('\n');
  assert.deepEqual(privateMountPoints(mountinfo), ['/tmp', '/var/tmp', '/dev/shm', '/run/lock']);
  assert.deepEqual(privateMountPoints(''), []);
});

test('a process without private directories holds none; a gone one is undefined', async () => {
  assert.equal(await privateTmpBytes(process.pid), 0);
  assert.equal(await privateTmpBytes(2 ** 22 + 1), undefined);
});
