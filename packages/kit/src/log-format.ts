// Readable log lines for a terminal: a pino JSON line becomes `12:34:56.789 INFO  message
// key=value …`. Used by kit/log when stdout is a TTY and by `pnpm start` for its children's
// lines when its own stdout is one; everything else (files, pipes, log collectors) gets the JSON.

const LEVELS: Record<number, [string, string]> = {
  10: ['TRACE', '\x1b[90m'],
  20: ['DEBUG', '\x1b[36m'],
  30: ['INFO ', '\x1b[32m'],
  40: ['WARN ', '\x1b[33m'],
  50: ['ERROR', '\x1b[31m'],
  60: ['FATAL', '\x1b[35m'],
};
const DIM = '\x1b[2m';
const RESET = '\x1b[0m';
/** Fields shown elsewhere in the line, or noise on a terminal. */
const SKIP = new Set(['level', 'time', 'msg', 'svc', 'name', 'pid', 'hostname']);

function show(value: unknown): string {
  if (typeof value === 'string') return /[\s"=]/.test(value) ? JSON.stringify(value) : value;
  return JSON.stringify(value);
}

/** A pino JSON line as readable text; a line that is not one comes back unchanged. */
export function formatLogLine(line: string, color = true): string {
  if (!line.startsWith('{')) return line;
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  if (typeof rec.level !== 'number' || typeof rec.time !== 'number') return line;
  const [name, tint] = LEVELS[rec.level] ?? [String(rec.level), ''];
  const time = new Date(rec.time).toISOString().slice(11, 23);
  const parts: string[] = [];
  let stack = '';
  for (const [k, v] of Object.entries(rec)) {
    if (SKIP.has(k) || v === undefined) continue;
    if (k === 'err' && v && typeof v === 'object') {
      const e = v as { message?: string; stack?: string };
      parts.push(`err=${show(e.message ?? '')}`);
      if (e.stack && rec.level >= 50) stack = `\n${e.stack}`;
      continue;
    }
    parts.push(`${k}=${show(v)}`);
  }
  const fields = parts.length > 0 ? ` ${color ? DIM : ''}${parts.join(' ')}${color ? RESET : ''}` : '';
  const level = color ? `${tint}${name}${RESET}` : name;
  return `${time} ${level} ${String(rec.msg ?? '')}${fields}${stack}`;
}
