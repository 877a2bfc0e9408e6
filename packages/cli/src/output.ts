// What commands print: tables for people, JSON for scripts, and a progress indicator on a
// terminal's stderr for anything that takes longer than a second (never on a pipe, so scripts
// and tests read clean output).

/**
 * Control characters that a terminal acts on: C0 (but tab and newline), DEL, C1, and the Unicode
 * bidirectional overrides and isolates (which reorder what is shown).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text for a terminal, with every control character a terminal would act on written out as a
 * JSON-style escape (`\u001b`). What the CLI prints comes largely from elsewhere — the API's
 * answers (an endpoint's description, an event's type, an error message echoing an id) and the
 * local server of `mcs listen` — and an escape sequence in it could otherwise set the window
 * title, rewrite earlier lines, hide text, or on some terminals write files or answer back.
 * In JSON output the characters that remain raw (DEL, C1) are inside strings, where the escape
 * means the same character, so the JSON stays valid and equal.
 */
export function terminalSafe(text: string): string {
  return text.replace(UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

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
