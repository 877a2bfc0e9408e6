// mcs listen: deliveries to a server on this machine, without a public URL. A listen endpoint
// (url "mcs-listen:", test mode) gets the account's events like any endpoint; the gateway
// streams each attempt to this process (GET /v1/webhooks/{id}/listen), which POSTs the exact
// body to --forward-to, signed again with a session secret printed at start, and reports the
// local server's answer back (POST …/listen/ack), so the delivery's record is what really
// happened. Ctrl-C removes the endpoint. Design: packages/kit/src/listen.ts, gateway README.
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { EVENT_TYPES } from '@mcs/kit/event-types';
import { LISTEN_URL, type ListenFrame } from '@mcs/kit/listen';
import type { Api, Json } from '../api.ts';
import { ApiError } from '../api.ts';
import { CliError, type Parsed, required, str, usageError } from '../args.ts';
import type { Command, Ctx } from '../context.ts';
import { when } from '../output.ts';

const FORWARD_TIMEOUT_MS = 10_000;
const EXCERPT_KEEP = 2048;
const PARENT_CHECK_MS = 1_000;
/**
 * Intervals of the stream's ping (its ready line says how long one is) without a line before the
 * connection is taken for dead: one that died without a word (a laptop's sleep, a new network)
 * would otherwise stay open and silent for good.
 */
const SILENT_PINGS = 3;
const DEFAULT_PING_INTERVAL_MS = 15_000;

/**
 * `order.created,payment.*` → the endpoint's event list (patterns expanded, sorted). A pattern
 * expands against every type the API accepts, so `webhook_endpoint.*` names the operational ones;
 * `*` alone stays `*`, which the API reads as the resource types only (CONTRACT).
 */
export function expandEvents(text: string | undefined): string[] {
  if (text === undefined || text.trim() === '' || text.trim() === '*') return ['*'];
  const out = new Set<string>();
  for (const raw of text.split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    if (item === '*') return ['*'];
    if (item.endsWith('.*')) {
      const prefix = item.slice(0, -1);
      const hits = EVENT_TYPES.filter((t) => t.startsWith(prefix));
      if (hits.length === 0)
        throw new CliError(`--events: "${item}" matches no event type (${EVENT_TYPES.join(', ')})`);
      for (const h of hits) out.add(h);
    } else out.add(item); // the API checks the name
  }
  return [...out].sort();
}

/** The signatures the service puts on deliveries (CONTRACT §4), made with the session's secret. */
export function signatureHeaders(
  secret: string,
  eventId: string,
  body: string,
  now = Date.now(),
): Record<string, string> {
  const timestamp = Math.floor(now / 1000);
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const standard = createHmac('sha256', key)
    .update(`${eventId}.${timestamp}.${body}`, 'utf8')
    .digest('base64');
  return {
    'x-service-signature': createHmac('sha256', secret).update(body, 'utf8').digest('hex'),
    'webhook-id': eventId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': `v1,${standard}`,
  };
}

interface Forwarded {
  status_code: number | null;
  error: string | null;
  latency_ms: number;
  response_excerpt: string | null;
}

/**
 * The start of an answer's body, as text: at most EXCERPT_KEEP characters, read from at most
 * that many UTF-8 bytes' worth of it; the rest is not read (the connection goes). A local server
 * that streams without end, or a huge file, costs neither memory nor the forward's deadline.
 */
async function excerptOf(res: Response): Promise<string> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < EXCERPT_KEEP * 4) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.length;
    }
  } catch {
    // Cut off (reset, timed out): the excerpt is what came.
  } finally {
    reader.cancel().catch(() => {});
  }
  return Buffer.concat(chunks)
    .subarray(0, EXCERPT_KEEP * 4)
    .toString('utf8')
    .slice(0, EXCERPT_KEEP);
}

/** Forwards one delivery to the local server; what it answered, for the attempt log. */
export async function forward(
  url: string,
  body: string,
  headers: Record<string, string>,
): Promise<Forwarded> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  try {
    const res = await fetch(url, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'user-agent': 'mcs-listen/1', ...headers },
      redirect: 'manual',
      signal: AbortSignal.timeout(FORWARD_TIMEOUT_MS),
    });
    const excerpt = await excerptOf(res);
    return { status_code: res.status, error: null, latency_ms: ms(), response_excerpt: excerpt };
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; errors?: Array<{ code?: string }> } };
    const why =
      e.name === 'TimeoutError'
        ? `timed out after ${FORWARD_TIMEOUT_MS} ms`
        : (e.cause?.code ?? e.cause?.errors?.[0]?.code ?? e.message);
    return { status_code: null, error: `${url}: ${why}`, latency_ms: ms(), response_excerpt: null };
  }
}

