// Schema migrations, applied in order; PRAGMA user_version records how many
// have run. Never edit a migration that has shipped: add a new one.
//
// Resources are stored as versioned JSON documents (`doc`) with the columns
// that queries filter on pulled out beside them.

export const MIGRATIONS: readonly string[] = [
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
  CREATE INDEX services_vpc ON services(json_extract(doc, '$.vpcId'));
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
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    resource_kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'done', 'failed', 'cancelled')),
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    run_after INTEGER NOT NULL,
    locked_by TEXT,
    lease_expires_at INTEGER,
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
    value INTEGER NOT NULL
  );
  `,
  // 3: operations know their project (the engine shares its slots fairly
  // between projects), the newest operation of a resource is found by index,
  // and Basin's own log entries (events) are stored per resource.
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
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    node INTEGER,
    at INTEGER NOT NULL,
    severity TEXT NOT NULL,
    message TEXT NOT NULL
  );
  CREATE INDEX events_resource ON events(resource_kind, resource_id, at, id);
  `,
  // 4: users' email addresses (GET /v1/auth/info); users made before have none.
  `
  ALTER TABLE users ADD COLUMN email TEXT;
  `,
  // 5: the completed backups of each service (the recovery window of forks).
  `
  CREATE TABLE backups (
    service_id TEXT NOT NULL,
    label TEXT NOT NULL,
    started_at TEXT NOT NULL,
    stopped_at TEXT NOT NULL,
    PRIMARY KEY (service_id, label)
  );
  `,
  // 6: operations count their waits ("not done yet, call again") and know
  // since when they wait, so waiting is bounded like failing (engine.ts).
  `
  ALTER TABLE operations ADD COLUMN waits INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE operations ADD COLUMN waiting_since INTEGER;
  `,
  // 7: the hosts of an installation (docs/decisions.md, "Several hosts"),
  // their one-time join tokens, and the installation's secrets (their CA).
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
    heartbeat_at INTEGER NOT NULL
  );
  CREATE TABLE host_tokens (
    id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
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
  // 8: the leadership lease of the Basin processes that share a store
  // (src/engine/leadership.ts); one row, id 1, made by the first
  // candidate. Its times are the store's clock, in epoch ms. SQLite's
  // Basin is alone and never writes it; the contract suite tests it here too.
  `
  CREATE TABLE leadership (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    term INTEGER NOT NULL,
    holder TEXT,
    expires_at INTEGER NOT NULL
  );
  `,
  // 9: a host's role (domain/hosts.ts HostRole): database hosts run the
  // nodes placed on them, a repository host holds the pgBackRest
  // repositories instead. Hosts joined before were database hosts.
  `
  ALTER TABLE hosts ADD COLUMN role TEXT NOT NULL DEFAULT 'database';
  `,
  // 10: the host a node was moved from while its data is restored onto its
  // new one (domain/hosts.ts Placement.movedFrom); NULL otherwise.
  `
  ALTER TABLE placements ADD COLUMN moved_from TEXT;
  `,
  // 11: a host being drained (domain/hosts.ts Host.draining): 1, else 0.
  `
  ALTER TABLE hosts ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;
  `,
  // 12: what a commit changed, for the read cache (sqlite/read-cache.ts):
  // a count per table a request's read view reads, moved by every row
  // written to it, whichever connection or process writes; and the services
  // of a project listed from an index alone (id, version, creation time) in
  // the list's order. SQLite's own bookkeeping: not copied to a PostgreSQL
  // store (copy-store.ts), whose read mirror is its own (read-mirror.ts).
  `
  CREATE TABLE read_changes (name TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
  INSERT INTO read_changes (name, seq) VALUES
    ('credentials', 0), ('user_projects', 0), ('services', 0), ('replica_sets', 0);
  CREATE TRIGGER read_changes_credentials_insert AFTER INSERT ON credentials
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'credentials'; END;
  CREATE TRIGGER read_changes_credentials_update AFTER UPDATE ON credentials
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'credentials'; END;
  CREATE TRIGGER read_changes_credentials_delete AFTER DELETE ON credentials
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'credentials'; END;
  CREATE TRIGGER read_changes_user_projects_insert AFTER INSERT ON user_projects
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'user_projects'; END;
  CREATE TRIGGER read_changes_user_projects_update AFTER UPDATE ON user_projects
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'user_projects'; END;
  CREATE TRIGGER read_changes_user_projects_delete AFTER DELETE ON user_projects
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'user_projects'; END;
  CREATE TRIGGER read_changes_services_insert AFTER INSERT ON services
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'services'; END;
  CREATE TRIGGER read_changes_services_update AFTER UPDATE ON services
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'services'; END;
  CREATE TRIGGER read_changes_services_delete AFTER DELETE ON services
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'services'; END;
  CREATE TRIGGER read_changes_replica_sets_insert AFTER INSERT ON replica_sets
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'replica_sets'; END;
  CREATE TRIGGER read_changes_replica_sets_update AFTER UPDATE ON replica_sets
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'replica_sets'; END;
  CREATE TRIGGER read_changes_replica_sets_delete AFTER DELETE ON replica_sets
    BEGIN UPDATE read_changes SET seq = seq + 1 WHERE name = 'replica_sets'; END;
  CREATE INDEX services_project_listed ON services(project_id, created_at, id, version);
  `,
];
