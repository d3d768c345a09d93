// A host's etcd member, run and supervised by its agent (docs/decisions.md,
// "etcd on the hosts"). At every heartbeat the agent calls tick(): with no
// member, it asks the control plane whether this host should run one (and
// gets a certificate for a key made here); with one, it starts etcd when it
// is not running, and now and then asks again, to learn that the member was
// removed (then it stops it and forgets its data). etcd runs as a uid of its
// own (from the host's uid range: never a tenant's), with no_new_privs, in
// a session of its own: it outlives the agent, and a restarted agent adopts
// it by its pid file (the process's command line must be ours).

import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import {
  etcdClientUrl,
  ETCD_MEMBER_CN,
  type EtcdMemberPlan,
  etcdPeerUrl,
} from '../../domain/etcd.js';
import { CONTROL_PLANE_CN } from '../../domain/hosts.js';
import { asUser, childEnv } from '../../drivers/local/host/exec.js';
import { httpsJson } from '../../lib/https-json.js';
import type { Logger } from '../../lib/logger.js';
import { makeKeyAndRequest } from '../../lib/x509.js';
import type { AgentIdentity } from '../agent-files.js';
import {
  installMember,
  memberPaths,
  type MemberState,
  readMemberState,
  readPid,
  removeMember,
  writeClientTrust,
  writePid,
} from './etcd-files.js';

export interface EtcdMemberOptions {
  dataDir: string;
  /** This host's address: etcd listens there (peer and client ports). */
  address: string;
  identity: AgentIdentity;
  allocateUid: () => Promise<number>;
  log: Logger;
  /** How often a running member asks whether it is still one (default 10 s). */
  recheckMs?: number;
  /** How often a host without a member asks whether it should run one (default 2 s). */
  askMs?: number;
}

interface Answer {
  member: {
    name: string;
    initial_cluster: string;
    state: 'new' | 'existing';
    token: string;
  } | null;
  certificate?: string;
  members_ca?: string;
  clients_ca?: string;
}

export class EtcdMemberSupervisor {
  private request: Promise<{ key: string; csr: string }> | undefined;
  private lastStart = 0;
  private lastCheck = 0;
  private lastAsk = 0;
  /** Starts in a row that did not last: each waits twice as long as the one before. */
  private failedStarts = 0;
  private busy = false;

  constructor(private readonly o: EtcdMemberOptions) {}

