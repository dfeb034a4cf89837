/**
 * Browser test of the installed extension in a real JupyterLab.
 *
 * Run by scripts/test_extension_browser.sh, which starts the server and
 * passes everything through the environment:
 *   TW_LAB_URL      base URL of a running, token-less JupyterLab
 *   TW_NOTEBOOK     notebook path relative to the server root
 *   TW_FIXTURE      (self-contained mode) the trace JSON the notebook displays,
 *                   so counts can be checked exactly
 *   TW_TIMELINE_FIXTURE  (self-contained mode) the trace with a measured timeline
 *                   (tw.timeline) the notebook displays after the others
 *   TW_SCREENSHOTS  directory for PNGs
 *   TW_CHROMIUM     browser executable (default /usr/bin/chromium)
 *
 * Uses node's test runner and playwright-core only: the browser is the
 * system Chromium, never a downloaded one.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const LAB_URL = required('TW_LAB_URL');
const NOTEBOOK = required('TW_NOTEBOOK');
const SHOTS = process.env.TW_SCREENSHOTS || path.resolve('ui-tests/screenshots');
const FIXTURE = process.env.TW_FIXTURE ? JSON.parse(fs.readFileSync(process.env.TW_FIXTURE, 'utf8')) : null;
const TIMELINE_FIXTURE = process.env.TW_TIMELINE_FIXTURE
  ? JSON.parse(fs.readFileSync(process.env.TW_TIMELINE_FIXTURE, 'utf8'))
  : null;
const CHROMIUM = process.env.TW_CHROMIUM || '/usr/bin/chromium';

const KERNEL_TIMEOUT = 120_000;
const UI_TIMEOUT = 30_000;

function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} must be set (run scripts/test_extension_browser.sh)`);
  }
  return value;
}

let context;
let page;
let profileDir;
const pageErrors = [];

before(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-chromium-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1440, height: 1000 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync'
    ]
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(UI_TIMEOUT);
  page.on('pageerror', err => pageErrors.push(err));
  page.on('console', msg => {
    if (msg.type() === 'error') {
      console.log(`[browser console] ${msg.text()}`);
    }
  });
});

after(async () => {
  await context?.close();
  if (profileDir) {
    fs.rmSync(profileDir, { recursive: true, force: true });
  }
});

const shot = (locator, name) => locator.screenshot({ path: path.join(SHOTS, name) });

/** Run a test body; on failure keep a full-page screenshot to see what the page showed. */
function withFailureShot(name, body) {
  return async t => {
    try {
      await body(t);
    } catch (err) {
      await page
        ?.screenshot({ path: path.join(SHOTS, `FAILED-${name}.png`), fullPage: true })
        .catch(() => {});
      throw err;
    }
  };
}

async function selectedPass(stepper) {
  const item = stepper.locator('[data-testid="tw-pass-item"].tw-selected');
  assert.equal(await item.count(), 1, 'exactly one selected pass');
  return Number(await item.getAttribute('data-index'));
}

/**
 * Wait until the notebook's kernel is connected and idle. Running cells
 * earlier makes JupyterLab ask for a kernel ("Select Kernel" dialog). The
 * toolbar indicator can read idle before the connection exists, so when the
 * server exposes the app (--LabApp.expose_app_in_browser, set by the script)
 * the session itself is checked.
 */
async function waitForKernel() {
  await page.waitForFunction(
    () => {
      const app = window.jupyterapp;
      if (!app) {
        return !!document.querySelector(
          '.jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status="idle"]'
        );
      }
      const kernel = app.shell.currentWidget?.sessionContext?.session?.kernel;
      return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
    },
    null,
    { timeout: KERNEL_TIMEOUT, polling: 250 }
  );
}

