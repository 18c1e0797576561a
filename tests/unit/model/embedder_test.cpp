// Embedding models (model/embedder.h): the BERT-family encoders against an independent float64
// computation written from the architecture's description, batching that does not change a
// sequence's output, decoder pooling checked against the causal forward's own structure, and the
// Qwen3-Reranker head against the reference forward's yes/no logits.
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "model/embedder.h"
#include "model/model.h"
#include "model/reference.h"
#include "quant/quant.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::string write_dummy(const std::string& shape, const std::string& pooling, const std::string& tag) {
  auto s = find_shape(shape);
  EXPECT_TRUE(s.has_value()) << shape;
  DummyOptions o;
  o.shape = *s;
  o.dtype = DType::F32;
  o.seed = 11;
  o.pooling = pooling;
  const std::string path = test::temp_dir() + "/emb-" + shape + "-" + tag + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

std::unique_ptr<Embedder> load(const std::string& path, ThreadPool* pool) {
  auto f = GgufFile::open(path);
  EXPECT_TRUE(f.ok()) << f.error();
  auto e = Embedder::create(std::make_shared<const GgufFile>(std::move(f).value()), pool, 4096);
  EXPECT_TRUE(e.ok()) << e.error();
  return std::move(e).value();
}

// float64 BERT / nomic-bert, one sequence, straight from the tensors.
struct F64Bert {
  const GgufFile& f;
  std::vector<double> vec(const std::string& name) const {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) return {};
    std::vector<float> v(static_cast<size_t>(t->n_elements));
    dequantize_row(t->type, t->data, v.data(), t->n_elements);
    return {v.begin(), v.end()};
  }
  // y = W x (+ b): W rows of x.size()
  std::vector<double> lin(const std::string& w, const std::string& b, const std::vector<double>& x) const {
    auto W = vec(w), B = vec(b);
    const size_t cols = x.size(), rows = W.size() / cols;
    std::vector<double> y(rows);
    for (size_t r = 0; r < rows; ++r) {
      double s = B.empty() ? 0 : B[r];
      for (size_t c = 0; c < cols; ++c) s += W[r * cols + c] * x[c];
      y[r] = s;
    }
    return y;
  }
  static std::vector<double> ln(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b) {
    double m = 0, v = 0;
    for (double a : x) m += a;
    m /= double(x.size());
    for (double a : x) v += (a - m) * (a - m);
    v /= double(x.size());
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - m) / std::sqrt(v + 1e-12) * w[i] + b[i];
    return y;
  }
  std::vector<double> run(const std::vector<int32_t>& toks) const {
    const std::string arch = *f.get_string("general.architecture");
    const bool nomic = arch == "nomic-bert", jina = arch == "jina-bert-v2";
    const auto E = static_cast<size_t>(*f.get_int(arch + ".embedding_length"));
    const auto H = static_cast<size_t>(*f.get_int(arch + ".attention.head_count"));
    const auto L = *f.get_int(arch + ".block_count");
    const size_t hd = E / H, n = toks.size();
    auto emb = vec("token_embd.weight"), types = vec("token_types.weight"), pos = vec("position_embd.weight");
    std::vector<std::vector<double>> x(n, std::vector<double>(E));
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < E; ++i)
        x[t][i] = emb[size_t(toks[t]) * E + i] + types[i] + (nomic || jina ? 0.0 : pos[t * E + i]);
      x[t] = ln(x[t], vec("token_embd_norm.weight"), vec("token_embd_norm.bias"));
    }
    const double theta = f.get_number(arch + ".rope.freq_base").value_or(10000.0);
    auto rope = [&](std::vector<double>& v, size_t p) {  // NeoX halves, per head
      for (size_t h = 0; h < H; ++h)
        for (size_t i = 0; i < hd / 2; ++i) {
          const double a = double(p) * std::pow(theta, -2.0 * double(i) / double(hd));
          double& x0 = v[h * hd + i];
          double& x1 = v[h * hd + i + hd / 2];
          const double r0 = x0 * std::cos(a) - x1 * std::sin(a), r1 = x0 * std::sin(a) + x1 * std::cos(a);
          x0 = r0, x1 = r1;
        }
    };
    for (int64_t l = 0; l < L; ++l) {
      const std::string p = fmt::format("blk.{}.", l);
      std::vector<std::vector<double>> q(n), k(n), v(n);
      for (size_t t = 0; t < n; ++t) {
        if (nomic) {
          auto qkv = lin(p + "attn_qkv.weight", "", x[t]);
          q[t].assign(qkv.begin(), qkv.begin() + long(E));
          k[t].assign(qkv.begin() + long(E), qkv.begin() + long(2 * E));
          v[t].assign(qkv.begin() + long(2 * E), qkv.end());
          rope(q[t], t);
          rope(k[t], t);
        } else {
          q[t] = lin(p + "attn_q.weight", p + "attn_q.bias", x[t]);
          k[t] = lin(p + "attn_k.weight", p + "attn_k.bias", x[t]);
          v[t] = lin(p + "attn_v.weight", p + "attn_v.bias", x[t]);
        }
      }
      std::vector<std::vector<double>> nx(n);
      for (size_t t = 0; t < n; ++t) {
        std::vector<double> att(E, 0.0);
        for (size_t h = 0; h < H; ++h) {
          std::vector<double> s(n);
          double mx = -1e300, sum = 0;
          for (size_t j = 0; j < n; ++j) {
            double d = 0;
            for (size_t i = 0; i < hd; ++i) d += q[t][h * hd + i] * k[j][h * hd + i];
            s[j] = d / std::sqrt(double(hd));
            if (jina) {  // ALiBi, max bias 8; H is a power of two here
              s[j] -= std::pow(2.0, -8.0 * double(h + 1) / double(H)) * std::abs(double(t) - double(j));
            }
            mx = std::max(mx, s[j]);
          }
          for (double& a : s) sum += (a = std::exp(a - mx));
          for (size_t j = 0; j < n; ++j)
            for (size_t i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * v[j][h * hd + i];
        }
        auto o = lin(p + "attn_output.weight", p + "attn_output.bias", att);
        for (size_t i = 0; i < E; ++i) o[i] += x[t][i];
        auto a = ln(o, vec(p + "attn_output_norm.weight"), vec(p + "attn_output_norm.bias"));
        std::vector<double> h;
        auto gelu = [](double z) { return 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z))); };
        if (jina) {
          auto g = lin(p + "ffn_gate.weight", "", a), u = lin(p + "ffn_up.weight", p + "ffn_up.bias", a);
          h.resize(g.size());
          for (size_t i = 0; i < g.size(); ++i) h[i] = gelu(g[i]) * u[i];
        } else if (nomic) {
          auto g = lin(p + "ffn_gate.weight", "", a), u = lin(p + "ffn_up.weight", "", a);
          h.resize(g.size());
          for (size_t i = 0; i < g.size(); ++i) h[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
        } else {
          h = lin(p + "ffn_up.weight", p + "ffn_up.bias", a);
          for (double& z : h) z = gelu(z);
        }
        auto d = lin(p + "ffn_down.weight", p + "ffn_down.bias", h);
        for (size_t i = 0; i < E; ++i) d[i] += a[i];
        nx[t] = ln(d, vec(p + "layer_output_norm.weight"), vec(p + "layer_output_norm.bias"));
      }
      x = nx;
    }
    const int pooling = static_cast<int>(*f.get_int(arch + ".pooling_type"));
    std::vector<double> out(E, 0.0);
    if (pooling == 1) {
      for (auto& r : x)
        for (size_t i = 0; i < E; ++i) out[i] += r[i] / double(n);
      return out;
    }
    out = x[0];
    if (pooling != 4) return out;
    auto c = lin("cls.weight", "cls.bias", out);
    for (double& z : c) z = std::tanh(z);
    return lin("cls.output.weight", "cls.output.bias", c);
  }
};

