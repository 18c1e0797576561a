// Reasoning output with the official openai client: message.reasoning_content / delta.reasoning_content
// as vLLM returns them, chat_template_kwargs and reasoning_effort reaching the template. The default
// model (stories260K) does not reason, so the server gets a chat template whose generation prompt opens
// <think> (closed at once when enable_thinking is false) and --reasoning-parser deepseek_r1: everything
// the model writes up to </think> is reasoning. The model never writes </think>, so the whole greedy
// output must come back as reasoning_content with content null, exactly the text /v1/completions gives
// for the same prompt tokens, with the same finish_reason.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer } from './lib/server.mjs';

const MODEL = 'stories260K';
const TEMPLATE =
  "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n" +
  '{% if enable_thinking is false %}</think>\n\n{% endif %}{% endif %}';

let server;
let client;
let dir;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-reasoning-'));
  const file = path.join(dir, 'think.jinja');
  fs.writeFileSync(file, TEMPLATE);
  server = await startServer(['--chat-template', file, '--reasoning-parser', 'deepseek_r1']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const r = await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.code, 0, server.log());
});

const messages = [{ role: 'user', content: 'Tell me a story about a cat.' }];

// The greedy text the model writes after the rendered chat prompt, via /tokenize + /v1/completions
// (no reasoning split there).
async function plainOutput(extra, max_tokens) {
  const tok = await (await fetch(`${server.url}/tokenize`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages, ...extra }),
  })).json();
  assert.ok(Array.isArray(tok.tokens), JSON.stringify(tok));
  const r = await client.completions.create({ model: MODEL, prompt: tok.tokens, max_tokens, temperature: 0 });
  return { text: r.choices[0].text, finish: r.choices[0].finish_reason };
}

test('the reasoning the prompt opened comes back as reasoning_content, content null', async () => {
  const want = await plainOutput({}, 40);
  assert.ok(want.text.length > 0);
  assert.ok(!want.text.includes('</think>'));
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 40, temperature: 0 });
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(c.message.content, null);
  assert.equal(c.message.reasoning_content, want.text);
  assert.equal(c.finish_reason, want.finish);
  assert.equal(r.usage.completion_tokens <= 40, true);
});

test('streaming: delta.reasoning_content adds up to the same text, no content deltas', async () => {
  const want = await plainOutput({}, 40);
  const stream = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 40, temperature: 0, stream: true,
  });
  let reasoning = '';
  let content = '';
  let finish = null;
  let n = 0;
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    if (n++ === 0) assert.equal(ch.delta.role, 'assistant');
    if (ch.delta.reasoning_content) reasoning += ch.delta.reasoning_content;
    if (ch.delta.content) content += ch.delta.content;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
  assert.ok(n > 2);
  assert.equal(reasoning, want.text);
  assert.equal(content, '');
  assert.equal(finish, want.finish);
});

test('chat_template_kwargs enable_thinking=false closes the block: all content, reasoning_content null', async () => {
  const extra = { chat_template_kwargs: { enable_thinking: false } };
  const want = await plainOutput(extra, 24);
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 24, temperature: 0, ...extra });
  assert.equal(r.choices[0].message.content, want.text);
  assert.equal(r.choices[0].message.reasoning_content, null);
  assert.equal(r.choices[0].finish_reason, want.finish);
  // reasoning_effort "none" does the same (vLLM sets enable_thinking from it).
  const e = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 24, temperature: 0, reasoning_effort: 'none',
  });
  assert.equal(e.choices[0].message.content, want.text);
  assert.equal(e.choices[0].message.reasoning_content, null);
});

test('reasoning_effort is checked; include_reasoning=false drops the reasoning', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: MODEL, messages, max_tokens: 4, reasoning_effort: 'enormous' }),
    (err) => err.status === 400 && err.param === 'reasoning_effort',
  );
  const r = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 8, temperature: 0, include_reasoning: false,
  });
  assert.equal(r.choices[0].message.reasoning_content, null);
  assert.equal(r.choices[0].message.content, null);
});

test('a tool_choice constraint starts after the reasoning: free reasoning with thinking on, a forced call with it off', async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: {
        type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false,
      },
    },
  }];
  // Thinking on: the output starts inside the reasoning and the grammar waits for </think>, which this
  // model never writes, so the reasoning is exactly the unconstrained greedy text and no call is made.
  const want = await plainOutput({}, 30);
  const r = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 30, temperature: 0, tools, tool_choice: 'required',
  });
  assert.equal(r.choices[0].message.reasoning_content, want.text);
  assert.equal(r.choices[0].message.content, null);
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.equal(r.choices[0].finish_reason, 'length');
  // Thinking off (the prompt closes the block): the grammar applies from the first token and the call
  // comes back parsed (Hermes format for a template without tool markers).
  const off = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 80, temperature: 0, tools, tool_choice: 'required', parallel_tool_calls: false,
    chat_template_kwargs: { enable_thinking: false },
  });
  const c = off.choices[0];
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
  assert.equal(c.message.reasoning_content, null);
  assert.equal(c.message.tool_calls.length, 1);
  assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
  const args = JSON.parse(c.message.tool_calls[0].function.arguments);
  assert.deepEqual(Object.keys(args), ['city']);
  assert.ok(args.city.length <= 12);
});

test('response_format after the reasoning: free reasoning with thinking on, valid JSON content with it off', async () => {
  const schema = { type: 'object', properties: { n: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['n'], additionalProperties: false };
  const response_format = { type: 'json_schema', json_schema: { name: 'n', schema, strict: true } };
  const want = await plainOutput({}, 30);
  const on = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 30, temperature: 0, response_format });
  assert.equal(on.choices[0].message.reasoning_content, want.text);
  assert.equal(on.choices[0].message.content, null);
  const off = await client.chat.completions.create({
    model: MODEL, messages, max_tokens: 30, temperature: 0, response_format, chat_template_kwargs: { enable_thinking: false },
  });
  assert.equal(off.choices[0].finish_reason, 'stop');
  assert.equal(off.choices[0].message.reasoning_content, null);
  const v = JSON.parse(off.choices[0].message.content);
  assert.ok(Number.isInteger(v.n) && v.n >= 0 && v.n <= 99, off.choices[0].message.content);
});
