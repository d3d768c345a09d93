// npm run openapi: rewrites openapi.json from the route schemas.
import { writeFileSync } from 'node:fs';
import { openApiDocument } from '../src/openapi-document.js';

writeFileSync('openapi.json', await openApiDocument());
console.log('wrote openapi.json');
