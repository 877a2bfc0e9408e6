// Retry-After pauses told to every webhooks replica. A pause commits in PostgreSQL and moves the
// endpoint's pending rows to its end, but another replica may hold a copy it read or claimed
// just before (waiting for a slot, or a claim under way): its engine holds such copies only once
// it knows of the pause (engine.ts `pauses`). Each replica publishes the pauses it records on a
// core NATS subject and notes the others' as they arrive, so the window shrinks from up to half a
// lease margin to the time a message takes on loopback. A lost message costs only that window
// (the claims still read the pause from the database).
import { randomBytes } from 'node:crypto';
import type { Logger } from '@mcs/kit/log';
import type { NatsConnection } from 'nats';

export interface PauseBus {
  announce(endpointId: string, until: Date): void;
  stop(): void;
}

export function sharePauses(opts: {
  nc: NatsConnection;
  prefix: string;
  log: Logger;
  onPaused: (endpointId: string, until: Date) => void;
}): PauseBus {
  const subject = `${opts.prefix}.webhooks.paused`;
  const self = randomBytes(8).toString('hex');
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const sub = opts.nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      try {
        const m = JSON.parse(decoder.decode(msg.data)) as {
          from?: unknown;
          endpoint?: unknown;
          until?: unknown;
        };
        if (m.from === self || typeof m.endpoint !== 'string' || typeof m.until !== 'number') return;
        opts.onPaused(m.endpoint, new Date(m.until));
      } catch (e) {
        opts.log.warn({ err: (e as Error).message }, 'unreadable pause message');
      }
    },
  });
  return {
    announce(endpointId, until) {
      try {
        opts.nc.publish(
          subject,
          encoder.encode(JSON.stringify({ from: self, endpoint: endpointId, until: until.getTime() })),
        );
      } catch (e) {
        opts.log.warn({ err: (e as Error).message }, 'could not announce a pause');
      }
    },
    stop() {
      sub.unsubscribe();
    },
  };
}
