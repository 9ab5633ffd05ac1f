// Checks HTTP exchanges against the OpenAPI document the server publishes: every response under
// /api/v1 must be one the document lists for its operation (status, content type, required headers,
// body shape), and every request the server accepted (2xx) must be one the document allows.
// watchConformance puts every exchange of an app through it (startTestApp does, for every app it starts).
import type { FastifyInstance } from 'fastify';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { createRequire } from 'node:module';
import { DESCRIBED_ONLY } from '../../src/donations/schema.js';
import { formFieldName } from '../../src/http/body.js';
import { buildOpenApiDocument } from '../../src/http/openapi.js';

// ajv-formats is CommonJS, and its typings describe its ESM-interop default: require it as it is.
const addFormats = createRequire(import.meta.url)('ajv-formats') as (ajv: Ajv2020) => Ajv2020;

export interface Exchange {
  method: string;
  /** The path as requested, query string included. */
  url: string;
  requestHeaders: Record<string, string | string[] | undefined>;
  /** The parsed body (undefined without one). */
  requestBody: unknown;
  status: number;
  responseHeaders: Record<string, unknown>;
  /** The body as sent. */
  responseBody: string;
}

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** A value as JSON, cut short, for a message (a hostile body may be too deep to stringify). */
function preview(value: unknown): string {
  try {
    return String(JSON.stringify(value)).slice(0, 80);
  } catch {
    return '(too deep to show)';
  }
}

const mediaType = (value: unknown) => String(value ?? '').split(';')[0]!.trim().toLowerCase();

export class OpenApiConformance {
  readonly document: Json;
  readonly #base: string;
  readonly #ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
  readonly #compiled = new Map<unknown, ValidateFunction>();
  /** Exchanges checked so far, by "METHOD /path status". */
  readonly seen = new Map<string, number>();

