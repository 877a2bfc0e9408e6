// Structured logs (pino): JSON lines on stdout, readable lines when stdout is a terminal
// (kit/log-format). Inside a traced request every line carries its trace_id and span_id
// (kit/tracing); request, event and delivery ids are logged as `requestId`, `eventId`,
// `deliveryId`. Credentials never reach a log line, whatever a caller passes in.
import { pino } from 'pino';
import { formatLogLine } from './log-format.ts';
import { activeTraceFields, tracing } from './tracing.ts';

export type Logger = pino.Logger;

export function createLogger(
  name: string,
  level: string = process.env.LOG_LEVEL ?? 'info',
  /** Where the JSON lines go (tests); default stdout, readable when it is a terminal. */
  destination?: pino.DestinationStream,
): Logger {
  const options: pino.LoggerOptions = {
    name,
    level,
    base: { svc: name },
    // Off unless tracing is configured: then the active span's ids (a lookup, no I/O). A new
    // object each time: pino merges the line's fields into what the mixin returns, so a shared
    // one would carry every earlier line's fields (request ids, paths) into the lines after it.
    mixin: () => (tracing.enabled ? activeTraceFields() : {}),
    redact: {
      paths: [
        'authorization',
        '*.authorization',
        '*.headers.authorization',
        'headers.authorization',
        'headers.cookie',
        '*.headers.cookie',
        'secret',
        '*.secret',
        'key',
        '*.key',
        'password',
        '*.password',
      ],
      censor: '[redacted]',
    },
  };
  if (destination) return pino(options, destination);
  if (process.stdout.isTTY && process.env.LOG_FORMAT !== 'json') {
    return pino(options, {
      write(line: string) {
        process.stdout.write(`${formatLogLine(line.trimEnd())}\n`);
      },
    });
  }
  return pino(options);
}
