// The vocabulary of the sim's synthetic logs: PostgreSQL-like messages, so that
// clients can exercise severity and full-text filters against text that looks
// like what the local driver (real PostgreSQL) produces. Primaries and standbys
// speak slightly differently (checkpoints vs restartpoints, read-only errors).

import { int, pick, type Rng } from './sim-random.js';

export type Severity = 'LOG' | 'WARNING' | 'ERROR' | 'FATAL';

/**
 * Maps a roll in [0, 1) to a severity: mostly LOG, some WARNING, a few ERROR
 * and FATAL, roughly as a busy but healthy database logs.
 */
export function severityFor(roll: number): Severity {
  if (roll < 0.01) return 'FATAL';
  if (roll < 0.045) return 'ERROR';
  if (roll < 0.11) return 'WARNING';
  return 'LOG';
}

const APPS = ['psql', 'pgAdmin 4', 'node-postgres', 'PostgreSQL JDBC Driver', 'grafana', 'dbt'];
const TABLES = ['conditions', 'metrics', 'orders', 'users', 'events', 'devices'];
const BAD_NAMES = ['foo', 'tmp_import', 'public.user', 'metric', 'order_items'];
const BAD_TOKENS = ['SELEC', 'FORM', 'WHERE', ')', 'LIMT'];
const BAD_USERS = ['postgres', 'admin', 'root', 'tsdbadmin', 'readonly'];
const BAD_DATABASES = ['postgres', 'test', 'app', 'tsdb_dev'];
const READS = [
  "SELECT * FROM conditions WHERE time > now() - interval '1 hour' ORDER BY time DESC",
  "SELECT time_bucket('5 minutes', time) AS bucket, device_id, avg(temperature) FROM conditions GROUP BY bucket, device_id ORDER BY bucket DESC LIMIT 100",
  'SELECT count(*) FROM orders WHERE created_at >= $1',
  'SELECT id, email, created_at FROM users WHERE id = $1',
  'SELECT d.name, last(m.value, m.time) FROM metrics m JOIN devices d ON d.id = m.device_id GROUP BY d.name',
];
const WRITES = [
  'INSERT INTO metrics (time, device_id, value) VALUES ($1, $2, $3)',
  'INSERT INTO conditions (time, location, temperature, humidity) VALUES ($1, $2, $3, $4)',
  'UPDATE orders SET status = $1 WHERE id = $2',
  "DELETE FROM events WHERE time < now() - interval '30 days'",
  'COMMIT',
];

/** A plausible WAL position that advances with the entry index. */
export function lsnAt(index: number, rng: Rng): string {
  const bytes = Math.max(0, index) * 24576 + int(rng, 0, 24575);
  const high = Math.floor(bytes / 0x100000000);
  const low = bytes % 0x100000000;
  return `${high.toString(16).toUpperCase()}/${low.toString(16).toUpperCase().padStart(8, '0')}`;
}

/** The periodic checkpoint (primary) or restartpoint (standby) lines. */
export function checkpointMessage(replica: boolean, step: number, index: number, rng: Rng): string {
  const what = replica ? 'restartpoint' : 'checkpoint';
  if (step === 0) return `${what} starting: time`;
  if (step === 2) return `recovery restart point at ${lsnAt(index, rng)}`;
  const buffers = int(rng, 3, 900);
  const write = (buffers * 0.011 + rng()).toFixed(3);
  const sync = (rng() * 0.02).toFixed(3);
  const total = (Number(write) + Number(sync) + 0.001).toFixed(3);
  const distance = int(rng, 40, 8000);
  return (
    `${what} complete: wrote ${buffers} buffers (${(buffers / 163.84).toFixed(1)}%); ` +
    `0 WAL file(s) added, 0 removed, ${int(rng, 0, 2)} recycled; ` +
    `write=${write} s, sync=${sync} s, total=${total} s; ` +
    `sync files=${int(rng, 1, 40)}, longest=${sync} s, average=0.001 s; ` +
    `distance=${distance} kB, estimate=${distance + int(rng, 0, 900)} kB; ` +
    `lsn=${lsnAt(index, rng)}, redo lsn=${lsnAt(index - 1, rng)}`
  );
}

