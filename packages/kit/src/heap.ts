// The heap a part keeps after it started. Loading a part's code (a few thousand modules) allocates
// fast and keeps much of it (compiled functions, module records), so V8 grows its young
// generation to its maximum (V8's default: two 64 MB semi-spaces on a machine with a 4 GB heap
// limit; 16 MB with kit/config's PART_NODE_FLAGS) and the old space with it, all touched and
// resident. A part that then sees little traffic keeps that memory until V8's memory reducer
// gives it back, and the reducer waits for a garbage collection to tell it the allocation rate
// dropped, which an idle part never runs: only its watchdog, about 100 s after start, ends the
// wait. So an idle part (accounts, messaging during an order load) stood at ~190 MiB RSS for its
// first 100 s, then ~130 (memory soak, issue 9 target 7: "flat ±10 %").
//
// settleHeap asks V8 once, right after start-up, for what it does under memory pressure: a full
// collection that also shrinks the young generation and returns free pages to the system
// (LowMemoryNotification, reached through the in-process inspector's HeapProfiler.collectGarbage;
// no port is opened). A part under load grows its young generation again as its allocation rate
// asks; an idle one stays small from the start. Costs one full GC at start (~0.1 s).
import v8 from 'node:v8';

export interface HeapSettled {
  /** V8's heap (all spaces, committed) before and after, MiB. */
  beforeMiB: number;
  afterMiB: number;
}

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10;

/** A memory-reducing full GC; resolves null where Node was built without the inspector. */
export async function settleHeap(): Promise<HeapSettled | null> {
  let inspector: typeof import('node:inspector/promises');
  try {
    inspector = await import('node:inspector/promises');
  } catch {
    return null;
  }
  const before = v8.getHeapStatistics().total_heap_size;
  const session = new inspector.Session();
  session.connect();
  try {
    await session.post('HeapProfiler.collectGarbage');
  } finally {
    session.disconnect();
  }
  return { beforeMiB: mib(before), afterMiB: mib(v8.getHeapStatistics().total_heap_size) };
}
