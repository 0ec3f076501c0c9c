/**
 * The status page in a real headless Chromium (Debian's `chromium`, driven by playwright-core),
 * against a server and a host agent run as processes: the page loads without a token, refuses a
 * wrong one with a clear message, logs in with the admin token (kept in the tab, sent as a header,
 * never in a URL), and follows a switch live: the switch appears with its phases and its Temporal
 * Web UI link, and the host's GPU view moves from the first model to the second, parked.
 * The screenshot is kept in test-output/statusPage.png.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, CLUSTER_ADMIN_TOKEN, type ClusterHost } from './support/cluster.js';
import { simDeployment } from './support/lifecycle.js';
import { until } from './support/until.js';

const CHROMIUM = process.env.CAPYCTL_CHROMIUM ?? '/usr/bin/chromium';
const OUTPUT_DIR = join(import.meta.dirname, '..', 'test-output');

/** The text of each element `selector` matches, as the reader sees it. */
const textsOf = (page: Page, selector: string) => page.locator(selector).allInnerTexts();

describe('the status page in Chromium', () => {
  let cluster: Cluster;
  let host: ClusterHost;
  let browser: Browser;
  let page: Page;
  /** Every URL the page asked for: the token must be in none. */
  const requested: string[] = [];

  beforeAll(async () => {
    // One 8 GiB card holds one 5 GiB model: a request for the second switches.
    cluster = await Cluster.start({ hosts: [{}] });
    host = cluster.hosts[0]!;
    await Promise.all([cluster.deploy(simDeployment('chat-a')), cluster.deploy(simDeployment('chat-b'))]);
    // Root in a container: Chromium's sandbox needs user namespaces it may not have.
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('request', (r) => requested.push(r.url()));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await cluster?.close();
  }, 60_000);

  it('serves the login form without a token, and says so plainly when a token is wrong', async () => {
    const reply = await page.goto(`${cluster.managementUrl}/`);
    expect(reply?.status()).toBe(200);
    expect(await page.title()).toBe('capyctl status');
    await page.fill('#token', 'capy_admin_guessed_wrong');
    await page.click('button[type=submit]');
    await page.locator('#login-message', { hasText: 'refused' }).waitFor();
    expect(await page.innerText('#login-message')).toBe('The server refused that token: it is not the admin token.');
    expect(await page.isHidden('#status')).toBe(true);
  });

  it('logs in with the admin token, kept for the tab and sent as a header, never in a URL', async () => {
    await page.fill('#token', CLUSTER_ADMIN_TOKEN);
    await page.click('button[type=submit]');
    await page.locator('#status').waitFor();
    await page.locator('tr[data-deployment="chat-b"]').waitFor();
    expect(await textsOf(page, '#deployments tr td:first-child')).toEqual(['chat-a', 'chat-b']);
    // A reload keeps the session: the tab still holds the token.
    await page.reload();
    await page.locator('tr[data-deployment="chat-a"]').waitFor();
    expect(await page.isHidden('#login')).toBe(true);
    expect(page.url()).toBe(`${cluster.managementUrl}/`);
    expect(requested.filter((url) => url.includes(CLUSTER_ADMIN_TOKEN))).toEqual([]);
  });

  it('shows a switch as it happens: its phases, its Web UI link, and the GPU now holding the other model', async () => {
    const hostSection = page.locator(`section[data-host="${host.hostId}"]`);
    expect((await cluster.chat('chat-a')).status).toBe(200);
    await until('chat-a ready on the GPU view', async () =>
      (await hostSection.innerText()).includes('Ready on the GPU\nchat-a') ? true : undefined,
    );

    expect((await cluster.chat('chat-b')).status).toBe(200);
    const row = page.locator('#switches tr', { hasText: 'park chat-a' });
    // The last receipt, with the phases, is written just after the waiters are released.
    await until('the switch to chat-b listed with its phases', async () =>
      (await row.count()) === 1 && (await row.locator('.phases').innerText()).includes('release') ? true : undefined,
    );
    const cells = await row.locator('td').allInnerTexts();
    expect(cells[1]).toBe(`start chat-b, park chat-a on ${host.hostId}`);
    expect(cells[2]).toBe('released');
    const took = '[\\d.]+ m?s';
    expect(cells[4]).toMatch(
      new RegExp(
        `^window ${took} · drain ${took} · park \\((host_ram|deep)\\) ${took} · start ${took} · release ${took}$`,
      ),
    );
    const switchId = await row.getAttribute('data-switch-id');
    expect(await row.locator('a.web-ui').getAttribute('href')).toBe(
      `http://127.0.0.1:8233/namespaces/default/workflows/switch%2F${switchId}`,
    );
    // The first switch, which started chat-a, is listed below it.
    expect(await textsOf(page, '#switches tr td:nth-child(2)')).toEqual([
      `start chat-b, park chat-a on ${host.hostId}`,
      `start chat-a on ${host.hostId}`,
    ]);

    await until('the GPU view to hold chat-b ready and chat-a parked', async () => {
      const text = await hostSection.innerText();
      return text.includes('Ready on the GPU\nchat-b') && /Parked (in host RAM|deep \(on disk\))\nchat-a/.test(text)
        ? true
        : undefined;
    });
    // The card's line: what is used of it, and the model on it now (chat-a gave its memory back).
    // Its bar, then its memory used of its total and what is free.
    const gpu = hostSection.locator('.gpu[data-gpu="0"]');
    const [, used, free] = /^\s*GPU 0: \S+, ([1-9][\d.]*) GiB of 8\.0 GiB used, ([\d.]+) GiB free · chat-b$/.exec(
      await gpu.innerText(),
    )!;
    expect(Number(used) + Number(free)).toBeCloseTo(8, 1);
    expect(Number(await gpu.locator('meter').getAttribute('value'))).toBeCloseTo(Number(used) * 2 ** 30, -8);
    expect(await page.innerText('tr[data-deployment="chat-a"] td:nth-child(2)')).toMatch(
      /^parked \((host_ram|deep)\)$/,
    );
    expect(await page.innerText('tr[data-deployment="chat-b"] td:nth-child(2)')).toBe('ready');
    expect(await page.innerText('tr[data-deployment="chat-b"] td:nth-child(4)')).toBe('0 / 64');
    expect(requested.filter((url) => url.includes(CLUSTER_ADMIN_TOKEN))).toEqual([]);
    // Polled every 2 s, the reads log only what fails: the server's log is not buried in them.
    const polled = [
      '/management/v1/status/history',
      '/management/v1/hosts',
      '/management/v1/deployments',
      '/management/v1/metrics/load',
      '/management/v1/switches?limit=20',
    ];
    for (const path of polled) expect(requested.filter((url) => url.endsWith(path)).length, path).toBeGreaterThan(3);
    expect(
      cluster.server
        .output()
        .split('\n')
        .filter((line) => polled.some((path) => line.includes(`"method":"GET","url":"${path}"`))),
    ).toEqual([]);

    mkdirSync(OUTPUT_DIR, { recursive: true });
    await page.screenshot({ path: join(OUTPUT_DIR, 'statusPage.png'), fullPage: true });
  });

  it('answers why: the last engine exit and restarts, errors by code, the last hour, dates, on a narrow screen too', async () => {
    const b = await cluster.status('chat-b');
    // The engine's port, from the launch its host agent logged.
    const launched = host.process
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"engine launched"') && l.includes(b.deployment_id))
      .at(-1)!;
    const argv = JSON.parse(launched).argv as string[];
    const port = argv[argv.indexOf('--port') + 1];
    await fetch(`http://127.0.0.1:${port}/sim/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ crash: true }),
    }).catch(() => undefined);
    const row = page.locator('tr[data-deployment="chat-b"]');
    await until('chat-b’s exit on the page', async () =>
      (await row.locator('td.problem').innerText()).includes('engine exited') ? true : undefined,
    );
    const problem = await row.locator('td.problem').innerText();
    expect(problem).toMatch(
      new RegExp(
        `^engine exited \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\(\\d+ s ago\\) on ${host.hostId}: ` +
          'its engine exited unasked \\(code 1\\)\\s*\\[sim\\] simulated crash$',
      ),
    );
    expect(await row.locator('td:nth-child(2)').innerText()).toBe('stopped');
    expect(await row.locator('td:nth-child(8)').innerText()).toBe('1');

    // A request the gateway refuses is counted by its code: chat-a stopped by its operator is answered 409.
    await cluster.capyctlOk(['stop', 'deployment', 'chat-a']);
    expect((await cluster.chat('chat-a')).status).toBe(409);
    await page.locator('#errors tr[data-code="deployment_stopped"]').waitFor();
    expect(await textsOf(page, '#errors tr[data-code="deployment_stopped"] td')).toEqual(['deployment_stopped', '1']);

    // The last hour: the requests that waited, and a bar a switch, each with how long it took.
    expect(await page.locator('#waiting-chart svg polyline').count()).toBe(1);
    expect(await page.locator('#switch-chart line.switch').count()).toBeGreaterThanOrEqual(2);
    expect(await page.innerText('#switches-hour')).toMatch(/^\d+, the longest [\d.]+ m?s$/);
    // Times carry their date.
    expect((await textsOf(page, '#switches tr td:first-child'))[0]).toMatch(
      /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(\d+ (s|min) ago\)$/,
    );

    // A phone's width: the tables scroll in their boxes, the page does not scroll sideways.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
    await page.screenshot({ path: join(OUTPUT_DIR, 'statusPage-narrow.png'), fullPage: true });
  });
});
