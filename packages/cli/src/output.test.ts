import { describe, expect, it } from 'vitest';
import { table, terminalSafe, withProgress } from './output.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('withProgress', () => {
  it('shows a spinner on a terminal once the work takes longer than the threshold, then erases it', async () => {
    const written: string[] = [];
    const tty = { isTTY: true, write: (t: string) => written.push(t) };
    expect(await withProgress('Fetching', () => sleep(400).then(() => 42), tty, 100)).toBe(42);
    expect(written.length).toBeGreaterThan(1);
    expect(written[0]).toMatch(/^\r. Fetching \(0 s\)/);
    expect(written.at(-1)).toBe('\r\x1b[K');
  });

  it('stays silent for quick work and on a pipe', async () => {
    const written: string[] = [];
    await withProgress('Quick', () => sleep(10), { isTTY: true, write: (t: string) => written.push(t) }, 200);
    await withProgress(
      'Piped',
      () => sleep(300),
      { isTTY: false, write: (t: string) => written.push(t) },
      100,
    );
    expect(written).toEqual([]);
  });

  it('erases the spinner when the work fails too', async () => {
    const written: string[] = [];
    const tty = { isTTY: true, write: (t: string) => written.push(t) };
    await expect(
      withProgress('Failing', () => sleep(300).then(() => Promise.reject(new Error('no'))), tty, 50),
    ).rejects.toThrow('no');
    expect(written.at(-1)).toBe('\r\x1b[K');
  });
});

describe('table', () => {
  it('pads columns to the widest cell and marks empty cells', () => {
    expect(
      table(
        ['id', 'status'],
        [
          ['we_1', 'enabled'],
          ['we_22', null],
        ],
      ),
    ).toBe('ID     STATUS\nwe_1   enabled\nwe_22  -\n');
    expect(table(['id'], [])).toBe('(none)\n');
  });
});

describe('terminalSafe', () => {
  it('writes out every control character a terminal acts on, keeping tab and newline', () => {
    expect(terminalSafe('a\u001b]0;title\u0007b\u001b[2K\rc\u009bd\u007fe\u202ef\tg\n')).toBe(
      'a\\u001b]0;title\\u0007b\\u001b[2K\\u000dc\\u009bd\\u007fe\\u202ef\tg\n',
    );
  });

  it('leaves JSON valid and equal', () => {
    const value = { text: 'x\u0085y\u007f\\\u009b' };
    expect(JSON.parse(terminalSafe(JSON.stringify(value)))).toEqual(value);
  });
});
