// A resource's usage, as the driver last sampled it (docs/architecture.md §9: metrics
// come from the real processes and files). Read on every GET of a service,
// so it never waits: the driver samples in the background.

import type { Target } from '../domain/logs.js';
import type { Metrics } from '../domain/types.js';
import type { Ctx } from './context.js';

export function currentUsage(ctx: Ctx, target: Target): Metrics | undefined {
  return ctx.driver.metrics(target);
}