double max_rel(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

const std::vector<std::vector<int32_t>> kSeqs = {{2, 40, 41, 42, 3}, {2, 7, 3}, {2, 100, 150, 199, 250, 300, 400, 17, 3}};

}  // namespace

class EncoderTest : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(EncoderTest, MatchesFloat64ReferenceAloneAndBatched) {
  const auto [shape, pooling] = GetParam();
  const std::string path = write_dummy(shape, pooling, pooling);
  ThreadPool pool(2);
  auto e = load(path, &pool);
  ASSERT_TRUE(e);
  EXPECT_EQ(pooling_name(e->info().pooling), std::string(pooling));
  EXPECT_FALSE(e->info().causal);
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  F64Bert ref{*f};
  std::vector<std::span<const int32_t>> all;
  for (const auto& s : kSeqs) all.emplace_back(s);
  std::vector<std::vector<float>> batched, alone;
  e->run(all, batched);
  ASSERT_EQ(batched.size(), kSeqs.size());
  for (size_t i = 0; i < kSeqs.size(); ++i) {
    const auto want = ref.run(kSeqs[i]);
    EXPECT_LT(max_rel(batched[i], want), 1e-4) << shape << " " << pooling << " seq " << i;
    e->run({std::span<const int32_t>(kSeqs[i])}, alone);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_LT(max_rel(alone[0], want), 1e-4);
    for (size_t k = 0; k < alone[0].size(); ++k) EXPECT_NEAR(alone[0][k], batched[i][k], 1e-5f);
  }
  if (std::string(pooling) == "rank") {
    EXPECT_EQ(e->info().out_dim, 1);
    EXPECT_EQ(batched[0].size(), 1u);
  } else {
    EXPECT_EQ(e->info().out_dim, e->info().n_embd);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, EncoderTest,
                         ::testing::Values(std::make_pair("tiny-bert", "cls"), std::make_pair("tiny-bert", "mean"),
                                           std::make_pair("tiny-bert", "rank"),
                                           std::make_pair("tiny-nomic-bert", "mean"),
                                           std::make_pair("tiny-jina-bert-v2", "mean")),
                         [](const auto& info) {
                           std::string n = std::string(info.param.first) + "_" + info.param.second;
                           for (auto& c : n) if (c == '-') c = '_';
                           return n;
                         });

TEST(Embedder, EmbeddingModelDetection) {
  auto plain = GgufFile::open(write_dummy("tiny-qwen3", "", "gen"));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(is_embedding_model(*plain));
  auto last = GgufFile::open(write_dummy("tiny-qwen3", "last", "last"));
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(is_embedding_model(*last));
  auto bert = GgufFile::open(write_dummy("tiny-bert", "", "default"));
  ASSERT_TRUE(bert.ok());
  EXPECT_TRUE(is_embedding_model(*bert));
  auto p = read_pooling_type(*bert);
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_EQ(**p, Pooling::Cls);  // the dummy's default for bert
}

// A causal model's hidden state at position t depends on tokens 0..t only, so mean pooling over a
// sequence equals the average of last-token pooling over its prefixes (the same weights: same seed).
// (the recurrent families too: each of the batch's 18 sequences gets a state slot of its own)
TEST(Embedder, DecoderMeanPoolingIsTheMeanOfPrefixLastPooling) {
  ThreadPool pool(2);
  for (const char* shape : {"tiny-qwen3", "tiny-llama", "tiny-granitehybrid", "tiny-qwen35", "tiny-nemotron-h"}) {
    auto mean = load(write_dummy(shape, "mean", "mean"), &pool);
    auto last = load(write_dummy(shape, "last", "last"), &pool);
    ASSERT_TRUE(mean && last);
    EXPECT_TRUE(mean->info().causal);
    const std::vector<int32_t> seq = {1, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200, 210};
    std::vector<std::vector<float>> m, lasts;
    mean->run({std::span<const int32_t>(seq)}, m);
    std::vector<std::span<const int32_t>> prefixes;
    for (size_t n = 1; n <= seq.size(); ++n) prefixes.emplace_back(seq.data(), n);
    last->run(prefixes, lasts);  // every prefix in one batch (also exercises several sequences)
    ASSERT_EQ(lasts.size(), seq.size());
    const size_t E = m[0].size();
    for (size_t i = 0; i < E; ++i) {
      double s = 0;
      for (const auto& v : lasts) s += v[i];
      EXPECT_NEAR(m[0][i], s / double(seq.size()), 2e-3) << shape << " dim " << i;
    }
    // the whole sequence alone: its last-token pooling is the last prefix's in the big batch
    std::vector<std::vector<float>> alone;
    last->run({std::span<const int32_t>(seq)}, alone);
    for (size_t i = 0; i < E; ++i) EXPECT_NEAR(alone[0][i], lasts.back()[i], 2e-3) << shape << " dim " << i;
  }
}

// Qwen3-Reranker (qwen3, pooling rank): the output is the softmax of the lm_head's "yes" and "no"
// logits at the last position, so output[0] = sigmoid(logit_yes - logit_no) of the reference forward
// (the generation oracle, one token at a time) over the same tokens.
TEST(Embedder, Qwen3RerankerIsTheSoftmaxOfTheReferenceYesNoLogits) {
  const std::string path = write_dummy("tiny-qwen3-reranker", "", "rank");  // the shape's pooling: rank
  ThreadPool pool(2);
  auto e = load(path, &pool);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->info().pooling, Pooling::Rank);
  EXPECT_TRUE(e->info().causal);
  EXPECT_TRUE(e->info().rank_softmax);
  ASSERT_EQ(e->info().out_dim, 2);
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok());
  const auto* toks = f->find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_TRUE(toks && toks->size() == 512u);
  EXPECT_EQ((*toks)[510], "yes");  // the dummy puts the answers last
  EXPECT_EQ((*toks)[511], "no");
  EXPECT_TRUE(f->find("tokenizer.chat_template.rerank"));
  auto model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.error();
  const std::vector<std::vector<int32_t>> seqs = {
      {508, 40, 41, 42, 509, 300, 7}, {9}, {508, 100, 150, 199, 250, 300, 400, 17, 3, 20, 21, 22, 23, 24, 25, 26, 27, 28}};
  std::vector<std::span<const int32_t>> all;
  for (const auto& s : seqs) all.emplace_back(s);
  std::vector<std::vector<float>> out;
  e->run(all, out);
  ASSERT_EQ(out.size(), seqs.size());
  std::vector<double> scores;
  for (size_t i = 0; i < seqs.size(); ++i) {
    ReferenceForward ref(*model, 64);
    const std::vector<float>* logits = nullptr;
    for (size_t t = 0; t < seqs[i].size(); ++t) logits = &ref.forward(seqs[i][t], static_cast<int64_t>(t));
    const double want = 1.0 / (1.0 + std::exp(-(double((*logits)[510]) - double((*logits)[511]))));
    ASSERT_EQ(out[i].size(), 2u);
    // the batched forward keeps K/V in F16 (as llama.cpp's default cache), the reference in F32
    EXPECT_NEAR(out[i][0], want, 1e-3) << "seq " << i;
    EXPECT_GT(std::abs(out[i][0] - (1 - want)), 3e-3) << "yes and no swapped? seq " << i;
    EXPECT_NEAR(out[i][0] + out[i][1], 1.0, 1e-6);
    scores.push_back(out[i][0]);
  }
  EXPECT_GT(std::abs(scores[0] - scores[1]) + std::abs(scores[0] - scores[2]), 1e-4);  // not a constant

  // The same weights as a plain generation model (no pooling key, the reranker's vocabulary and
  // prompt): the pooling override rank takes the yes/no rows from its output matrix, same scores.
  auto s = find_shape("tiny-qwen3-reranker");
  DummyOptions o;
  o.shape = *s;
  o.dtype = DType::F32;
  o.seed = 11;
  o.pooling = "none";
  o.vocab_path = path;
  const std::string gen = test::temp_dir() + "/emb-qwen3-gen-with-rerank-vocab.gguf";
  ASSERT_TRUE(write_dummy_model(o, gen).ok());
  auto gf = GgufFile::open(gen);
  ASSERT_TRUE(gf.ok());
  EXPECT_FALSE(is_embedding_model(*gf));
  EXPECT_FALSE(gf->find_tensor("cls.output.weight"));
  auto ge = Embedder::create(std::make_shared<const GgufFile>(std::move(gf).value()), &pool, 4096, Pooling::Rank);
  ASSERT_TRUE(ge.ok()) << ge.error();
  std::vector<std::vector<float>> gout;
  (*ge)->run(all, gout);
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_NEAR(gout[i][0], out[i][0], 1e-6) << "seq " << i;

  // Rank needs qwen3 and the two answer tokens.
  auto plain = GgufFile::open(write_dummy("tiny-qwen3", "", "gen"));
  ASSERT_TRUE(plain.ok());
  auto no_answers = Embedder::create(std::make_shared<const GgufFile>(std::move(plain).value()), &pool, 4096, Pooling::Rank);
  ASSERT_FALSE(no_answers.ok());
  EXPECT_NE(no_answers.error().find("\"yes\""), std::string::npos) << no_answers.error();
  auto llama = GgufFile::open(write_dummy("tiny-llama", "", "gen"));
  ASSERT_TRUE(llama.ok());
  EXPECT_FALSE(Embedder::create(std::make_shared<const GgufFile>(std::move(llama).value()), &pool, 4096, Pooling::Rank).ok());
}
