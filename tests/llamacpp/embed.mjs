// llama.cpp computes the embeddings tokenmill computes: tiny random embedding models written by
// `tokenmill dummy` (bert with cls and mean pooling, nomic-bert, jina-bert-v2, a bert reranker, decoders with a
// pooling type: qwen3 last-token (Qwen3-Embedding style) and llama mean, EmbeddingGemma's bidirectional
// gemma-embedding with and without its dense projections, and a Qwen3-Reranker with Qwen2's vocabulary),
// the same token sequences through node-llama-cpp's embedding / ranking contexts (its prebuilt llama.cpp)
// and through `tokenmill embed`. Embeddings must agree within 1e-4 cosine distance,
// reranker scores within 1e-4, and llama.cpp's WordPiece tokenization of the texts (and its tokens of the
// Qwen3-Reranker prompt) must equal tokenmill's.
//
// Exit 0 pass, 1 fail, 77 skipped (node-llama-cpp not installed or its binary cannot load here).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { checker, loadLlama, sourceDir, tm } from './common.mjs';

const llama = await loadLlama();
const { failures, check } = checker();
const tmTokens = (file, text, special) =>
  JSON.parse(tm(['tokenize', '--model', file, '--text', text, ...(special ? ['--add-special', '--parse-special'] : [])]));
const tmEmbed = (file, seqs) =>
  tm(['embed', '--model', file, '--threads', '2', ...seqs.flatMap((s) => ['--tokens', s.join(',')])])
    .trim().split('\n').map((l) => JSON.parse(l).embedding);