/** One message of the given severity, drawn from `rng`. */
export function messageFor(severity: Severity, replica: boolean, index: number, rng: Rng): string {
  switch (severity) {
    case 'LOG':
      return logMessage(replica, index, rng);
    case 'WARNING':
      return pick(rng, [
        'there is no transaction in progress',
        'there is already a transaction in progress',
        'SET LOCAL can only be used in transaction blocks',
        `nonstandard use of \\' in a string literal at character ${int(rng, 20, 90)}`,
        'skipping "pg_authid" --- only superuser can vacuum it',
      ]);
    case 'ERROR':
      return errorMessage(replica, rng);
    case 'FATAL':
      return fatalMessage(replica, rng);
  }
}

function logMessage(replica: boolean, index: number, rng: Rng): string {
  const host = `10.0.${int(rng, 0, 3)}.${int(rng, 2, 254)}`;
  const port = int(rng, 32768, 60999);
  const roll = rng();
  if (roll < 0.22) return `connection received: host=${host} port=${port}`;
  if (roll < 0.42) {
    return (
      `connection authorized: user=tsdbadmin database=tsdb application_name=${pick(rng, APPS)} ` +
      'SSL enabled (protocol=TLSv1.3, cipher=TLS_AES_256_GCM_SHA384, bits=256)'
    );
  }
  if (roll < 0.6) {
    const seconds = (rng() * 60).toFixed(3).padStart(6, '0');
    return (
      `disconnection: session time: 0:${String(int(rng, 0, 59)).padStart(2, '0')}:${seconds} ` +
      `user=tsdbadmin database=tsdb host=${host} port=${port}`
    );
  }
  if (roll < 0.88) {
    const statement = replica || rng() < 0.6 ? pick(rng, READS) : pick(rng, WRITES);
    return `duration: ${(rng() * rng() * 2500).toFixed(3)} ms  statement: ${statement}`;
  }
  if (roll < 0.93) return 'could not receive data from client: Connection reset by peer';
  if (replica) return `recovery restart point at ${lsnAt(index, rng)}`;
  const table = pick(rng, TABLES);
  if (roll < 0.97) {
    const pages = int(rng, 8, 20000);
    return (
      `automatic vacuum of table "tsdb.public.${table}": index scans: ${int(rng, 0, 1)}, ` +
      `pages: 0 removed, ${pages} remain, ${int(rng, 0, pages)} scanned; ` +
      `tuples: ${int(rng, 0, 5000)} removed, ${int(rng, 1000, 2000000)} remain, 0 are dead but not yet removable`
    );
  }
  return (
    `automatic analyze of table "tsdb.public.${table}" system usage: ` +
    `CPU: user: ${(rng() * 0.2).toFixed(2)} s, system: 0.00 s, elapsed: ${(rng() * 0.5).toFixed(2)} s`
  );
}

function errorMessage(replica: boolean, rng: Rng): string {
  if (replica && rng() < 0.4) {
    return pick(rng, [
      'cannot execute INSERT in a read-only transaction',
      'cannot execute UPDATE in a read-only transaction',
      'canceling statement due to conflict with recovery',
    ]);
  }
  const at = `at character ${int(rng, 8, 120)}`;
  return pick(rng, [
    `relation "${pick(rng, BAD_NAMES)}" does not exist ${at}`,
    `column "${pick(rng, ['nme', 'temprature', 'createdat', 'val'])}" does not exist ${at}`,
    `syntax error at or near "${pick(rng, BAD_TOKENS)}" ${at}`,
    `duplicate key value violates unique constraint "${pick(rng, TABLES)}_pkey"`,
    'canceling statement due to statement timeout',
    'permission denied for table pg_authid',
    'deadlock detected',
  ]);
}

function fatalMessage(replica: boolean, rng: Rng): string {
  if (replica && rng() < 0.3) return 'terminating connection due to conflict with recovery';
  const user = pick(rng, BAD_USERS);
  return pick(rng, [
    `password authentication failed for user "${user}"`,
    `no pg_hba.conf entry for host "203.0.113.${int(rng, 1, 254)}", user "${user}", database "${pick(rng, BAD_DATABASES)}", no encryption`,
    `database "${pick(rng, BAD_DATABASES)}" does not exist`,
    `role "${pick(rng, ['admin', 'root', 'readonly', 'app'])}" does not exist`,
    'terminating connection due to administrator command',
    'canceling authentication due to timeout',
  ]);
}
