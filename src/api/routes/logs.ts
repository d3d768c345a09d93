import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { readServiceLogs } from '../../commands/service-logs.js';
import { LogsQuery, ServiceLogsResponse } from '../schemas/logs.js';
import { ServiceParams } from '../schemas/params.js';
import { ref } from '../schemas/ref.js';
import { principal, reads, responses, type RouteDeps } from './deps.js';

const list = (v: string | string[] | undefined) =>
  v === undefined ? undefined : Array.isArray(v) ? v : [v];

export const logRoutes: FastifyPluginAsync<RouteDeps> = async (app, { ctx }) => {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/projects/:project_id/services/:service_id/logs',
    {
      schema: {
        tags: ['services'],
        summary: 'Read service logs, newest first, 500 a page',
        params: ServiceParams,
        querystring: LogsQuery,
        response: responses(200, ref(ServiceLogsResponse)),
      },
    },
    async (req, reply) => {
      const q = req.query;
      // Aborted when the client's connection closes before the page is sent:
      // the driver stops reading (a page of logs can cost real work).
      const signal = req.signal;
      let page;
      try {
        page = await readServiceLogs(
          ctx,
          reads(req),
          principal(req),
          req.params.project_id,
          req.params.service_id,
          {
            cursor: q.cursor,
            node: q.node === undefined ? undefined : Number(q.node),
            search: list(q.search),
            severities: list(q.severities),
            since: q.since,
            until: q.until,
            source: q.source,
            signal,
          },
        );
      } catch (err) {
        // Nobody is left to answer: not an error of Basin's, nothing to send.
        if (signal.aborted) return reply.hijack();
        throw err;
      }
      return {
        logs: page.entries.map((e) => e.message),
        entries: page.entries,
        // Both spellings, the spec's and the one newer clients read, same value.
        ...(page.nextCursor ? { lastCursor: page.nextCursor, last_cursor: page.nextCursor } : {}),
      };
    },
  );
};
