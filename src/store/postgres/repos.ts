// The PostgreSQL repositories other than the document tables (doc-repo.ts),
// the operation queue (operation-repo.ts) and events (event-repo.ts): the
// SQLite ones' statements (sqlite/repos.ts) in PostgreSQL's words.

import type { Backup } from '../../domain/backups.js';
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
  BackupRepo,
  CounterRepo,
  CredentialRepo,
  PeeringRepo,
  PortRepo,
  ProjectRepo,
  ReplicaSetRepo,
  Repos,
  ServiceRepo,
  UserRepo,
  VpcRepo,
} from '../store.js';
import { PgDocRepo } from './doc-repo.js';
import { PgHostRepo, PgHostTokenRepo, PgPlacementRepo, PgSecretRepo } from './host-repo.js';
import { PgEventRepo } from './event-repo.js';
import { PgOperationRepo } from './operation-repo.js';
import { BY_TIME, C, changes, type PgContext, rows } from './queryable.js';

class Projects implements ProjectRepo {
  constructor(private readonly ctx: PgContext) {}
  async get(id: string) {
    const [row] = await rows(this.ctx.db, 'SELECT * FROM projects WHERE id = $1', [id]);
    return row === undefined ? undefined : toProject(row);
  }
  async list(ids?: readonly string[]) {
    const all = (await rows(this.ctx.db, `SELECT * FROM projects ORDER BY ${BY_TIME}`)).map(
      toProject,
    );
    return ids === undefined ? all : all.filter((p) => ids.includes(p.id));
  }
  async insert(p: Project) {
    await this.ctx.db.query('INSERT INTO projects (id, name, created_at) VALUES ($1, $2, $3)', [
      p.id,
      p.name,
      p.createdAt,
    ]);
  }
  async count() {
    const [row] = await rows(this.ctx.db, 'SELECT count(*)::int AS n FROM projects');
    return row?.n as number;
  }
}

export function toProject(r: Record<string, unknown>): Project {
  return { id: r.id as string, name: r.name as string, createdAt: r.created_at as string };
}

class Users implements UserRepo {
  constructor(private readonly ctx: PgContext) {}
  async get(id: string) {
    const [row] = await rows(this.ctx.db, 'SELECT * FROM users WHERE id = $1', [id]);
    return toUser(row);
  }
  async findByName(name: string) {
    const [row] = await rows(this.ctx.db, 'SELECT * FROM users WHERE name = $1', [name]);
    return toUser(row);
  }
  async list() {
    const found = await rows(this.ctx.db, `SELECT * FROM users ORDER BY ${BY_TIME}`);
    return found.map((r) => toUser(r) as User);
  }
  async insert(u: User) {
    await this.ctx.db.query(
      'INSERT INTO users (id, name, email, created_at) VALUES ($1, $2, $3, $4)',
      [u.id, u.name, u.email, u.createdAt],
    );
  }
  async setEmail(userId: string, email: string) {
    return (
      (await changes(this.ctx.db, 'UPDATE users SET email = $1 WHERE id = $2', [email, userId])) > 0
    );
  }
  async addToProject(userId: string, projectId: string) {
    this.ctx.touched('user_projects');
    await this.ctx.db.query(
      'INSERT INTO user_projects (user_id, project_id) VALUES ($1, $2) ON CONFLICT DO NOTHING',
      [userId, projectId],
    );
  }
  async projectIds(userId: string) {
    const found = await rows(
      this.ctx.db,
      `SELECT project_id FROM user_projects WHERE user_id = $1 ORDER BY project_id ${C}`,
      [userId],
    );
    return found.map((r) => r.project_id as string);
  }
}

function toUser(r: Record<string, unknown> | undefined): User | undefined {
  if (r === undefined) return undefined;
  return {
    id: r.id as string,
    name: r.name as string,
    email: (r.email as string | null) ?? null,
    createdAt: r.created_at as string,
  };
}

