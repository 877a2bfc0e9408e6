// What commands print: tables for people, JSON for scripts, and a progress indicator on a
// terminal's stderr for anything that takes longer than a second (never on a pipe, so scripts
// and tests read clean output).

/** Columns padded to their widest cell; the header in capitals. */
export function table(headers: string[], rows: Array<Array<string | number | null | undefined>>): string {
  if (rows.length === 0) return '(none)\n';
  const cells = rows.map((r) => r.map((c) => (c === null || c === undefined || c === '' ? '-' : String(c))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return `${[line(headers.map((h) => h.toUpperCase())), ...cells.map(line)].join('\n')}\n`;
}

/** `key  value` lines, aligned. */
export function fields(pairs: Array<[string, string | number | boolean | null | undefined]>): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return `${pairs
    .map(([k, v]) => `${k.padEnd(width)}  ${v === null || v === undefined || v === '' ? '-' : String(v)}`)
    .join('\n')}\n`;
}

/** An ISO 8601 timestamp as `2026-11-23 16:45:01Z`. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '-';
  return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export interface ProgressStream {
  isTTY?: boolean;
  write(text: string): unknown;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/**
 * Runs `work`; if it takes longer than `afterMs` and `stream` is a terminal, shows a spinner
 * with `label` until it ends, then erases it.
 */
export async function withProgress<T>(
  label: string,
  work: () => Promise<T>,
  stream: ProgressStream = process.stderr,
  afterMs = 1_000,
): Promise<T> {
  if (!stream.isTTY) return work();
  let frame = 0;
  let spinner: NodeJS.Timeout | undefined;
  const started = Date.now();
  const show = setTimeout(() => {
    const draw = () => {
      const secs = Math.floor((Date.now() - started) / 1000);
      stream.write(`\r${FRAMES[frame++ % FRAMES.length]} ${label} (${secs} s)\x1b[K`);
    };
    draw();
    spinner = setInterval(draw, 100);
  }, afterMs);
  try {
    return await work();
  } finally {
    clearTimeout(show);
    if (spinner) {
      clearInterval(spinner);
      stream.write('\r\x1b[K');
    }
  }
}
