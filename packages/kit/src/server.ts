// A service process: a Connect server over HTTP/2 cleartext (speaking Connect, gRPC and
// gRPC-Web, so stock gRPC clients work), and an orderly stop on SIGTERM/SIGINT.
import http2 from 'node:http2';
import type { ConnectRouter, Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { Logger } from './log.ts';

export interface ServerHandle {
  port: number;
  close(): Promise<void>;
}

export async function startConnectServer(opts: {
  routes: (router: ConnectRouter) => void;
  port: number;
  host?: string;
  interceptors?: Interceptor[];
}): Promise<ServerHandle> {
  const handler = connectNodeAdapter({ routes: opts.routes, interceptors: opts.interceptors ?? [] });
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // SERVICE_HOST lets containers bind every interface; locally services stay on loopback.
    server.listen(opts.port, opts.host ?? process.env.SERVICE_HOST ?? '127.0.0.1', () => resolve());
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address ? address.port : opts.port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Let in-flight calls finish, then end idle sessions so close() can complete.
        for (const s of sessions) s.close();
      }),
  };
}

/**
 * Runs `start`, then waits for SIGTERM or SIGINT and calls the stop function it returned
 * (which stops the parts in reverse order of start). A second signal exits at once.
 */
export async function runProcess(log: Logger, start: () => Promise<() => Promise<void>>): Promise<void> {
  let stop: () => Promise<void>;
  try {
    stop = await start();
  } catch (err) {
    log.fatal({ err }, 'failed to start');
    process.exit(1);
  }
  let stopping = false;
  const onSignal = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info({ signal }, 'stopping');
    const force = setTimeout(() => process.exit(1), 15_000);
    force.unref();
    stop().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}

/** Logs every failure that is not a deliberate ConnectError; Connect masks those as internal. */
export function errorLogger(log: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (!(err instanceof Error && err.name === 'ConnectError')) {
        log.error({ err, rpc: req.method.name, requestId: req.header.get('request-id') }, 'unexpected error');
      }
      throw err;
    }
  };
}
