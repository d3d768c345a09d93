import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, parseConfig } from './config.js';

test('service OS user options: defaults, flags and environment', () => {
  const d = parseConfig([], {});
  assert.deepEqual(d.serviceUidRange, { min: 2_000_000, max: 2_999_999 });
  assert.equal(d.servicePrivateTmp, 'auto');
  assert.equal(d.serviceTmpSizeMb, 1024);
  const c = parseConfig(['--service-uid-range', '3000000-3000099', '--service-private-tmp=off'], {
    BASIN_SERVICE_TMP_SIZE_MB: '64',
  });
  assert.deepEqual(c.serviceUidRange, { min: 3_000_000, max: 3_000_099 });
  assert.equal(c.servicePrivateTmp, 'off');
  assert.equal(c.serviceTmpSizeMb, 64);
});

test('service OS user options: bad values say what to write', () => {
  for (const range of ['1000-2000', '3000000-2000000', '2000000', '2000000-4294967295']) {
    assert.throws(
      () => parseConfig([], { BASIN_SERVICE_UID_RANGE: range }),
      (err: unknown) =>
        err instanceof ConfigError && /BASIN_SERVICE_UID_RANGE must look like/.test(err.message),
      range,
    );
  }
  assert.throws(
    () => parseConfig(['--service-private-tmp', 'yes'], {}),
    /BASIN_SERVICE_PRIVATE_TMP must be auto, on or off; got yes/,
  );
  assert.throws(() => parseConfig(['--service-tmp-size-mb', '0'], {}), ConfigError);
});

test("the shared services' memory: a quarter of the host's unless set, at least 256 MiB", () => {
  assert.equal(parseConfig([], {}).sharedMemoryMb, null);
  assert.equal(parseConfig(['--shared-memory-mb', '4096'], {}).sharedMemoryMb, 4096);
  assert.equal(parseConfig([], { BASIN_SHARED_MEMORY_MB: '512' }).sharedMemoryMb, 512);
  assert.throws(
    () => parseConfig(['--shared-memory-mb', '100'], {}),
    /sharedMemoryMb must be a whole number from 256/,
  );
});

test('backup options: a schedule and a recovery window, as durations', () => {
  const d = parseConfig([], {});
  assert.equal(d.backupScheduleMs, 86_400_000);
  assert.equal(d.pitrWindowMs, 3 * 86_400_000);
  const c = parseConfig(['--backup-schedule', '90s'], { BASIN_PITR_WINDOW: '15m' });
  assert.equal(c.backupScheduleMs, 90_000);
  assert.equal(c.pitrWindowMs, 900_000);
  assert.equal(parseConfig(['--pitr-window=6h'], {}).pitrWindowMs, 6 * 3_600_000);
  for (const bad of ['0s', '1', '1w', '-1d', '1.5h', '3651d', '']) {
    assert.throws(
      () => parseConfig(['--backup-schedule', bad], {}),
      /BASIN_BACKUP_SCHEDULE must be a duration such as 90s, 15m, 6h or 3d/,
      bad,
    );
  }
});

test('the administrator email: a default, a flag, and a clear error for a bad one', () => {
  assert.equal(parseConfig([], {}).adminEmail, 'admin@basin.localhost');
  assert.equal(parseConfig(['--admin-email', 'ops@example.com'], {}).adminEmail, 'ops@example.com');
  assert.equal(
    parseConfig([], { BASIN_ADMIN_EMAIL: 'root@db.example.org' }).adminEmail,
    'root@db.example.org',
  );
  for (const bad of ['admin', 'admin@localhost', 'a b@example.com']) {
    assert.throws(
      () => parseConfig([], { BASIN_ADMIN_EMAIL: bad }),
      (err: unknown) =>
        err instanceof ConfigError &&
        /BASIN_ADMIN_EMAIL must be an email address/.test(err.message),
      bad,
    );
  }
});

