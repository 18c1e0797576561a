// Tool calling with the official openai client on the default model (stories260K, the ChatML fallback,
// so the Hermes <tool_call> format): tool_choice "required" and a named function are enforced by the
// grammar, so even this tiny model writes calls whose arguments validate against the function's
// parameters; streaming delta.tool_calls reassemble to the same calls; "auto" parses what the model
// wrote; bad tools are 400s naming the field.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './lib/server.mjs';

let server;
let client;
const MODEL = 'stories260K';

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Get the current weather in a city',
      parameters: {
        type: 'object',
        properties: {
          city: { type: 'string', maxLength: 12 },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['city', 'unit'],
        additionalProperties: false,
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'set_alarm',
      parameters: {
        type: 'object',
        properties: { hour: { type: 'integer', minimum: 0, maximum: 23 }, loud: { type: 'boolean' } },
        required: ['hour', 'loud'],
        additionalProperties: false,
      },
    },
  },
];
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];

before(async () => {
  server = await startServer(['--max-num-seqs', '8']);
  client = new OpenAI({ baseURL: server.baseURL, apiKey: 'unused', maxRetries: 0 });
});
after(async () => {
  const r = await server.stop();
  assert.equal(r.code, 0, server.log());
});

// The subset of JSON Schema the tools above use.
function validate(schema, v, at = '$') {
  if (schema.enum) assert.ok(schema.enum.includes(v), `${at}: ${JSON.stringify(v)} not in enum`);
  switch (schema.type) {
    case 'object':
      assert.ok(v && typeof v === 'object' && !Array.isArray(v), `${at} is not an object`);
      for (const k of schema.required ?? []) assert.ok(k in v, `${at}.${k} is missing`);
      for (const [k, val] of Object.entries(v)) {
        const p = schema.properties?.[k];
        if (!p) assert.notEqual(schema.additionalProperties, false, `${at}.${k} is not allowed`);
        else validate(p, val, `${at}.${k}`);
      }
      break;
    case 'string':
      assert.equal(typeof v, 'string', `${at} is not a string`);
      if (schema.maxLength !== undefined) assert.ok([...v].length <= schema.maxLength, `${at} is too long`);
      break;
    case 'integer':
      assert.ok(Number.isInteger(v), `${at} is not an integer`);
      if (schema.minimum !== undefined) assert.ok(v >= schema.minimum, `${at} < minimum`);
      if (schema.maximum !== undefined) assert.ok(v <= schema.maximum, `${at} > maximum`);
      break;
    case 'boolean':
      assert.equal(typeof v, 'boolean', `${at} is not a boolean`);
      break;
  }
}

function checkCall(call, allowed = tools.map((t) => t.function.name)) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^(call_[0-9a-f]{24}|functions\.[\w.-]+:\d+)$/);  // Kimi-K2 writes its own ids
  assert.ok(allowed.includes(call.function.name), `unexpected function ${call.function.name}`);
  assert.equal(typeof call.function.arguments, 'string');
  const args = JSON.parse(call.function.arguments);
  validate(tools.find((t) => t.function.name === call.function.name).function.parameters, args);
  return args;
}

// Streams a request and reassembles delta.tool_calls the way OpenAI clients do, checking that each
// call's first chunk carries index, id, type and name and later chunks only index and arguments.
async function streamCalls(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const calls = [];
  let content = '';
  let finish = null;
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    if (ch.delta.content) content += ch.delta.content;
    for (const d of ch.delta.tool_calls ?? []) {
      if (d.index === calls.length) {
        assert.ok(d.id && d.type === 'function' && typeof d.function.name === 'string', JSON.stringify(d));
        assert.equal(typeof d.function.arguments, 'string');
        calls.push({ id: d.id, type: d.type, function: { name: d.function.name, arguments: d.function.arguments } });
      } else {
        assert.ok(d.index < calls.length, `delta for call ${d.index} before its first chunk`);
        assert.equal(d.id, undefined);
        assert.equal(d.function.name, undefined);
        calls[d.index].function.arguments += d.function.arguments ?? '';
      }
    }
  }
  return { calls, content, finish };
}

