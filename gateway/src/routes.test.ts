import { describe, expect, it } from 'vitest';
import { buildRoutes, createMatcher } from './routes.ts';

const routes = buildRoutes();
const match = createMatcher(routes);

describe('routes from proto options', () => {
  it('derives every public RPC, owner process and write flag', () => {
    const create = routes.find((r) => r.path === '/v1/orders' && r.httpMethod === 'POST');
    expect(create).toMatchObject({ owner: 'commerce', write: true, body: true, testHelper: false });
    expect(routes.find((r) => r.path === '/v1/webhooks' && r.httpMethod === 'GET')?.owner).toBe('webhooks');
    // Internal services (accounts) have no REST routes.
    expect(routes.some((r) => r.owner === 'accounts')).toBe(false);
  });

  it('matches path parameters, prefers literal segments', () => {
    const m = match('GET', '/v1/orders/ord_123');
    expect(m.kind === 'route' && m.params).toEqual({ id: 'ord_123' });
    expect(match('GET', '/v1/orders').kind).toBe('route');
  });

  it('answers 405 with the allowed methods, and 404 for unknown paths', () => {
    expect(match('PUT', '/v1/orders')).toEqual({
      kind: 'method_not_allowed',
      allow: ['GET', 'HEAD', 'POST'],
      browser: [],
    });
    // Allow names every method the path answers: HEAD with GET, PATCH where POST updates.
    expect(match('PUT', '/v1/webhooks/we_1')).toEqual({
      kind: 'method_not_allowed',
      allow: ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE'],
      browser: [],
    });
    expect(match('GET', '/v1/orders/ord_1/cancel')).toEqual({
      kind: 'method_not_allowed',
      allow: ['POST'],
      browser: [],
    });
    // The catalog's paths are the ones a browser may call with a publishable key.
    expect(match('OPTIONS', '/v1/products/prod_1')).toMatchObject({
      kind: 'method_not_allowed',
      browser: ['GET', 'HEAD'],
    });
    expect(match('GET', '/v1/nothing')).toEqual({ kind: 'not_found' });
    expect(match('GET', '/v1/orders/a/b/c')).toEqual({ kind: 'not_found' });
    expect(match('GET', '/v1/orders/%E0%A4%A')).toEqual({ kind: 'not_found' });
  });

  it('accepts PATCH only where POST updates a resource', () => {
    expect(match('PATCH', '/v1/orders').kind).toBe('method_not_allowed');
    expect(match('HEAD', '/v1/orders').kind).toBe('route');
    const update = match('PATCH', '/v1/webhooks/we_1');
    expect(update.kind === 'route' && update.route.method.name).toBe('UpdateWebhookEndpoint');
    // An action under a resource is a POST, not an update.
    expect(match('PATCH', '/v1/orders/ord_1/cancel').kind).toBe('method_not_allowed');
  });
});
