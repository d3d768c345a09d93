// The SQLite repositories other than the document tables (doc-repo.ts).

import type Database from 'better-sqlite3';
import { AppError } from '../../domain/errors.js';
import type {
  Credential,
  Peering,
  Project,
  ReplicaSet,
  Service,
  User,
  Vpc,
} from '../../domain/types.js';
import type {
  CredentialRepo,
  PeeringRepo,
  PortRepo,
  ProjectRepo,
  ReadView,
  ReplicaSetRepo,
  Repos,
  ServiceRepo,
  UserRepo,
  VpcRepo,
} from '../store.js';
import { SqliteBackupRepo } from './backup-repo.js';
import { SqliteCounterRepo } from './counter-repo.js';
import { SqliteDocRepo } from './doc-repo.js';
import { SqliteEventRepo } from './event-repo.js';
import {
  SqliteHostRepo,
  SqliteHostTokenRepo,
  SqlitePlacementRepo,
  SqliteSecretRepo,
} from './host-repo.js';
import { SqliteOperationRepo } from './operation-repo.js';

class Projects implements ProjectRepo {
  constructor(private readonly db: Database.Database) {}
  async get(id: string) {
    const row = this.db.prepare('SELECT id, name, created_at FROM projects WHERE id = ?').get(id);
    return row === undefined ? undefined : toProject(row);
  }
  async list(ids?: readonly string[]) {
    const rows = this.db
      .prepare('SELECT id, name, created_at FROM projects ORDER BY created_at, id')
      .all();
    const all = rows.map(toProject);
    return ids === undefined ? all : all.filter((p) => ids.includes(p.id));
  }
  async insert(p: Project) {
    this.db
      .prepare('INSERT INTO projects (id, name, created_at) VALUES (?, ?, ?)')
      .run(p.id, p.name, p.createdAt);
  }
  async count() {
    return this.db.prepare('SELECT count(*) FROM projects').pluck().get() as number;
  }
}

function toProject(row: unknown): Project {
  const r = row as { id: string; name: string; created_at: string };
  return { id: r.id, name: r.name, createdAt: r.created_at };
}

class Users implements UserRepo {
  private readonly byUser;
  constructor(private readonly db: Database.Database) {
    this.byUser = db
      .prepare('SELECT project_id FROM user_projects WHERE user_id = ? ORDER BY project_id')
      .pluck();
  }
  async get(id: string) {
    return toUser(this.db.prepare('SELECT * FROM users WHERE id = ?').get(id));
  }
  async findByName(name: string) {
    return toUser(this.db.prepare('SELECT * FROM users WHERE name = ?').get(name));
  }
  async list() {
    return this.db
      .prepare('SELECT * FROM users ORDER BY created_at, id')
      .all()
      .map((r) => toUser(r) as User);
  }
  async insert(u: User) {
    this.db
      .prepare('INSERT INTO users (id, name, email, created_at) VALUES (?, ?, ?, ?)')
      .run(u.id, u.name, u.email, u.createdAt);
  }
  async setEmail(userId: string, email: string) {
    return (
      this.db.prepare('UPDATE users SET email = ? WHERE id = ?').run(email, userId).changes > 0
    );
  }
  async addToProject(userId: string, projectId: string) {
    this.db
      .prepare('INSERT OR IGNORE INTO user_projects (user_id, project_id) VALUES (?, ?)')
      .run(userId, projectId);
  }
  async projectIds(userId: string) {
    return this.readProjectIds(userId);
  }
  readProjectIds(userId: string) {
    return this.byUser.all(userId) as string[];
  }
}

function toUser(row: unknown): User | undefined {
  if (row === undefined) return undefined;
  const r = row as { id: string; name: string; email: string | null; created_at: string };
  return { id: r.id, name: r.name, email: r.email ?? null, createdAt: r.created_at };
}

