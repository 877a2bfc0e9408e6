// The restart policy of `pnpm start` (scripts/start.ts): how long to wait before starting a
// crashed part again, and when to stop trying. Pure (times are passed in), so it is unit-tested.

export interface RestartPolicy {
  /** First delay; each crash within `stableMs` of the previous restart doubles it. */
  initialDelayMs: number;
  maxDelayMs: number;
  /** A part that stayed up this long is healthy again: the delay starts over. */
  stableMs: number;
  /** Restarts in a row that exited before they were ready: past this, stop the stack. */
  maxFailedStarts: number;
  /** Crashes within `windowMs`: past this, stop the stack. */
  maxCrashes: number;
  windowMs: number;
}

export const DEFAULT_POLICY: RestartPolicy = {
  initialDelayMs: 100,
  maxDelayMs: 10_000,
  stableMs: 30_000,
  maxFailedStarts: 5,
  maxCrashes: 10,
  windowMs: 60_000,
};

export type Decision = { restart: true; delayMs: number } | { restart: false; reason: string };

/** One part's crash history. */
export class CrashHistory {
  private readonly policy: RestartPolicy;
  private crashes: number[] = [];
  private failedStarts = 0;
  private delayMs: number;
  private upSince: number | undefined;

  constructor(policy: RestartPolicy = DEFAULT_POLICY) {
    this.policy = policy;
    this.delayMs = policy.initialDelayMs;
  }

  /** The part accepts connections (again) since `at`. */
  ready(at: number): void {
    this.failedStarts = 0;
    this.upSince = at;
  }

  /**
   * The part exited at `at`; `ready` tells whether it had accepted connections since its start.
   * Returns when to start it again, or why not to.
   */
  crashed(at: number, ready: boolean): Decision {
    const p = this.policy;
    this.crashes = this.crashes.filter((t) => at - t < p.windowMs);
    this.crashes.push(at);
    if (ready && this.upSince !== undefined && at - this.upSince >= p.stableMs) {
      this.delayMs = p.initialDelayMs;
    }
    this.upSince = undefined;
    if (!ready) this.failedStarts++;
    if (this.failedStarts >= p.maxFailedStarts) {
      return {
        restart: false,
        reason: `${this.failedStarts} restarts in a row exited before they were ready`,
      };
    }
    if (this.crashes.length >= p.maxCrashes) {
      return { restart: false, reason: `${this.crashes.length} crashes within ${p.windowMs / 1000} s` };
    }
    const delayMs = this.delayMs;
    this.delayMs = Math.min(p.maxDelayMs, this.delayMs * 2);
    return { restart: true, delayMs };
  }
}
