// npm run openapi: rewrites openapi.json from the route schemas, and the
// client's types (src/client/generated/openapi.ts) from openapi.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { openApiDocument } from '../src/openapi-document.js';
import { CLIENT_TYPES_FILE, clientTypes, OPENAPI_FILE } from './in-step.js';

const doc = await openApiDocument();
writeFileSync(OPENAPI_FILE, doc);
mkdirSync(dirname(CLIENT_TYPES_FILE), { recursive: true });
writeFileSync(CLIENT_TYPES_FILE, await clientTypes(doc));
console.log(`wrote ${OPENAPI_FILE} and ${CLIENT_TYPES_FILE}`);
