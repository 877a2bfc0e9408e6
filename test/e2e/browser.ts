// The browser side of the dashboard and docs suites: Debian's Chromium, headless, and the few
// habits of driving it that the suites share.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '@mcs/testkit';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';

/** Debian's Chromium, headless, with nothing of its own on the network (no updates, sync or QUIC). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-quic',
      '--no-first-run',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * Where a suite's screenshots go: `.data/screenshots/<prefix>-<name>.png`, kept as artefacts of the
 * run (.data is not committed).
 */
export function screenshotPath(prefix: string): (name: string) => string {
  const dir = join(REPO_ROOT, '.data', 'screenshots');
  mkdirSync(dir, { recursive: true });
  return (name) => join(dir, `${prefix}-${name}.png`);
}

/** Clicks a form's button and waits for the page the POST ends on (after its redirect, if any). */
export async function submit(page: Page, selector: string | Locator): Promise<void> {
  const button = typeof selector === 'string' ? page.locator(selector) : selector;
  await Promise.all([page.waitForEvent('load'), button.click()]);
}

/** The stack environment of the dashboard suites: plain-HTTP receivers on loopback, fast retries. */
export const DASHBOARD_STACK_ENV = {
  WEBHOOK_RETRY_SCHEDULE: Array(5).fill('100ms').join(','),
  WEBHOOK_TIMEOUT: '1s',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_ALLOW_HTTP: 'true',
};