/** Open the notebook, wait for an idle kernel, and run every cell from the Run menu. */
async function openAndRunNotebook() {
  await page.goto(`${LAB_URL}/lab/tree/${NOTEBOOK}`);
  await page.locator('.jp-NotebookPanel').first().waitFor();
  // Collapse the file browser: more width for the renderer (and the screenshots).
  if (await page.locator('#jp-left-stack:visible').count()) {
    await page.keyboard.press('Control+b');
  }
  await waitForKernel();
  await page.locator('.lm-MenuBar-itemLabel', { hasText: /^Run$/ }).click();
  await page.locator('.lm-Menu-itemLabel', { hasText: /^Run All Cells$/ }).click();
  // Done when some cell has run and none is queued or running ("[*]"); a cell
  // that raises stops the run, leaving later cells unnumbered.
  await page.waitForFunction(
    () => {
      if (document.querySelector('.jp-Dialog')) {
        return true;
      }
      const prompts = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')].map(
        p => p.textContent ?? ''
      );
      return prompts.some(t => /\d/.test(t)) && !prompts.some(t => t.includes('*'));
    },
    null,
    { timeout: KERNEL_TIMEOUT, polling: 250 }
  );
  const dialog = page.locator('.jp-Dialog');
  if (await dialog.count()) {
    assert.fail(`unexpected dialog: ${await dialog.first().innerText()}`);
  }
}

/** The first trace output; fails with the notebook's error output when there is none. */
async function firstTrace() {
  const trace = page.locator('[data-testid="tw-trace"]').first();
  try {
    await trace.waitFor({ timeout: UI_TIMEOUT });
  } catch {
    const errors = await page
      .locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
      .allInnerTexts();
    assert.fail(
      `no trace was rendered after running ${NOTEBOOK}; error output:\n${errors.join('\n') || '(none)'}`
    );
  }
  return trace;
}

