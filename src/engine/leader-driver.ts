// The driver as the leader's engine sees it: every call that acts on the
// host first asks the leadership guard (leadership.ts, mayAct), so that a
// leader whose lease may have lapsed (paused, cut off from the store)
// touches nothing; such a call is refused with NotLeaderError, and asking
// is what tells the leader it lost. Reads (logs, sampled metrics, the disk)
// and the registrations of watches go through as they are.

import type { Driver } from '../drivers/driver.js';
import { NotLeaderError } from './leadership.js';

const PASS = new Set<PropertyKey>(['name', 'capabilities', 'readLogs', 'metrics', 'disk']);

export function leaderDriver(driver: Driver, mayAct: () => boolean): Driver {
  return new Proxy(driver, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (PASS.has(prop) || (typeof prop === 'string' && prop.startsWith('watch'))) {
        return method.bind(target);
      }
      return (...args: unknown[]) => {
        if (!mayAct()) return Promise.reject(new NotLeaderError('its leadership is not confirmed'));
        return method.apply(target, args);
      };
    },
  });
}
