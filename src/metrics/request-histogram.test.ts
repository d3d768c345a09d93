import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Histogram, type Metric, Registry } from 'prom-client';
import { RequestHistogram } from './request-histogram.js';

test("the same text as prom-client's Histogram for the same observations", async () => {
  const buckets = [0.001, 0.01, 0.1, 1];
  const theirs = new Registry();
  const reference = new Histogram({
    name: 'req_seconds',
    help: 'Requests',
    labelNames: ['method', 'route', 'status'],
    buckets,
    registers: [theirs],
  });
  const ours = new Registry();
  const fast = new RequestHistogram('req_seconds', 'Requests', buckets);
  ours.registerMetric(fast as unknown as Metric);
  const seen: [string, string, number, number][] = [
    ['GET', '/v1/projects', 200, 0.0005],
    ['GET', '/v1/projects', 200, 0.001], // on a bound: counted in it
    ['GET', '/v1/projects', 200, 0.05],
    ['GET', '/v1/projects', 200, 7], // above every bound: +Inf only
    ['POST', '/v1/projects/:project_id/services', 202, 0.3],
    ['GET', 'unmatched', 404, 0.0001],
  ];
  for (const [method, route, status, seconds] of seen) {
    reference.observe({ method, route, status: String(status) }, seconds);
    fast.observe(method, route, status, seconds);
  }
  assert.equal(await ours.metrics(), await theirs.metrics());
  fast.reset();
  reference.reset();
  assert.equal(await ours.metrics(), await theirs.metrics());
});
