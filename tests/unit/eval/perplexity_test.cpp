// LogitStream against the reference forward, perplexity against a hand computation on
// ReferenceForward, and the reference-vs-model comparison on real quantizations and KV types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/thread_pool.h"
#include "eval/perplexity.h"
#include "eval_models.h"
#include "model/reference.h"

using namespace tmill;
using namespace tmill::eval;

namespace {

std::shared_ptr<Model> load(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error();
  return *m;
}

std::unique_ptr<LogitStream> stream(std::shared_ptr<const Model> m, int64_t ctx, int64_t batch, DType kv,
                                    ThreadPool* pool) {
  LogitStreamOptions o;
  o.max_ctx = ctx;
  o.batch = batch;
  o.kv_dtype = kv;
  auto s = LogitStream::create(std::move(m), o, pool);
  EXPECT_TRUE(s.ok()) << s.error();
  return std::move(s).value();
}

std::vector<std::vector<int32_t>> story_chunks(const Model& m, int64_t ctx, int64_t max_chunks) {
  auto t = tokenize_text_file(m, test::story_text_path());
  EXPECT_TRUE(t.ok()) << t.error();
  return make_chunks(t->tokens, ctx, t->bos, max_chunks);
}

CompareResult run_compare(const std::string& ref_path, const std::string& model_path, DType ref_kv, DType kv,
                          int64_t ctx = 64, int64_t chunks = 4) {
  ThreadPool pool(2);
  auto ref = load(ref_path);
  auto model = ref_path == model_path ? ref : load(model_path);
  auto rs = stream(ref, ctx, 32, ref_kv, &pool);
  auto ms = stream(model, ctx, 32, kv, &pool);
  auto r = compare(*rs, *ms, story_chunks(*ref, ctx, chunks));
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? *r : CompareResult{};
}

}  // namespace

TEST(Chunks, SplitReplaceFirstTokenDropTail) {
  std::vector<int32_t> t = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto c = make_chunks(t, 4, 99);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], (std::vector<int32_t>{99, 1, 2, 3}));
  EXPECT_EQ(c[1], (std::vector<int32_t>{99, 5, 6, 7}));
  EXPECT_EQ(make_chunks(t, 4, -1)[1], (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(make_chunks(t, 4, 99, 1).size(), 1u);
  EXPECT_TRUE(make_chunks(t, 11, 99).empty());
  EXPECT_EQ(first_scored(512), 256);
}

TEST(LogitStream, RowsMatchReferenceForwardAcrossFeedsAndSubBatches) {
  auto m = load(test::stories_path());
  ThreadPool pool(2);
  auto s = stream(m, 40, 5, DType::F32, &pool);
  std::vector<int32_t> toks;
  for (int i = 0; i < 30; ++i) toks.push_back(i == 0 ? 1 : 3 + (i * 37) % 500);
  std::vector<std::vector<float>> rows(30);
  std::vector<int64_t> seen;
  auto keep = [&](int64_t pos, const float* r) {
    seen.push_back(pos);
    rows[pos].assign(r, r + m->config().n_vocab);
  };
  s->reset();
  ASSERT_TRUE(s->feed(std::span<const int32_t>(toks.data(), 12), 7, keep).ok());
  ASSERT_TRUE(s->feed(std::span<const int32_t>(toks.data() + 12, 18), 7, keep).ok());
  ASSERT_EQ(seen.size(), 23u);  // positions 7..29, in order
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int64_t>(7 + i));
  ReferenceForward ref(m, 40);
  for (int64_t p = 0; p < 30; ++p) {
    const auto& want = ref.forward(toks[p], p);
    if (p < 7) continue;
    double err = 0, scale = 0;
    for (size_t v = 0; v < want.size(); ++v) {
      err = std::max(err, static_cast<double>(std::abs(want[v] - rows[p][v])));
      scale = std::max(scale, static_cast<double>(std::abs(want[v])));
    }
    EXPECT_LT(err, 1e-4 * scale) << "position " << p;
  }
  // too long, bad ids
  EXPECT_FALSE(s->feed(toks, 0, keep).ok());
  s->reset();
  std::vector<int32_t> bad = {1, 512};
  auto st = s->feed(bad, 0, keep);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("outside the vocabulary"), std::string::npos);
}

