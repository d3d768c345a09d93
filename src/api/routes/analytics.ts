import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  AnalyticsIdentifyInput,
  AnalyticsResponse,
  AnalyticsTrackInput,
} from '../schemas/analytics.js';
import { ref } from '../schemas/ref.js';
import { responses, type RouteDeps } from './deps.js';

/** The vendor CLI's telemetry: accepted, and nothing is kept (schemas/analytics.ts). */
export const analyticsRoutes: FastifyPluginAsync<RouteDeps> = async (app) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const accepted = { status: 'success' as const };
  const extension = {
    tags: ['analytics'],
    'x-basin-extension': true,
    response: responses(200, ref(AnalyticsResponse)),
  };
  r.post(
    '/analytics/identify',
    {
      schema: {
        ...extension,
        summary: "The vendor CLI's telemetry (identify): accepted, and Basin keeps nothing",
        body: ref(AnalyticsIdentifyInput),
      },
    },
    async () => accepted,
  );
  r.post(
    '/analytics/track',
    {
      schema: {
        ...extension,
        summary: "The vendor CLI's telemetry (an event): accepted, and Basin keeps nothing",
        body: ref(AnalyticsTrackInput),
      },
    },
    async () => accepted,
  );
};
