// Saving the config file that holds a secret key: never through a file or symlink planted at a
// name the temporary file could have, and in a directory only its user can read.
import { lstat, mkdir, mkdtemp, readFile, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig, saveConfig } from './config.ts';

describe('saveConfig', () => {
  it('does not write through a symlink planted where its temporary file used to go', async () => {
    const shared = await mkdtemp(join(tmpdir(), 'mcs-shared-'));
    const path = join(shared, 'config.json');
    const victim = join(shared, 'victim');
    await writeFile(victim, 'untouched');
    // The name the temporary file had before (path.pid.tmp), planted by another user.
    await symlink(victim, `${path}.${process.pid}.tmp`);
    await saveConfig({ api_key: 'sk_test_xxxxxxxxxxxxxxxxxxxx' }, path);
    expect(await readFile(victim, 'utf8')).toBe('untouched');
    expect(await readlink(`${path}.${process.pid}.tmp`)).toBe(victim);
    expect(await loadConfig(path)).toEqual({ api_key: 'sk_test_xxxxxxxxxxxxxxxxxxxx' });
    expect((await lstat(path)).isFile()).toBe(true);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it('makes an existing mcs directory of the user 0700', async () => {
    const home = await mkdtemp(join(tmpdir(), 'mcs-home-'));
    const dir = join(home, 'mcs');
    await mkdir(dir, { mode: 0o755 });
    await saveConfig({ base_url: 'http://127.0.0.1:8080' }, join(dir, 'config.json'));
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
  });
});
