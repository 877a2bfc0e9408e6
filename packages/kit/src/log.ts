import { pino } from 'pino';

export type Logger = pino.Logger;

/** JSON logs on stdout. Credentials never reach a log line, whatever a caller passes in. */
export function createLogger(name: string, level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    name,
    level,
    base: { svc: name },
    redact: {
      paths: [
        'authorization',
        '*.authorization',
        '*.headers.authorization',
        'headers.authorization',
        'secret',
        '*.secret',
        'key',
        '*.key',
        'password',
        '*.password',
      ],
      censor: '[redacted]',
    },
  });
}