  /** One step; never throws (the next heartbeat tries again). */
  async tick(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const state = readMemberState(this.o.dataDir);
      if (!state) await this.join();
      else await this.keep(state);
    } catch (err) {
      this.o.log.warn({ err: (err as Error).message }, 'etcd member: a step failed');
    } finally {
      this.busy = false;
    }
  }

  private async ask(csr?: string): Promise<Answer> {
    const id = this.o.identity;
    const res = await httpsJson(`${id.controlPlane}/v1/hosts/etcd`, {
      ca: id.ca,
      cert: id.cert,
      key: id.key,
      peerCn: CONTROL_PLANE_CN,
      body: csr === undefined ? {} : { csr },
      timeoutMs: 20_000,
    });
    // A host removed from the installation runs no member any more.
    if (res.status === 403) return { member: null };
    if (res.status !== 200) {
      throw new Error(`the control plane answered HTTP ${res.status}: ${res.text}`);
    }
    return res.body as Answer;
  }

  private async join(): Promise<void> {
    // Every host asks, members or not: not at every heartbeat, each answer costs an etcdctl.
    if (Date.now() - this.lastAsk < (this.o.askMs ?? 2000)) return;
    this.lastAsk = Date.now();
    this.request ??= makeKeyAndRequest(ETCD_MEMBER_CN);
    const { key, csr } = await this.request;
    const a = await this.ask(csr);
    if (!a.member || !a.certificate || !a.members_ca || !a.clients_ca) return;
    const plan: EtcdMemberPlan = {
      name: a.member.name,
      initialCluster: a.member.initial_cluster,
      state: a.member.state,
      token: a.member.token,
    };
    const state: MemberState = { plan, uid: await this.o.allocateUid() };
    installMember(this.o.dataDir, state, {
      key,
      certificate: a.certificate,
      membersCa: a.members_ca,
      clientsCa: a.clients_ca,
    });
    this.request = undefined;
    this.o.log.info(
      { member: plan.name, state: plan.state, uid: state.uid },
      'etcd member: this host runs one',
    );
    this.start(state);
  }

  private async keep(state: MemberState): Promise<void> {
    const now = Date.now();
    // First whether it runs: a slow answer from the control plane must not delay a restart.
    if (this.runningPid() !== undefined) {
      // Up for a minute: its next death is not one of a series.
      if (now - this.lastStart > 60_000) this.failedStarts = 0;
    } else if (now - this.lastStart >= Math.min(30_000, 1000 * 2 ** this.failedStarts)) {
      this.o.log.warn(
        { member: state.plan.name, log: memberPaths(this.o.dataDir).log },
        'etcd member: not running; starting it',
      );
      this.failedStarts++;
      this.start(state);
    }
    if (now - this.lastCheck < (this.o.recheckMs ?? 10_000)) return;
    this.lastCheck = now;
    let a: Answer | undefined;
    try {
      a = await this.ask();
    } catch {
      a = undefined; // the control plane cannot tell now: keep what runs
    }
    if (a?.member === null) {
      this.stopRunning();
      removeMember(this.o.dataDir);
      this.o.log.warn({ member: state.plan.name }, 'etcd member: removed from the cluster');
    }
  }

  /** The pid of our etcd, if its pid file names a live process with our data directory. */
  runningPid(): number | undefined {
    const pid = readPid(this.o.dataDir);
    if (pid === undefined) return undefined;
    let cmdline: string;
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return undefined;
    }
    // Empty for a zombie; another program's for a reused pid.
    return cmdline.split('\0').includes(`--data-dir=${memberPaths(this.o.dataDir).data}`)
      ? pid
      : undefined;
  }

  private start(state: MemberState): void {
    this.lastStart = Date.now();
    const p = memberPaths(this.o.dataDir);
    const tls = (f: string) => join(p.tls, f);
    const { plan } = state;
    const args = [
      `--name=${plan.name}`,
      `--data-dir=${p.data}`,
      `--listen-peer-urls=${etcdPeerUrl(this.o.address)}`,
      `--initial-advertise-peer-urls=${etcdPeerUrl(this.o.address)}`,
      `--listen-client-urls=${etcdClientUrl(this.o.address)}`,
      `--advertise-client-urls=${etcdClientUrl(this.o.address)}`,
      `--initial-cluster=${plan.initialCluster}`,
      `--initial-cluster-state=${plan.state}`,
      `--initial-cluster-token=${plan.token}`,
      // Clients: a certificate from the clients CA (and the member's own, for
      // its JSON gateway: writeClientTrust); the user is the CN (root's) or
      // a password's (a service's).
      '--client-cert-auth',
      `--trusted-ca-file=${writeClientTrust(this.o.dataDir, state.uid)}`,
      `--cert-file=${tls('member.crt')}`,
      `--key-file=${tls('member.key')}`,
      // Peers: only members' certificates (their own CA, their one subject).
      '--peer-client-cert-auth',
      `--peer-trusted-ca-file=${tls('members-ca.crt')}`,
      `--peer-cert-allowed-cn=${ETCD_MEMBER_CN}`,
      `--peer-cert-file=${tls('member.crt')}`,
      `--peer-key-file=${tls('member.key')}`,
      // Raft's timing at 2.5× etcd's defaults: a loaded host (or a machine
      // shared by test hosts) misses heartbeats of 100 ms and elects leaders
      // all the time. An election (2.5-5 s) is not small beside Patroni's
      // ttl across hosts (10 s): the control plane keeps etcd's leader off
      // the primaries' hosts (hosts/etcd-leader.ts).
      '--heartbeat-interval=250',
      '--election-timeout=2500',
      // A member cut off from the others (its host partitioned) keeps
      // raising its term; without a pre-vote it forces an election when it
      // is back, and every client's request fails for seconds, long enough
      // for Patroni's leader, which could not renew its key meanwhile, to
      // demote itself (docs/decisions.md, "HA across hosts": a partition).
      // 3.5's default.
      '--pre-vote',
      // Patroni writes its keys every few seconds: old revisions go after an hour.
      '--auto-compaction-mode=periodic',
      '--auto-compaction-retention=1h',
      '--logger=zap',
      '--log-outputs=stderr',
    ];
    const cmd = asUser({ name: 'basin-etcd', uid: state.uid, gid: state.uid }, 'etcd', args);
    // One older log kept: a member that keeps failing must not fill the disk.
    if ((statSync(p.log, { throwIfNoEntry: false })?.size ?? 0) > 10 * 2 ** 20) {
      renameSync(p.log, `${p.log}.1`);
    }
    const out = openSync(p.log, 'a', 0o600);
    try {
      const child = spawn(cmd.file, cmd.args, {
        cwd: p.dir,
        env: childEnv(),
        // A session of its own: the agent's end (or kill -9) is not its end.
        detached: true,
        stdio: ['ignore', out, out],
      });
      child.on('error', (err) =>
        this.o.log.warn({ err: err.message }, 'etcd member: could not start etcd'),
      );
      child.unref();
      if (child.pid !== undefined) writePid(this.o.dataDir, child.pid);
    } finally {
      closeSync(out);
    }
  }

  private stopRunning(): void {
    const pid = this.runningPid();
    if (pid === undefined) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
}
