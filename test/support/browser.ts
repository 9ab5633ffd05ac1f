// Headless Chromium for the docs page test: Debian's chromium, driven by playwright-core (whose own
// browser download is not used). CHROMIUM_PATH overrides where it is.
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Why the browser tests cannot run here, or undefined when they can. CI installs Chromium, so there they always run. */
export const noBrowser: string | undefined =
  existsSync(CHROMIUM_PATH) || process.env.CI ? undefined : `no Chromium at ${CHROMIUM_PATH} (apt-get install -y chromium, or set CHROMIUM_PATH)`;

/** `args`: more of Chromium's switches (`--host-resolver-rules=MAP almoner.test 127.0.0.1`, for a host name that is not localhost). */
export function launchChromium(args: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    // A fresh profile each time (Playwright's default); no sandbox as root; nothing that reaches the network.
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', ...args],
  });
}
