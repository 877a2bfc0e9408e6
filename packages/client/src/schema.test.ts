// The committed types are what openapi-typescript makes of the document the gateway serves now:
// a change to the API without `pnpm --filter @mcs/client generate` fails here.
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { currentDocument, schemaSource } from '../scripts/generate.ts';

it('src/generated/schema.ts is up to date with the OpenAPI document', async () => {
  const committed = readFileSync(new URL('./generated/schema.ts', import.meta.url), 'utf8');
  expect(
    committed === (await schemaSource(currentDocument())),
    'run `pnpm --filter @mcs/client generate`',
  ).toBe(true);
});
