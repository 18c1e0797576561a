// lfm2's short convolution layers: what the file says (which layers convolve, the kernel length),
// the cache layout they get, and the convolution state in the paged cache -- across chunks, after a
// prefix-cache hit on another sequence's blocks, after a block copy, and after rejected speculative
// tokens -- against the reference forward (FamilyTest covers the reference against float64).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "convert/dummy.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "gguf_edit.h"
#include "model/forward.h"
#include "model/reference.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::shared_ptr<Model> tiny_lfm2(const std::string& tag = "lfm2", int64_t conv_l = 0) {
  DummyOptions o;
  o.shape = *find_shape("tiny-lfm2");
  o.shape.conv_l = conv_l;
  o.dtype = DType::F32;
  o.seed = 5;
  const std::string path = test::temp_dir() + "/tiny-" + tag + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error();
  return *m;
}

std::vector<int32_t> prompt(int n, int32_t n_vocab, int salt = 0) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 17 + 3 + salt * 29) % n_vocab);
  return p;
}

std::vector<std::vector<float>> reference_logits(const std::shared_ptr<Model>& m, const std::vector<int32_t>& toks) {
  ReferenceForward ref(m, 64);
  std::vector<std::vector<float>> out;
  for (size_t p = 0; p < toks.size(); ++p) out.push_back(ref.forward(toks[p], static_cast<int64_t>(p)));
  return out;
}

double rel_err(const float* got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t v = 0; v < want.size(); ++v) {
    num = std::max<double>(num, std::abs(got[v] - want[v]));
    den = std::max<double>(den, std::abs(want[v]));
  }
  return num / den;
}

// Runs tokens[begin, begin + n) of one sequence (every position's logits).
std::vector<float> run(Forward& fwd, KvStorage& kv, const std::vector<int32_t>& table, const std::vector<int32_t>& toks,
                       int begin, int n) {
  ForwardBatch b;
  b.tokens.assign(toks.begin() + begin, toks.begin() + begin + n);
  SeqSlice s;
  s.n_tokens = n;
  s.pos_begin = begin;
  s.block_table = table;
  s.logits = SeqSlice::Logits::All;
  b.seqs = {s};
  std::vector<float> logits;
  fwd.run(b, kv, logits);
  return logits;
}

}  // namespace

TEST(Lfm2, FileSaysWhichLayersConvolve) {
  auto m = tiny_lfm2();
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch.name, "lfm2");
  EXPECT_EQ(c.shortconv_l, 3);
  ASSERT_EQ(c.n_layer, 5);
  // tiny-lfm2: attention on layers 1 and 3, convolutions on 0, 2 and 4
  const std::vector<uint8_t> conv = {1, 0, 1, 0, 1};
  EXPECT_EQ(c.conv_layer, conv);
  const std::vector<int32_t> slots = {0, 0, 1, 1, 2};
  EXPECT_EQ(c.cache_slot, slots);
  EXPECT_EQ(c.n_kv_layers(), 2);
  EXPECT_EQ(c.n_head_kv, 2);
  const LayerWeights& L0 = m->weights().layers[0];
  EXPECT_FALSE(L0.wq.valid());
  EXPECT_EQ(L0.conv_in.rows, 3 * c.n_embd);
  EXPECT_EQ(L0.conv_kernel.size(), static_cast<size_t>(3 * c.n_embd));
  EXPECT_TRUE(m->weights().layers[1].wq.valid());
  EXPECT_FALSE(m->weights().layers[1].conv_in.valid());
  EXPECT_EQ(tiny_lfm2("lfm2-l4", 4)->config().shortconv_l, 4);

  // The cache: K/V for the two attention layers only; the convolution state of three layers, a ring
  // of shortconv_l - 1 positions plus the speculative lookahead, at most the block.
  const KvLayout lay = KvLayout::for_model(c, 16, 10, DType::F16);
  EXPECT_EQ(lay.n_layer, 2);
  EXPECT_EQ(lay.n_conv_layers, 3);
  EXPECT_EQ(lay.conv_width, c.n_embd);
  EXPECT_EQ(lay.conv_ring, 2);
  EXPECT_EQ(KvLayout::for_model(c, 16, 10, DType::F16, 4).conv_ring, 6);
  EXPECT_EQ(KvLayout::for_model(c, 4, 10, DType::F16, 4).conv_ring, 4);
  EXPECT_EQ(lay.bytes_per_block(), 2 * 2 * lay.block_bytes_per_layer() + 3 * 2 * 64 * sizeof(float));
  // A model without convolutions keeps the old layout.
  DummyOptions o;
  o.shape = *find_shape("tiny-llama");
  o.dtype = DType::F32;
  const std::string path = test::temp_dir() + "/lfm2-test-llama.gguf";
  ASSERT_TRUE(write_dummy_model(o, path).ok());
  auto llama = Model::load(path);
  ASSERT_TRUE(llama.ok());
  const KvLayout ll = KvLayout::for_model((*llama)->config(), 16, 10, DType::F16, 4);
  EXPECT_EQ(ll.n_layer, (*llama)->config().n_layer);
  EXPECT_EQ(ll.n_conv_layers, 0);
  EXPECT_EQ(ll.bytes_per_block(), 2 * static_cast<size_t>(ll.n_layer) * ll.block_bytes_per_layer());
}

