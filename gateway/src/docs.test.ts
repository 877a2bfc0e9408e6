// The /docs pages render from the document of this build: every operation has its section on
// the reference page and every guide renders (the browser test, test/e2e/docs.test.ts, checks
// links and anchors against a running gateway).
import { describe, expect, it } from 'vitest';
import { renderDocs } from './docs.ts';
import { buildOpenApi } from './openapi.ts';
import { buildRoutes } from './routes.ts';

describe('/docs', () => {
  const doc = buildOpenApi(buildRoutes(), 'http://127.0.0.1:8080');
  const pages = renderDocs(doc);

  it('renders a section per operation of the document, with a curl command', () => {
    const reference = pages.get('/docs/reference')!;
    for (const ops of Object.values(doc.paths))
      for (const op of Object.values(ops)) {
        const at = reference.indexOf(`<section class="op" id="${op.operationId}">`);
        expect(at, op.operationId).toBeGreaterThan(0);
        expect(reference.slice(at, reference.indexOf('</section>', at))).toContain('curl ');
      }
  });

  it('renders every guide, with no proto names and no HTTPS claim for the API', () => {
    for (const path of [
      '/docs',
      '/docs/authentication',
      '/docs/errors',
      '/docs/webhooks',
      '/docs/test-mode',
    ]) {
      const html = pages.get(path);
      expect(html, path).toContain('<nav');
      expect(html, path).not.toMatch(/mcs\.(commerce|messaging|webhooks|events)\.v1/);
      expect(html, path).not.toMatch(/over HTTPS/i);
    }
  });
});
