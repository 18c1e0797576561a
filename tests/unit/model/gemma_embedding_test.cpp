// EmbeddingGemma (GGUF "gemma-embedding"): the decoder embedder's bidirectional forward against an
// independent float64 computation written from the model's description (Gemma 3's layers; every
// position attends to its whole sequence, the sliding layers to the positions within window / 2 on
// either side; mean pooling, then dense_2 and dense_3), alone and batched; and what makes it an
// embedding model (detection without a pooling key, no generation, no reference forward).
#include <gtest/gtest.h>

#include <cmath>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "gguf_edit.h"
#include "model/embedder.h"
#include "model/model.h"
#include "quant/quant.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::string write_gemma_embedding(const std::string& shape, const std::string& tag, bool pooling_key = true) {
  DummyOptions o;
  o.shape = *find_shape(shape);
  if (!pooling_key) o.shape.pooling.clear();
  o.dtype = DType::F32;
  o.seed = 13;
  const std::string path = test::temp_dir() + "/gemma-embedding-" + tag + ".gguf";
  const Status st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

using Vec = std::vector<double>;

// The float64 model: its weights read from the file by name, its hyperparameters from the metadata.
class F64GemmaEmbedding {
 public:
  explicit F64GemmaEmbedding(const GgufFile& f) : f_(f) {
    const std::string a = "gemma-embedding.";
    E_ = *f.get_int(a + "embedding_length");
    L_ = *f.get_int(a + "block_count");
    H_ = *f.get_int(a + "attention.head_count");
    HKV_ = *f.get_int(a + "attention.head_count_kv");
    hd_ = *f.get_int(a + "attention.key_length");
    window_ = *f.get_int(a + "attention.sliding_window");
    theta_ = *f.get_number(a + "rope.freq_base");
    theta_swa_ = *f.get_number(a + "rope.freq_base_swa");
    eps_ = *f.get_number(a + "attention.layer_norm_rms_epsilon");
  }

  // The pooled (mean) embedding of one sequence, through dense_2 and dense_3 when the file has them.
  Vec embed(const std::vector<int32_t>& toks) const {
    const auto n = static_cast<int64_t>(toks.size());
    std::vector<Vec> x(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      x[t] = row("token_embd.weight", toks[t]);
      for (double& e : x[t]) e *= std::sqrt(static_cast<double>(E_));
    }
    for (int64_t l = 0; l < L_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const bool slides = l % 6 != 5;  // five sliding layers to one global
      std::vector<Vec> q(n), k(n), v(n);
      for (int64_t t = 0; t < n; ++t) {
        const Vec h = rms(x[t], vec(p + "attn_norm.weight"));
        q[t] = mv(p + "attn_q.weight", h);
        k[t] = mv(p + "attn_k.weight", h);
        v[t] = mv(p + "attn_v.weight", h);
        for (int64_t hh = 0; hh < H_; ++hh) head(q[t], hh, vec(p + "attn_q_norm.weight"), t, slides ? theta_swa_ : theta_);
        for (int64_t hh = 0; hh < HKV_; ++hh) head(k[t], hh, vec(p + "attn_k_norm.weight"), t, slides ? theta_swa_ : theta_);
      }
      for (int64_t t = 0; t < n; ++t) {
        Vec att(static_cast<size_t>(H_ * hd_), 0.0);
        for (int64_t hh = 0; hh < H_; ++hh) {
          const int64_t kh = hh / (H_ / HKV_);
          std::vector<double> s;
          std::vector<int64_t> js;
          for (int64_t j = 0; j < n; ++j) {
            if (slides && std::abs(j - t) > window_ / 2) continue;
            double d = 0;
            for (int64_t i = 0; i < hd_; ++i) d += q[t][hh * hd_ + i] * k[j][kh * hd_ + i];
            s.push_back(d / std::sqrt(static_cast<double>(hd_)));
            js.push_back(j);
          }
          double mx = -1e300, sum = 0;
          for (double e : s) mx = std::max(mx, e);
          for (double& e : s) sum += (e = std::exp(e - mx));
          for (size_t u = 0; u < s.size(); ++u)
            for (int64_t i = 0; i < hd_; ++i) att[hh * hd_ + i] += s[u] / sum * v[js[u]][kh * hd_ + i];
        }
        const Vec o = rms(mv(p + "attn_output.weight", att), vec(p + "post_attention_norm.weight"));
        for (int64_t i = 0; i < E_; ++i) x[t][i] += o[i];
      }
      for (int64_t t = 0; t < n; ++t) {
        const Vec h = rms(x[t], vec(p + "ffn_norm.weight"));
        Vec g = mv(p + "ffn_gate.weight", h);
        const Vec u = mv(p + "ffn_up.weight", h);
        for (size_t i = 0; i < g.size(); ++i) {
          const double z = g[i];
          g[i] = 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z))) * u[i];
        }
        const Vec d = rms(mv(p + "ffn_down.weight", g), vec(p + "post_ffw_norm.weight"));
        for (int64_t i = 0; i < E_; ++i) x[t][i] += d[i];
      }
    }
    Vec pooled(static_cast<size_t>(E_), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      const Vec o = rms(x[t], vec("output_norm.weight"));
      for (int64_t i = 0; i < E_; ++i) pooled[i] += o[i] / static_cast<double>(n);
    }
    if (f_.find_tensor("dense_2.weight")) pooled = mv("dense_2.weight", pooled);
    if (f_.find_tensor("dense_3.weight")) pooled = mv("dense_3.weight", pooled);
    return pooled;
  }

 private:
  Vec row(const std::string& name, int64_t r) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    const int64_t cols = t->ne[0];
    const size_t rb = static_cast<size_t>(t->nbytes / static_cast<uint64_t>(t->ne[1]));
    std::vector<float> tmp(static_cast<size_t>(cols));
    dequantize_row(t->type, t->data + static_cast<size_t>(r) * rb, tmp.data(), cols);
    return Vec(tmp.begin(), tmp.end());
  }
  Vec vec(const std::string& name) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    const auto* p = reinterpret_cast<const float*>(t->data);
    return Vec(p, p + t->ne[0]);
  }
  Vec mv(const std::string& name, const Vec& x) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    Vec y(static_cast<size_t>(t->ne[1]));
    for (int64_t r = 0; r < t->ne[1]; ++r) {
      const Vec w = row(name, r);
      double s = 0;
      for (size_t i = 0; i < x.size(); ++i) s += w[i] * x[i];
      y[r] = s;
    }
    return y;
  }
  Vec rms(const Vec& x, const Vec& w) const {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double inv = 1 / std::sqrt(ss / static_cast<double>(x.size()) + eps_);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
  }
  // head h of v: RMS-normed with w, then NeoX RoPE at pos (pairs i, i + hd / 2)
  void head(Vec& v, int64_t h, const Vec& w, int64_t pos, double theta) const {
    const Vec n = rms(Vec(v.begin() + h * hd_, v.begin() + (h + 1) * hd_), w);
    const int64_t half = hd_ / 2;
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd_));
      v[h * hd_ + i] = n[i] * std::cos(a) - n[i + half] * std::sin(a);
      v[h * hd_ + i + half] = n[i] * std::sin(a) + n[i + half] * std::cos(a);
    }
  }
  const GgufFile& f_;
  int64_t E_, L_, H_, HKV_, hd_, window_;
  double theta_, theta_swa_, eps_;
};

