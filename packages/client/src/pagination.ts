// Lists: `await mcs.orders.list({ limit: 100 })` is one page; `for await (const order of
// mcs.orders.list())` walks every page (newest first), fetching the next one only when needed.

export interface ListPage<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  url: string;
}

export class PagePromise<T extends { id: string }> implements PromiseLike<ListPage<T>>, AsyncIterable<T> {
  readonly #fetchPage: (startingAfter?: string) => Promise<ListPage<T>>;
  #first: Promise<ListPage<T>> | undefined;

  constructor(fetchPage: (startingAfter?: string) => Promise<ListPage<T>>) {
    this.#fetchPage = fetchPage;
  }

  #firstPage(): Promise<ListPage<T>> {
    this.#first ??= this.#fetchPage();
    return this.#first;
  }

  // biome-ignore lint/suspicious/noThenProperty: a PagePromise is awaited for its first page, by design
  then<A = ListPage<T>, B = never>(
    onFulfilled?: ((page: ListPage<T>) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.#firstPage().then(onFulfilled, onRejected);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    let page = await this.#firstPage();
    for (;;) {
      yield* page.data;
      const last = page.data.at(-1);
      if (!page.has_more || last === undefined) return;
      page = await this.#fetchPage(last.id);
    }
  }

  /** Every item of every page, at most `limit` (default 10 000) so a huge list cannot exhaust memory. */
  async toArray(limit = 10_000): Promise<T[]> {
    const items: T[] = [];
    if (limit <= 0) return items;
    for await (const item of this) {
      items.push(item);
      if (items.length >= limit) break; // before asking for a page it would not use
    }
    return items;
  }
}
