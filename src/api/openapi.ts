import type { SwaggerOptions } from '@fastify/swagger';

/** The OpenAPI document's frame; the paths and shapes come from the route schemas. */
export const openApiInfo: SwaggerOptions = {
  openapi: {
    openapi: '3.0.3',
    info: {
      title: 'Basin — Cloud Database Management REST API',
      version: '1.0.0',
      description:
        'Projects, VPCs, peerings, database services and read replica sets, backed by real PostgreSQL. Errors always have the body {code, message}. Each credential may make a number of reads (GET) and, separately, of writes a minute (configured per installation); over it, requests are answered 429 RATE_LIMITED with Retry-After.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'API key' },
        basic: { type: 'http', scheme: 'basic', description: '<access key>:<secret key>' },
      },
    },
    security: [{ bearer: [] }, { basic: [] }],
  },
  refResolver: {
    buildLocalReference: (json, _baseUri, _fragment, i) =>
      typeof json.$id === 'string' ? json.$id : `def-${i}`,
  },
};
