// GGUF files written by tokenmill (convert, dummy, quantize) read by an independent GGUF parser:
// Hugging Face's @huggingface/gguf (the reader behind the Hub's GGUF pages), not our own reader.
// For every file: the parser accepts it; tensor count, names, ggml shapes and type ids agree with
// `tokenmill inspect`; the data section and every tensor are aligned to general.alignment; tensors are
// laid out back to back in header order (each padded to the alignment, as ggml's writer does) and end
// inside the file, with sizes from the GGUF spec's block table below; tensor names follow llama.cpp's
// naming; and the metadata keys llama.cpp reads for the architecture are present with the value types
// it expects. (llama.cpp itself is not available on this machine; this is the closest independent check.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gguf, GGMLQuantizationType, GGUFValueType } from '@huggingface/gguf';
import { binary, sourceDir } from './lib/server.mjs';

// GGUF spec / ggml: [elements per block, bytes per block] by type name.
const BLOCK = {
  F32: [1, 4], F16: [1, 2], BF16: [1, 2], Q8_0: [32, 34], Q4_0: [32, 18], Q4_1: [32, 20], Q5_0: [32, 22],
  Q5_1: [32, 24], Q2_K: [256, 84], Q3_K: [256, 110], Q4_K: [256, 144], Q5_K: [256, 176], Q6_K: [256, 210],
};
const NAME_RE = /^(token_embd|output_norm|output|rope_freqs)\.weight$|^blk\.\d+\.(attn_norm|attn_q|attn_k|attn_v|attn_output|attn_q_norm|attn_k_norm|post_attention_norm|post_ffw_norm|ffn_norm|ffn_gate|ffn_up|ffn_down)\.(weight|bias)$/;

function tm(args) {
  const r = spawnSync(binary, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, `tokenmill ${args.join(' ')}:\n${r.stderr}`);
  return r.stdout;
}

// `tokenmill inspect --tensors`: [{ name, type, shape: [ne0, ne1, ...] }] and the header counts.
function inspect(file) {
  const out = tm(['inspect', file, '--tensors']);
  const fmt = out.match(/GGUF v(\d+), alignment (\d+), (\d+) metadata keys, (\d+) tensors/);
  assert.ok(fmt, out.slice(0, 400));
  const tensors = [];
  for (const line of out.split('\n')) {
    const m = line.match(/^\s+(\S+)\s+([A-Z0-9_]+)\s+\[([0-9 x]+)\]/);
    if (m && m[1].includes('.')) tensors.push({ name: m[1], type: m[2], shape: m[3].split(' x ').map(Number) });
  }
  return { version: +fmt[1], alignment: +fmt[2], kvCount: +fmt[3], tensorCount: +fmt[4], tensors };
}

function u32Types(t) {
  return t === GGUFValueType.UINT32 || t === GGUFValueType.INT32 || t === GGUFValueType.UINT64;
}

