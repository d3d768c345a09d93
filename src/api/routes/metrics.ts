import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { availableSeries, readSeries } from '../../commands/service-metrics.js';
import { AvailableSeries, MetricSeriesList, MetricsSeriesRequest } from '../schemas/metrics.js';
import { ServiceParams } from '../schemas/params.js';
import { ref } from '../schemas/ref.js';
import { principal, reads, responses, type RouteDeps } from './deps.js';

export const metricsRoutes: FastifyPluginAsync<RouteDeps> = async (app, { ctx }) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/projects/:project_id/services/:service_id/metrics/available-series',
    {
      schema: {
        tags: ['services'],
        summary: 'List the metric series sampled of a service (preview)',
        params: ServiceParams,
        response: responses(200, AvailableSeries),
      },
    },
    async (req) =>
      availableSeries(
        ctx,
        reads(req),
        principal(req),
        req.params.project_id,
        req.params.service_id,
      ),
  );
  r.post(
    '/projects/:project_id/services/:service_id/metrics/series',
    {
      schema: {
        tags: ['services'],
        summary: 'Read a metric series in buckets (preview; retention in docs/decisions.md)',
        params: ServiceParams,
        body: ref(MetricsSeriesRequest),
        response: responses(200, MetricSeriesList),
      },
    },
    async (req) =>
      readSeries(
        ctx,
        reads(req),
        principal(req),
        req.params.project_id,
        req.params.service_id,
        req.body,
      ),
  );
};