/**
 * The listen endpoint to use: one left with the same events (a session that died), or a new one
 * (`fresh`: always, when the one it would reuse turned out to be another live session's).
 */
async function endpointFor(
  api: Api,
  events: string[],
  forwardTo: string,
  fresh = false,
): Promise<{ endpoint: Json; reused: boolean }> {
  const list = fresh ? { data: [] } : await api.get('/v1/webhooks', { limit: 100 });
  const same = (list.data as Json[]).find(
    (e) => e.url === LISTEN_URL && JSON.stringify([...e.events].sort()) === JSON.stringify(events),
  );
  if (same) {
    const endpoint = same.status === 'enabled' ? same : await api.post(`/v1/webhooks/${same.id}/enable`);
    return { endpoint, reused: true };
  }
  const endpoint = await api.post('/v1/webhooks', {
    url: LISTEN_URL,
    events,
    description: `mcs listen → ${forwardTo}`.slice(0, 500),
    // A local server answering 410 is a failed attempt like any other, not the end of the session.
    disable_on_gone: false,
  });
  return { endpoint, reused: false };
}

/**
 * The longest line of the stream kept while waiting for its end: far above any delivery (an
 * event's body is a few KiB, the API takes requests of 1 MiB), so only a broken or hostile
 * server reaches it, which would otherwise have this process buffer without end.
 */
export const MAX_LINE = 16 * 1024 * 1024;

export async function* lines(body: ReadableStream<Uint8Array>, max = MAX_LINE): AsyncGenerator<string> {
  let buffered = '';
  for await (const chunk of body.pipeThrough(new TextDecoderStream())) {
    buffered += chunk;
    let nl = buffered.indexOf('\n');
    while (nl >= 0) {
      yield buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      nl = buffered.indexOf('\n');
    }
    if (buffered.length > max) {
      throw new Error(`the stream sent a line longer than ${Math.round(max / 1024 / 1024)} MiB`);
    }
  }
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });

/**
 * What ends a session, all as Ctrl-C does (the endpoint is deleted): SIGINT, SIGTERM, SIGHUP (its
 * terminal closed), and the loss of its parent. Under `pnpm mcs`, `pnpm exec mcs` and
 * node_modules/.bin/mcs, the npm `node` package's shim (node_modules/.bin/node) runs the real node
 * as its child, without exec and without passing signals on: a signal to the launcher ends pnpm
 * and the shim and would leave this process forwarding, with its endpoint. Linux gives an orphan
 * a new parent, so a process.ppid other than the one at start, looked at each second, is a stop.
 * So is a new parent of any of its ancestors: under `pnpm mcs` the shim's sh outlives pnpm, and
 * only the shim is re-parented when pnpm is signalled; where pnpm itself runs through a shim
 * (node_modules/.bin first on the PATH), the signalled sh is one level further up. (Not the end
 * of its process group's leader: a group may rightly outlive its leader.)
 * Once stopping, a further SIGINT or SIGHUP (a second Ctrl-C, the terminal closing meanwhile) is
 * ignored until the endpoint is deleted; a second SIGTERM still ends the process at once.
 * Returns what removes the handlers.
 */
function stopOn(stop: AbortController): () => void {
  const parent = process.ppid;
  const onSignal = () => stop.abort();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const s of signals) process.on(s, onSignal);
  stop.signal.addEventListener('abort', () => process.off('SIGTERM', onSignal), { once: true });
  const chain = ancestry(parent);
  const orphaned = setInterval(() => {
    if (process.ppid !== parent || chain.some(([pid, ppid]) => parentOf(pid) !== ppid)) stop.abort();
  }, PARENT_CHECK_MS);
  orphaned.unref(); // a check, never what keeps the process running
  return () => {
    clearInterval(orphaned);
    // Stopping, the process is about to exit: a late SIGINT or SIGHUP (a second Ctrl-C right
    // after the clean-up) must not end it by the default action, with a status other than 0.
    if (stop.signal.aborted) return;
    for (const s of signals) process.off(s, onSignal);
  };
}

/** [pid, its parent] from `pid` up to init (at most 16 levels; empty where /proc is not). */
function ancestry(pid: number): Array<[number, number]> {
  const chain: Array<[number, number]> = [];
  for (let p = pid; p > 1 && chain.length < 16; ) {
    const ppid = parentOf(p);
    if (ppid === undefined) break;
    chain.push([p, ppid]);
    p = ppid;
  }
  return chain;
}

/** The parent of process `pid` (Linux /proc), or undefined when that cannot be read. */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // After the command's ")" (which may hold spaces): the state, then the parent's pid.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  } catch {
    return undefined;
  }
}