test(
  'JupyterLab renders the trace, steps passes with j/k, and shows the timelines',
  { timeout: 300_000 },
  withFailureShot('trace', async () => {
    await openAndRunNotebook();

    const trace = await firstTrace();
    assert.equal(await page.locator('[data-testid="tw-render-error"]').count(), 0, 'no render error');
    const stepper = trace.locator('[data-testid="tw-stepper"]');
    await stepper.waitFor();

    const items = stepper.locator('[data-testid="tw-pass-item"]');
    const passCount = await items.count();
    if (FIXTURE) {
      assert.equal(passCount, FIXTURE.passes.length, 'one list item per pass');
    }
    assert.ok(passCount >= 2, `need at least 2 passes to step, got ${passCount}`);
    await trace.scrollIntoViewIfNeeded();
    await shot(trace, 'stepper-initial.png');

    // Step with the keyboard until the IR text changes (unchanged passes keep it).
    const ir = stepper.locator('[data-testid="tw-ir"]');
    const diff = stepper.locator('[data-testid="tw-diff"]');
    // Clicking a pass selects it and gives the stepper keyboard focus, as for a user.
    await items.first().click();
    const first = await selectedPass(stepper);
    assert.equal(first, 0, 'clicking the first pass selects it');
    const firstIr = await ir.innerText();
    const firstDiff = await diff.innerText();
    let current = first;
    for (let i = 1; i < passCount && (await ir.innerText()) === firstIr; i++) {
      await page.keyboard.press('j');
      const next = await selectedPass(stepper);
      assert.equal(next, current + 1, 'j selects the next pass (not a notebook cell)');
      current = next;
    }
    assert.notEqual(await ir.innerText(), firstIr, 'IR changed after stepping');
    assert.notEqual(await diff.innerText(), firstDiff, 'diff changed after stepping');
    assert.ok((await diff.locator('.tw-diff-add, .tw-diff-del').count()) > 0, 'diff shows changed lines');
    await shot(trace, 'stepper-stepped.png');

    await page.keyboard.press('k');
    assert.equal(await selectedPass(stepper), current - 1, 'k selects the previous pass');
    await page.keyboard.press('j');

    await stepper.locator('[data-testid="tw-diff-mode-split"]').click();
    await stepper.locator('table.tw-diff-split').waitFor();
    await shot(trace, 'stepper-side-by-side.png');
    await stepper.locator('[data-testid="tw-diff-mode-unified"]').click();

    // Search highlights matches in the IR.
    const word = (await ir.locator('.tw-code-text').first().innerText()).match(/[A-Za-z_]{3,}/)?.[0];
    if (word) {
      await stepper.locator('[data-testid="tw-search"]').fill(word);
      assert.ok((await ir.locator('mark.tw-match').count()) > 0, `search for "${word}" highlights matches`);
      await stepper.locator('[data-testid="tw-search"]').fill('');
    }

    // Hide unchanged keeps only changed (or failed) passes.
    await stepper.locator('[data-testid="tw-hide-unchanged"]').check();
    const shown = stepper.locator('[data-testid="tw-pass-item"]:visible');
    const statuses = await shown.evaluateAll(els => els.map(el => el.dataset.status));
    assert.ok(
      statuses.every(s => s !== 'unchanged'),
      'no unchanged pass is shown'
    );
    await stepper.locator('[data-testid="tw-hide-unchanged"]').uncheck();

    // Barrier timeline: one mark per event, details on hover.
    await trace.locator('[data-testid="tw-tab-barriers"]').click();
    const timeline = trace.locator('[data-testid="tw-barrier-timeline"]');
    await timeline.waitFor({ state: 'visible' });
    const marks = timeline.locator('[data-testid="tw-barrier-event"]');
    const markCount = await marks.count();
    if (FIXTURE) {
      assert.equal(markCount, FIXTURE.barriers?.events.length ?? 0, 'one mark per barrier event');
    }
    if (markCount > 0) {
      await marks.nth(Math.floor(markCount / 2)).hover();
      assert.match(await timeline.locator('[data-testid="tw-hover-detail"]').innerText(), / on .+\[/);
    }
    await shot(timeline, 'barrier-timeline.png');

    await trace.locator('[data-testid="tw-tab-smem"]').click();
    const smem = trace.locator('[data-testid="tw-smem-timeline"]');
    await smem.waitFor({ state: 'visible' });
    if (FIXTURE?.smem) {
      assert.equal(await smem.locator('[data-testid="tw-smem-buffer"]').count(), FIXTURE.smem.buffers.length);
    }
    await shot(smem, 'smem-timeline.png');

    await trace.locator('[data-testid="tw-tab-source"]').click();
    const source = trace.locator('[data-testid="tw-source"]');
    await source.waitFor({ state: 'visible' });
    await source.locator('[data-testid="tw-source-tab-host"]').click();
    assert.equal(await source.locator('[data-testid="tw-source-code"]').getAttribute('data-source'), 'host');
    await source.locator('[data-testid="tw-source-tab-device"]').click();
    await shot(trace, 'source.png');
    // Only bundles that carry "compare" have the kernel-diff tab.
    if (await source.locator('[data-testid="tw-source-tab-compare"]').count()) {
      await source.locator('[data-testid="tw-source-tab-compare"]').click();
      const compareDiff = source.locator('[data-testid="tw-source-diff"]');
      await compareDiff.waitFor();
      await shot(trace, 'source-compare.png');
    }

    if (await page.locator('[data-testid="tw-bench-plot"]').count()) {
      const plot = page.locator('[data-testid="tw-bench-plot"]').first();
      // one series per kernel (ours, any spec kernel of that dtype) and cuBLAS, each in the legend
      const series = await plot.locator('.tw-series').count();
      assert.ok(series >= 2, `ours and cuBLAS series at least (got ${series})`);
      assert.equal(await plot.locator('[data-testid="tw-series-ours"]').count(), 1, 'our series');
      assert.equal(await plot.locator('[data-testid="tw-series-cublas"]').count(), 1, 'the cuBLAS series');
      assert.equal(await plot.locator('.tw-legend-item').count(), series, 'a legend entry per series');
      await plot.locator('[data-testid="tw-bench-metric-ratio"]').click();
      assert.equal(await plot.locator('[data-testid="tw-parity"]').count(), 1, 'the ratio view draws the 1x line');
      await plot.locator('[data-testid="tw-bench-metric-tflops"]').click();
      await plot.scrollIntoViewIfNeeded();
      await shot(page.locator('[data-testid="tw-bench"]').first(), 'bench-plot.png');
    }

    assert.deepEqual(pageErrors.map(String), [], 'no uncaught page errors');
  })
);

test(
  'the measured timeline (tw.timeline) is drawn on the planned barrier rows',
  { timeout: 120_000 },
  withFailureShot('measured-timeline', async t => {
    // The trace outputs that carry a timeline; the self-contained notebook displays one last.
    const traces = page
      .locator('[data-testid="tw-trace"]')
      .filter({ has: page.locator('[data-testid="tw-tab-timeline"]') });
    if (!TIMELINE_FIXTURE && (await traces.count()) === 0) {
      t.skip(`${NOTEBOOK} displays no trace with a timeline`);
      return;
    }
    assert.ok((await traces.count()) >= 1, 'a trace output with a "Measured timeline" tab');
    const trace = traces.last();
    await trace.scrollIntoViewIfNeeded();
    await trace.locator('[data-testid="tw-tab-timeline"]').click();
    const measured = trace.locator('[data-testid="tw-measured-timeline"]');
    await measured.waitFor({ state: 'visible' });
    const data = TIMELINE_FIXTURE?.timeline?.measured;
    if (TIMELINE_FIXTURE) {
      assert.ok(data, 'the timeline fixture holds a measurement');
    }
    if (!(await measured.locator('[data-testid="tw-measured-note"]').count())) {
      // Rows: the planned barrier view's lanes in its order, then one per recording warpgroup.
      const text = els => els.map(el => el.textContent);
      const planned = await trace
        .locator('[data-testid="tw-barrier-timeline"] .tw-lane-labels .tw-lane-label')
        .evaluateAll(text);
      const slots = await measured
        .locator('[data-testid="tw-measured-lane"][data-kind="slot"]')
        .evaluateAll(text);
      assert.deepEqual(slots.slice(0, planned.length), planned, 'slot lanes follow the planned timeline');
      const bars = measured.locator('[data-testid="tw-measured-wait"]');
      if (data) {
        const streams = await measured
          .locator('[data-testid="tw-measured-lane"][data-kind="stream"]')
          .evaluateAll(text);
        assert.deepEqual(
          streams,
          data.streams.map(s => `${s.role} (thread ${s.thread})`),
          'one lane per recording stream'
        );
        assert.equal(await bars.count(), data.waits.length, 'one bar per measured wait');
        const fraction = data.summary.consumer_wait_on_loads_fraction;
        assert.equal(
          await measured.locator('tr[data-fact="bubbles"] td').nth(1).innerText(),
          `${(fraction * 100).toFixed(1)}%`,
          "consumers' time waiting for loads"
        );
        assert.equal(
          await measured.locator('[data-testid="tw-measured-slot-row"]').count(),
          data.summary.wait_by_slot.length,
          'a row per (role, barrier slot) in the waiting table'
        );
      }
      const barCount = await bars.count();
      assert.ok(barCount > 0, 'wait bars are drawn');
      // The bars are really laid out (non-zero boxes) and hovering one explains it.
      const box = await bars.nth(Math.floor(barCount / 2)).boundingBox();
      assert.ok(box && box.width > 0 && box.height > 0, 'a wait bar has a visible box');
      await bars.nth(Math.floor(barCount / 2)).hover();
      assert.match(await measured.locator('[data-testid="tw-hover-detail"]').innerText(), /waited on .+\[/);
    }
    await shot(measured, 'measured-timeline.png');
    assert.deepEqual(pageErrors.map(String), [], 'no uncaught page errors');
  })
);

test(
  'the dark theme applies to the renderer',
  { timeout: 120_000 },
  withFailureShot('dark-theme', async () => {
    await page.locator('.lm-MenuBar-itemLabel', { hasText: /^Settings$/ }).click();
    await page.locator('.lm-Menu-itemLabel', { hasText: /^Theme$/ }).hover();
    await page.locator('.lm-Menu-itemLabel', { hasText: /^JupyterLab Dark$/ }).click();
    await page.waitForFunction(() => document.body.dataset.jpThemeLight === 'false', null, {
      timeout: UI_TIMEOUT
    });
    const trace = page.locator('[data-testid="tw-trace"]').first();
    await trace.locator('[data-testid="tw-tab-passes"]').click();
    // The renderer background follows --jp-layout-color1, so it turns dark.
    const [r, g, b] = await trace.evaluate(el => {
      const root = el.closest('.tw-root');
      return getComputedStyle(root).backgroundColor.match(/\d+/g).map(Number);
    });
    assert.ok(r + g + b < 3 * 96, `dark background expected, got rgb(${r}, ${g}, ${b})`);
    await shot(trace, 'stepper-dark.png');
  })
);