class Credentials implements CredentialRepo {
  private readonly byBearer;
  private readonly byAccess;
  constructor(private readonly db: Database.Database) {
    this.byBearer = db.prepare('SELECT * FROM credentials WHERE bearer_hash = ?');
    this.byAccess = db.prepare('SELECT * FROM credentials WHERE access_key = ?');
  }
  async get(id: string) {
    return toCredential(this.db.prepare('SELECT * FROM credentials WHERE id = ?').get(id));
  }
  async findByBearerHash(hash: string) {
    return this.readByBearerHash(hash);
  }
  readByBearerHash(hash: string) {
    return toCredential(this.byBearer.get(hash));
  }
  async findByAccessKey(accessKey: string) {
    return this.readByAccessKey(accessKey);
  }
  readByAccessKey(accessKey: string) {
    return toCredential(this.byAccess.get(accessKey));
  }
  async insert(c: Credential) {
    this.db
      .prepare(
        `INSERT INTO credentials (id, kind, project_id, user_id, name, bearer_hash, access_key, secret_hash, created_at, revoked_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        c.id,
        c.kind,
        c.projectId,
        c.userId,
        c.name,
        c.bearerHash,
        c.accessKey,
        c.secretHash,
        c.createdAt,
        c.revokedAt,
      );
  }
  async revoke(id: string, at: string) {
    const res = this.db
      .prepare('UPDATE credentials SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL')
      .run(at, id);
    return res.changes === 1;
  }
  async list() {
    return this.db
      .prepare('SELECT * FROM credentials ORDER BY created_at, id')
      .all()
      .map((r) => toCredential(r) as Credential);
  }
}

function toCredential(row: unknown): Credential | undefined {
  if (row === undefined) return undefined;
  const r = row as Record<string, string | null>;
  return {
    id: r.id as string,
    kind: r.kind as Credential['kind'],
    projectId: r.project_id ?? null,
    userId: r.user_id ?? null,
    name: r.name as string,
    bearerHash: r.bearer_hash as string,
    accessKey: r.access_key as string,
    secretHash: r.secret_hash as string,
    createdAt: r.created_at as string,
    revokedAt: r.revoked_at ?? null,
  };
}

class Vpcs extends SqliteDocRepo<Vpc> implements VpcRepo {
  constructor(db: Database.Database) {
    super(db, 'vpcs', () => null, 'VPC');
  }
}

class Peerings extends SqliteDocRepo<Peering> implements PeeringRepo {
  constructor(db: Database.Database) {
    super(db, 'peerings', (p) => p.vpcId, 'peering');
  }
  listByVpc(vpcId: string) {
    return this.listByParent(vpcId);
  }
}

class Services extends SqliteDocRepo<Service> implements ServiceRepo {
  private readonly byVpc;
  constructor(db: Database.Database) {
    super(db, 'services', (s) => s.forkedFrom?.serviceId ?? null, 'service');
    this.byVpc = db
      .prepare(`SELECT count(*) FROM services WHERE json_extract(doc, '$.vpcId') = ?`)
      .pluck();
  }
  async countByVpc(vpcId: string) {
    return this.byVpc.get(vpcId) as number;
  }
}

class ReplicaSets extends SqliteDocRepo<ReplicaSet> implements ReplicaSetRepo {
  constructor(db: Database.Database) {
    super(db, 'replica_sets', (r) => r.serviceId, 'read replica set');
  }
  listByService(serviceId: string) {
    return this.listByParent(serviceId);
  }
}

class Ports implements PortRepo {
  constructor(private readonly db: Database.Database) {}
  async get(owner: string) {
    return this.db.prepare('SELECT port FROM ports WHERE owner = ?').pluck().get(owner) as
      number | undefined;
  }
  async allocate(
    owner: string,
    min: number,
    max: number,
    usable: (port: number) => Promise<boolean> = async () => true,
  ) {
    const existing = await this.get(owner);
    if (existing !== undefined) return existing;
    const taken = new Set(
      this.db
        .prepare('SELECT port FROM ports WHERE port BETWEEN ? AND ?')
        .pluck()
        .all(min, max) as number[],
    );
    for (let port = min; port <= max; port++) {
      if (taken.has(port) || !(await usable(port))) continue;
      this.db.prepare('INSERT INTO ports (port, owner) VALUES (?, ?)').run(port, owner);
      return port;
    }
    throw new AppError(
      'UNAVAILABLE',
      `No free port left in ${min}-${max}; an operator must widen BASIN_PORT_RANGE.`,
    );
  }
  async release(owner: string) {
    this.db.prepare('DELETE FROM ports WHERE owner = ?').run(owner);
  }
  async releasePrefix(prefix: string) {
    this.db.prepare('DELETE FROM ports WHERE substr(owner, 1, length(?)) = ?').run(prefix, prefix);
  }
}

/**
 * The reads of a request (Store.readView), uncached and synchronous, with the
 * repositories' own statements; read-cache.ts puts its cache in front.
 */
export function createReadView(db: Database.Database): ReadView {
  const credentials = new Credentials(db);
  const users = new Users(db);
  const services = new Services(db);
  const replicaSets = new ReplicaSets(db);
  return {
    credentials: {
      findByBearerHash: (hash) => credentials.readByBearerHash(hash),
      findByAccessKey: (accessKey) => credentials.readByAccessKey(accessKey),
    },
    users: { projectIds: (userId) => users.readProjectIds(userId) },
    services: {
      get: (id) => services.read(id),
      listByProject: (projectId) => services.readByProject(projectId),
    },
    replicaSets: {
      get: (id) => replicaSets.read(id),
      listByService: (serviceId) => replicaSets.readByParent(serviceId),
    },
  };
}

export function createRepos(db: Database.Database): Repos {
  return {
    projects: new Projects(db),
    users: new Users(db),
    credentials: new Credentials(db),
    vpcs: new Vpcs(db),
    peerings: new Peerings(db),
    services: new Services(db),
    replicaSets: new ReplicaSets(db),
    operations: new SqliteOperationRepo(db),
    events: new SqliteEventRepo(db),
    ports: new Ports(db),
    counters: new SqliteCounterRepo(db),
    backups: new SqliteBackupRepo(db),
    hosts: new SqliteHostRepo(db),
    hostTokens: new SqliteHostTokenRepo(db),
    secrets: new SqliteSecretRepo(db),
    placements: new SqlitePlacementRepo(db),
  };
}