TEST(Lfm2, FilesThatAreNotLfm2AreRefused) {
  auto m = tiny_lfm2();
  auto rewrite = [&](const std::string& key, const GgufValue& v) {
    return test::load_edited(m->path(), [&](GgufWriter& w) { w.set(key, v); });
  };
  auto one = rewrite("lfm2.attention.head_count_kv", GgufValue::u32(2));
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().find("per layer"), std::string::npos) << one.error();
  auto mixed = rewrite("lfm2.attention.head_count_kv", GgufValue::i32_array({0, 2, 0, 1, 0}));
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().find("per-layer KV head counts"), std::string::npos) << mixed.error();
  auto swa = rewrite("lfm2.attention.sliding_window", GgufValue::u32(8));
  ASSERT_FALSE(swa.ok());
  EXPECT_NE(swa.error().find("sliding-window"), std::string::npos) << swa.error();
  // a convolution layer's tensor on an attention layer's row of the array: the loader says which
  auto moved = rewrite("lfm2.attention.head_count_kv", GgufValue::i32_array({2, 0, 0, 2, 0}));
  ASSERT_FALSE(moved.ok());
  EXPECT_NE(moved.error().find("blk.0."), std::string::npos) << moved.error();
}

// The state of a sequence's last blocks serves a second sequence that shares them (a prefix-cache
// hit: it starts at the shared blocks' end with nothing of its own computed), and survives a
// block copy (copy-on-write of a partly filled block, as `n` > 1 sampling forks do).
TEST(Lfm2, ConvolutionStateServesPrefixHitsAndBlockCopies) {
  auto m = tiny_lfm2();
  const ModelConfig& c = m->config();
  ThreadPool pool(2);
  Forward fwd(m, &pool);
  auto kv = KvStorage::create(KvLayout::for_model(c, 4, 32, DType::F32));
  ASSERT_TRUE(kv.ok());
  const auto a = prompt(14, static_cast<int32_t>(c.n_vocab));
  auto b = a;  // shares a's first 12 positions (three full blocks), then differs
  b.resize(12);
  for (int i = 0; i < 6; ++i) b.push_back((i * 5 + 11) % static_cast<int32_t>(c.n_vocab));
  const auto want_b = reference_logits(m, b);
  run(fwd, *kv, {3, 9, 1, 20}, a, 0, 14);
  // b: a's three full blocks, then its own (12..15 in block 7, 16..17 in 12); only positions 12.. computed
  auto got = run(fwd, *kv, {3, 9, 1, 7, 12}, b, 12, 6);
  for (int i = 0; i < 6; ++i)
    EXPECT_LT(rel_err(got.data() + i * c.n_vocab, want_b[12 + i]), 1e-4) << "position " << 12 + i;
  // a copy of b's partly filled block 12 continues as b would: position 18 reads 16 and 17 from it
  kv->copy_block(12, 13);
  b.push_back(42);
  const auto want_b2 = reference_logits(m, b);
  got = run(fwd, *kv, {3, 9, 1, 7, 13}, b, 18, 1);
  EXPECT_LT(rel_err(got.data(), want_b2[18]), 1e-4);
}

// Speculative decoding writes drafts past the accepted tokens and rolls them back by overwriting:
// with the ring sized for the lookahead the continuation equals the reference; with a ring of only
// shortconv_l - 1 positions the rejected drafts have overwritten inputs the next step reads (this
// is what the lookahead is for, and shows the test can fail).
TEST(Lfm2, RejectedDraftsDoNotSpoilTheState) {
  auto m = tiny_lfm2();
  const ModelConfig& c = m->config();
  const auto toks = prompt(30, static_cast<int32_t>(c.n_vocab), 1);
  const auto want = reference_logits(m, toks);
  for (int64_t lookahead : {4, 0}) {
    ThreadPool pool(2);
    Forward fwd(m, &pool);
    auto kv = KvStorage::create(KvLayout::for_model(c, 16, 8, DType::F32, lookahead));
    ASSERT_TRUE(kv.ok());
    const std::vector<int32_t> table = {5, 2};
    run(fwd, *kv, table, toks, 0, 10);  // positions 0..9
    // a verify step: position 10 and four drafts 11..14, of which only the first is right
    auto drafted = toks;
    for (int p = 12; p < 15; ++p) drafted[p] = (drafted[p] + 7) % static_cast<int32_t>(c.n_vocab);
    run(fwd, *kv, table, drafted, 10, 5);
    // the next step starts after the accepted 10, 11
    const auto got = run(fwd, *kv, table, toks, 12, 6);
    double worst = 0;
    for (int i = 0; i < 6; ++i) worst = std::max(worst, rel_err(got.data() + i * c.n_vocab, want[12 + i]));
    if (lookahead > 0) EXPECT_LT(worst, 1e-4);
    else EXPECT_GT(worst, 1e-3) << "a ring without the lookahead should have lost inputs";
  }
}
