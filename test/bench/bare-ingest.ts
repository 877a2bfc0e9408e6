// The "bare" ingest baseline (docs/performance.md): node:http + a pg pool of 32
// doing what POST /v1/orders does to the database in ONE statement: the idempotency row, the
// order and its outbox row, through data-modifying CTEs. No auth, no RPC hop, no framework: the
// physical limit of this box for the same writes, measured in the same run as the gateway.
//
// Run as its own process (test/bench/ingest.ts starts it):
//   DATABASE_URL=… PORT=… node test/bench/bare-ingest.ts
// It creates its scratch tables in schema bench_bare of that database (the benchmark's own test
// database, dropped with it) and prints one line `{"ready":PORT}` once it listens.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import pg from 'pg';

const url = process.env.DATABASE_URL;
const port = Number(process.env.PORT);
if (!url || !port) {
  process.stderr.write('bare-ingest: set DATABASE_URL and PORT\n');
  process.exit(2);
}

const POOL = Number(process.env.POOL ?? 32);
// Idle connections kept 30 s, as the services' pools keep theirs (kit/db): with pg's default of
// 10 s, a run after the bare server had waited through two project runs began by opening its 32
// connections again, and its p99 at a paced 900/s was 30-50 ms instead of 7-12.
const pool = new pg.Pool({ connectionString: url, max: POOL, idleTimeoutMillis: 30_000 });
pool.on('error', () => {});

// The same columns and indexes as <service>.idempotency_keys (kit/idempotency), commerce.orders
// and commerce.outbox (kit/outbox), so each write costs what it costs there.
await pool.query(`
  create schema if not exists bench_bare;
  create table if not exists bench_bare.idempotency_keys (
    account_id text not null, livemode boolean not null, key_hash text not null,
    fingerprint text not null, response bytea not null, created_at timestamptz not null,
    primary key (account_id, livemode, key_hash));
  create index if not exists bare_idem_created on bench_bare.idempotency_keys (created_at);
  create table if not exists bench_bare.orders (
    id text primary key, account_id text not null, livemode boolean not null, status text not null,
    customer_name text not null, customer_phone text not null, currency text not null,
    total bigint not null, items jsonb not null,
    created_at timestamptz not null, updated_at timestamptz not null);
  create index if not exists bare_orders_account on bench_bare.orders (account_id, livemode, id);
  create index if not exists bare_orders_status on bench_bare.orders (account_id, livemode, status, id);
  create table if not exists bench_bare.outbox (
    seq bigserial primary key, event_id text not null unique, type text not null,
    payload bytea not null, created_at timestamptz not null default now());
`);

// Open every pooled connection now, so a measurement right after start does not pay for them.
await Promise.all(Array.from({ length: POOL }, () => pool.query('select 1')));

const ORDER_COLUMNS = `id, account_id, livemode, status, customer_name, customer_phone, currency, total, items,
  created_at, updated_at`;

// With a key: store it with its answer, and only if it was new insert order + event.
const WITH_KEY = `
  with k as (
    insert into bench_bare.idempotency_keys (account_id, livemode, key_hash, fingerprint, response, created_at)
    values ($1, false, $2, $3, $5, $4)
    on conflict do nothing
    returning 1),
  o as (
    insert into bench_bare.orders (${ORDER_COLUMNS})
    select $6, $1, false, 'pending', $7, $8, $9, $10, $11::jsonb, $4, $4
     where exists (select 1 from k)
    returning id),
  e as (
    insert into bench_bare.outbox (event_id, type, payload)
    select $12, 'order.created', $13 from o
    returning seq)
  select (select count(*) from e)::int as created`;

const WITHOUT_KEY = `
  with o as (
    insert into bench_bare.orders (${ORDER_COLUMNS})
    values ($5, $1, false, 'pending', $6, $7, $8, $9, $10::jsonb, $2, $2)
    returning id),
  e as (
    insert into bench_bare.outbox (event_id, type, payload)
    select $3, 'order.created', $4 from o
    returning seq)
  select (select count(*) from e)::int as created`;

const ACCOUNT = 'acct_bare';
const newId = (prefix: string) => `${prefix}_${randomBytes(13).toString('hex')}`;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

interface Item {
  name: string;
  unit_amount: number;
  quantity: number;
}

function send(res: http.ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function handle(req: http.IncomingMessage, res: http.ServerResponse, raw: string): Promise<void> {
  let input: { customer?: { name?: string; phone?: string }; currency?: string; items?: Item[] };
  try {
    input = JSON.parse(raw);
  } catch {
    return send(res, 400, '{"error":{"code":"invalid_json"}}');
  }
  const items = (input.items ?? []).map((it) => ({
    product: null,
    name: it.name,
    unit_amount: it.unit_amount,
    quantity: it.quantity,
    amount: it.unit_amount * it.quantity,
  }));
  if (!input.customer?.name || !input.currency || items.length === 0) {
    return send(res, 400, '{"error":{"code":"missing_required_field"}}');
  }
  const at = new Date();
  const order = {
    id: newId('ord'),
    object: 'order',
    status: 'pending',
    customer: { name: input.customer.name, phone: input.customer.phone ?? '' },
    total: items.reduce((s, it) => s + it.amount, 0),
    currency: input.currency,
    items,
    livemode: false,
    created_at: at.toISOString(),
    updated_at: at.toISOString(),
  };
  const answer = JSON.stringify(order);
  const eventId = newId('evt');
  const payload = Buffer.from(
    JSON.stringify({ id: eventId, type: 'order.created', created_at: order.created_at, data: order }),
  );
  const itemsJson = JSON.stringify(
    items.map((it) => ({ ...it, unitAmount: it.unit_amount, unit_amount: undefined })),
  );
  const key = req.headers['idempotency-key'];
  const common = [order.customer.name, order.customer.phone, order.currency, order.total, itemsJson];
  const { rows } =
    typeof key === 'string'
      ? await pool.query<{ created: number }>(WITH_KEY, [
          ACCOUNT,
          sha256(key),
          sha256(raw),
          at,
          Buffer.from(answer),
          order.id,
          ...common,
          eventId,
          payload,
        ])
      : await pool.query<{ created: number }>(WITHOUT_KEY, [
          ACCOUNT,
          at,
          eventId,
          payload,
          order.id,
          ...common,
        ]);
  if (rows[0]?.created !== 1) return send(res, 409, '{"error":{"code":"idempotency_key_in_use"}}');
  send(res, 200, answer);
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    handle(req, res, Buffer.concat(chunks).toString('utf8')).catch((err: Error) => {
      send(res, 500, JSON.stringify({ error: { message: err.message } }));
    });
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ ready: port })}\n`));

const stop = () => {
  server.close();
  server.closeAllConnections();
  pool.end().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2_000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