std::unique_ptr<Embedder> load(const std::shared_ptr<const GgufFile>& f, ThreadPool* pool) {
  auto e = Embedder::create(f, pool, 4096);
  EXPECT_TRUE(e.ok()) << e.error();
  return e.ok() ? std::move(e).value() : nullptr;
}

double rel_err(const std::vector<float>& a, const Vec& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

// Sequences shorter than, as long as and well past the sliding layers' reach (4 positions either side).
const std::vector<std::vector<int32_t>> kSeqs = {
    {2, 40, 7},
    {2, 9, 310, 77, 15, 200, 18, 3, 99},
    {2, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 100, 200, 300, 400, 500, 11, 22, 33, 44, 66},
};

TEST(GemmaEmbedding, MatchesAFloat64BidirectionalForwardAloneAndBatched) {
  for (const std::string shape : {"tiny-gemma-embedding", "tiny-gemma-embedding-nodense"}) {
    SCOPED_TRACE(shape);
    auto opened = GgufFile::open(write_gemma_embedding(shape, shape));
    ASSERT_TRUE(opened.ok()) << opened.error();
    auto f = std::make_shared<const GgufFile>(std::move(opened).value());
    ThreadPool pool(2);
    auto e = load(f, &pool);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->info().pooling, Pooling::Mean);
    EXPECT_FALSE(e->info().causal);
    EXPECT_EQ(e->info().out_dim, 64);  // dense_3 maps dense_2's 96 back to n_embd
    const F64GemmaEmbedding ref(*f);
    std::vector<std::span<const int32_t>> seqs(kSeqs.begin(), kSeqs.end());
    std::vector<std::vector<float>> batched;
    e->run(seqs, batched);
    ASSERT_EQ(batched.size(), kSeqs.size());
    for (size_t i = 0; i < kSeqs.size(); ++i) {
      std::vector<std::vector<float>> alone;
      e->run({std::span<const int32_t>(kSeqs[i])}, alone);
      ASSERT_EQ(alone[0].size(), 64u);
      const Vec want = ref.embed(kSeqs[i]);
      // (the KV scratch is F16, as for every decoder embedder: ~1e-3 of the values)
      EXPECT_LT(rel_err(alone[0], want), 3e-3) << "sequence " << i;
      EXPECT_EQ(alone[0], batched[i]) << "batching changed sequence " << i;
    }
  }
}

