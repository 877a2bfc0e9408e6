// Prints the OpenAPI document exactly as the gateway serves it at /v1/openapi.json (for linters
// and generators that want a file). Usage: node gateway/scripts/openapi.ts [server-url] > openapi.json
import { buildOpenApi } from '../src/openapi.ts';
import { buildRoutes } from '../src/routes.ts';

const serverUrl = process.argv[2] ?? 'http://127.0.0.1:8080';
process.stdout.write(`${JSON.stringify(buildOpenApi(buildRoutes(), serverUrl), null, 2)}\n`);