// LongRoPE (phi3) follows the stream's context: tiny-phi3 (original context 32) through a stream of
// 24 positions matches the reference on the short factors, through one of 64 the reference on the
// long ones, and the two differ.
TEST(LogitStream, Phi3LongRopeFactorsFollowTheStreamContext) {
  auto m = load(test::dummy_model("tiny-phi3"));
  ThreadPool pool(2);
  std::vector<int32_t> toks;
  for (int i = 0; i < 24; ++i) toks.push_back(3 + (i * 37) % 500);
  double apart = 0;
  std::vector<std::vector<float>> by_ctx[2];
  for (int k = 0; k < 2; ++k) {
    const int64_t ctx = k == 0 ? 24 : 64;
    auto s = stream(m, ctx, 8, DType::F32, &pool);
    auto& rows = by_ctx[k];
    rows.resize(toks.size());
    s->reset();
    ASSERT_TRUE(s->feed(toks, 0, [&](int64_t pos, const float* r) { rows[pos].assign(r, r + m->config().n_vocab); }).ok());
    ReferenceForward ref(m, ctx);
    for (int64_t p = 0; p < static_cast<int64_t>(toks.size()); ++p) {
      const auto& want = ref.forward(toks[p], p);
      double err = 0, scale = 0;
      for (size_t v = 0; v < want.size(); ++v) {
        err = std::max(err, static_cast<double>(std::abs(want[v] - rows[p][v])));
        scale = std::max(scale, static_cast<double>(std::abs(want[v])));
      }
      EXPECT_LT(err, 1e-4 * scale) << "ctx " << ctx << " position " << p;
    }
  }
  for (size_t p = 0; p < toks.size(); ++p)
    for (size_t v = 0; v < by_ctx[0][p].size(); ++v)
      apart = std::max(apart, static_cast<double>(std::abs(by_ctx[0][p][v] - by_ctx[1][p][v])));
  EXPECT_GT(apart, 1e-3);
}

// PPL = exp(mean NLL) where the NLLs come from ReferenceForward, summed here in float64.
// A bidirectional embedding model (gemma-embedding) has no next-token logits: the stream refuses it rather
// than compute chunk-dependent numbers (each chunk would see only the positions fed so far).
TEST(LogitStream, RefusesABidirectionalModel) {
  auto m = load(test::dummy_model("tiny-gemma-embedding"));
  LogitStreamOptions o;
  auto s = LogitStream::create(m, o, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("embedding model"), std::string::npos) << s.error();
}

TEST(Perplexity, EqualsHandComputedReferenceOnStories260K) {
  auto m = load(test::stories_path());
  const int64_t ctx = 48;
  auto chunks = story_chunks(*m, ctx, 3);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1][0], 1);  // every chunk starts with BOS
  double sum = 0;
  int64_t n = 0;
  for (const auto& c : chunks) {
    ReferenceForward ref(m, ctx);
    for (int64_t p = 0; p + 1 < ctx; ++p) {
      const auto& l = ref.forward(c[p], p);
      if (p < ctx / 2) continue;
      double mx = l[0], z = 0;
      for (float x : l) mx = std::max(mx, static_cast<double>(x));
      for (float x : l) z += std::exp(x - mx);
      sum += mx + std::log(z) - l[c[p + 1]];
      ++n;
    }
  }
  ASSERT_EQ(n, 3 * (ctx - 1 - ctx / 2));
  const double want = std::exp(sum / static_cast<double>(n));
  ThreadPool pool(2);
  auto s = stream(m, ctx, 16, DType::F32, &pool);
  auto r = perplexity(*s, chunks);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->ppl.tokens, n);
  EXPECT_EQ(r->chunks, 3);
  EXPECT_NEAR(r->ppl.ppl, want, 1e-5 * want);
  EXPECT_GT(r->ppl.ppl_stderr, 0);
  std::printf("stories260K PPL on story.txt, ctx %lld: %.4f (reference %.4f)\n", static_cast<long long>(ctx), r->ppl.ppl,
              want);
  // A trained model predicts its own kind of text far better than chance (vocabulary 512).
  EXPECT_LT(r->ppl.ppl, 60.0);
}