test('sizes are whole milli-cores and gigabytes: clients read them as integers', () => {
  assert.deepEqual(parseConfig([], { BASIN_SIZES: 'shared,250m/1GB' }).sizes, [
    { shared: true, cpuMillis: 0, memoryGbs: 0 },
    { shared: false, cpuMillis: 250, memoryGbs: 1 },
  ]);
  assert.throws(
    () => parseConfig([], { BASIN_SIZES: '250m/0.5GB' }),
    /Bad size 250m\/0.5GB: write sizes like 1000m\/4GB, in whole milli-cores and gigabytes/,
  );
});

test('storage options: allowance per GB of memory or fixed, and the reserve', () => {
  const d = parseConfig([], {});
  assert.deepEqual(d.storageAllowance, {
    kind: 'perMemoryGb',
    bytesPerGb: 25 * 1024 ** 3,
    sharedBytes: 10 * 1024 ** 3,
  });
  assert.deepEqual(d.diskReserve, { kind: 'fraction', fraction: 0.05 });
  const c = parseConfig(['--storage-allowance', '200MB'], { BASIN_DISK_RESERVE: '2GB' });
  assert.deepEqual(c.storageAllowance, { kind: 'fixed', bytes: 200 * 1024 ** 2 });
  assert.deepEqual(c.diskReserve, { kind: 'bytes', bytes: 2 * 1024 ** 3 });
  const r = parseConfig(['--storage-allowance=2x', '--storage-allowance-shared', '300MB'], {});
  assert.deepEqual(r.storageAllowance, {
    kind: 'perMemoryGb',
    bytesPerGb: 2 * 1024 ** 3,
    sharedBytes: 300 * 1024 ** 2,
  });
  assert.throws(() => parseConfig(['--storage-allowance', '200'], {}), ConfigError);
  assert.throws(
    () => parseConfig(['--storage-allowance', '200'], {}),
    /^Error: BASIN_STORAGE_ALLOWANCE must be <n>x .* or a size such as 500MB, 20GB or 2TB; got 200\.$/,
  );
  assert.throws(
    () => parseConfig([], { BASIN_STORAGE_ALLOWANCE_SHARED: 'big' }),
    /^Error: BASIN_STORAGE_ALLOWANCE_SHARED must be a size such as 500MB/,
  );
  assert.throws(
    () => parseConfig(['--disk-reserve', '90%'], {}),
    /^Error: BASIN_DISK_RESERVE must be a percentage of the file system under 50%/,
  );
});

test("the services' network: a block by default, another, or off; bad blocks say what to write", () => {
  assert.equal(parseConfig([], {}).serviceNetwork, '198.18.0.0/15');
  assert.equal(
    parseConfig(['--service-network', '10.250.0.0/20'], {}).serviceNetwork,
    '10.250.0.0/20',
  );
  assert.equal(parseConfig([], { BASIN_SERVICE_NETWORK: 'off' }).serviceNetwork, 'off');
  assert.throws(
    () => parseConfig(['--service-network', '198.18.0.1/15'], {}),
    /BASIN_SERVICE_NETWORK: 198\.18\.0\.1\/15 has host bits set: did you mean 198\.18\.0\.0\/15\?, or off\./,
  );
  assert.throws(() => parseConfig(['--service-network', '127.0.0.0/16'], {}), ConfigError);
  assert.throws(() => parseConfig(['--service-network', 'on'], {}), ConfigError);
});

test('service hostnames: off by default; on needs a DNS name as the public host', () => {
  assert.equal(parseConfig([], {}).serviceHostnames, false);
  const on = parseConfig(['--service-hostnames', 'on', '--public-host', 'db.example.com'], {});
  assert.equal(on.serviceHostnames, true);
  assert.throws(
    () => parseConfig(['--public-host', '10.0.0.5'], { BASIN_SERVICE_HOSTNAMES: 'on' }),
    /BASIN_SERVICE_HOSTNAMES needs a DNS name as the public host \(BASIN_PUBLIC_HOST\), not the address 10\.0\.0\.5/,
  );
});

