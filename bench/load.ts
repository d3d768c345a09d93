// A small closed-loop HTTP/1.1 load generator over raw keep-alive sockets.
//
// Why not http.Agent: on a 2-core machine the load generator shares the CPU
// with the server under test, and Node's http client costs several times more
// per request than a pre-encoded request and a minimal response parser. The
// cheaper the client, the more of the other core the server gets, and the
// less the bare-server baseline is capped by the client rather than by the
// server. Each connection keeps exactly one request in flight (no pipelining),
// like an http.Agent with keepAlive and maxSockets = connections.

import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { percentile } from './report.js';

export interface LoadOptions {
  host: string;
  port: number;
  path: string;
  /**
   * Extra request headers (Host is added); several sets for requests that
   * take turns (e.g. one credential each): connection i starts with set i
   * and moves to the next one after each response.
   */
  headers: Record<string, string> | readonly Record<string, string>[];
  connections: number;
  /** Run this long first; responses in it are checked but not counted. */
  warmupMs: number;
  /** Then count responses for this long. */
  durationMs: number;
  /** Other processes whose CPU time to report for the measured window. */
  watchPids?: readonly number[];
}

export interface LoadResult {
  /** Responses completed within the measured window. */
  requests: number;
  /** Responses received in all, warmup included. */
  received: number;
  seconds: number;
  rps: number;
  /** Responses other than 200, over warmup and window alike. */
  non200: Map<number, number>;
  latencyMs: { p50: number; p99: number; max: number };
  /** A 200 body seen, to check what was served. */
  sampleBody: string | undefined;
  /**
   * CPU used in the window, in cores: this process, each of watchPids, and
   * the whole machine (which includes the kernel's network work and any
   * other program running meanwhile).
   */
  cpu: { self: number; watched: (number | undefined)[]; machine: number | undefined };
}

export class HttpProtocolError extends Error {}

/**
 * Splits a byte stream of HTTP/1.1 responses into (status, body) pairs. Only
 * what the servers under test send is understood: Content-Length bodies.
 */
export class ResponseParser {
  private pending: Buffer | null = null;
  /** Body bytes still expected; -1 while reading a head. */
  private need = -1;
  private status = 0;

  constructor(private readonly onResponse: (status: number, body: Buffer) => void) {}

  push(chunk: Buffer): void {
    const data = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    let off = 0;
    for (;;) {
      if (this.need < 0) {
        const end = data.indexOf('\r\n\r\n', off, 'latin1');
        if (end < 0) break;
        const head = data.toString('latin1', off, end);
        const m = /^HTTP\/1\.[01] (\d{3})/.exec(head);
        if (!m) throw new HttpProtocolError(`not an HTTP/1.x response: ${head.slice(0, 40)}`);
        if (/\r\ntransfer-encoding:/i.test(head)) {
          throw new HttpProtocolError('chunked responses are not supported by this load generator');
        }
        const len = /\r\ncontent-length: *(\d+)/i.exec(head);
        if (!len) throw new HttpProtocolError('response without Content-Length');
        this.status = Number(m[1]);
        this.need = Number(len[1]);
        off = end + 4;
      }
      if (data.length - off < this.need) break;
      const body = data.subarray(off, off + this.need);
      off += this.need;
      this.need = -1;
      this.onResponse(this.status, body);
    }
    this.pending = off < data.length ? data.subarray(off) : null;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc; Linux only. */
export function cpuSecondsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks / 100 : undefined; // USER_HZ is 100 on Linux
  } catch {
    return undefined;
  }
}

/** CPU seconds the whole machine has spent busy so far (all cores), from /proc/stat. */
export function machineBusySeconds(): number | undefined {
  try {
    const line = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0] as string;
    // cpu  user nice system idle iowait irq softirq steal ...
    const t = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const busy = t.reduce((a, b) => a + b, 0) - (t[3] ?? 0) - (t[4] ?? 0);
    return Number.isFinite(busy) ? busy / 100 : undefined;
  } catch {
    return undefined;
  }
}

function selfCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/** Drives `connections` keep-alive connections for warmup + duration; resolves with the counts. */
export function runLoad(o: LoadOptions): Promise<LoadResult> {
  const headerSets = Array.isArray(o.headers) ? o.headers : [o.headers];
  const requests = headerSets.map((headers: Record<string, string>) =>
    Buffer.from(
      `GET ${o.path} HTTP/1.1\r\nHost: ${o.host}:${o.port}\r\n` +
        Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join('') +
        '\r\n',
      'latin1',
    ),
  );
  const watched = o.watchPids ?? [];

  return new Promise<LoadResult>((resolve, reject) => {
    const sockets: Socket[] = [];
    const latencies: number[] = [];
    const non200 = new Map<number, number>();
    let sampleBody: string | undefined;
    let measuring = false;
    let stopped = false;
    let count = 0;
    let received = 0;
    let windowStart = 0;
    let cpuStart = {
      self: 0,
      watched: [] as (number | undefined)[],
      machine: undefined as number | undefined,
    };

    const fail = (err: Error) => {
      if (stopped) return;
      stopped = true;
      clearTimeout(startTimer);
      clearTimeout(stopTimer);
      for (const s of sockets) s.destroy();
      reject(err);
    };

    for (let i = 0; i < o.connections; i++) {
      const socket = connect({ host: o.host, port: o.port, noDelay: true });
      sockets.push(socket);
      let sentAt = 0;
      let turn = i % requests.length;
      const send = () => {
        sentAt = performance.now();
        socket.write(requests[turn] as Buffer);
        turn = turn + 1 === requests.length ? 0 : turn + 1;
      };
      const parser = new ResponseParser((status, body) => {
        if (stopped) return;
        const now = performance.now();
        received++;
        if (status !== 200) non200.set(status, (non200.get(status) ?? 0) + 1);
        else if (sampleBody === undefined) sampleBody = body.toString('utf8');
        if (measuring) {
          count++;
          latencies.push(now - sentAt);
        }
        send();
      });
      socket.on('connect', send);
      socket.on('data', (chunk: Buffer) => {
        try {
          parser.push(chunk);
        } catch (err) {
          fail(err as Error);
        }
      });
      socket.on('error', (err) => fail(new Error(`connection ${i}: ${err.message}`)));
      socket.on('close', () => fail(new Error(`connection ${i} closed by the server`)));
    }

    const startTimer = setTimeout(() => {
      measuring = true;
      windowStart = performance.now();
      cpuStart = {
        self: selfCpuSeconds(),
        watched: watched.map(cpuSecondsOf),
        machine: machineBusySeconds(),
      };
    }, o.warmupMs);

    const stopTimer = setTimeout(() => {
      const seconds = (performance.now() - windowStart) / 1000;
      const selfCpu = selfCpuSeconds();
      const watchedCpu = watched.map(cpuSecondsOf);
      const machineCpu = machineBusySeconds();
      stopped = true;
      measuring = false;
      for (const s of sockets) s.destroy();
      const sorted = Float64Array.from(latencies).sort();
      resolve({
        requests: count,
        received,
        seconds,
        rps: count / seconds,
        non200,
        latencyMs: {
          p50: percentile(sorted, 50),
          p99: percentile(sorted, 99),
          max: sorted.length ? (sorted[sorted.length - 1] as number) : NaN,
        },
        sampleBody,
        cpu: {
          self: (selfCpu - cpuStart.self) / seconds,
          watched: watchedCpu.map((end, i) => {
            const start = cpuStart.watched[i];
            return end === undefined || start === undefined ? undefined : (end - start) / seconds;
          }),
          machine:
            machineCpu === undefined || cpuStart.machine === undefined
              ? undefined
              : (machineCpu - cpuStart.machine) / seconds,
        },
      });
    }, o.warmupMs + o.durationMs);
  });
}
