// The PostgreSQL store's schema migrations: the same numbering as SQLite's
// (sqlite/migrations.ts), one entry per number, each bringing the schema to
// what that number means there, in PostgreSQL's words. `basin_schema`
// records how many have run. Never edit a migration that has shipped: add a
// new one, here and in sqlite/migrations.ts at the same index
// (docs/decisions.md, "The store on PostgreSQL").
//
// The differences from SQLite are of type only: epoch milliseconds are
// BIGINT (read back as numbers, pg-store.ts), ids BIGSERIAL, and documents
// and payloads stay TEXT, as written (a payload a newer Basin wrote may not
// even be JSON, and must still be read so that it can be failed with why).

export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE TABLE users (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
  );
  CREATE TABLE user_projects (
    user_id TEXT NOT NULL REFERENCES users(id),
    project_id TEXT NOT NULL REFERENCES projects(id),
    PRIMARY KEY (user_id, project_id)
  );
  CREATE TABLE credentials (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('project', 'user')),
    project_id TEXT REFERENCES projects(id),
    user_id TEXT REFERENCES users(id),
    name TEXT NOT NULL,
    bearer_hash TEXT NOT NULL UNIQUE,
    access_key TEXT NOT NULL UNIQUE,
    secret_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
  );
  CREATE TABLE vpcs (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    parent_id TEXT,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
  );
  CREATE INDEX vpcs_project ON vpcs(project_id);
  CREATE TABLE peerings (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    parent_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
  );
  CREATE INDEX peerings_parent ON peerings(parent_id);
  CREATE TABLE services (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    parent_id TEXT,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
  );
  CREATE INDEX services_project ON services(project_id);
  CREATE INDEX services_vpc ON services(((doc::jsonb) ->> 'vpcId'));
  CREATE TABLE replica_sets (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    parent_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
  );
  CREATE INDEX replica_sets_parent ON replica_sets(parent_id);
  CREATE TABLE operations (
    id BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'failed', 'cancelled')),
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    run_after BIGINT NOT NULL,
    locked_by TEXT,
    lease_expires_at BIGINT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  );
  CREATE INDEX operations_pending ON operations(state, run_after);
  CREATE INDEX operations_resource ON operations(resource_kind, resource_id, state);
  CREATE TABLE ports (
    port INTEGER PRIMARY KEY,
    owner TEXT NOT NULL UNIQUE
  );
  `,
  // 2: the counters of CounterRepo (the high-water mark of service uids).
  `
  CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value BIGINT NOT NULL
  );
  `,
  // 3: operations know their project, the newest operation of a resource is
  // found by index, and Basin's own log entries (events) are stored.
  `
  ALTER TABLE operations ADD COLUMN project_id TEXT NOT NULL DEFAULT '';
  UPDATE operations SET project_id = coalesce(
    CASE resource_kind
      WHEN 'service' THEN (SELECT project_id FROM services WHERE id = operations.resource_id)
      WHEN 'replicaSet' THEN (SELECT project_id FROM replica_sets WHERE id = operations.resource_id)
      WHEN 'peering' THEN (SELECT project_id FROM peerings WHERE id = operations.resource_id)
    END, '');
  CREATE INDEX operations_latest ON operations(resource_kind, resource_id, id);
  CREATE INDEX operations_locked ON operations(locked_by) WHERE locked_by IS NOT NULL;
  CREATE TABLE events (
    id BIGSERIAL PRIMARY KEY,
    resource_kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    node INTEGER,
    at BIGINT NOT NULL,
    severity TEXT NOT NULL,
    message TEXT NOT NULL
  );
  CREATE INDEX events_resource ON events(resource_kind, resource_id, at, id);
  `,
  // 4: users' email addresses; users made before have none.
  `
  ALTER TABLE users ADD COLUMN email TEXT;
  `,
  // 5: the completed backups of each service.
  `
  CREATE TABLE backups (
    service_id TEXT NOT NULL,
    label TEXT NOT NULL,
    started_at TEXT NOT NULL,
    stopped_at TEXT NOT NULL,
    PRIMARY KEY (service_id, label)
  );
  `,
  // 6: operations count their waits and know since when they wait.
  `
  ALTER TABLE operations ADD COLUMN waits INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE operations ADD COLUMN waiting_since BIGINT;
  `,
  // 7: the hosts of an installation, their join tokens, the installation's secrets.
  `
  CREATE TABLE hosts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    address TEXT NOT NULL,
    agent_port INTEGER NOT NULL,
    zone TEXT NOT NULL,
    capacity TEXT NOT NULL,
    usage TEXT,
    cert_sha256 TEXT NOT NULL,
    joined_at TEXT NOT NULL,
    heartbeat_at BIGINT NOT NULL
  );
  CREATE TABLE host_tokens (
    id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_by TEXT
  );
  CREATE TABLE secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
  );
  CREATE TABLE placements (
    resource_id TEXT PRIMARY KEY,
    host_id TEXT NOT NULL,
    cpu_millis INTEGER NOT NULL,
    memory_mb INTEGER NOT NULL
  );
  `,
  // 8: the leadership lease (leadership-repo.ts); times from the store's clock.
  `
  CREATE TABLE leadership (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    term BIGINT NOT NULL,
    holder TEXT,
    expires_at BIGINT NOT NULL
  );
  `,
  // 9: a host's role: database hosts run nodes, a repository host holds backups.
  `
  ALTER TABLE hosts ADD COLUMN role TEXT NOT NULL DEFAULT 'database';
  `,
  // 10: the host a node was moved from while its data is restored onto its new one.
  `
  ALTER TABLE placements ADD COLUMN moved_from TEXT;
  `,
  // 11: a host being drained: 1, else 0 (an integer, as SQLite's: basin store migrate copies it).
  `
  ALTER TABLE hosts ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;
  `,
];

/** The tables the read view mirrors (read-mirror.ts): a commit that changes one notifies. */
export const MIRRORED_TABLES = [
  'credentials',
  'user_projects',
  'services',
  'replica_sets',
] as const;
export type MirroredTable = (typeof MIRRORED_TABLES)[number];

/** The channel of those notifications; the payload is the table's name. */
export const CHANGE_CHANNEL = 'basin_store_changed';

/**
 * The channel that says an operation was queued (any process, on commit):
 * the leader's engine runs it at once rather than at its next poll.
 */
export const QUEUE_CHANNEL = 'basin_operation_queued';

/**
 * Not a numbered migration: made again at every start (CREATE OR REPLACE),
 * so it is the same in every version and a table added to MIRRORED_TABLES
 * gets its trigger. A statement-level trigger: one notification per table
 * and statement, which PostgreSQL folds to one per table and transaction,
 * delivered when (and only if) the transaction commits.
 */
export const CHANGE_TRIGGERS = `
  CREATE OR REPLACE FUNCTION basin_store_changed() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_notify('${CHANGE_CHANNEL}', TG_TABLE_NAME);
    RETURN NULL;
  END $$;
  ${MIRRORED_TABLES.map(
    (t) => `
  CREATE OR REPLACE TRIGGER ${t}_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON ${t}
    FOR EACH STATEMENT EXECUTE FUNCTION basin_store_changed();`,
  ).join('')}
  CREATE OR REPLACE FUNCTION basin_operation_queued() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_notify('${QUEUE_CHANNEL}', '');
    RETURN NULL;
  END $$;
  CREATE OR REPLACE TRIGGER operations_queued AFTER INSERT ON operations
    FOR EACH STATEMENT EXECUTE FUNCTION basin_operation_queued();
`;

/** The channel that says the leader published a round of usage samples (usage-rounds.ts). */
export const USAGE_CHANNEL = 'basin_usage_published';

/**
 * Not a numbered migration either: the rounds of usage samples the leader
 * publishes for every process (usage-rounds.ts) are what each process holds
 * in memory on SQLite, not the store's state. UNLOGGED: no WAL for samples
 * every 10 s, nothing on a standby; after a crash of the store's server, or
 * a failover to a standby, the table is empty and the series go on from
 * there, as after a restart of Basin on SQLite. `basin store migrate`
 * copies the SQLite tables only, so it never sees it.
 */
export const USAGE_TABLE = `
  CREATE UNLOGGED TABLE IF NOT EXISTS usage_rounds (
    at BIGINT PRIMARY KEY,
    body TEXT NOT NULL
  );
`;