TEST(Perplexity, SubBatchSizeDoesNotMatter) {
  auto m = load(test::stories_path());
  auto chunks = story_chunks(*m, 32, 2);
  ThreadPool pool(2);
  double first = 0;
  for (int64_t b : {1, 7, 64}) {
    auto s = stream(m, 32, b, DType::F32, &pool);
    auto r = perplexity(*s, chunks);
    ASSERT_TRUE(r.ok());
    if (b == 1) first = r->ppl.ppl;
    EXPECT_NEAR(r->ppl.ppl, first, 1e-6 * first) << "batch " << b;
  }
  auto small = stream(m, 16, 8, DType::F32, &pool);
  EXPECT_FALSE(perplexity(*small, chunks).ok());  // chunks longer than the stream's context
  EXPECT_FALSE(perplexity(*small, {}).ok());
}

TEST(Compare, ModelAgainstItselfIsExactlyZero) {
  const std::string path = test::dummy_model("tiny-qwen2");
  for (bool shared : {true, false}) {
    ThreadPool pool(2);
    auto a = load(path);
    auto b = shared ? a : load(path);
    auto rs = stream(a, 64, 32, DType::F16, &pool);
    auto ms = stream(b, 64, 32, DType::F16, &pool);
    auto r = compare(*rs, *ms, story_chunks(*a, 64, 3));
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->tokens, 3 * 31);
    EXPECT_EQ(r->kld.mean, 0.0);
    EXPECT_EQ(r->kld.max, 0.0);
    EXPECT_EQ(r->top1_agreement, 1.0);
    EXPECT_EQ(r->top1_same, r->tokens);
    EXPECT_EQ(r->ppl_reference.ppl, r->ppl_model.ppl);
    EXPECT_EQ(r->delta_ppl, 0.0);
  }
}

TEST(Compare, Q8IsCloseAndQ4IsFurther) {
  const std::string f32 = test::dummy_model("tiny-qwen2");
  const CompareResult q8 = run_compare(f32, test::quantized(f32, "Q8_0"), DType::F32, DType::F32);
  const CompareResult q4 = run_compare(f32, test::quantized(f32, "Q4_0"), DType::F32, DType::F32);
  std::printf("tiny-qwen2 vs F32: Q8_0 KLD mean %.6f p99 %.6f max %.6f top1 %.4f | Q4_0 KLD mean %.6f p99 %.6f max %.6f top1 %.4f\n",
              q8.kld.mean, q8.kld.p99, q8.kld.max, q8.top1_agreement, q4.kld.mean, q4.kld.p99, q4.kld.max,
              q4.top1_agreement);
  EXPECT_GT(q8.kld.mean, 0.0);
  EXPECT_LT(q8.kld.mean, 1e-3);
  EXPECT_GT(q4.kld.mean, 5 * q8.kld.mean);
  EXPECT_GE(q8.top1_agreement, q4.top1_agreement);
  EXPECT_GT(q8.top1_agreement, 0.95);
  EXPECT_LE(q8.kld.p99, q8.kld.max);
  EXPECT_LE(q8.kld.median, q8.kld.p99);
}

