import { baseEnvSchema, parseEnv } from '@mcs/kit/config';
import { z } from 'zod';

const schema = baseEnvSchema.extend({
  /** Base of every error's doc_url; default http://HOST:PORT/docs. */
  DOCS_URL: z.string().url().optional(),
  /** How long the gateway trusts a verified API key before asking the accounts service again. */
  AUTH_CACHE_TTL: z.coerce.number().int().min(0).default(60_000),
});

export function loadEnv(source: NodeJS.ProcessEnv = process.env) {
  const env = parseEnv(schema, source);
  return { ...env, docsUrl: (env.DOCS_URL ?? `http://${env.HOST}:${env.PORT}/docs`).replace(/\/$/, '') };
}
export type Env = ReturnType<typeof loadEnv>;
