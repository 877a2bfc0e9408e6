// Preloaded into every part by gc-per-request.ts (`--import`): counts this process's garbage
// collections and what they moved, and writes the running totals to
// $MCS_GC_COUNTERS_DIR/<part>.json twice a second.
//
// From V8's per-collection heap statistics (v8.GCProfiler):
// - young: bytes allocated in the young generation (its growth between collections);
// - promoted: old-space growth during scavenges (objects that left the young generation);
// - direct: old-space growth between collections (allocated there at once: pretenured, or large);
// - scavenges and full (mark-compact) collections.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';

const dir = process.env.MCS_GC_COUNTERS_DIR;
const part = path.basename(path.dirname(path.dirname(process.argv[1] ?? 'unknown/src/main.ts')));
if (dir) {
  const totals = { young: 0, promoted: 0, direct: 0, scavenges: 0, full: 0 };
  const used = (stats, name) =>
    stats.heapSpaceStatistics.find((s) => s.spaceName === name)?.spaceUsedSize ?? 0;
  const old = (stats) => used(stats, 'old_space') + used(stats, 'large_object_space');
  let after;
  let profiler = new v8.GCProfiler();
  profiler.start();
  setInterval(() => {
    const { statistics } = profiler.stop();
    profiler = new v8.GCProfiler();
    profiler.start();
    for (const gc of statistics) {
      if (after) {
        totals.direct += Math.max(0, old(gc.beforeGC) - old(after));
        totals.young += Math.max(0, used(gc.beforeGC, 'new_space') - used(after, 'new_space'));
      }
      if (gc.gcType === 'Scavenge') {
        totals.scavenges++;
        totals.promoted += old(gc.afterGC) - old(gc.beforeGC);
      } else if (gc.gcType === 'MarkSweepCompact') totals.full++;
      after = gc.afterGC;
    }
    writeFileSync(path.join(dir, `${part}.json`), JSON.stringify(totals));
  }, 500).unref();
}
