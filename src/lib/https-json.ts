// A JSON request over HTTPS with mutual TLS, for the control plane and its
// hosts. The peer is identified by its certificate's subject (CN), checked
// against `peerCn`, not by the address it was reached at: a host's address
// may change, and what matters is whom the installation's CA named.

import { request } from 'node:https';
import type { PeerCertificate } from 'node:tls';

export interface HttpsJsonOptions {
  method?: 'GET' | 'POST';
  body?: unknown;
  /** The CA that must have signed the peer; none: the peer is not verified (only to fetch a CA to pin). */
  ca?: string;
  /** Our certificate and key, when the peer asks for one. */
  cert?: string;
  key?: string;
  /** The CN the peer's certificate must carry (with `ca`). */
  peerCn?: string | ((cn: string) => boolean);
  /** How long the peer may stay silent (the whole call, for a peer that works before it answers). */
  timeoutMs?: number;
  /**
   * How long a new connection may take (TCP and TLS), apart from
   * `timeoutMs`: a host gone from the network answers no SYN, and a call
   * that may work for minutes must not wait minutes to find that out.
   */
  connectTimeoutMs?: number;
  /** Headers of the request's own (content-type is set for a body). */
  headers?: Record<string, string>;
}

export interface HttpsJsonResponse {
  status: number;
  body: unknown;
  text: string;
}

export function httpsJson(url: string, o: HttpsJsonOptions = {}): Promise<HttpsJsonResponse> {
  const payload = o.body === undefined ? undefined : JSON.stringify(o.body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: o.method ?? (payload === undefined ? 'GET' : 'POST'),
        headers: {
          ...o.headers,
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(o.ca === undefined ? { rejectUnauthorized: false } : { ca: o.ca }),
        ...(o.cert === undefined ? {} : { cert: o.cert, key: o.key }),
        checkServerIdentity: (_host: string, peer: PeerCertificate) =>
          o.ca === undefined || cnMatches(peer.subject?.CN, o.peerCn)
            ? undefined
            : new Error(
                `the peer's certificate names ${String(peer.subject?.CN)}, not the one expected`,
              ),
        timeout: o.timeoutMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // not JSON: the text is the body
          }
          resolve({ status: res.statusCode ?? 0, body, text });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} in time`)));
    const connectMs = o.connectTimeoutMs;
    if (connectMs !== undefined) {
      req.on('socket', (socket) => {
        if (req.reusedSocket) return; // connected already (kept alive)
        const timer = setTimeout(
          () => req.destroy(new Error(`could not connect to ${url} in ${connectMs} ms`)),
          connectMs,
        );
        socket.once('secureConnect', () => clearTimeout(timer));
        req.once('close', () => clearTimeout(timer));
      });
    }
    req.on('error', reject);
    req.end(payload);
  });
}

function cnMatches(cn: string | string[] | undefined, want: HttpsJsonOptions['peerCn']): boolean {
  if (want === undefined) return true;
  if (typeof cn !== 'string') return false;
  return typeof want === 'string' ? cn === want : want(cn);
}