function cosDist(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return 1 - ab / Math.sqrt(aa * bb);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-embed-'));
const models = [
  { name: 'bert-cls-f32', args: ['--shape', 'tiny-bert', '--pooling', 'cls', '--dtype', 'F32'] },
  { name: 'bert-mean-f16', args: ['--shape', 'tiny-bert', '--pooling', 'mean', '--dtype', 'F16'] },
  { name: 'bert-mean-q8_0', args: ['--shape', 'tiny-bert', '--pooling', 'mean', '--dtype', 'Q8_0'] },
  { name: 'nomic-bert-mean-f32', args: ['--shape', 'tiny-nomic-bert', '--dtype', 'F32'] },
  { name: 'jina-bert-v2-mean-f32', args: ['--shape', 'tiny-jina-bert-v2', '--dtype', 'F32'] },
  { name: 'qwen3-last-f32', args: ['--shape', 'tiny-qwen3', '--pooling', 'last', '--dtype', 'F32'] },
  { name: 'llama-mean-f32', args: ['--shape', 'tiny-llama', '--pooling', 'mean', '--dtype', 'F32'] },
  // EmbeddingGemma: bidirectional, windows of 4 positions either side, dense_2 / dense_3 after pooling
  { name: 'gemma-embedding-f32', args: ['--shape', 'tiny-gemma-embedding', '--dtype', 'F32'] },
  // Q8_0: the two implementations' 8-bit activations round apart; on these random Gemma weights (the
  // stream scaled by sqrt(n_embd), four matmuls after the pooling's) that moves the embedding about as
  // far as quantizing does (2026-12-07: Q8_0 vs the F32 file's embedding 7.4e-4 in llama.cpp, 8.7e-4 in
  // tokenmill; tokenmill vs llama.cpp 5.8e-4; a causal tiny-gemma3 with mean pooling 1.2e-4, tiny-llama
  // 6.7e-6), so it is held to 2e-3 -- F32 and F16 files show the computation is the same.
  { name: 'gemma-embedding-q8_0', args: ['--shape', 'tiny-gemma-embedding', '--dtype', 'Q8_0'], tol: 2e-3 },
  { name: 'gemma-embedding-nodense-f16', args: ['--shape', 'tiny-gemma-embedding-nodense', '--dtype', 'F16'] },
];
const texts = ['hello world', 'The cat is fast!', 'search and rank: a query, a document (embed) 42', 'dogs'];

try {
  for (const m of models) {
    const file = path.join(dir, `${m.name}.gguf`);
    tm(['dummy', ...m.args, '--seed', '9', '-o', file]);
    const seqs = texts.map((t) => tmTokens(file, t, true));
    const ours = tmEmbed(file, seqs);
    const model = await llama.loadModel({ modelPath: file });
    try {
      if (m.name.includes('bert')) {
        for (const t of texts) {
          const theirs = Array.from(model.tokenize(t));
          const mine = tmTokens(file, t, false);
          check(JSON.stringify(theirs) === JSON.stringify(mine), `${m.name}: WordPiece tokens of "${t}" equal llama.cpp's`);
        }
      }
      const ctx = await model.createEmbeddingContext({ contextSize: 128, batchSize: 128, threads: 2 });
      let worst = 0;
      for (let i = 0; i < seqs.length; i++) {
        const theirs = (await ctx.getEmbeddingFor(seqs[i])).vector;
        check(theirs.length === ours[i].length, `${m.name}: ${theirs.length} dims (tokenmill ${ours[i].length})`);
        worst = Math.max(worst, cosDist(ours[i], theirs));
      }
      await ctx.dispose();
      const tol = m.tol ?? 1e-4;
      check(worst < tol, `${m.name}: cosine distance to llama.cpp ${worst.toExponential(2)} < ${tol}`);
    } finally {
      await model.dispose();
    }
  }

  // A cross-encoder reranker: llama.cpp's ranking context scores [CLS] query [SEP] document (its pair
  // layout, which /v1/rerank uses too); tokenmill's raw score of the same tokens through a sigmoid.
  const file = path.join(dir, 'bert-rank.gguf');
  tm(['dummy', '--shape', 'tiny-bert', '--pooling', 'rank', '--dtype', 'F32', '--seed', '9', '-o', file]);
  const model = await llama.loadModel({ modelPath: file });
  try {
    const ctx = await model.createRankingContext({ contextSize: 128, batchSize: 128, threads: 2 });
    const query = tmTokens(file, 'what is a cat', false);
    let worst = 0;
    for (const d of texts) {
      const doc = tmTokens(file, d, false);
      const theirs = await ctx.rank(query, doc);
      const raw = tmEmbed(file, [[2, ...query, 3, ...doc]])[0][0];
      worst = Math.max(worst, Math.abs(theirs - 1 / (1 + Math.exp(-raw))));
    }
    await ctx.dispose();
    check(worst < 1e-4, `bert reranker: scores differ from llama.cpp's by ${worst.toExponential(2)} < 1e-4`);
  } finally {
    await model.dispose();
  }

  // A Qwen3-Reranker (qwen3, pooling rank, cls.output = the lm_head rows of "yes" and "no", the prompt in
  // tokenizer.chat_template.rerank; llama.cpp: last token, cls.output, softmax). llama-server's prompt
  // (the template with query and document in place, special tokens parsed, nothing added) tokenizes
  // the same in both, and llama.cpp's outputs on it equal tokenmill's; node-llama-cpp's ranking context
  // (template pieces tokenized apart) returns output[0] as the score, equal to tokenmill's on its tokens.
  {
    const file = path.join(dir, 'qwen3-rerank.gguf');
    const vocab = path.join(sourceDir, 'tests/data/tokenizers/ggml-vocab-qwen2.gguf');
    tm(['dummy', '--shape', 'tiny-qwen3-reranker', '--vocab', vocab, '--dtype', 'F32', '--seed', '9', '-o', file]);
    const model = await llama.loadModel({ modelPath: file });
    try {
      const tmpl = model.fileInfo.metadata?.tokenizer?.['chat_template.rerank'];
      check(typeof tmpl === 'string' && tmpl.includes('{query}') && tmpl.includes('{document}'),
        'qwen3 reranker: llama.cpp reads tokenizer.chat_template.rerank');
      // what node-llama-cpp adds around an evaluated input (its resolveBeginningTokenToPrepend /
      // resolveEndTokenToAppend for a BPE vocabulary); nothing for Qwen's
      const bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
      const eos = model.tokens.shouldAppendEosToken ? model.tokens.eos : null;
      const query = 'what is a cat';
      const qTok = Array.from(model.tokenize(query, false, 'trimLeadingSpace'));
      const serverSeqs = [], rankSeqs = [];
      for (const d of texts) {
        const prompt = tmpl.replaceAll('{query}', query).replaceAll('{document}', d);
        const theirs = Array.from(model.tokenize(prompt, true));
        const mine = JSON.parse(tm(['tokenize', '--model', file, '--text', prompt, '--parse-special']));
        check(JSON.stringify(theirs) === JSON.stringify(mine), `qwen3 reranker: prompt tokens with "${d}" equal llama.cpp's`);
        const s = [...theirs];
        if (bos != null && s[0] !== bos) s.unshift(bos);  // LlamaEmbeddingContext._prepareInput
        if (eos != null && s.at(-1) !== eos) s.push(eos);
        serverSeqs.push(s);
        const dTok = Array.from(model.tokenize(d, false, 'trimLeadingSpace'));
        const r = tmpl.split(/(\{query\}|\{document\})/).flatMap((piece) =>
          piece === '{query}' ? qTok : piece === '{document}' ? dTok : Array.from(model.tokenize(piece, true, 'trimLeadingSpace')));
        if (bos != null && r[0] !== bos) r.unshift(bos);  // LlamaRankingContext._getEvaluationInput
        if (eos != null && r.at(-1) !== eos) r.unshift(eos);
        rankSeqs.push(r);
      }
      const ours = tmEmbed(file, [...serverSeqs, ...rankSeqs]);
      const emb = await model.createEmbeddingContext({ contextSize: 1024, batchSize: 1024, threads: 2 });
      let worst = 0;
      for (let i = 0; i < serverSeqs.length; i++) {
        const theirs = (await emb.getEmbeddingFor([...serverSeqs[i]])).vector;
        check(theirs.length === 2 && ours[i].length === 2, `qwen3 reranker: 2 outputs (llama.cpp ${theirs.length}, tokenmill ${ours[i].length})`);
        worst = Math.max(worst, Math.abs(theirs[0] - ours[i][0]), Math.abs(theirs[1] - ours[i][1]));
      }
      await emb.dispose();
      check(worst < 1e-4, `qwen3 reranker: outputs on llama-server's prompts differ from llama.cpp's by ${worst.toExponential(2)} < 1e-4`);
      const ctx = await model.createRankingContext({ contextSize: 1024, batchSize: 1024, threads: 2 });
      worst = 0;
      const scores = [];
      for (let i = 0; i < texts.length; i++) {
        const dTok = Array.from(model.tokenize(texts[i], false, 'trimLeadingSpace'));
        const theirs = await ctx.rank(qTok, dTok);
        scores.push(theirs);
        worst = Math.max(worst, Math.abs(theirs - ours[serverSeqs.length + i][0]));
      }
      await ctx.dispose();
      check(worst < 1e-4, `qwen3 reranker: ranking scores differ from llama.cpp's by ${worst.toExponential(2)} < 1e-4`);
      check(Math.max(...scores) - Math.min(...scores) > 1e-4, `qwen3 reranker: scores vary (${scores.map((x) => x.toFixed(4)).join(' ')})`);
    } finally {
      await model.dispose();
    }
  }
} catch (e) {
  check(false, `error: ${e.stack ?? e}`);
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}

console.log(failures.length ? `${failures.length} failure(s)` : 'all passed');
process.exit(failures.length ? 1 : 0);
