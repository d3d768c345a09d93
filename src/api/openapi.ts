import type { FastifyDynamicSwaggerOptions, SwaggerTransformObject } from '@fastify/swagger';

/** The OpenAPI document's frame; the paths and shapes come from the route schemas. */
export const openApiInfo: FastifyDynamicSwaggerOptions = {
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
  transformObject: (doc) => optionalBodies(doc),
  refResolver: {
    buildLocalReference: (json, _baseUri, _fragment, i) =>
      typeof json.$id === 'string' ? json.$id : `def-${i}`,
  },
};

/** Marks a route whose body may be left out (its handler reads none as `{}`). */
export const OPTIONAL_BODY = 'x-basin-optional-body';

/**
 * @fastify/swagger writes every body as required (Fastify validates `{}` at
 * least); a route marked OPTIONAL_BODY fills in a missing body itself
 * (POST /v1/auth/logout, as upstream), so its document says so instead.
 */
function optionalBodies(doc: Parameters<SwaggerTransformObject>[0]) {
  const paths = ('openapiObject' in doc ? doc.openapiObject.paths : undefined) ?? {};
  for (const item of Object.values(paths)) {
    for (const op of Object.values(item ?? {}) as Record<string, unknown>[]) {
      if (typeof op !== 'object' || op === null || !(OPTIONAL_BODY in op)) continue;
      delete op[OPTIONAL_BODY];
      if (typeof op.requestBody === 'object' && op.requestBody !== null) {
        (op.requestBody as { required?: boolean }).required = false;
      }
    }
  }
  return 'openapiObject' in doc ? doc.openapiObject : doc.swaggerObject;
}
