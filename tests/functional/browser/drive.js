// drive.js - opens a taipan flame-graph page in headless Chromium (Debian's,
// through playwright-core), acts on it like a person would (real mouse and
// keyboard) and prints what it saw as JSON for tests/functional/test_html.py,
// which makes the assertions.
//
//   node drive.js SCENARIO PAGE.html OUTDIR [ARGS...]
//
// Scenarios: chain (tooltip, zoom, Esc, search, layout, lines), threads (the
// thread selector), timing (load and first render), kinds (the legend and
// the frames' colours by kind of code), speedscope (PAGE is
// speedscope's index.html; imports the file ARGS[0]). OUTDIR gets a
// screenshot (page.png) either way, for the test to keep when it fails.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.TAIPAN_CHROMIUM || '/usr/bin/chromium';
// Without the background-networking flags Chromium keeps trying to reach
// Google's hosts, which this closed network refuses.
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

async function settle(page) {
  // Two animation frames: the page draws in requestAnimationFrame.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

async function frames(page) {
  return page.evaluate(() => window.taipan.visibleFrames());
}

async function state(page) {
  return page.evaluate(() => window.taipan.state());
}

function find(list, name) {
  return list.find((f) => f.name === name);
}

async function clickFrame(page, f) {
  await page.mouse.click(f.x + f.width / 2, f.y + f.height / 2);
  await settle(page);
}

async function chain(page, args) {
  const out = {};
  const fn = args[0]; // the frame to zoom into and to search for
  out.initial = { state: await state(page), frames: await frames(page) };

  // Tooltip: hover a frame.
  const target = find(out.initial.frames, fn);
  if (target) {
    await page.mouse.move(target.x + target.width / 2, target.y + target.height / 2);
    await settle(page);
    out.tooltip = await page.evaluate(() => {
      const t = document.getElementById('tip');
      return { hidden: t.hidden, text: t.innerText };
    });

    // Zoom: a real click on it.
    await clickFrame(page, target);
    out.zoomed = { state: await state(page), frames: await frames(page) };

    // Out again with Esc.
    await page.mouse.move(1, 1);
    await page.keyboard.press('Escape');
    await settle(page);
    out.unzoomed = { state: await state(page), frames: await frames(page) };

    // Zoom in and back out by clicking the root frame.
    await clickFrame(page, target);
    const root = (await frames(page)).find((f) => f.depth === 0);
    await clickFrame(page, root);
    out.rootClicked = { state: await state(page) };
  }

  // Search, typed into the box; '/' focuses it.
  await page.keyboard.press('/');
  await page.keyboard.type(args[1] || fn);
  await page.waitForFunction((q) => window.taipan.state().search === q, args[1] || fn);
  await settle(page);
  out.searched = {
    state: await state(page),
    frames: await frames(page),
    matchText: await page.textContent('#match'),
  };

  // Icicle, then flame again.
  await page.click('#layout');
  await settle(page);
  out.icicle = { state: await state(page), frames: await frames(page) };
  await page.click('#layout');
  await settle(page);
  out.flame = { state: await state(page), frames: await frames(page) };

  // One box per line, then per function again.
  await page.click('#bylines');
  await settle(page);
  out.byLine = { state: await state(page), frames: await frames(page) };
  await page.click('#bylines');
  await settle(page);
  return out;
}

async function threads(page) {
  const out = { threads: await page.evaluate(() => window.taipan.threads()), views: [] };
  out.all = { state: await state(page), frames: await frames(page) };
  const options = await page.$$eval('#thread option', (os) => os.map((o) => ({ value: o.value, text: o.textContent })));
  out.options = options;
  for (const o of options) {
    await page.selectOption('#thread', o.value);
    await settle(page);
    out.views.push({ value: o.value, text: o.text, state: await state(page), frames: await frames(page) });
  }
  return out;
}

async function timing(page) {
  const out = { timings: await page.evaluate(() => window.taipan.timings()), state: await state(page) };
  out.frames = (await frames(page)).length;
  // A zoom on the widest frame below the root, timed to the next paint.
  const f = (await frames(page)).filter((x) => x.depth === 1).sort((a, b) => b.width - a.width)[0];
  if (f) {
    const t0 = Date.now();
    await clickFrame(page, f);
    out.zoomMs = Date.now() - t0;
    out.zoomed = await state(page);
  }
  return out;
}

// The legend as a person sees it (its text and swatch colours, from the
// DOM), the page's own account of it, and the frames with their colours.
async function kinds(page) {
  return {
    legend: await page.evaluate(() => window.taipan.legend()),
    legendShown: await page.$eval('#legend', (l) => ({
      visible: l.offsetParent !== null,
      items: Array.from(l.children).map((i) => ({
        text: i.textContent,
        color: getComputedStyle(i.querySelector('.sw')).backgroundColor,
      })),
    })),
    frames: await frames(page),
  };
}

// The page is speedscope's own app (from its npm package, offline); the
// first ARG is a speedscope JSON file to import through its file input.
async function speedscope(page, args) {
  await page.setInputFiles('input[type=file]', args[0]);
  // The title bar names the active profile and says "(k/N)".
  await page.waitForFunction(() => /\(\d+\/\d+\)/.test(document.body.innerText), null, { timeout: 30000 });
  await settle(page);
  return { text: await page.evaluate(() => document.body.innerText) };
}

const SCENARIOS = { chain, threads, timing, kinds, speedscope };

async function main() {
  const [scenario, pagePath, outDir, ...args] = process.argv.slice(2);
  if (!SCENARIOS[scenario] || !pagePath || !outDir) {
    console.error('usage: node drive.js chain|threads|timing|kinds|speedscope PAGE.html OUTDIR [ARGS...]');
    process.exit(2);
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'taipan-chromium-'));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 800 },
  });
  const report = { requests: [], errors: [] };
  let page;
  try {
    page = await ctx.newPage();
    const url = 'file://' + path.resolve(pagePath);
    // Whatever the page asks for besides itself is a failure: it must work offline.
    page.on('request', (r) => { if (r.url() !== url) report.requests.push(r.url()); });
    page.on('pageerror', (e) => report.errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') report.errors.push(m.text()); });
    // An alert() is a name that got out of its string.
    page.on('dialog', (d) => { report.errors.push('dialog: ' + d.message()); d.dismiss().catch(() => {}); });

    const t0 = Date.now();
    await page.goto(url, { waitUntil: 'load', timeout: 60000 });
    if (scenario !== 'speedscope')
      await page.waitForFunction(() => window.taipan && window.taipan.ready, null, { timeout: 60000 });
    await settle(page);
    report.loadMs = Date.now() - t0;
    report.result = await SCENARIOS[scenario](page, args);
    report.scripts = await page.evaluate(() => document.scripts.length);
    report.elements = await page.evaluate(() => document.getElementsByTagName('*').length);
  } catch (e) {
    report.errors.push('driver: ' + (e && e.stack ? e.stack : String(e)));
  } finally {
    if (page) await page.screenshot({ path: path.join(outDir, 'page.png') }).catch(() => {});
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
