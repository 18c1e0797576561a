// The web pages (GET / chat playground, GET /dashboard) in a real browser: Debian's headless
// Chromium driven by playwright-core. Streams a reply, stops a long one (the server's running count
// returns to 0), shows model output with <script> as text, keyboard and labels, phone width, the
// dashboard's charts moving under `tokenmill bench serve`, --api-key asking for the key, --no-ui. Screenshots go to
// $TM_E2E_OUT/ui (default build/tests/e2e_out/ui). Skipped without /usr/bin/chromium or playwright-core.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { startServer, scrape, metric, sleep, sourceDir, binary } from './lib/server.mjs';

const CHROMIUM = '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
               '--disable-component-update', '--no-first-run'];
const outDir = path.join(process.env.TM_E2E_OUT ?? path.join(path.dirname(binary), 'tests', 'e2e_out'), 'ui');

let chromium = null;
let skip = false;
if (!fs.existsSync(CHROMIUM)) skip = `${CHROMIUM} not installed`;
else {
  try {
    ({ chromium } = await import('playwright-core'));
  } catch (e) {
    skip = `playwright-core not installed (npm ci in tests/e2e): ${e.message}`;
  }
}

let server, browser;
before(async () => {
  if (skip) return;
  fs.mkdirSync(outDir, { recursive: true });
  // 20 ms per engine step (hidden testing option): a 400-token reply runs for seconds, so a stop
  // lands while it runs.
  server = await startServer(['--debug-step-delay-ms', '20']);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
});
after(async () => {
  if (browser) await browser.close();
  if (server) await server.stop();
});

// A fresh page (own localStorage) that fails the test on a script error or a console error (a CSP
// violation is one); `allow` matches console errors that are expected.
async function newPage(allow = null, viewport = { width: 1280, height: 900 }) {
  const ctx = await browser.newContext({ viewport });
  const page = await ctx.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !(allow && allow.test(m.text()))) page.errors.push(`console: ${m.text()}`);
  });
  page.on('dialog', (d) => { page.errors.push(`unexpected dialog: ${d.message()}`); d.dismiss(); });
  return page;
}

async function openChat(page, url = server.url) {
  await page.goto(url + '/');
  await page.waitForSelector('body[data-ready="1"]');
  await page.waitForSelector('#model option', { state: 'attached' });
}

async function setSetting(page, id, value) {
  await page.fill('#' + id, String(value));
  await page.dispatchEvent('#' + id, 'change');
}

const assistant = (page) => page.locator('article[data-role="assistant"]').last();

async function waitRunning(want, ms) {
  const t0 = Date.now();
  for (;;) {
    const v = metric(await scrape(server.url), 'vllm:num_requests_running');
    if (v === want) return Date.now() - t0;
    if (Date.now() - t0 > ms) assert.fail(`vllm:num_requests_running is ${v}, not ${want}, after ${ms} ms`);
    await sleep(20);
  }
}