test('tool_choice required: one call whose arguments validate, finish_reason tool_calls', async () => {
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: MODEL, messages, tools, tool_choice: 'required', parallel_tool_calls: false,
      max_tokens: 200, temperature: 1, seed,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.role, 'assistant');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    checkCall(c.message.tool_calls[0]);
  }
});

test('tool_choice names a function: that function is called', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages, tools, tool_choice: { type: 'function', function: { name: 'set_alarm' } },
    parallel_tool_calls: false, max_tokens: 200, temperature: 0,
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
  assert.equal(c.message.tool_calls.length, 1);
  checkCall(c.message.tool_calls[0], ['set_alarm']);
});

test('streaming: delta.tool_calls reassemble to the non-streamed calls', async () => {
  const params = {
    model: MODEL, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
    parallel_tool_calls: false, max_tokens: 200, temperature: 0,
  };
  const whole = await client.chat.completions.create(params);
  const streamed = await streamCalls(params);
  assert.equal(streamed.finish, 'tool_calls');
  assert.equal(streamed.content, '');
  assert.equal(streamed.calls.length, 1);
  checkCall(streamed.calls[0], ['get_weather']);
  const want = whole.choices[0].message.tool_calls;
  assert.deepEqual(streamed.calls.map((c) => c.function), want.map((c) => c.function));
});

test('parallel calls (the default) are each valid', async () => {
  const r = await client.chat.completions.create({
    model: MODEL, messages, tools, tool_choice: 'required', max_tokens: 400, temperature: 1, seed: 7,
  });
  const c = r.choices[0];
  const calls = c.message.tool_calls ?? [];
  if (c.finish_reason === 'tool_calls') assert.ok(calls.length >= 1);
  else assert.equal(c.finish_reason, 'length');  // cut inside a later call: the complete ones still come back
  for (const call of calls) checkCall(call);
  assert.equal(new Set(calls.map((x) => x.id)).size, calls.length, 'ids are unique');
});

test('tool_choice auto and none: whatever parses, no error', async () => {
  for (const tool_choice of ['auto', 'none', undefined]) {
    const r = await client.chat.completions.create({ model: MODEL, messages, tools, tool_choice, max_tokens: 32 });
    const c = r.choices[0];
    assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason));
    if (c.message.tool_calls) for (const call of c.message.tool_calls) assert.equal(call.type, 'function');
    else assert.equal(typeof c.message.content, 'string');
    const s = await streamCalls({ model: MODEL, messages, tools, tool_choice, max_tokens: 32, seed: 3 });
    assert.ok(s.finish);
  }
});

test('bad tools and tool_choice are 400s naming the field', async () => {
  const bad = [
    [{ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }, 'tools'],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ tools, tool_choice: 'sometimes' }, 'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'],
  ];
  for (const [extra, param] of bad) {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages, max_tokens: 4, ...extra }),
      (e) => e.status === 400 && e.param === param,
      JSON.stringify(extra),
    );
  }
});

test('--tool-call-parser: forced calls in other formats parse back and validate', async () => {
  for (const parser of ['qwen3_coder', 'llama3_json', 'mistral', 'kimi_k2', 'glm45']) {
    const s = await startServer(['--max-num-seqs', '4', '--tool-call-parser', parser]);
    try {
      const c2 = new OpenAI({ baseURL: s.baseURL, apiKey: 'unused', maxRetries: 0 });
      const params = {
        model: MODEL, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
        parallel_tool_calls: false, max_tokens: 200, temperature: 0,
      };
      const r = await c2.chat.completions.create(params);
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls', `${parser}: ${JSON.stringify(c)}`);
      assert.equal(c.message.tool_calls.length, 1);
      checkCall(c.message.tool_calls[0], ['get_weather']);
      const streamed = await (async () => {
        const saved = client;
        client = c2;
        try {
          return await streamCalls(params);
        } finally {
          client = saved;
        }
      })();
      assert.equal(streamed.finish, 'tool_calls', parser);
      assert.deepEqual(streamed.calls.map((x) => x.function), c.message.tool_calls.map((x) => x.function), parser);
    } finally {
      const r = await s.stop();
      assert.equal(r.code, 0, s.log());
    }
  }
});
