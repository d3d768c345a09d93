// Validating answers against an OpenAPI 3.0 document: the schema of an
// operation's response for the status it answered (an exact status, else
// its class, `4XX`), compiled by Ajv with the document's components, so
// `$ref`s resolve as the document means them. OpenAPI 3.0's `nullable` is
// Ajv's own keyword; its other additions (`example`, `deprecated`,
// `readOnly`, `x-…`) say nothing about validity and are ignored, and so are
// the formats that JSON Schema does not define (`password`, `cidr`,
// `double`): any string or number passes them.

import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import formats from 'ajv-formats';
import YAML from 'yaml';

type Json = Record<string, any>;

/** One answer, as a test recorded it: the document's path template, not the URL. */
export interface Answer {
  method: string;
  /** The path as the document spells it, e.g. `/projects/{project_id}/services`. */
  path: string;
  status: number;
  body: unknown;
  /** What was sent, for failure messages. */
  url: string;
}

export interface OpenApiValidator {
  /** The document's operations: `operationId` (or `METHOD path`) and where. */
  readonly operations: { id: string; method: string; path: string }[];
  /** Problems with one answer: none when the document describes it. */
  problems(a: Answer): string[];
}

export function loadDocument(file: string): Json {
  const text = readFileSync(file, 'utf8');
  return file.endsWith('.json') ? JSON.parse(text) : YAML.parse(text);
}

/**
 * A validator for `doc`, whose paths are under `prefix` (Basin's are under
 * `/v1`; the vendor's server URL holds its `/v1`).
 */
export function openApiValidator(doc: Json, prefix = ''): OpenApiValidator {
  const ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false });
  // A CommonJS module: its default export is under `default` when imported from ESM.
  const addFormats = (formats as unknown as { default: (ajv: Ajv) => Ajv }).default;
  addFormats(ajv);
  for (const f of ['password', 'cidr', 'double', 'float', 'int32', 'int64']) ajv.addFormat(f, true);
  ajv.addSchema(doc, 'doc');
  const compiled = new Map<string, ValidateFunction>();
  const pointer = (parts: string[]) =>
    `doc#/${parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')}`;

  const operations = Object.entries(doc.paths as Json).flatMap(([path, ops]) =>
    Object.entries(ops as Json)
      .filter(([m]) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))
      .map(([method, op]) => ({
        id: (op as Json).operationId ?? `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path: path.slice(prefix.length),
      })),
  );

  /** The response object and where it is, following a `$ref` to components/responses. */
  function response(a: Answer): { parts: string[]; value: Json } | undefined {
    const op = doc.paths[`${prefix}${a.path}`]?.[a.method.toLowerCase()];
    if (!op) return undefined;
    const status = String(a.status);
    const klass = `${status[0]}XX`;
    const key = Object.keys(op.responses).find(
      (k) => k === status || k.toUpperCase() === klass || k === 'default',
    );
    if (key === undefined) return undefined;
    let parts = ['paths', `${prefix}${a.path}`, a.method.toLowerCase(), 'responses', key];
    let value = op.responses[key] as Json;
    if (typeof value.$ref === 'string') {
      parts = (value.$ref as string).replace(/^#\//, '').split('/');
      value = parts.reduce((v: Json, p) => v[p], doc);
    }
    return { parts, value };
  }

  return {
    operations,
    problems(a) {
      const where = `${a.method} ${a.url} → ${a.status}`;
      const found = response(a);
      if (!found) return [`${where}: the document has no response for this operation and status`];
      const schema = found.value.content?.['application/json']?.schema;
      if (schema === undefined) {
        return a.body === undefined ? [] : [`${where}: a body where the document has none`];
      }
      const ref = pointer([...found.parts, 'content', 'application/json', 'schema']);
      const validate = compiled.get(ref) ?? ajv.compile({ $ref: ref });
      compiled.set(ref, validate);
      if (validate(a.body)) return [];
      return (validate.errors ?? []).map(
        (e) => `${where}: ${e.instancePath || '(body)'} ${e.message} (${e.schemaPath})`,
      );
    },
  };
}