async function listen(ctx: Ctx, p: Parsed, spec: Command): Promise<number> {
  const forwardTo = required(p, 'forward-to', spec);
  try {
    const u = new URL(forwardTo);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
  } catch {
    throw usageError(`--forward-to must be an http(s) URL, not "${forwardTo}"`, spec);
  }
  const events = expandEvents(str(p, 'events'));
  const secret = str(p, 'secret') ?? `whsec_${randomBytes(24).toString('base64')}`;
  if (!/^whsec_[A-Za-z0-9+/]{32,}={0,2}$/.test(secret)) {
    throw usageError('--secret must be whsec_ followed by the base64 of at least 24 bytes', spec);
  }
  // Connections of its own: when the stream's connection turns out dead, so may the others be.
  const api = (await ctx.api()).withOwnConnections();
  if (api.livemode) throw new CliError('mcs listen runs in test mode only: use a sk_test_ key');
  let { endpoint, reused } = await ctx.progress('Preparing a listen endpoint', () =>
    endpointFor(api, events, forwardTo),
  );
  let id = endpoint.id as string;
  let path = `/v1/webhooks/${encodeURIComponent(id)}/listen`;

  const stop = new AbortController();
  const inFlight = new Set<Promise<void>>();
  const unwatch = stopOn(stop);

  const handle = async (frame: Extract<ListenFrame, { type: 'delivery' }>) => {
    let type = '?';
    try {
      type = (JSON.parse(frame.body) as { type?: string }).type ?? '?';
    } catch {}
    const result = await forward(forwardTo, frame.body, signatureHeaders(secret, frame.event, frame.body));
    const at = when(new Date().toISOString());
    ctx.print(
      {
        type: 'forwarded',
        event: frame.event,
        event_type: type,
        delivery: frame.delivery,
        attempt: frame.attempt,
        ...result,
      },
      () =>
        `${at}  ${type}  ${frame.event}  → ${result.status_code !== null ? `[${result.status_code}]` : `[error: ${result.error}]`} POST ${forwardTo} (${result.latency_ms} ms)\n`,
    );
    try {
      await api.post(`${path}/ack`, { ack: frame.ack, ...result });
    } catch (err) {
      const why = err instanceof ApiError ? err.describe() : (err as Error).message;
      ctx.err(`could not report the result of ${frame.event} (${frame.delivery}): ${why}\n`);
      return;
    }
    // The service records the failure after the ack is answered: look a moment later.
    const ok = result.status_code !== null && result.status_code >= 200 && result.status_code < 300;
    if (!ok) setTimeout(() => void keepEnabled(), 1_000).unref();
  };

  /**
   * A failure recorded by an ack can end the endpoint's deliveries (its last retry failed: it
   * turns unhealthy; or, made before disable_on_gone, a 410 disabled it). The session would then
   * stay open and silent: it re-enables its endpoint and says so. Checked a second after each
   * failure and at each ping (15 s).
   */
  let enabling: Promise<void> | undefined;
  const keepEnabled = () =>
    (enabling ??= (async () => {
      if (stop.signal.aborted) return; // stopping: the endpoint is about to go
      try {
        const now = await api.get(`/v1/webhooks/${encodeURIComponent(id)}`);
        if (now.status === 'enabled') return;
        await api.post(`/v1/webhooks/${encodeURIComponent(id)}/enable`);
        ctx.print(
          { type: 're-enabled', endpoint: id, was: now.status, reason: now.disabled_reason ?? null },
          () =>
            `Endpoint ${id} was ${now.status} after the local server's failures (the deliveries it skipped are not sent again); re-enabled.\n`,
        );
      } catch (err) {
        const why = err instanceof ApiError ? err.describe() : (err as Error).message;
        ctx.err(`could not check or re-enable endpoint ${id}: ${why}\n`);
      }
    })().finally(() => {
      enabling = undefined;
    }));

  let announced = false;
  let failures = 0;
  // This run's token: reconnecting with it takes the endpoint over from a stream of ours that the
  // API still holds open (one that died without a word), where another session's is refused.
  const session = randomBytes(18).toString('base64url');
  let pingIntervalMs = DEFAULT_PING_INTERVAL_MS;
  while (!stop.signal.aborted) {
    const connection = new AbortController();
    const onStop = () => connection.abort(stop.signal.reason);
    stop.signal.addEventListener('abort', onStop, { once: true });
    let silence: NodeJS.Timeout | undefined;
    const heard = () => {
      clearTimeout(silence);
      const limit = SILENT_PINGS * pingIntervalMs;
      silence = setTimeout(() => {
        connection.abort(new Error(`no word from the API for ${Math.round(limit / 1000)} s`));
        // The connections beside it went the same way, most likely (a laptop's sleep, a new
        // network): an ack or a check on one would wait out its time-out. New ones.
        api.reset();
      }, limit);
      silence.unref();
    };
    try {
      heard();
      const res = await api.open(path, {
        signal: connection.signal,
        headers: { 'mcs-listen-session': session },
      });
      if (!res.body) throw new Error('the stream has no body');
      for await (const line of lines(res.body)) {
        heard();
        if (line.trim() === '') continue;
        const frame = JSON.parse(line) as ListenFrame;
        if (frame.type === 'ready') {
          failures = 0;
          if (Number.isInteger(frame.ping_interval_ms) && frame.ping_interval_ms >= 1_000) {
            pingIntervalMs = frame.ping_interval_ms;
            heard();
          }
          if (!announced) {
            announced = true;
            ctx.print(
              { type: 'ready', endpoint: id, reused, events, forward_to: forwardTo, secret },
              () =>
                `Ready: forwarding ${events.join(', ')} to ${forwardTo}\n` +
                `Endpoint ${id} (${reused ? 'reused' : 'new'}, test mode); Ctrl-C stops and removes it.\n` +
                `Session signing secret: ${secret}\n`,
            );
          } else ctx.err('reconnected\n');
        } else if (frame.type === 'ping') {
          void keepEnabled();
        } else if (frame.type === 'delivery') {
          const job = handle(frame).finally(() => inFlight.delete(job));
          inFlight.add(job);
        }
      }
      if (!stop.signal.aborted) ctx.err('the API closed the stream; reconnecting\n');
    } catch (caught) {
      if (stop.signal.aborted) break;
      // Given up for silence: the abort's reason says so, not fetch's AbortError.
      const err = connection.signal.aborted ? connection.signal.reason : caught;
      if (err instanceof ApiError && err.code === 'listen_endpoint_in_use' && !announced && reused) {
        // The endpoint left with these events is another live session's, not a dead one's.
        ({ endpoint, reused } = await endpointFor(api, events, forwardTo, true));
        id = endpoint.id as string;
        path = `/v1/webhooks/${encodeURIComponent(id)}/listen`;
        continue;
      }
      if (err instanceof ApiError && (err.status === 404 || err.status === 401 || err.status === 400)) {
        unwatch();
        throw err; // the endpoint is gone or the key no longer works: nothing to wait for
      }
      ctx.err(
        `connection to ${api.baseUrl} lost (${err instanceof ApiError ? err.describe() : (err as Error).message}); reconnecting\n`,
      );
    } finally {
      clearTimeout(silence);
      stop.signal.removeEventListener('abort', onStop);
    }
    failures++;
    await sleep(Math.min(500 * 2 ** Math.min(failures, 4), 8_000), stop.signal);
  }

  await Promise.allSettled([...inFlight]);
  let removed = false;
  try {
    await api.del(`/v1/webhooks/${encodeURIComponent(id)}`);
    removed = true;
  } catch (err) {
    ctx.err(`could not remove ${id}: ${err instanceof ApiError ? err.describe() : (err as Error).message}\n`);
  }
  ctx.print({ type: 'stopped', endpoint: id, removed }, () =>
    removed ? `Stopped; removed endpoint ${id}.\n` : 'Stopped.\n',
  );
  unwatch();
  return removed ? 0 : 1;
}