class Credentials implements CredentialRepo {
  constructor(private readonly ctx: PgContext) {}
  private async one(column: string, value: string) {
    const [row] = await rows(this.ctx.db, `SELECT * FROM credentials WHERE ${column} = $1`, [
      value,
    ]);
    return row === undefined ? undefined : toCredential(row);
  }
  get(id: string) {
    return this.one('id', id);
  }
  findByBearerHash(hash: string) {
    return this.one('bearer_hash', hash);
  }
  findByAccessKey(accessKey: string) {
    return this.one('access_key', accessKey);
  }
  async insert(c: Credential) {
    this.ctx.touched('credentials');
    await this.ctx.db.query(
      `INSERT INTO credentials (id, kind, project_id, user_id, name, bearer_hash, access_key, secret_hash, created_at, revoked_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
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
      ],
    );
  }
  async revoke(id: string, at: string) {
    this.ctx.touched('credentials');
    const n = await changes(
      this.ctx.db,
      'UPDATE credentials SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL',
      [at, id],
    );
    return n === 1;
  }
  async list() {
    const found = await rows(this.ctx.db, `SELECT * FROM credentials ORDER BY ${BY_TIME}`);
    return found.map(toCredential);
  }
}

export function toCredential(r: Record<string, unknown>): Credential {
  return {
    id: r.id as string,
    kind: r.kind as Credential['kind'],
    projectId: (r.project_id as string | null) ?? null,
    userId: (r.user_id as string | null) ?? null,
    name: r.name as string,
    bearerHash: r.bearer_hash as string,
    accessKey: r.access_key as string,
    secretHash: r.secret_hash as string,
    createdAt: r.created_at as string,
    revokedAt: (r.revoked_at as string | null) ?? null,
  };
}

class Vpcs extends PgDocRepo<Vpc> implements VpcRepo {
  constructor(ctx: PgContext) {
    super(ctx, 'vpcs', () => null, 'VPC');
  }
}

class Peerings extends PgDocRepo<Peering> implements PeeringRepo {
  constructor(ctx: PgContext) {
    super(ctx, 'peerings', (p) => p.vpcId, 'peering');
  }
  listByVpc(vpcId: string) {
    return this.listByParent(vpcId);
  }
}

class Services extends PgDocRepo<Service> implements ServiceRepo {
  constructor(ctx: PgContext) {
    super(ctx, 'services', (s) => s.forkedFrom?.serviceId ?? null, 'service');
  }
  async countByVpc(vpcId: string) {
    const [row] = await rows(
      this.ctx.db,
      `SELECT count(*)::int AS n FROM services WHERE (doc::jsonb) ->> 'vpcId' = $1`,
      [vpcId],
    );
    return row?.n as number;
  }
}

class ReplicaSets extends PgDocRepo<ReplicaSet> implements ReplicaSetRepo {
  constructor(ctx: PgContext) {
    super(ctx, 'replica_sets', (r) => r.serviceId, 'read replica set');
  }
  listByService(serviceId: string) {
    return this.listByParent(serviceId);
  }
}

class Ports implements PortRepo {
  constructor(private readonly ctx: PgContext) {}
  async get(owner: string) {
    const [row] = await rows(this.ctx.db, 'SELECT port FROM ports WHERE owner = $1', [owner]);
    return row?.port as number | undefined;
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
      (
        await rows(this.ctx.db, 'SELECT port FROM ports WHERE port BETWEEN $1 AND $2', [min, max])
      ).map((r) => r.port as number),
    );
    for (let port = min; port <= max; port++) {
      if (taken.has(port) || !(await usable(port))) continue;
      await this.ctx.db.query('INSERT INTO ports (port, owner) VALUES ($1, $2)', [port, owner]);
      return port;
    }
    throw new AppError(
      'UNAVAILABLE',
      `No free port left in ${min}-${max}; an operator must widen BASIN_PORT_RANGE.`,
    );
  }
  async release(owner: string) {
    await this.ctx.db.query('DELETE FROM ports WHERE owner = $1', [owner]);
  }
  async releasePrefix(prefix: string) {
    await this.ctx.db.query('DELETE FROM ports WHERE left(owner, length($1)) = $1', [prefix]);
  }
}

/** CounterRepo: one upsert, so a value is never handed out twice. */
class Counters implements CounterRepo {
  constructor(private readonly ctx: PgContext) {}
  async next(name: string, floor: number): Promise<number> {
    const [row] = await rows(
      this.ctx.db,
      `INSERT INTO counters (name, value) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET value = greatest(counters.value + 1, excluded.value)
       RETURNING value`,
      [name, floor],
    );
    return row?.value as number;
  }
}

/** BackupRepo; times are RFC 3339 text, which sorts (byte-wise) as time does. */
class Backups implements BackupRepo {
  constructor(private readonly ctx: PgContext) {}
  async listByService(serviceId: string): Promise<Backup[]> {
    const found = await rows(
      this.ctx.db,
      `SELECT * FROM backups WHERE service_id = $1 ORDER BY started_at ${C}, label ${C}`,
      [serviceId],
    );
    return found.map((r) => ({
      serviceId: r.service_id as string,
      label: r.label as string,
      startedAt: r.started_at as string,
      stoppedAt: r.stopped_at as string,
    }));
  }
  async insert(b: Backup): Promise<void> {
    await this.ctx.db.query(
      `INSERT INTO backups (service_id, label, started_at, stopped_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (service_id, label) DO NOTHING`,
      [b.serviceId, b.label, b.startedAt, b.stoppedAt],
    );
  }
  async deleteOlderThan(serviceId: string, label: string): Promise<void> {
    await this.ctx.db.query(
      `DELETE FROM backups WHERE service_id = $1 AND started_at ${C} <
         (SELECT started_at FROM backups WHERE service_id = $1 AND label = $2)`,
      [serviceId, label],
    );
  }
  async deleteForService(serviceId: string): Promise<void> {
    await this.ctx.db.query('DELETE FROM backups WHERE service_id = $1', [serviceId]);
  }
}

export function createPgRepos(ctx: PgContext): Repos {
  return {
    projects: new Projects(ctx),
    users: new Users(ctx),
    credentials: new Credentials(ctx),
    vpcs: new Vpcs(ctx),
    peerings: new Peerings(ctx),
    services: new Services(ctx),
    replicaSets: new ReplicaSets(ctx),
    operations: new PgOperationRepo(ctx),
    events: new PgEventRepo(ctx),
    ports: new Ports(ctx),
    counters: new Counters(ctx),
    backups: new Backups(ctx),
    hosts: new PgHostRepo(ctx),
    hostTokens: new PgHostTokenRepo(ctx),
    secrets: new PgSecretRepo(ctx),
    placements: new PgPlacementRepo(ctx),
  };
}