test('chat: a message streams a reply with TTFT and tokens/s, kept across reloads, edit and regenerate',
     { skip }, async () => {
  const page = await newPage();
  await openChat(page);
  assert.equal(await page.locator('#model').inputValue(), 'stories260K');
  await setSetting(page, 'max_tokens', 120);
  await setSetting(page, 'temperature', 0);
  await page.fill('#input', 'Tell me a story');
  await page.press('#input', 'Enter');
  // Text appears while the reply is still streaming (120 steps of >= 20 ms).
  await page.waitForFunction(() => {
    const a = [...document.querySelectorAll('article[data-role="assistant"]')].pop();
    return a && a.dataset.state === 'streaming' && a.querySelector('.body').textContent.length > 5;
  }, null, { timeout: 10000 });
  assert.equal(await page.locator('#stop').isEnabled(), true);
  await page.waitForSelector('article[data-role="assistant"][data-state="done"]', { timeout: 20000 });
  const stats = await assistant(page).locator('.stats').textContent();
  assert.match(stats, /120 tokens · TTFT \d+ ms · [\d.]+ tokens\/s · length/);
  const reply = await assistant(page).locator('.body').textContent();
  assert.ok(reply.length > 50, reply);
  fs.mkdirSync(outDir, { recursive: true });
  await page.screenshot({ path: path.join(outDir, 'chat.png'), fullPage: true });

  // localStorage keeps the conversation and the settings.
  await page.reload();
  await page.waitForSelector('body[data-ready="1"]');
  assert.equal(await page.locator('article[data-role="user"] .body').textContent(), 'Tell me a story');
  assert.equal(await assistant(page).locator('.body').textContent(), reply);
  assert.equal(await page.locator('#max_tokens').inputValue(), '120');

  // Regenerate: greedy, so the same reply again, as a new message in place of the old one.
  await assistant(page).getByRole('button', { name: 'Regenerate this reply' }).click();
  await page.waitForSelector('article[data-role="assistant"][data-state="done"]', { timeout: 20000 });
  assert.equal(await page.locator('article.msg').count(), 2);
  assert.equal(await assistant(page).locator('.body').textContent(), reply);

  // Edit: the message goes back into the input and the conversation is cut there.
  await page.getByRole('button', { name: 'Edit this message' }).click();
  assert.equal(await page.locator('#input').inputValue(), 'Tell me a story');
  assert.equal(await page.locator('article.msg').count(), 0);
  await page.fill('#input', 'Once upon a time');
  await page.click('#send');
  await page.waitForSelector('article[data-role="assistant"][data-state="done"]', { timeout: 20000 });
  assert.equal(await page.locator('article[data-role="user"] .body').textContent(), 'Once upon a time');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('chat: Stop aborts a long generation on the server (running count back to 0)', { skip }, async () => {
  const page = await newPage();
  await openChat(page);
  await setSetting(page, 'max_tokens', 400);
  await page.fill('#input', 'Tell me a long story');
  await page.click('#send');
  await page.waitForFunction(() => {
    const a = [...document.querySelectorAll('article[data-role="assistant"]')].pop();
    return a && a.querySelector('.body').textContent.length > 0;
  }, null, { timeout: 10000 });
  await waitRunning(1, 2000);
  await page.click('#stop');
  const ms = await waitRunning(0, 3000);
  await page.waitForSelector('article[data-role="assistant"][data-state="stopped"]');
  assert.match(await assistant(page).locator('.stats').textContent(), /stopped/);
  assert.equal(await page.locator('#send').isEnabled(), true);
  // Escape stops too (in a new chat: the stopped reply would make the prompt too long for 400 more).
  await page.click('#new-chat');
  assert.equal(await page.locator('article.msg').count(), 0);
  await page.fill('#input', 'Another story');
  await page.press('#input', 'Enter');
  await waitRunning(1, 5000);
  await page.keyboard.press('Escape');
  await waitRunning(0, 3000);
  assert.deepEqual(page.errors, []);
  console.log(`running count back to 0 ${ms} ms after Stop`);
  await page.context().close();
});

test('chat: model output with <script> and HTML is shown as text (JSON-schema field)', { skip }, async () => {
  const page = await newPage();
  await openChat(page);
  const evil = '<script>document.title="pwned"</script><img src=x onerror="document.title=1"> **bold**';
  await page.fill('#schema', JSON.stringify({ enum: [evil] }));
  await page.fill('#input', 'say it');
  await page.press('#input', 'Enter');
  await page.waitForSelector('article[data-role="assistant"][data-state="done"]', { timeout: 20000 });
  const body = assistant(page).locator('.body');
  const text = await body.textContent();
  assert.ok(text.includes('<script>document.title=\\"pwned\\"</script><img src=x'), text);
  assert.equal(await page.locator('#messages script, #messages img').count(), 0);
  assert.equal(await body.locator('strong').textContent(), 'bold');  // markdown still applies
  assert.equal(await page.title(), 'tokenmill chat');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('chat: labels, keyboard use and a phone-sized screen', { skip }, async () => {
  const page = await newPage(null, { width: 390, height: 844 });
  await openChat(page);
  // Every form control has an accessible name (a <label for> or aria-label).
  const unlabeled = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea, button')]
    .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.textContent.trim())
    .map((e) => e.id || e.outerHTML));
  assert.deepEqual(unlabeled, []);
  assert.equal(await page.getByLabel('Message').count(), 1);
  assert.equal(await page.getByLabel('System prompt').count(), 1);
  // The input has focus on load; Tab reaches the Send button next.
  assert.equal(await page.evaluate(() => document.activeElement.id), 'input');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'send');
  // Phone width: nothing wider than the screen; the settings open with their button.
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  assert.equal(await page.locator('#system').isVisible(), false);
  await page.click('#settings-toggle');
  assert.equal(await page.locator('#system').isVisible(), true);
  assert.equal(await page.locator('#settings-toggle').getAttribute('aria-expanded'), 'true');
  await setSetting(page, 'max_tokens', 30);
  await page.click('#settings-toggle');
  await page.fill('#input', 'Hello');
  await page.keyboard.press('Enter');
  await page.waitForSelector('article[data-role="assistant"][data-state="done"]', { timeout: 20000 });
  await page.screenshot({ path: path.join(outDir, 'chat-phone.png') });
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('chat: reasoning and tool calls are shown apart from the answer', { skip }, async () => {
  // A real server whose template opens <think>: stories260K's whole reply is reasoning.
  const dir = fs.mkdtempSync(path.join(outDir, 'think-'));
  const file = path.join(dir, 'think.jinja');
  fs.writeFileSync(file, "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}" +
                         '{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}');
  const s = await startServer(['--chat-template', file, '--reasoning-parser', 'deepseek_r1']);
  try {
    const page = await newPage();
    await openChat(page, s.url);
    await setSetting(page, 'max_tokens', 24);
    await page.fill('#input', 'Think first');
    await page.press('#input', 'Enter');
    await page.waitForSelector('article[data-role="assistant"][data-state="done"]', { timeout: 20000 });
    const reasoning = await assistant(page).locator('details.reasoning .reasoning-text').textContent();
    assert.ok(reasoning.length > 10, reasoning);
    assert.equal(await assistant(page).locator('details.reasoning summary').textContent(), 'Reasoning');
    assert.equal((await assistant(page).locator('.body').textContent()).includes(reasoning.slice(0, 10)), false);

    // Tool calls, in deltas as a server streams them (index, id and name first, arguments in pieces):
    // the page's rendering of a canned stream.
    const events = [
      { choices: [{ index: 0, delta: { role: 'assistant', reasoning_content: 'Need the weather.' } }] },
      { choices: [{ index: 0, delta: { content: 'Let me check.' } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function',
                                                      function: { name: 'get_weather', arguments: '' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city": ' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Paris<b>"}' } }] } }] },
      { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { choices: [], usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 } },
    ];
    let sent = null;
    await page.route('**/v1/chat/completions', (route) => {
      sent = JSON.parse(route.request().postData());
      route.fulfill({ status: 200, contentType: 'text/event-stream',
                      body: events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n' });
    });
    await page.click('#new-chat');
    await page.fill('#tools', JSON.stringify([{ type: 'function', function: { name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]));
    await page.fill('#input', 'Weather in Paris?');
    await page.press('#input', 'Enter');
    await page.waitForSelector('article[data-role="assistant"][data-state="done"]');
    assert.equal(sent.tools[0].function.name, 'get_weather');
    assert.equal(sent.stream, true);
    const a = assistant(page);
    assert.equal(await a.locator('.reasoning-text').textContent(), 'Need the weather.');
    assert.equal(await a.locator('.body').textContent(), 'Let me check.');
    assert.equal(await a.locator('.tools .muted').textContent(), 'Tool call: get_weather');
    assert.deepEqual(JSON.parse(await a.locator('.tools pre').textContent()), { city: 'Paris<b>' });
    assert.match(await a.locator('.stats').textContent(), /^9 tokens · TTFT \d+ ms/);
    assert.equal(await page.locator('#messages b').count(), 0);
    await page.screenshot({ path: path.join(outDir, 'chat-tools.png') });
    assert.deepEqual(page.errors, []);
    await page.context().close();
  } finally {
    await s.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('dashboard: charts appear within seconds and move under load', { skip }, async () => {
  const page = await newPage();
  const t0 = Date.now();
  await page.goto(server.url + '/dashboard');
  await page.waitForFunction(() => document.querySelectorAll('svg.chart').length >= 10, null, { timeout: 5000 });
  const shownMs = Date.now() - t0;
  const max = (id) => page.locator(`[data-chart="${id}"] svg`).getAttribute('data-max').then(Number);
  // Idle: nothing generated.
  await page.waitForFunction(() => Number(document.body.dataset.scrapes) >= 2);
  assert.equal(await max('tokens'), 0);
  // Load: `tokenmill bench serve`, 12 requests 4 at a time, 100 tokens each (>= 2 s each at 20 ms a step).
  const bench = spawn(binary, ['bench', 'serve', '--base-url', server.url, '--num-prompts', '12', '--max-concurrency', '4',
                               '--input-len', '16', '--output-len', '100', '--ignore-eos', '--no-progress'],
                      { stdio: ['ignore', 'pipe', 'pipe'] });
  let benchLog = '';
  bench.stdout.on('data', (d) => (benchLog += d));
  bench.stderr.on('data', (d) => (benchLog += d));
  const load = new Promise((resolve) => bench.on('exit', (code) => resolve(code)));
  await page.waitForFunction(() => {
    const m = (id) => Number(document.querySelector(`[data-chart="${id}"] svg`).dataset.max);
    return m('tokens') > 0 && m('requests') >= 2 && m('kv') > 0 && m('ttft') > 0 && m('cpu') > 0;
  }, null, { timeout: 15000 });
  assert.equal(await load, 0, benchLog);
  await page.waitForFunction(() => Number(document.querySelector('[data-chart="itl"] svg').dataset.max) > 0,
                             null, { timeout: 6000 });
  // The models table and the static facts.
  const table = await page.locator('#models-table').textContent();
  assert.match(table, /stories260K/);
  const facts = await page.locator('#facts').textContent();
  for (const want of ['Quantization', 'F32', 'Max model length', '512', 'Memory plan', 'Uptime', 'Version'])
    assert.ok(facts.includes(want), `facts lack ${want}: ${facts}`);
  // Lines were drawn.
  assert.ok(await page.locator('[data-chart="tokens"] svg path').count() >= 1);
  await page.screenshot({ path: path.join(outDir, 'dashboard.png'), fullPage: true });
  const phone = await newPage(null, { width: 390, height: 844 });
  await phone.goto(server.url + '/dashboard');
  await phone.waitForFunction(() => document.querySelectorAll('svg.chart').length >= 10, null, { timeout: 5000 });
  assert.ok(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  await phone.screenshot({ path: path.join(outDir, 'dashboard-phone.png') });
  assert.deepEqual(page.errors, []);
  assert.deepEqual(phone.errors, []);
  console.log(`dashboard charts shown ${shownMs} ms after navigation`);
  await page.context().close();
  await phone.context().close();
});

test('--api-key: the pages load, ask for the key and send it as Bearer', { skip }, async () => {
  const s = await startServer(['--api-key', 'sekrit']);
  try {
    assert.equal((await fetch(`${s.url}/`)).status, 200);
    assert.equal((await fetch(`${s.url}/ui/info`)).status, 401);
    const page = await newPage(/401/);
    await page.goto(s.url + '/');
    const dialog = page.locator('#key-dialog');
    await dialog.waitFor({ state: 'visible' });
    await page.locator('#key-input').fill('wrong');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#key-dialog .key-message:text("refused")');
    await page.locator('#key-input').fill('sekrit');
    await page.keyboard.press('Enter');
    await page.waitForSelector('#model option', { state: 'attached' });
    await setSetting(page, 'max_tokens', 8);
    await page.fill('#input', 'Hi');
    await page.press('#input', 'Enter');
    await page.waitForSelector('article[data-role="assistant"][data-state="done"]', { timeout: 20000 });
    // The dashboard (same browser storage) uses the key for /ui/info.
    await page.goto(s.url + '/dashboard');
    await page.waitForFunction(() => document.getElementById('facts').textContent.includes('F32'), null,
                               { timeout: 5000 });
    assert.deepEqual(page.errors, []);
    await page.context().close();
  } finally {
    await s.stop();
  }
});

test('--no-ui: the pages answer 404, /health, /metrics and the API are unchanged', { skip }, async () => {
  const s = await startServer(['--no-ui']);
  try {
    for (const p of ['/', '/dashboard', '/ui/chat.js', '/ui/ui.css', '/ui/info'])
      assert.equal((await fetch(s.url + p)).status, 404, p);
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
    assert.equal((await fetch(`${s.url}/metrics`)).status, 200);
    assert.equal((await fetch(`${s.baseURL}/models`)).status, 200);
    const r = await fetch(`${s.baseURL}/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'stories260K', prompt: 'Once', max_tokens: 4 }),
    });
    assert.equal(r.status, 200);
  } finally {
    await s.stop();
  }
});

// Not a browser test: runs with or without chromium.
test('no asset loads anything from an http(s):// address', async () => {
  const dir = path.join(sourceDir, 'src/server/assets');
  const files = fs.readdirSync(dir);
  assert.ok(files.includes('chat.html') && files.includes('dashboard.js'));
  const bad = /(?:\b(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?\/\/)|(?:url\(\s*["']?\s*(?:https?:)?\/\/)|(?:@import)|(?:\b(?:fetch|import)\s*\(\s*["'`]\s*(?:https?:)?\/\/)/i;
  for (const f of files) {
    const text = fs.readFileSync(path.join(dir, f), 'utf8');
    text.split('\n').forEach((line, i) => assert.ok(!bad.test(line), `${f}:${i + 1}: ${line.trim()}`));
  }
  // The checker itself catches what it is for.
  for (const line of ['<script src="https://cdn.example/x.js">', "<a href='http://x'>", 'url(//x/y.png)',
                      "fetch('https://x')"])
    assert.ok(bad.test(line), line);
});
