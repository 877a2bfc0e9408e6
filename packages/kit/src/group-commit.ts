// Group commit for one-statement creates (docs/design.md "Idempotency", docs/performance.md). Creates
// that reach one pool in the same turn of the event loop go to PostgreSQL as ONE statement: every
// parameter of the one-row statement becomes an array, unnested with ordinality, and each create
// gets its own result row back. Under load a statement then carries a handful of creates, and the
// per-statement costs (a round trip, parse and bind, executor start, a commit and its WAL flush,
// a wake-up on both sides) are paid once for all of them; a bare node:http + pg server writing
// keyed orders this way ran at 2.3× its one-statement rate on the 2-core bench machine.
//
// Without load nothing waits: a turn that brings one create sends the one-row statement at once.
// The rules that keep the batch as safe as the single statement:
//
// - One statement commits whole or not at all, so a create is in it or not; each row's result
//   says which (a taken key writes nothing for that create only).
// - Two creates with the same idempotency key never share a statement (ON CONFLICT DO UPDATE
//   cannot touch one row twice): the later one waits until the first one's statement is done,
//   then finds the key taken. (Replicas race on the key's index as two single statements do.)
// - Keys are inserted in one global order (sorted), so two batches racing on shared keys wait
//   for each other and never deadlock.
// - A batch that PostgreSQL refused (one create broke a constraint) runs again as one statement
//   per create, so each create gets its own answer and a bad one fails alone. A batch whose
//   connection broke is not run again: it may have committed, and an unkeyed create would then
//   be written twice.
import { createRequire } from 'node:module';
import pg from 'pg';

/** pg's own conversion of a parameter to its text form (pg/lib/utils; not in its types). */
const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils.js') as {
  prepareValue(value: unknown): unknown;
};

/** A statement's text under its prepared-statement name. */
export interface NamedText {
  name: string;
  text: string;
}

/** What a create's statement answers: one row per create. */
export interface CreateResult {
  inserted: boolean;
  /**
   * The key's earlier answer, when the key was taken by a create committed before this
   * statement (the one-row statement reads it; a batch leaves it to answerOnce).
   */
  fingerprint?: string | null;
  response?: Buffer | null;
  /** The earlier answer is sealed (kit/idempotency holdsSecret). */
  sealed?: boolean | null;
  /** When the earlier answer's key was stored, ms since the epoch (text). */
  created_ms?: string | null;
  /** The outbox seq of the create's event. */
  seq?: string | null;
}

/** The two forms of one create: alone, and for N creates (each parameter an array, plus `i`). */
export interface GroupedStatement {
  single: NamedText;
  batch: NamedText;
}

/** Most creates one statement carries. */
const MAX_BATCH = 64;
/**
 * Batch statements of one shape in flight at once on one pool. While they run, new creates
 * gather for the next: the batch grows with the load instead of each create taking a
 * connection of its own.
 */
const MAX_IN_FLIGHT = 4;

interface Pending {
  params: unknown[];
  /** The idempotency key's identity (account, mode, hash), for creates that have one. */
  key: string | undefined;
  logger: QueryLogger;
  resolve: (row: CreateResult | undefined) => void;
  reject: (err: unknown) => void;
}

/** drizzle's logger of the caller's database object: told of every statement sent. */
type QueryLogger = { logQuery(text: string, params: unknown[]): void };

class GroupCommit {
  private pending: Pending[] = [];
  private inFlight = 0;
  /**
   * The keys of each batch in flight (at most MAX_IN_FLIGHT): a create with one of them waits.
   * A set per batch, dropped with it, rather than one long-lived set that every keyed create
   * enters and leaves: that set's discarded tables, promoted to the old generation, kept the
   * keys they held alive through young-generation collections.
   */
  private readonly busyKeys: Array<Set<string>> = [];
  private scheduled = false;
  private readonly flushNow = () => this.flush();

  private readonly pool: pg.Pool;
  private readonly st: GroupedStatement;

  constructor(pool: pg.Pool, st: GroupedStatement) {
    this.pool = pool;
    this.st = st;
  }

