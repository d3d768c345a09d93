// Identifiers (docs/architecture.md §8): projects, services and replica sets get 10 random
// lowercase alphanumerics; VPCs and peerings get numeric strings.

import { randomInt } from 'node:crypto';

const ALNUM = 'abcdefghijklmnopqrstuvwxyz0123456789';

export function resourceId(): string {
  let id = ALNUM[randomInt(26)] as string; // start with a letter: safe in host names and paths
  for (let i = 1; i < 10; i++) id += ALNUM[randomInt(ALNUM.length)];
  return id;
}

export function numericId(): string {
  return String(randomInt(1_000_000_000, 9_999_999_999));
}
