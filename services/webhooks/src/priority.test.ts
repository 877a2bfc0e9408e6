import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const MODULE = fileURLToPath(new URL('./priority.ts', import.meta.url));
/** The child starts at the test process's niceness (a CI may run everything niced). */
const BASE = os.getPriority();

/**
 * Runs yieldCpu in a fresh Node process (niceness cannot be taken back without privilege, so not
 * in the test's own) and reads back the niceness of each of its threads from /proc.
 */
function inChild(script: string): { result: unknown; nices: number[] } {
  const code = `
    import { readdirSync, readFileSync } from 'node:fs';
    import { yieldCpu } from ${JSON.stringify(MODULE)};
    ${script}
    const nices = readdirSync('/proc/self/task').map((t) => {
      const stat = readFileSync('/proc/self/task/' + t + '/stat', 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
    });
    console.log(JSON.stringify({ result, nices }));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  return JSON.parse(out.trim().split('\n').at(-1)!);
}

describe.runIf(process.platform === 'linux')('yieldCpu (WEBHOOK_NICE)', () => {
  it('sets every thread of the process, and threads started later inherit it', () => {
    const { result, nices } = inChild(`
      const result = yieldCpu(7);
      // A thread started afterwards: libuv's pool, on the first file-system call.
      await import('node:fs/promises').then((fs) => fs.stat('/'));
    `);
    expect(nices.length).toBeGreaterThan(4);
    if (BASE < 7) expect((result as { threads: number }).threads).toBeGreaterThan(4);
    expect(new Set(nices)).toEqual(new Set([Math.max(BASE, 7)]));
  });

  it('0 leaves the process as it is', () => {
    const { result, nices } = inChild('const result = yieldCpu(0);');
    expect(result).toBeNull();
    expect(new Set(nices)).toEqual(new Set([BASE]));
  });

  it('never lowers a niceness that is already higher (that would need privilege)', () => {
    const { result, nices } = inChild(`
      yieldCpu(12);
      const result = yieldCpu(5);
    `);
    expect(result).toEqual({ threads: 0 });
    expect(new Set(nices)).toEqual(new Set([Math.max(BASE, 12)]));
  });
});