async function check(file) {
  const want = inspect(file);
  const { metadata, typedMetadata, tensorInfos, tensorDataOffset } = await gguf(file, { allowLocalFile: true, typedMetadata: true });
  assert.equal(metadata.version, want.version);
  assert.equal(Number(metadata.tensor_count), want.tensorCount);
  assert.equal(Number(metadata.kv_count), want.kvCount);
  const align = BigInt(metadata['general.alignment'] ?? 32);
  assert.equal(Number(align), want.alignment);
  assert.equal(tensorDataOffset % align, 0n, 'data section aligned');

  // Tensors: same list as tokenmill's reader, in the same order.
  assert.equal(tensorInfos.length, want.tensors.length);
  const size = fs.statSync(file).size;
  let expectOffset = 0n;
  tensorInfos.forEach((ti, i) => {
    const w = want.tensors[i];
    const type = GGMLQuantizationType[ti.dtype];
    assert.equal(ti.name, w.name);
    assert.equal(type, w.type, ti.name);
    assert.deepEqual(ti.shape.map(Number), w.shape, ti.name);
    assert.match(ti.name, NAME_RE);
    const [be, bb] = BLOCK[type] ?? assert.fail(`unexpected type ${type}`);
    const n = ti.shape.reduce((a, b) => a * b, 1n);
    assert.equal(ti.shape[0] % BigInt(be), 0n, `${ti.name}: row of ${ti.shape[0]} is not whole ${type} blocks`);
    const bytes = (n / BigInt(be)) * BigInt(bb);
    assert.equal(ti.offset % align, 0n, `${ti.name} aligned`);
    assert.equal(ti.offset, expectOffset, `${ti.name}: tensors back to back in header order`);
    expectOffset = ((ti.offset + bytes + align - 1n) / align) * align;
    assert.ok(tensorDataOffset + ti.offset + bytes <= BigInt(size), `${ti.name} ends inside the file`);
  });

  // Metadata llama.cpp reads when it loads the architecture, with the value types it accepts.
  const arch = metadata['general.architecture'];
  assert.ok(['llama', 'qwen2', 'qwen3', 'gemma2', 'gemma3'].includes(arch), arch);
  for (const k of ['context_length', 'embedding_length', 'block_count', 'feed_forward_length',
    'attention.head_count', 'attention.head_count_kv']) {
    const e = typedMetadata[`${arch}.${k}`];
    assert.ok(e, `${arch}.${k} present`);
    assert.ok(u32Types(e.type), `${arch}.${k} is an integer`);
  }
  assert.equal(typedMetadata[`${arch}.attention.layer_norm_rms_epsilon`].type, GGUFValueType.FLOAT32);
  assert.equal(typedMetadata['tokenizer.ggml.model'].type, GGUFValueType.STRING);
  const tokens = typedMetadata['tokenizer.ggml.tokens'];
  assert.equal(tokens.type, GGUFValueType.ARRAY);
  assert.equal(tokens.subType, GGUFValueType.STRING);
  const vocab = tokens.value.length;
  const emb = tensorInfos.find((t) => t.name === 'token_embd.weight');
  assert.equal(Number(emb.shape[1]), vocab, 'embedding rows = vocabulary');
  if (typedMetadata['tokenizer.ggml.scores']) {
    assert.equal(typedMetadata['tokenizer.ggml.scores'].subType, GGUFValueType.FLOAT32);
    assert.equal(typedMetadata['tokenizer.ggml.scores'].value.length, vocab);
  }
  if (typedMetadata['tokenizer.ggml.token_type']) {
    assert.equal(typedMetadata['tokenizer.ggml.token_type'].subType, GGUFValueType.INT32);
    assert.equal(typedMetadata['tokenizer.ggml.token_type'].value.length, vocab);
  }
  return { arch, types: new Set(tensorInfos.map((t) => GGMLQuantizationType[t.dtype])) };
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-gguf-interop-'));
const stories = path.join(sourceDir, 'models/stories260K/stories260K.gguf');
const dims = ['--n-vocab', '512', '--n-embd', '256', '--n-layer', '2', '--n-head', '4', '--n-head-kv', '2',
  '--n-ff', '512', '--n-ctx', '256', '--vocab', stories];

test('the bundled stories260K (written by convert --llama2c)', async () => {
  const r = await check(stories);
  assert.equal(r.arch, 'llama');
  assert.deepEqual([...r.types], ['F32']);
});

test('convert --llama2c output', async () => {
  const src = path.join(sourceDir, 'tests/data/stories260K');
  const out = path.join(dir, 'converted.gguf');
  tm(['convert', '--llama2c', path.join(src, 'stories260K.bin'), '--tokenizer', path.join(src, 'tok512.bin'), '-o', out]);
  const r = await check(out);
  assert.equal(r.arch, 'llama');
});

for (const arch of ['llama', 'qwen2', 'qwen3', 'gemma2', 'gemma3']) {
  for (const dtype of ['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0']) {
    test(`dummy --arch ${arch} --dtype ${dtype}`, async () => {
      const out = path.join(dir, `dummy-${arch}-${dtype}.gguf`);
      tm(['dummy', '--arch', arch, ...dims, '--dtype', dtype, '-o', out]);
      const r = await check(out);
      assert.equal(r.arch, arch);
      assert.ok(r.types.has(dtype), [...r.types].join(','));
    });
  }
}

test('quantize: every type and mixed recipe', async () => {
  const f16 = path.join(dir, 'q-src-f16.gguf');
  tm(['dummy', '--arch', 'qwen2', ...dims, '--dtype', 'F16', '-o', f16]);
  for (const type of ['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q4_K', 'Q5_K', 'Q6_K', 'Q4_K_M', 'Q5_K_M', 'BF16', 'F32']) {
    const out = path.join(dir, `q-${type}.gguf`);
    tm(['quantize', f16, out, '--type', type]);
    const r = await check(out);
    const main = type.replace(/_M$/, '');
    assert.ok(r.types.has(main), `${type}: ${[...r.types].join(',')}`);
  }
});

test('cleanup', () => fs.rmSync(dir, { recursive: true, force: true }));
