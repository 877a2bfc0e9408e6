// The REST route table, derived from the (mcs.api.v1.http) option of every RPC in the proto
// registry: adding an RPC with the option adds its route, with no code here.
import { type DescMethod, type DescService, getOption, hasOption } from '@bufbuild/protobuf';
import { SERVICES, type ServiceName } from '@mcs/kit/config';
import { api, registry } from '@mcs/proto';

export interface Route {
  httpMethod: string;
  /** The path template, e.g. `/v1/orders/{id}`. */
  path: string;
  segments: Array<{ literal: string } | { param: string }>;
  body: boolean;
  service: DescService;
  method: DescMethod;
  /** Which process serves it: the second segment of the proto package (`mcs.commerce.v1`). */
  owner: ServiceName;
  /** Writes need a secret key. */
  write: boolean;
  /** Simulations of the outside world: test-mode keys only. */
  testHelper: boolean;
  /**
   * Open to publishable keys, which end up in client-side code: the product catalog only. Orders
   * (customer phone numbers), payments, conversations, messages, events and webhook endpoints
   * need a secret key even to read.
   */
  publishable: boolean;
  /** An update: POST (or PATCH) to a resource's own path, `/v1/things/{id}`. */
  update: boolean;
}

const PUBLISHABLE = new Set(['GET /v1/products', 'GET /v1/products/{id}']);

function ownerOf(service: DescService): ServiceName {
  const name = service.file.proto.package.split('.')[1];
  const owner = SERVICES.find((s) => s === name);
  if (!owner)
    throw new Error(`${service.typeName}: no service process serves package ${service.file.proto.package}`);
  return owner;
}

export function buildRoutes(): Route[] {
  const routes: Route[] = [];
  for (const desc of registry) {
    if (desc.kind !== 'service') continue;
    for (const method of desc.methods) {
      if (!hasOption(method, api.http)) continue;
      const rule = getOption(method, api.http);
      const httpMethod = rule.method.toUpperCase();
      routes.push({
        httpMethod,
        path: rule.path,
        segments: rule.path
          .split('/')
          .filter(Boolean)
          .map((s) => (s.startsWith('{') && s.endsWith('}') ? { param: s.slice(1, -1) } : { literal: s })),
        body: rule.body === '*',
        service: desc,
        method,
        owner: ownerOf(desc),
        write: httpMethod !== 'GET',
        testHelper: rule.path.startsWith('/v1/test_helpers/'),
        publishable: PUBLISHABLE.has(`${httpMethod} ${rule.path}`),
        update: httpMethod === 'POST' && rule.path.endsWith('}'),
      });
    }
  }
  return routes;
}

export type Match =
  | { kind: 'route'; route: Route; params: Record<string, string> }
  /** `browser`: the methods of the path publishable keys may call, which browsers may reach (CORS). */
  | { kind: 'method_not_allowed'; allow: string[]; browser: string[] }
  | { kind: 'not_found' };

/** Finds the route for a method and path; literal segments win over parameters. */
export function createMatcher(routes: Route[]): (httpMethod: string, path: string) => Match {
  // Paths without parameters (`/v1/orders`), answered without splitting: the general search
  // below allocated 1.8 KB per request, for the most frequent calls (creates and lists).
  const literal = new Map<string, Map<string, Match>>();
  const general = (httpMethod: string, path: string) => search(routes, httpMethod, path);
  for (const route of routes) {
    if (!route.segments.every((seg) => 'literal' in seg)) continue;
    const path = route.path;
    const byMethod = literal.get(path) ?? new Map<string, Match>();
    literal.set(path, byMethod);
    for (const method of ['GET', 'HEAD', 'POST', 'PATCH', 'PUT', 'DELETE', 'OPTIONS']) {
      const m = general(method, path);
      // Shared by every request of the path: nothing may change it.
      byMethod.set(method, m.kind === 'route' ? { ...m, params: Object.freeze({}) } : m);
    }
  }
  return (httpMethod, path) => literal.get(path)?.get(httpMethod) ?? general(httpMethod, path);
}

function search(routes: Route[], httpMethod: string, path: string): Match {
  const parts = path.split('/').filter(Boolean);
  let decoded: string[];
  try {
    decoded = parts.map((p) => decodeURIComponent(p));
  } catch {
    return { kind: 'not_found' };
  }
  const candidates: Array<{ route: Route; params: Record<string, string>; literals: number }> = [];
  for (const route of routes) {
    if (route.segments.length !== decoded.length) continue;
    const params: Record<string, string> = {};
    let literals = 0;
    let ok = true;
    for (let i = 0; i < decoded.length && ok; i++) {
      const seg = route.segments[i]!;
      if ('literal' in seg) {
        ok = seg.literal === decoded[i];
        literals++;
      } else params[seg.param] = decoded[i]!;
    }
    if (ok) candidates.push({ route, params, literals });
  }
  if (candidates.length === 0) return { kind: 'not_found' };
  const best = Math.max(...candidates.map((c) => c.literals));
  const top = candidates.filter((c) => c.literals === best);
  // Updates are POST in the route table; PATCH is accepted as its synonym.
  const wanted = httpMethod === 'PATCH' ? 'POST' : httpMethod === 'HEAD' ? 'GET' : httpMethod;
  const hit = top.find((c) => c.route.httpMethod === wanted && (httpMethod !== 'PATCH' || c.route.update));
  if (hit) return { kind: 'route', route: hit.route, params: hit.params };
  return {
    kind: 'method_not_allowed',
    allow: allowed(top.map((c) => c.route)),
    browser: allowed(top.filter((c) => c.route.publishable).map((c) => c.route)),
  };
}

/** The methods a path answers, as `Allow` names them: HEAD with GET, PATCH with an update. */
function allowed(routes: Route[]): string[] {
  const methods = new Set<string>();
  for (const route of routes) {
    methods.add(route.httpMethod);
    if (route.httpMethod === 'GET') methods.add('HEAD');
    if (route.update) methods.add('PATCH');
  }
  return ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'].filter((m) => methods.has(m));
}