  run(params: unknown[], key: string | undefined, logger: QueryLogger): Promise<CreateResult | undefined> {
    return new Promise((resolve, reject) => {
      this.pending.push({ params, key, logger, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.pending.length === 0 || this.inFlight >= MAX_IN_FLIGHT) return;
    this.scheduled = true;
    // After the poll phase: every call that arrived with this turn's I/O is pending by then.
    setImmediate(this.flushNow);
  }

  private flush(): void {
    this.scheduled = false;
    if (this.inFlight >= MAX_IN_FLIGHT || this.pending.length === 0) return;
    const keys = new Set<string>();
    const batch = this.take(keys);
    if (batch.length === 0) return; // every pending create waits for a key in flight
    this.inFlight++;
    if (keys.size > 0) this.busyKeys.push(keys);
    const done = () => {
      this.inFlight--;
      if (keys.size > 0) this.busyKeys.splice(this.busyKeys.indexOf(keys), 1);
      this.schedule();
    };
    (batch.length === 1 ? this.one(batch[0]!) : this.many(batch)).then(done, done);
    this.schedule();
  }

  /**
   * Up to MAX_BATCH pending creates, no key twice nor in flight, keyed ones sorted by key; their
   * keys go into `keys`.
   */
  private take(keys: Set<string>): Pending[] {
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    for (const p of this.pending) {
      if (batch.length >= MAX_BATCH || (p.key !== undefined && (keys.has(p.key) || this.keyBusy(p.key)))) {
        rest.push(p);
        continue;
      }
      if (p.key !== undefined) keys.add(p.key);
      batch.push(p);
    }
    this.pending = rest;
    if (keys.size > 1) sortByKey(batch);
    return batch;
  }

  private keyBusy(key: string): boolean {
    for (const keys of this.busyKeys) if (keys.has(key)) return true;
    return false;
  }

  private async one(p: Pending): Promise<void> {
    try {
      p.logger.logQuery(this.st.single.text, p.params);
      const { rows } = await this.pool.query<CreateResult>({ ...this.st.single, values: p.params });
      p.resolve(rows[0]);
    } catch (err) {
      p.reject(err);
    }
  }

  private async many(batch: Pending[]): Promise<void> {
    const width = batch[0]!.params.length;
    const columns: unknown[][] = Array.from({ length: width }, () => new Array(batch.length));
    for (let r = 0; r < batch.length; r++) {
      const params = batch[r]!.params;
      for (let c = 0; c < width; c++) columns[c]![r] = params[c];
    }
    for (let c = 0; c < width; c++) columns[c] = arrayLiteral(columns[c]!) as never;
    let rows: Array<CreateResult & { i: number }>;
    try {
      for (const logger of new Set(batch.map((p) => p.logger))) logger.logQuery(this.st.batch.text, columns);
      rows = (await this.pool.query<CreateResult & { i: number }>({ ...this.st.batch, values: columns }))
        .rows;
    } catch (err) {
      if (!(err instanceof pg.DatabaseError)) {
        for (const p of batch) p.reject(err);
        return;
      }
      // PostgreSQL refused the statement, so nothing of it was written: each create alone.
      await Promise.all(batch.map((p) => this.one(p)));
      return;
    }
    for (const row of rows) batch[row.i - 1]?.resolve(row);
    // A create without a row (cannot happen: the statement answers one per create) must not hang.
    for (const p of batch) p.resolve(undefined);
  }
}

/**
 * Sorts a batch in place by key, unkeyed creates first (insertion sort: a batch has at most
 * MAX_BATCH creates, and Array.prototype.sort allocates a work array per call).
 */
export function sortByKey(batch: Array<{ key: string | undefined }>): void {
  for (let i = 1; i < batch.length; i++) {
    const p = batch[i]!;
    let j = i - 1;
    while (j >= 0 && before(p.key, batch[j]!.key)) {
      batch[j + 1] = batch[j]!;
      j--;
    }
    batch[j + 1] = p;
  }
}

/** `a` sorts before `b`: no key before any key, keys in code-unit order. */
function before(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined) return b !== undefined;
  return b !== undefined && a < b;
}

const byPool = new WeakMap<pg.Pool, Map<GroupedStatement, GroupCommit>>();

/**
 * Runs one create through its pool's group commit: alone when it is the only one this turn,
 * else in one statement with the others of its shape. `key` identifies its idempotency key.
 */
export function groupCommit(
  pool: pg.Pool,
  st: GroupedStatement,
  params: unknown[],
  key: string | undefined,
  logger: QueryLogger,
): Promise<CreateResult | undefined> {
  let groups = byPool.get(pool);
  if (!groups) {
    groups = new Map();
    byPool.set(pool, groups);
  }
  let group = groups.get(st);
  if (!group) {
    group = new GroupCommit(pool, st);
    groups.set(st, group);
  }
  return group.run(params, key, logger);
}

/**
 * One column of a batch as a PostgreSQL array literal, what pg's own conversion writes (quoted
 * elements, `NULL`, `\\x`-hex bytea) without its two regular-expression replaces per element:
 * a string needs escaping only when it holds a quote or a backslash. That conversion was the
 * largest single allocation of the commerce service per order (3.2 KB). Values of other kinds
 * (dates, numbers, booleans, nested arrays) go through pg's own conversion, element by element.
 */
export function arrayLiteral(values: unknown[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ',';
    const v = values[i];
    if (v === null || v === undefined) out += 'NULL';
    else if (typeof v === 'string') out += quoted(v);
    else if (Buffer.isBuffer(v)) out += `\\\\x${v.toString('hex')}`;
    else if (ArrayBuffer.isView(v))
      out += `\\\\x${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')}`;
    else if (Array.isArray(v)) out += prepareValue(v) as string;
    else out += quoted(String(prepareValue(v)));
  }
  return `${out}}`;
}

function quoted(s: string): string {
  if (s.indexOf('"') < 0 && s.indexOf('\\') < 0) return `"${s}"`;
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}
