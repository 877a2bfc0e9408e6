// `pnpm --filter @mcs/client build` (and `pnpm pack`): types from the current OpenAPI document,
// then JavaScript + declarations in dist/ for Node ≥ 20. The sources import each other as `.ts`
// (Node runs them as they are in the workspace); tsc rewrites that in the JavaScript, and this
// rewrites it in the declarations, so consumers' TypeScript resolves them without special options.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = (cmd: string, args: string[], cwd = root) => execFileSync(cmd, args, { cwd, stdio: 'inherit' });

// The receiver library first: our declarations refer to its declarations.
run('pnpm', ['run', 'build'], join(root, '../webhook-verify'));
run(process.execPath, [join(root, 'scripts/generate.ts')]);
rmSync(join(root, 'dist'), { recursive: true, force: true });
run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json']);

function fixDeclarations(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) fixDeclarations(path);
    else if (entry.name.endsWith('.d.ts')) {
      const text = readFileSync(path, 'utf8');
      writeFileSync(path, text.replace(/(from\s+['"]\.{1,2}\/[^'"]+)\.ts(['"])/g, '$1.js$2'));
    }
  }
}
fixDeclarations(join(root, 'dist'));
