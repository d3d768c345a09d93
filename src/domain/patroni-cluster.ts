// What the control plane makes of an HA service's Patroni cluster across
// hosts (docs/decisions.md, "HA across hosts"): it reads GET /cluster from
// the nodes' REST APIs (the local driver's patroni/client.ts) and turns
// what Patroni decided into the service's health and into Basin's own log
// entries. It reads to report, never to decide: nothing here asks Patroni
// for anything. Pure, for the unit test.

import type { ProgressNote } from './progress.js';

export type MemberRole = 'leader' | 'sync_standby' | 'replica' | 'standby_leader';

/** One member of a cluster, as GET /cluster reports it. */
export interface PatroniMemberState {
  name: string;
  role: MemberRole;
  /** Patroni's word for its PostgreSQL: 'running', 'streaming', 'starting', 'stopped'… */
  state: string;
  host?: string;
  port?: number;
  timeline?: number;
  /** Bytes behind the leader's last known position; undefined for the leader, or when Patroni does not know. */
  lagBytes?: number;
}

/**
 * One of the leader's WAL senders, as its own GET /patroni `replication`
 * says (pg_stat_replication): whom it streams to, and how.
 */
export interface WalSender {
  /** The standby's application_name: its member's name (node<i>). */
  name: string;
  /** pg_stat_replication's state: 'streaming', 'catchup', 'startup', 'backup'… */
  state: string;
  /** pg_stat_replication's sync_state: 'sync', 'quorum', 'potential', 'async'. */
  syncState: string;
}

/** A cluster as one node's Patroni sees it (GET /cluster, read by the local driver's client.ts). */
export interface ClusterState {
  members: PatroniMemberState[];
  /** The leader's name, when there is one. */
  leader?: string;
  paused: boolean;
  /**
   * The leader's WAL senders, read from the leader's own node (GET
   * /patroni on it) when that node answered as a running primary;
   * undefined when the cluster was read elsewhere. Patroni 3.0 says
   * `running` of a replica whose PostgreSQL runs, streaming or not (its
   * upstream gone, its connection refused): only the leader knows who
   * streams.
   */
  replication?: WalSender[];
}

/**
 * One decision of a node's Patroni, read from its log by the node's host
 * (local/patroni/patroni-log.ts) and told in Basin's words.
 */
export interface PatroniLogEvent {
  /** Epoch ms of Patroni's line. */
  timeMs: number;
  severity: 'LOG' | 'WARNING' | 'ERROR';
  /** Basin's sentence, without the node (the control plane names it and its host). */
  text: string;
}

/** What the user asked of the service: its standbys, and how many of them synchronous. */
export interface HaAsk {
  standbys: number;
  sync: number;
}

export interface PatroniVerdict {
  /** The driver's health: `running` makes the service READY, `failed` UNSTABLE. */
  health: 'running' | 'failed';
  /** Why it is not running as asked (for the service's logs); none when it is. */
  reason?: string;
}

/** Patroni 3.0 says `running` of a replica that runs (streaming or not); later versions say `streaming`. */
const runs = (m: PatroniMemberState) =>
  (m.role === 'replica' || m.role === 'sync_standby') &&
  (m.state === 'streaming' || m.state === 'running');

/**
 * The standbys that stream from the leader: members Patroni says run,
 * whose WAL sender on the leader is `streaming`. Undefined when the
 * leader's WAL senders were not read (its node did not answer).
 */
export function streamingStandbys(state: ClusterState): PatroniMemberState[] | undefined {
  const senders = state.replication;
  if (!senders) return undefined;
  return state.members.filter(
    (m) =>
      m.name !== state.leader &&
      runs(m) &&
      senders.some((w) => w.name === m.name && w.state === 'streaming'),
  );
}

/** Whether the leader's WAL sender to `name` is synchronous (a commit waits for it). */
const synchronous = (state: ClusterState, name: string) =>
  (state.replication ?? []).some(
    (w) => w.name === name && (w.syncState === 'sync' || w.syncState === 'quorum'),
  );

/**
 * `running` (the service is READY) when a leader runs and every standby
 * asked for streams, as many synchronous as asked; `failed` (UNSTABLE)
 * otherwise, saying what is missing. A leader that serves while a standby
 * is missing is still `failed`: the service has less than it asked for (a
 * host lost, a standby rebuilding), and with synchronous_mode_strict its
 * writes wait while no synchronous standby is left. A standby streams
 * only when the leader's own WAL senders say so (Patroni's `running` of a
 * replica is not enough), and is synchronous only when the leader's
 * sync_state says so: as on one host, a standby that does not stream
 * makes the service UNSTABLE.
 */
