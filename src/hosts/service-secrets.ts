// Secrets a service's nodes on several hosts must share (docs/decisions.md,
// "HA across hosts": its etcd user's password, its replication role's, its
// Patroni REST API's), derived in the control plane: HMAC-SHA256 of the
// purpose and the service's id under one random key in the store's
// `secrets` (made on first use, first writer wins). Every control-plane
// process derives the same; a secret asked for again is the same (a grant
// converges); nothing per service is left in the store after the service
// (ids are random and never reused, so a secret never comes back for
// another service); one purpose's secret tells nothing of another's.

import { createHmac, randomBytes } from 'node:crypto';
import type { Store } from '../store/store.js';

const KEY = 'service-secrets-key';

export type ServiceSecretPurpose = 'etcd' | 'replication' | 'patroni-api';

export async function serviceSecret(
  store: Store,
  serviceId: string,
  purpose: ServiceSecretPurpose,
): Promise<string> {
  let key = await store.secrets.get(KEY);
  if (key === undefined) {
    const made = randomBytes(32).toString('hex');
    key = await store.transaction((tx) => tx.secrets.putIfAbsent(KEY, made));
  }
  return createHmac('sha256', Buffer.from(key, 'hex'))
    .update(`${purpose}\n${serviceId}`)
    .digest('base64url');
}