  constructor(document: Json = buildOpenApiDocument('test')) {
    this.document = document;
    this.#base = new URL(document.servers[0].url, 'http://localhost').pathname; // absolute when served, relative when built bare
    addFormats(this.#ajv);
    // ajv-formats has no idn-email: a loose check of its shape (the server's own rule is stricter).
    this.#ajv.addFormat('idn-email', /^[\s\S]+@[^\s@]+\.[^\s@]+$/u);
  }

  /** Each node of the document, dereferenced once: the same node gives the same object, which compile() keeps its validator by. */
  readonly #dereffed = new WeakMap<object, Json>();

  /**
   * Follows `$ref`s (in the document: no cycles) until the node is not one. A node's copy is made
   * once (a fresh copy each call had every exchange compile its schemas afresh: 17 ms a create in a
   * test app, about four times the server's own time).
   */
  deref(node: Json): Json {
    if (!node || typeof node !== 'object') return node;
    let copy = this.#dereffed.get(node);
    if (copy !== undefined) return copy;
    if (Array.isArray(node)) copy = node.map((n) => this.deref(n));
    else if (typeof node.$ref === 'string') {
      const path = node.$ref.replace(/^#\//, '').split('/');
      copy = this.deref(path.reduce((at: Json, key: string) => at[key], this.document));
    } else copy = Object.fromEntries(Object.entries(node).map(([k, v]) => [k, this.deref(v)]));
    this.#dereffed.set(node, copy);
    return copy;
  }

  /** The schema (a node of the document) compiled by Ajv in strict mode: a schema error throws. */
  compile(schema: Json): ValidateFunction {
    let v = this.#compiled.get(schema);
    if (!v) this.#compiled.set(schema, (v = this.#ajv.compile(this.deref(schema))));
    return v;
  }

  /** The last errors of a compiled schema, in words. */
  errorsOf(validate: ValidateFunction): string {
    return this.#ajv.errorsText(validate.errors);
  }

  #schemaErrors(schema: Json, value: unknown): string | undefined {
    const validate = this.compile(schema);
    if (validate(value)) return undefined;
    // Each error with the value it is about, cut short: enough to reproduce it.
    return (validate.errors ?? [])
      .map((e) => {
        const at = e.instancePath.split('/').slice(1).reduce((v: any, k) => v?.[k.replaceAll('~1', '/').replaceAll('~0', '~')], value); // eslint-disable-line @typescript-eslint/no-explicit-any
        return `${e.instancePath || '(body)'} ${e.message} (given ${preview(at)})`;
      })
      .join('; ');
  }

  /** What is wrong with the exchange, if anything: [] when it conforms or is outside the API. */
  check(x: Exchange): string[] {
    const path = x.url.split('?')[0]!.replace(/(.)\/$/, '$1'); // one trailing slash is the route itself
    if (!path.startsWith(`${this.#base}/`) || path === `${this.#base}/openapi.json`) return [];
    const item: Json | undefined = this.document.paths[path.slice(this.#base.length)];
    const where = `${x.method} ${x.url} → ${x.status}`;
    this.seen.set(where, (this.seen.get(where) ?? 0) + 1);
    if (!item) return x.status === 404 ? [] : [`${where}: not a documented path, yet not a 404`];

    const method = x.method.toLowerCase();
    const operation: Json | undefined = item[method];
    const problems: string[] = [];
    if (!operation) {
      // An undocumented method is answered 405, as each operation of the path lists it.
      if (x.status !== 405) return [`${where}: ${x.method} is not documented for the path, yet not a 405`];
      const documented = Object.values(item).find((op: Json) => op.responses?.['405']);
      if (!documented) return [`${where}: no operation of the path documents a 405`];
      return this.#checkResponse(where, documented, x);
    }
    if (x.status === 405) return [`${where}: a 405 for a method the document lists`];
    problems.push(...this.#checkResponse(where, operation, x));
    if (x.status >= 200 && x.status < 300) problems.push(...this.#checkRequest(where, operation, x));
    if (x.status === 422 && this.#checkRequest(where, operation, x).length === 0) problems.push(...this.#checkRefusal(where, x));
    return problems;
  }

  /**
   * A request the document allows may be refused (422) only for a rule it states in words
   * (DESCRIBED_ONLY), for an Idempotency-Key used before with another body, or for a field sent in
   * the URL's query string, which the request body's description refuses.
   */
  #checkRefusal(where: string, x: Exchange): string[] {
    const inQuery = new Set([...new URL(x.url, 'http://localhost').searchParams.keys()].map(formFieldName));
    let errors: Record<string, string[]>;
    try {
      errors = JSON.parse(x.responseBody).errors ?? {};
    } catch {
      return []; // the response check reports it
    }
    return Object.entries(errors).flatMap(([field, messages]) =>
      field === 'idempotency_key' || inQuery.has(field)
        ? []
        : messages
            .filter((m) => !DESCRIBED_ONLY.some((rule) => rule.test(m)))
            .map((m) => `${where}: a request the document allows was refused: ${field}: ${m} (given ${preview((x.requestBody as Json)?.[field])})`),
    );
  }

  #checkResponse(where: string, operation: Json, x: Exchange): string[] {
    const spec = operation.responses[String(x.status)] ?? operation.responses.default;
    if (!spec) return [`${where}: status ${x.status} is not documented`];
    const response = this.deref(spec);
    const problems: string[] = [];
    for (const [name, header] of Object.entries<Json>(response.headers ?? {})) {
      const value = x.responseHeaders[name.toLowerCase()];
      if (value === undefined) {
        if (header.required) problems.push(`${where}: required header ${name} is missing`);
        continue;
      }
      const error = this.#schemaErrors(header.schema, String(value));
      if (error) problems.push(`${where}: header ${name}: ${error}`);
    }
    const content: Json = response.content ?? {};
    const type = mediaType(x.responseHeaders['content-type']);
    if (!content[type]) return [...problems, `${where}: content type "${type}" is not documented (${Object.keys(content).join(', ')})`];
    let body: unknown;
    try {
      body = JSON.parse(x.responseBody);
    } catch {
      return [...problems, `${where}: the body is not JSON`];
    }
    const error = this.#schemaErrors(content[type].schema, body);
    if (error) problems.push(`${where}: body: ${error}`);
    return problems;
  }

  #checkRequest(where: string, operation: Json, x: Exchange): string[] {
    const problems: string[] = [];
    for (const parameter of this.deref(operation.parameters ?? []) as Json[]) {
      if (parameter.in !== 'header') continue;
      const value = x.requestHeaders[parameter.name.toLowerCase()];
      if (value === undefined) {
        if (parameter.required) problems.push(`${where}: accepted without the required header ${parameter.name}`);
        continue;
      }
      const error = this.#schemaErrors(parameter.schema, value);
      if (error) problems.push(`${where}: accepted header ${parameter.name}: ${error}`);
    }
    const body = operation.requestBody && this.deref(operation.requestBody);
    const hasBody = x.requestBody !== undefined && x.requestBody !== null;
    if (!body) return problems; // a body sent anyway is ignored
    const type = mediaType(x.requestHeaders['content-type']);
    if (!hasBody) return body.required ? [...problems, `${where}: accepted without a body`] : problems;
    if (!body.content[type]) return [...problems, `${where}: accepted a body of undocumented type "${type}"`];
    const error = this.#schemaErrors(body.content[type].schema, x.requestBody);
    if (error) problems.push(`${where}: accepted a body the document does not allow: ${error}`);
    return problems;
  }
}

const shared = new OpenApiConformance();

/**
 * Checks every exchange of the app against the OpenAPI document; closing the app then fails
 * (app.close() rejects) if any did not conform. Call before app.ready().
 */
export function watchConformance(app: FastifyInstance, conformance: OpenApiConformance = shared): void {
  const violations: string[] = [];
  app.addHook('onSend', async (request, reply, payload) => {
    if (typeof payload !== 'string' && !Buffer.isBuffer(payload)) return; // no stream is sent under /api/v1
    const exchange = {
      method: request.method,
      url: request.url,
      requestHeaders: request.headers,
      requestBody: request.body,
      status: reply.statusCode,
      responseHeaders: reply.getHeaders(),
      responseBody: payload.toString(),
    };
    try {
      violations.push(...conformance.check(exchange));
    } catch (err) {
      violations.push(`${request.method} ${request.url}: the check itself failed: ${(err as Error).message}`);
    }
  });
  app.addHook('onClose', async () => {
    if (violations.length > 0) {
      throw new Error(`${violations.length} exchange(s) do not conform to the OpenAPI document:\n${[...new Set(violations)].join('\n')}`);
    }
  });
}