export function patroniVerdict(state: ClusterState | undefined, ask: HaAsk): PatroniVerdict {
  if (!state) return { health: 'failed', reason: "no node's Patroni answers" };
  if (state.paused) return { health: 'failed', reason: 'Patroni is paused (maintenance mode)' };
  const leader = state.members.find((m) => m.name === state.leader);
  if (!leader) {
    return {
      health: 'failed',
      reason: 'no leader: Patroni is electing one (it cannot while etcd has no quorum)',
    };
  }
  if (leader.state !== 'running') {
    return { health: 'failed', reason: `the leader ${leader.name} is ${leader.state || 'not running'}` }; // prettier-ignore
  }
  const streaming = streamingStandbys(state);
  if (streaming === undefined) {
    if (ask.standbys === 0) return { health: 'running' };
    return {
      health: 'failed',
      reason: `the leader ${leader.name}'s replication cannot be read (its own Patroni does not answer, or cannot read etcd): no standby is known to stream`,
    };
  }
  if (streaming.length < ask.standbys) {
    const missing = state.members
      .filter((m) => m !== leader && !streaming.includes(m))
      .map((m) => m.name);
    return {
      health: 'failed',
      reason:
        `degraded: ${streaming.length} of ${ask.standbys} standbys stream` +
        (missing.length > 0 ? ` (${missing.join(', ')} not streaming)` : ''),
    };
  }
  const sync = streaming.filter((m) => synchronous(state, m.name)).length;
  if (sync < ask.sync) {
    return {
      health: 'failed',
      reason: `degraded: ${sync} of ${ask.sync} synchronous standbys (writes wait for one: synchronous_mode_strict)`,
    };
  }
  return { health: 'running' };
}

/**
 * What changed between two readings of the cluster, as Basin's own log
 * entries of the service: a new leader (a failover when the old one is
 * gone or not running, a switchover when it runs on as a standby), the
 * leader lost, members joining and leaving. Nothing when nothing changed,
 * so a reading repeated says nothing twice.
 */
export function patroniChanges(
  before: ClusterState | undefined,
  after: ClusterState | undefined,
  /**
   * A switchover Basin asked of Patroni (a rolling restart, a drain): the
   * new leader it named, read while the old one is still a member but
   * demoting (stopped, starting), is that switchover, not a failover.
   */
  asked?: { from: string; to: string },
  /** Where a member runs (`h2, 10.0.0.2`), to name it with its host; undefined when unknown. */
  where?: (member: string) => string | undefined,
): ProgressNote[] {
  if (!before || !after) return [];
  const notes: ProgressNote[] = [];
  const named = (s: ClusterState, name: string | undefined) =>
    s.members.find((m) => m.name === name);
  const at = (name: string) => {
    const host = where?.(name);
    return host === undefined ? name : `${name} (on ${host})`;
  };
  const was = named(before, before.leader);
  const now = named(after, after.leader);
  if (now && now.name !== was?.name) {
    const old = named(after, was?.name);
    const timeline = now.timeline === undefined ? '' : ` (timeline ${now.timeline})`;
    // A leader change is one promotion, one timeline: told once however
    // many readings (or control-plane processes, in turn) see it.
    const once =
      now.timeline === undefined ? {} : { once: { ever: ['patroni: ', timeline.trim()] } };
    if (!was) {
      notes.push({
        severity: 'LOG',
        message: `patroni: ${at(now.name)} leads${timeline}`,
        ...once,
      });
    } else if (
      old !== undefined &&
      (['running', 'streaming'].includes(old.state) ||
        (asked?.from === was.name && asked.to === now.name))
    ) {
      notes.push({
        severity: 'LOG',
        message: `patroni: switchover: ${at(now.name)} is the primary${timeline}, ${at(was.name)} follows it`,
        ...once,
      });
    } else {
      notes.push({
        severity: 'WARNING',
        message: `patroni: failover: ${at(now.name)} was promoted${timeline}; the primary ${at(was.name)} is ${old ? old.state || 'not running' : 'gone'}`,
        ...once,
      });
    }
  } else if (was && !now) {
    notes.push({
      severity: 'ERROR',
      message: `patroni: no leader since ${at(was.name)} lost the leader lock: writes stop until Patroni elects one`,
    });
  }
  const names = (s: ClusterState) => new Set(s.members.map((m) => m.name));
  const [b, a] = [names(before), names(after)];
  for (const m of after.members) {
    if (!b.has(m.name) && m.name !== now?.name) {
      notes.push({ severity: 'LOG', message: `patroni: ${at(m.name)} joined as a ${m.role}` });
    }
  }
  for (const m of before.members) {
    if (!a.has(m.name) && m.name !== was?.name) {
      notes.push({ severity: 'WARNING', message: `patroni: ${at(m.name)} left the cluster` });
    }
  }
  return notes;
}
