// A Gemma 4 model end to end through the official openai client: a random tiny-gemma4 (`tokenmill dummy`)
// carrying the real Gemma 4 vocabulary and chat template (tests/data/tokenizers/ggml-vocab-gemma-4.gguf).
// The server picks the gemma4 tool-call parser and Gemma 4's thinking channel from the template; a forced
// call (tool_choice "required") comes back as a tool call whose arguments follow the function's
// parameters, streamed or not; the template renders tool results sent back (role "tool") into the
// prompt.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import OpenAI from 'openai';
import { startServer, binary, sourceDir } from './lib/server.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-gemma4-e2e-'));
let server;
let client;
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 5 } },
      required: ['city', 'days'],
      additionalProperties: false,
    },
  },
}];
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

before(async () => {
  const file = path.join(dir, 'g4.gguf');
  const vocab = path.join(sourceDir, 'tests/data/tokenizers/ggml-vocab-gemma-4.gguf');
  const r = spawnSync(binary, ['dummy', '--shape', 'tiny-gemma4', '--vocab', vocab, '--dtype', 'F16', '--seed', '3', '-o', file],
    { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  server = await startServer(['--model', file, '--served-model-name', 'g4']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'none', maxRetries: 0 });
});
after(async () => {
  if (server) assert.equal((await server.stop()).code, 0, server.log());
  fs.rmSync(dir, { recursive: true, force: true });
});

function checkArgs(call) {
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  const a = JSON.parse(call.function.arguments);
  assert.deepEqual(Object.keys(a).sort(), ['city', 'days']);
  assert.equal(typeof a.city, 'string');
  assert.ok([...a.city].length <= 12, a.city);
  assert.ok(Number.isInteger(a.days) && a.days >= 1 && a.days <= 5, String(a.days));
}

test('the template picks the gemma4 tool-call parser and thinking channel', () => {
  assert.match(server.log(), /tool-call parser: gemma4/);
  assert.match(server.log(), /reasoning parser: detected from the chat template \(<\|channel>thought\\n…<channel\|>\)/);
});

test('a forced call comes back as a tool call', async () => {
  const r = await client.chat.completions.create({
    model: 'g4', messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 80,
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls.length, 1);
  checkArgs(c.message.tool_calls[0]);
});

test('streamed, the name comes first and the arguments add up', async () => {
  const stream = await client.chat.completions.create({
    model: 'g4', messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 80, stream: true,
  });
  let name = '', args = '', finish = null, first = true;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta;
    for (const t of d?.tool_calls ?? []) {
      if (first) {
        assert.equal(t.function.name, 'get_weather');
        assert.ok(t.id);
        first = false;
      }
      name += t.function?.name ?? '';
      args += t.function?.arguments ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  checkArgs({ type: 'function', function: { name, arguments: args } });
});

test('tool results sent back render into the prompt', async () => {
  const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":1}' } };
  const r = await client.chat.completions.create({
    model: 'g4', max_tokens: 4,
    messages: [...messages, { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 18}' }],
    tools,
  });
  // the prompt holds the call and its result in Gemma 4's syntax: more tokens than the question alone
  const plain = await client.chat.completions.create({ model: 'g4', max_tokens: 4, messages, tools });
  assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 10, `${r.usage.prompt_tokens} vs ${plain.usage.prompt_tokens}`);
});
