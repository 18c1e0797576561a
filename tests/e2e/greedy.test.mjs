// Greedy output through the server equals `tokenmill generate` for the same prompt.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, generateJson } from './lib/server.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  await server.stop();
});

for (const [prompt, n] of [['Once upon a time', 100], ['The little dog', 60], ['', 200]]) {
  test(`completions(temperature 0) == generate for ${JSON.stringify(prompt)}`, async () => {
    const args = ['--temperature', '0', '--max-tokens', String(n)];
    if (prompt) args.push('--prompt', prompt);
    const ref = generateJson(args);
    const r = await client.completions.create({ model: 'stories260K', prompt, max_tokens: n, temperature: 0 });
    assert.equal(r.choices[0].text, ref.text);
    assert.equal(r.usage.prompt_tokens, ref.prompt_tokens.length);
    assert.equal(r.usage.completion_tokens, ref.tokens.length);
  });
}
