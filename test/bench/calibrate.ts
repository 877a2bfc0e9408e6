// How fast this machine is right now: a fixed single-threaded CPU workload (hashing, string
// building, object churn, the mix of a request's work), timed at the start and at the end of a
// bench run. The ratios of a run compare the project with its baselines measured minutes apart
// on the same machine; the calibration says how much the machine itself drifted meanwhile, and
// lets runs of different days be told apart (a VM's CPU speed varies with its host's load: on
// the 2-core bench VM the same loop took from 0.6 to 1.1 s within one idle minute).
import { createHash } from 'node:crypto';

function workload(): number {
  let x = 0;
  for (let i = 0; i < 100_000; i++) x += createHash('sha256').update(`calibration ${i}`).digest()[0]!;
  const o: Record<string, number> = {};
  for (let i = 0; i < 600_000; i++) o[`k${i % 1000}`] = i;
  let s = '';
  for (let i = 0; i < 200_000; i++) s = s.length > 10_000 ? '' : s + JSON.stringify({ i });
  return x + Object.keys(o).length + s.length;
}

/** Milliseconds of the workload: the fastest of `times` runs (the machine's speed, not its hiccups). */
export function calibrate(times = 3): number {
  let best = Number.POSITIVE_INFINITY;
  workload(); // warm-up: compiled code, not the interpreter
  for (let i = 0; i < times; i++) {
    const t0 = performance.now();
    workload();
    best = Math.min(best, performance.now() - t0);
  }
  return Math.round(best);
}
