// Runs the Basin server: parse configuration, wire everything, listen, and
// drain on SIGINT/SIGTERM. Databases keep running when the server exits.
// What only some configurations use (the hosts' listener and etcd, the
// metrics listener) is loaded when configured, and Basin itself once the
// flags are read: `--help` and a bad flag answer at once (docs/architecture.md §6).

import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { ConfigError, helpText, parseConfig } from './config.js';
import { makeDataDir } from './lib/data-dir.js';
import { DataDirInUseError } from './lib/data-dir-lock.js';
import { createServerLog, exitOnFatalErrors, type ServerLog } from './lib/logger.js';
import { selfSignedCertificate } from './lib/self-signed.js';
import { systemClock } from './lib/clock.js';

/** The exit status of a leader that lost leadership (a supervisor starts it again). */
const LEADERSHIP_LOST = 3;

/** Set once the logger exists; flushed when Basin stops. */
let serverLog: ServerLog | undefined;

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText());
    return;
  }
  const config = parseConfig(argv, process.env);
  // Nothing Basin writes (store, keys, certificates) is for other OS users:
  // the databases run as other users, which must not read Basin's files.
  // Set first: the self-signed certificate below is written before the store.
  process.umask(0o077);
  makeDataDir(config.dataDir);
  const https =
    config.tls === 'self-signed'
      ? selfSignedCertificate(config.dataDir, config.publicHost)
      : config.tls
        ? { cert: readFileSync(config.tls.cert, 'utf8'), key: readFileSync(config.tls.key, 'utf8') }
        : null;
  // JSON lines on stdout, buffered and written asynchronously (lib/logger.ts):
  // one access line per request at `info`, the engine's and drivers' lines.
  serverLog = createServerLog({ level: config.logLevel });
  exitOnFatalErrors(serverLog);
  const { createBasin } = await import('./basin.js');
  const basin = await createBasin(config, {
    https,
    logger: serverLog.logger,
    // A leader of several Basins that lost leadership stops at once: its
    // engine may be mid-way through work that the new leader now owns.
    // Started again (a supervisor), it is a follower (docs/decisions.md).
    onLeadershipLost: (reason) => {
      const out = serverLog;
      out?.logger.error(
        { reason },
        'stepping down: this Basin no longer leads; exiting so that it starts again as a follower',
      );
      // Why it exits is what its operator will look for: the lines are
      // written first. A synchronous flush cannot write behind a write under
      // way (lib/log-destination.ts), so the exit waits for the flush, a
      // moment at most; the guard and the fence refuse any work meanwhile.
      const exit = () => {
        out?.flushSync();
        process.exit(LEADERSHIP_LOST);
      };
      setTimeout(exit, 500);
      void (out?.flush() ?? Promise.resolve()).then(exit, exit);
    },
  });
  const log = serverLog.logger;

  if (basin.bootstrapped) {
    const { project, credential } = basin.bootstrapped;
    // Shown once, on the console, never through the logger: only hashes are kept.
    process.stderr.write(
      [
        '',
        '  Basin bootstrapped an empty data directory.',
        `  Project:     ${project.id} (${project.name})`,
        config.bootstrapApiKey
          ? '  Bearer key:  the value of BASIN_BOOTSTRAP_API_KEY'
          : `  Bearer key:  ${credential.bearerKey}`,
        `  Access key:  ${credential.accessKey}`,
        `  Secret key:  ${credential.secretKey}`,
        '  These secrets are shown only now. Create more with `basin credential create`.',
        '',
        '',
      ].join('\n'),
    );
  }

  await basin.app.listen({ host: config.host, port: config.port });
  const scheme = https ? 'https' : 'http';
  // The bound port: with --port 0 the system chose it.
  const { port } = basin.app.server.address() as AddressInfo;
  log.info(
    { driver: config.driver, dataDir: config.dataDir, port },
    `Basin API at ${scheme}://${config.host}:${port}/v1`,
  );
  if (!https && !isLoopback(config.host)) {
    log.warn(
      'Serving plain HTTP on a non-loopback address: put a TLS-terminating proxy in front, or pass --tls-cert/--tls-key.',
    );
  }

  // Off by default: the series span every project (docs/decisions.md).
  const metricsListener = config.metricsListen
    ? await (
        await import('./metrics/listener.js')
      ).listenMetrics(basin.metrics, config.metricsListen.host, config.metricsListen.port)
    : null;
  if (metricsListener) {
    const { address, port: metricsPort } = metricsListener.address;
    log.info(
      { metricsPort },
      `Prometheus metrics at http://${address.includes(':') ? `[${address}]` : address}:${metricsPort}/metrics`,
    );
  }

  // Off by default: one machine needs no hosts (docs/decisions.md, "Several hosts").
  const hostListen = config.hostListen;
  const hosts = hostListen
    ? await Promise.all([import('./hosts/host-listener.js'), import('./hosts/etcd-cluster.js')])
    : null;
  const hostListener =
    hosts && hostListen
      ? await hosts[0].listenForHosts({
          store: basin.store,
          clock: systemClock,
          log,
          host: hostListen.host,
          port: hostListen.port,
          lostAfterMs: config.hostLostAfterMs,
        })
      : null;
  // etcd's members on the hosts, once enough of them joined (docs/decisions.md, "etcd on the hosts").
  const etcdLoop = hosts
    ? hosts[1].superviseEtcd({
        store: basin.store,
        clock: systemClock,
        log,
        lostAfterMs: config.hostLostAfterMs,
      })
    : null;
  if (hostListener) {
    log.info(
      { hostPort: hostListener.port },
      `hosts join at https://${config.hostListen?.host}:${hostListener.port}`,
    );
  }

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    log.info({ signal }, 'shutting down; databases keep running');
    // The engine drains for at most drainTimeoutMs; the rest is a hang.
    const force = setTimeout(() => process.exit(1), config.drainTimeoutMs + 20_000);
    force.unref();
    await metricsListener?.close();
    await hostListener?.close();
    await etcdLoop?.close();
    await basin.close();
    log.info({}, 'stopped');
    await serverLog?.flush();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host.startsWith('127.') || host === '::1';
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`basin: ${err.message}\n`);
    process.exit(2);
  }
  serverLog?.flushSync();
  if (err instanceof DataDirInUseError) {
    process.stderr.write(`basin: ${err.message}\n`);
    process.exit(1);
  }
  process.stderr.write(
    `basin: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