TEST(Compare, Int8KvAgainstF16KvIsSmallButNotZero) {
  const std::string path = test::dummy_model("tiny-llama");
  const CompareResult r = run_compare(path, path, DType::F16, DType::I8);
  std::printf("tiny-llama int8 KV vs f16 KV: KLD mean %.3g p99 %.3g max %.3g top1 %.4f\n", r.kld.mean, r.kld.p99,
              r.kld.max, r.top1_agreement);
  EXPECT_GT(r.kld.mean, 0.0);
  EXPECT_LT(r.kld.mean, 1e-3);
  EXPECT_GT(r.top1_agreement, 0.95);
  const CompareResult same = run_compare(path, path, DType::F16, DType::F16);
  EXPECT_EQ(same.kld.max, 0.0);
  // two streams over one Forward (shared prepared weights) give the same figures
  ThreadPool pool(2);
  auto m = load(path);
  auto rs = stream(m, 64, 32, DType::F16, &pool);
  LogitStreamOptions o = rs->options();
  o.kv_dtype = DType::I8;
  auto ms = LogitStream::create(rs->forward(), o);
  ASSERT_TRUE(ms.ok()) << ms.error();
  auto shared = compare(*rs, **ms, story_chunks(*m, 64, 4));
  ASSERT_TRUE(shared.ok()) << shared.error();
  EXPECT_EQ(shared->kld.mean, r.kld.mean);
  EXPECT_EQ(shared->top1_same, r.top1_same);
}

// The 4-bit KV cache costs more than int8 and stays usable (the figures go to docs/eval.md).
TEST(Compare, Q4KvCostsMoreThanInt8ButStaysClose) {
  const std::string path = test::dummy_model("tiny-llama");
  const CompareResult i8 = run_compare(path, path, DType::F16, DType::I8);
  const CompareResult q4 = run_compare(path, path, DType::F16, DType::Q4_0);
  std::printf("tiny-llama q4_0 KV vs f16 KV: KLD mean %.3g p99 %.3g max %.3g top1 %.4f\n", q4.kld.mean, q4.kld.p99,
              q4.kld.max, q4.top1_agreement);
  EXPECT_GT(q4.kld.mean, 2 * i8.kld.mean);
  EXPECT_LT(q4.kld.mean, 0.05);
  EXPECT_GT(q4.top1_agreement, 0.8);
}

// fp8 KV (a byte per value, as int8, but 3 or 2 mantissa bits): on a random model's Gaussian keys and
// values int8's 256 levels per token and head are finer than E4M3's, and E4M3 finer than E5M2; all far
// closer than q4_0 to the F16 cache. (The order is the stored types' own: were fp8 stored as int8, or
// E5M2 as E4M3, it would not hold.)
TEST(Compare, Fp8KvCostsLieBetweenInt8AndQ4) {
  const std::string path = test::dummy_model("tiny-llama");
  const CompareResult i8 = run_compare(path, path, DType::F16, DType::I8);
  const CompareResult e4 = run_compare(path, path, DType::F16, DType::F8_E4M3);
  const CompareResult e5 = run_compare(path, path, DType::F16, DType::F8_E5M2);
  const CompareResult q4 = run_compare(path, path, DType::F16, DType::Q4_0);
  std::printf("tiny-llama KV vs f16 KV, KLD mean: int8 %.3g, fp8_e4m3 %.3g, fp8_e5m2 %.3g, q4_0 %.3g\n", i8.kld.mean,
              e4.kld.mean, e5.kld.mean, q4.kld.mean);
  EXPECT_GT(e4.kld.mean, 2 * i8.kld.mean);
  EXPECT_GT(e5.kld.mean, 2 * e4.kld.mean);
  EXPECT_GT(q4.kld.mean, e5.kld.mean);
  EXPECT_GT(e4.top1_agreement, 0.9);
}

TEST(Compare, DifferentVocabulariesAreAnError) {
  ModelShape other = *find_shape("tiny-qwen2");
  other.name = "tiny-qwen2-v600";
  other.n_vocab = 600;
  ThreadPool pool(2);
  auto a = load(test::dummy_model("tiny-qwen2"));
  auto b = load(test::dummy_model(other));
  auto rs = stream(a, 32, 16, DType::F32, &pool);
  auto ms = stream(b, 32, 16, DType::F32, &pool);
  auto r = compare(*rs, *ms, story_chunks(*a, 32, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("different vocabularies"), std::string::npos);
}