// The dense projections are applied: the two files share every other tensor (same seed, names), so
// the one with them gives dense_3(dense_2(the other's output)).
TEST(GemmaEmbedding, DenseProjectionsFollowThePooling) {
  auto with = GgufFile::open(write_gemma_embedding("tiny-gemma-embedding", "dense"));
  auto without = GgufFile::open(write_gemma_embedding("tiny-gemma-embedding-nodense", "nodense"));
  ASSERT_TRUE(with.ok() && without.ok());
  auto fw = std::make_shared<const GgufFile>(std::move(with).value());
  auto fn = std::make_shared<const GgufFile>(std::move(without).value());
  auto ew = load(fw, nullptr), en = load(fn, nullptr);
  ASSERT_TRUE(ew && en);
  std::vector<std::vector<float>> ow, on;
  ew->run({std::span<const int32_t>(kSeqs[2])}, ow);
  en->run({std::span<const int32_t>(kSeqs[2])}, on);
  auto apply = [&](const char* name, const std::vector<float>& x) {
    const GgufTensorInfo* t = fw->find_tensor(name);
    std::vector<float> y(static_cast<size_t>(t->ne[1]));
    const auto* w = reinterpret_cast<const float*>(t->data);  // (F32 dummy)
    for (int64_t r = 0; r < t->ne[1]; ++r) {
      double s = 0;
      for (int64_t c = 0; c < t->ne[0]; ++c) s += w[r * t->ne[0] + c] * x[static_cast<size_t>(c)];
      y[static_cast<size_t>(r)] = static_cast<float>(s);
    }
    return y;
  };
  const std::vector<float> want = apply("dense_3.weight", apply("dense_2.weight", on[0]));
  ASSERT_EQ(ow[0].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(ow[0][i], want[i], 1e-5 + 1e-4 * std::abs(want[i])) << i;
}

// Bidirectional: a later token changes the first token's state (cls pooling), which no causal model
// does; and a file without pooling_type is still an embedding model, pooling by the mean.
TEST(GemmaEmbedding, LaterTokensReachEarlierOnesAndTheModelOnlyEmbeds) {
  auto opened = GgufFile::open(write_gemma_embedding("tiny-gemma-embedding-nodense", "nokey", false));
  ASSERT_TRUE(opened.ok());
  auto f = std::make_shared<const GgufFile>(std::move(opened).value());
  EXPECT_FALSE(f->find("gemma-embedding.pooling_type"));
  EXPECT_TRUE(is_embedding_model(*f));
  auto mean = load(f, nullptr);
  ASSERT_NE(mean, nullptr);
  EXPECT_EQ(mean->info().pooling, Pooling::Mean);
  auto cls = Embedder::create(f, nullptr, 4096, Pooling::Cls);
  ASSERT_TRUE(cls.ok()) << cls.error();
  const std::vector<int32_t> a = {2, 9, 310, 77}, b = {2, 9, 310, 78};
  std::vector<std::vector<float>> oa, ob;
  (*cls)->run({std::span<const int32_t>(a)}, oa);
  (*cls)->run({std::span<const int32_t>(b)}, ob);
  EXPECT_NE(oa[0], ob[0]);
  // Qwen3-Reranker's head is qwen3's
  EXPECT_FALSE(Embedder::create(f, nullptr, 4096, Pooling::Rank).ok());
  // the model loads (its config says bidirectional), but nothing causal runs it
  auto m = Model::from_gguf(f);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_TRUE((*m)->config().arch.bidirectional);
  EXPECT_EQ((*m)->config().layer_attn[5].window, 0);
  EXPECT_EQ((*m)->config().layer_attn[4].window, 8);
  EXPECT_EQ((*m)->config().layer_attn[0].keys(10, 21, true).first, 6);
  EXPECT_EQ((*m)->config().layer_attn[0].keys(10, 21, true).end, 15);
  EXPECT_EQ((*m)->config().layer_attn[0].keys(2, 4, true).end, 4);
  EXPECT_EQ((*m)->config().layer_attn[5].keys(2, 21, true).end, 21);
}

TEST(GemmaEmbedding, TheSlidingWindowIsRequired) {
  const std::string path = write_gemma_embedding("tiny-gemma-embedding", "window");
  auto m = test::load_edited(path, [](GgufWriter& w) { w.set_u32("gemma-embedding.attention.sliding_window", 0); });
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().find("sliding_window"), std::string::npos) << m.error();
  DummyOptions o;
  o.shape = *find_shape("tiny-gemma-embedding");
  o.shape.n_swa = 0;
  o.dtype = DType::F32;
  EXPECT_FALSE(write_dummy_model(o, test::temp_dir() + "/gemma-embedding-nowindow.gguf").ok());
}

}  // namespace