test("the API's timeouts and connection cap: defaults, flags, and headers no longer than the request", () => {
  assert.deepEqual(parseConfig([], {}).http, {
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 72_000,
    maxConnections: 1024,
  });
  const c = parseConfig(['--headers-timeout-ms', '2000', '--max-connections=10'], {
    BASIN_REQUEST_TIMEOUT_MS: '5000',
    BASIN_KEEP_ALIVE_TIMEOUT_MS: '1000',
  });
  assert.deepEqual(c.http, {
    headersTimeoutMs: 2000,
    requestTimeoutMs: 5000,
    keepAliveTimeoutMs: 1000,
    maxConnections: 10,
  });
  assert.throws(
    () => parseConfig(['--headers-timeout-ms', '40000'], {}),
    /BASIN_HEADERS_TIMEOUT_MS \(40000\) must not be longer than BASIN_REQUEST_TIMEOUT_MS \(30000\)/,
  );
  // 0 would mean "never" to Node: not a bound.
  for (const flag of ['--keep-alive-timeout-ms', '--request-timeout-ms', '--max-connections']) {
    assert.throws(() => parseConfig([flag, '0'], {}), ConfigError, flag);
  }
});

test('restart backoff: 1 s doubling to 5 min, stable after 10 min; flags; the cap not below the base', () => {
  assert.deepEqual(parseConfig([], {}).restarts, {
    baseMs: 1_000,
    capMs: 300_000,
    stableMs: 600_000,
  });
  const c = parseConfig(['--restart-backoff-ms', '250', '--restart-backoff-max-ms=2000'], {
    BASIN_RESTART_STABLE_MS: '8000',
  });
  assert.deepEqual(c.restarts, { baseMs: 250, capMs: 2_000, stableMs: 8_000 });
  assert.throws(
    () => parseConfig(['--restart-backoff-ms', '5000', '--restart-backoff-max-ms', '1000'], {}),
    /BASIN_RESTART_BACKOFF_MAX_MS \(1000\) must not be shorter than BASIN_RESTART_BACKOFF_MS \(5000\)/,
  );
});

test("the time-series type's name: the spec's by default, the vendor's by flag or environment", () => {
  assert.equal(parseConfig([], {}).serviceTypeName, 'TIMESERIESDB');
  assert.equal(
    parseConfig(['--service-type-name', 'TIMESCALEDB'], {}).serviceTypeName,
    'TIMESCALEDB',
  );
  assert.equal(
    parseConfig([], { BASIN_SERVICE_TYPE_NAME: 'TIMESCALEDB' }).serviceTypeName,
    'TIMESCALEDB',
  );
  assert.throws(
    () => parseConfig([], { BASIN_SERVICE_TYPE_NAME: 'timescale' }),
    /BASIN_SERVICE_TYPE_NAME must be TIMESERIESDB or TIMESCALEDB; got timescale/,
  );
});

test('the hosts driver needs --host-listen, where its hosts join', () => {
  assert.throws(() => parseConfig(['--driver', 'hosts'], {}), /--host-listen/);
  const c = parseConfig(['--driver', 'hosts', '--host-listen', '10.0.0.1:9443'], {});
  assert.equal(c.driver, 'hosts');
  assert.deepEqual(c.hostListen, { host: '10.0.0.1', port: 9443 });
});

test('idle suspension: off by default; a duration; limited to environments', () => {
  assert.equal(parseConfig([], {}).idleSuspend, null);
  assert.deepEqual(parseConfig(['--idle-suspend-after', '15m'], {}).idleSuspend, {
    afterMs: 900_000,
    environments: ['DEV', 'PROD'],
  });
  assert.deepEqual(
    parseConfig(['--idle-environments=dev'], { BASIN_IDLE_SUSPEND_AFTER: '90s' }).idleSuspend,
    { afterMs: 90_000, environments: ['DEV'] },
  );
  assert.throws(
    () => parseConfig(['--idle-suspend-after', '10'], {}),
    /BASIN_IDLE_SUSPEND_AFTER must be a duration such as 90s/,
  );
  assert.throws(
    () => parseConfig(['--idle-environments', 'DEV,STAGING'], {}),
    /BASIN_IDLE_ENVIRONMENTS must list environments among DEV, PROD/,
  );
});