const listenCommand: Command = {
  name: 'listen',
  usage: 'mcs listen --forward-to URL [--events TYPE,TYPE.*,…] [--secret whsec_…]',
  summary:
    "Forwards the account's test-mode events to a server on this machine (no public URL needed),\n" +
    'printing each with the status your server answered.',
  options: {
    'forward-to': {
      type: 'string',
      description: 'URL: where to POST each event, e.g. http://localhost:3000/hooks',
    },
    events: {
      type: 'string',
      description:
        'TYPES: event types, comma separated; `payment.*` for a family (default: *, the resource events)',
    },
    secret: {
      type: 'string',
      description: 'SECRET: sign with this whsec_… secret (default: a new one each session)',
    },
  },
  api: true,
  details:
    'Creates a listen endpoint (url "mcs-listen:", test mode) or reuses one left with the same events,\n' +
    'streams its deliveries, POSTs each body unchanged to --forward-to with X-Service-Signature and the\n' +
    "Standard Webhooks headers made with the session secret printed at start, and reports your server's\n" +
    'answer back, so `mcs webhooks deliveries` shows it. Ctrl-C (SIGINT), SIGTERM, SIGHUP or the end of\n' +
    'its parent process (pnpm, a shell) removes the endpoint.\n' +
    'With --json: one JSON object per line (ready, forwarded…, stopped).',
  run(ctx, p) {
    return listen(ctx, p, this);
  },
};

export const LISTEN_COMMANDS: Command[] = [listenCommand];
