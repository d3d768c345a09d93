// The waker of a suspended service: a listening socket in Basin's process,
// on the host side of the service's namespace (its hostAddress, the
// service's own port), where the service's endpoint leads while it is
// suspended (the nftables DNAT and the local redirect: ServiceNetworks.park).
// No tenant's process can bind that address: it is on the host, and every
// tenant runs in a namespace of its own.
//
// The first connection wakes the service (`wake`, once for every
// connection that arrives meanwhile); then each is spliced, byte for byte,
// to the real server in the namespace: PostgreSQL's SSLRequest, the TLS
// handshake and everything after pass through untouched, so a client's
// `sslmode=verify-full` (and channel binding) hold against the service's
// own certificate, and the client sees only a delay. Nothing is read from
// a client before its server is there (the socket is paused at accept).
//
// A client the service's rules would not admit (its address outside the
// CIDRs pg_hba admits: the server will see the gateway instead) is
// refused here, before anything is woken. A wake that fails answers each
// waiting client with a PostgreSQL ErrorResponse and closes: a client
// without TLS shows its message; libpq with TLS (15's, after
// CVE-2024-10977) shows only that the server sent an error during the SSL
// exchange, since nothing before TLS can be trusted, and fails at once.

import { connect, createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../../../lib/logger.js';

export interface WakerOptions {
  serviceId: string;
  /** Where it listens: the namespace's hostAddress and the service's port. */
  listen: { host: string; port: number };
  /** The real server, once awake: the namespace's address and the same port. */
  server: { host: string; port: number };
  /** Whether the service's server admits a client from `address` (its admittedCidrs). */
  admits: (address: string) => boolean;
  /** Starts the service; rejects with a message a client may read. */
  wake: () => Promise<void>;
  log: Logger;
}

export class Waker {
  private server: Server | undefined;
  /** The wake in progress or done; undefined before the first connection and after a failed one. */
  private waking: Promise<void> | undefined;
  private readonly open = new Set<Socket>();

  constructor(private readonly o: WakerOptions) {}

  /** Listens; rejects when the address cannot be bound. */
  arm(): Promise<void> {
    const server = createServer({ pauseOnConnect: true, noDelay: true }, (socket) =>
      this.accept(socket),
    );
    server.on('error', (err) =>
      this.o.log.warn({ serviceId: this.o.serviceId, err: err.message }, 'waker error'),
    );
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.o.listen.host, port: this.o.listen.port, backlog: 511 }, () => {
        server.off('error', reject);
        this.server = server;
        resolve();
      });
    });
  }

  /** Whether it listens. */
  get armed(): boolean {
    return this.server !== undefined;
  }

  /** Awake already (a wake succeeded): connections go straight through. */
  awake(): void {
    this.waking ??= Promise.resolve();
  }

  /**
   * Stops listening; connections spliced already go on until they close
   * (`all`: they are cut too, for a service being deleted).
   */
  close(all = false): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (all) for (const s of this.open) s.destroy();
    if (!server) return Promise.resolve();
    return new Promise((resolve) => {
      server.close(() => resolve());
      // close() waits for every connection; the listener is what matters.
      if (!all) resolve();
    });
  }

  private accept(client: Socket): void {
    client.on('error', () => client.destroy());
    const from = client.remoteAddress ?? '';
    if (!this.o.admits(from)) {
      refuse(client, '28000', `no access from ${from} to this service (its allowed CIDRs)`);
      return;
    }
    this.open.add(client);
    client.once('close', () => this.open.delete(client));
    if (!this.waking) {
      const started = this.o.wake();
      this.waking = started;
      started.catch(() => {
        if (this.waking === started) this.waking = undefined; // the next connection tries again
      });
    }
    this.waking.then(
      () => this.splice(client),
      (err: Error) =>
        refuse(client, '57P03', `basin: the service could not be woken: ${err.message}`),
    );
  }

  /** The client's bytes to the server and back, untouched. */
  private splice(client: Socket): void {
    if (client.destroyed) return;
    const server = connect({ host: this.o.server.host, port: this.o.server.port, noDelay: true });
    server.on('error', () => {
      if (!client.destroyed) {
        refuse(client, '57P03', 'basin: the service woke but does not accept connections');
      }
    });
    client.once('close', () => server.destroy());
    server.once('close', () => client.destroy());
    server.once('connect', () => {
      server.removeAllListeners('error');
      server.on('error', () => client.destroy());
      client.pipe(server);
      server.pipe(client);
    });
  }
}

/**
 * Answers a client with a PostgreSQL ErrorResponse (FATAL, `code`) and
 * closes: what it sent first (an SSLRequest, a StartupMessage) is read and
 * dropped, so that the close is no reset that would hide the message.
 */
export function refuse(client: Socket, code: string, message: string): void {
  if (client.destroyed) return;
  const fields = Buffer.concat([
    field('S', 'FATAL'),
    field('V', 'FATAL'),
    field('C', code),
    field('M', message),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(fields.length + 4, 1);
  client.on('data', () => {}); // read and dropped
  client.resume();
  // Let the client's first packet arrive, then answer it.
  setTimeout(() => client.end(Buffer.concat([head, fields])), 50).unref();
  setTimeout(() => client.destroy(), 5_000).unref();
}

const field = (type: string, value: string) => Buffer.from(`${type}${value}\0`, 'utf8');
