// LoRA adapters (llama.cpp's GGUF format): the reference with an adapter equals the reference of
// the model with the adapter merged into its weights (`lora merge`), the batched forward with a
// batch mixing adapters and the base model equals the reference per sequence, and adapters that do
// not fit the model are refused with the tensor named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "convert/dummy.h"
#include "convert/lora.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "model/forward.h"
#include "model/lora.h"
#include "model/reference.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::string tiny_path(const std::string& shape, DType dtype = DType::F32) {
  DummyOptions o;
  o.shape = *find_shape(shape);
  o.dtype = dtype;
  o.seed = 5;
  const std::string path = test::temp_dir() + "/lora-base-" + shape + "-" + std::string(dtype_name(dtype)) + ".gguf";
  auto st = write_dummy_model(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

std::string dummy_lora(const std::string& base, const std::string& tag, std::vector<std::string> targets,
                       uint64_t seed = 1, int64_t rank = 4, DType dtype = DType::F32) {
  DummyLoraOptions o;
  o.base_path = base;
  o.targets = std::move(targets);
  o.seed = seed;
  o.rank = rank;
  o.dtype = dtype;
  const std::string path = test::temp_dir() + "/lora-" + tag + ".gguf";
  auto st = write_dummy_lora(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

std::shared_ptr<const Model> load(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error();
  return *m;
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max<double>(num, std::abs(a[i] - b[i]));
    den = std::max<double>(den, std::abs(b[i]));
  }
  return num / den;
}

std::vector<int32_t> prompt_of(int n, int64_t n_vocab, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 31 + salt * 7 + 3) % n_vocab));
  return p;
}

}  // namespace

class LoraFamily : public ::testing::TestWithParam<std::string> {};

// Every adaptable matrix (phi3's fused attn_qkv and ffn_up included, and output/token_embd where the
// model has them) at scale 0.7: reference + adapter == reference of the merged weights.
TEST_P(LoraFamily, ReferenceWithAdapterEqualsMergedModel) {
  const std::string base_path = tiny_path(GetParam());
  const std::string lora_path = dummy_lora(base_path, GetParam() + "-all", {"all"});
  const std::string merged_path = test::temp_dir() + "/lora-merged-" + GetParam() + ".gguf";
  auto st = merge_lora(base_path, {{lora_path, 0.7f}}, merged_path);
  ASSERT_TRUE(st.ok()) << st.error();
  auto base = load(base_path), merged = load(merged_path);
  auto adapter = LoraAdapter::load(lora_path, *base);
  ASSERT_TRUE(adapter.ok()) << adapter.error();
  EXPECT_EQ((*adapter)->n_tensors(), base->config().n_layer * (GetParam() == "tiny-phi3" ? 4 : 7) + 1 +
                                         (base->config().tied_output ? 0 : 1));
  ReferenceForward with(base, 32), want(merged, 32), plain(base, 32);
  with.set_lora(*adapter, 0.7f);
  double changed = 0;
  const auto prompt = prompt_of(12, base->config().n_vocab, 1);
  for (size_t p = 0; p < prompt.size(); ++p) {
    const std::vector<float> got = with.forward(prompt[p], static_cast<int64_t>(p));
    const std::vector<float>& exp = want.forward(prompt[p], static_cast<int64_t>(p));
    ASSERT_LT(rel_err(got, exp), 1e-4) << GetParam() << " pos " << p;
    changed = std::max(changed, rel_err(plain.forward(prompt[p], static_cast<int64_t>(p)), exp));
  }
  EXPECT_GT(changed, 0.05) << "the adapter must change the logits for this test to mean anything";
}

// One batch: seq 0 with adapter A (scale 1), seq 1 the base model, seq 2 adapter B (scale 0.5), seq 3
// adapter A again (decode after a cached prefix); each equals the reference with its own adapter.
TEST_P(LoraFamily, MixedBatchEqualsReferencePerSequence) {
  const std::string base_path = tiny_path(GetParam());
  auto base = load(base_path);
  const auto& c = base->config();
  auto a = LoraAdapter::load(dummy_lora(base_path, GetParam() + "-a", {"all"}, 2), *base);
  auto b = LoraAdapter::load(dummy_lora(base_path, GetParam() + "-b", {"ffn_down", "attn_output"}, 3, 8), *base);
  ASSERT_TRUE(a.ok()) << a.error();
  ASSERT_TRUE(b.ok()) << b.error();
  ThreadPool pool(2);
  Forward fwd(base, &pool);
  fwd.set_context_length(16);  // the reference's context (phi3's LongRoPE picks its factors by it)
  KvLayout lay{c.n_layer, c.n_head_kv, c.head_dim, 4, 64, DType::F32};
  auto kv = KvStorage::create(lay);
  ASSERT_TRUE(kv.ok());
  struct Seq {
    std::vector<int32_t> tokens;
    int lora;  // binding index, -1 none
    std::vector<int32_t> blocks;
  };
  std::vector<Seq> seqs = {{prompt_of(9, c.n_vocab, 1), 0, {0, 1, 2}},
                           {prompt_of(6, c.n_vocab, 2), -1, {3, 4}},
                           {prompt_of(7, c.n_vocab, 3), 1, {5, 6}},
                           {prompt_of(5, c.n_vocab, 4), 0, {7, 8}}};
  const std::vector<LoraBinding> bindings = {{a->get(), 1.0f}, {b->get(), 0.5f}};
  std::vector<float> lg;
  {  // seq 3's first 4 tokens alone (its adapter), so the mixed batch decodes its 5th
    ForwardBatch pre;
    pre.tokens.assign(seqs[3].tokens.begin(), seqs[3].tokens.begin() + 4);
    SeqSlice s;
    s.n_tokens = 4;
    s.block_table = seqs[3].blocks;
    s.logits = SeqSlice::Logits::None;
    s.lora = 0;
    pre.seqs = {s};
    pre.loras = bindings;
    fwd.run(pre, *kv, lg);
  }
  ForwardBatch mixed;
  mixed.loras = bindings;
  for (size_t i = 0; i < seqs.size(); ++i) {
    SeqSlice s;
    s.token_begin = static_cast<int32_t>(mixed.tokens.size());
    s.pos_begin = i == 3 ? 4 : 0;
    s.n_tokens = static_cast<int32_t>(seqs[i].tokens.size()) - s.pos_begin;
    s.block_table = seqs[i].blocks;
    s.logits = i == 0 ? SeqSlice::Logits::All : SeqSlice::Logits::Last;
    s.lora = seqs[i].lora;
    mixed.tokens.insert(mixed.tokens.end(), seqs[i].tokens.begin() + s.pos_begin, seqs[i].tokens.end());
    mixed.seqs.push_back(s);
  }
  fwd.run(mixed, *kv, lg);
  ASSERT_EQ(lg.size(), static_cast<size_t>((9 + 3) * c.n_vocab));
  size_t row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    ReferenceForward ref(base, 16);
    if (seqs[i].lora >= 0) ref.set_lora(seqs[i].lora == 0 ? *a : *b, bindings[seqs[i].lora].scale);
    for (size_t p = 0; p < seqs[i].tokens.size(); ++p) {
      const std::vector<float>& exp = ref.forward(seqs[i].tokens[p], static_cast<int64_t>(p));
      if (i != 0 && p + 1 != seqs[i].tokens.size()) continue;
      std::vector<float> got(lg.begin() + row * c.n_vocab, lg.begin() + (row + 1) * c.n_vocab);
      ++row;
      ASSERT_LT(rel_err(got, exp), 1e-4) << GetParam() << " seq " << i << " pos " << p;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, LoraFamily, ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-phi3"));

// F16 and Q8_0 adapter files (convert_lora_to_gguf.py's --outtype) read as the same values the
// merge sees: the reference with the adapter equals the merged model.
TEST(Lora, HalfAndQ8AdaptersMatchTheirMerge) {
  const std::string base_path = tiny_path("tiny-llama");
  auto base = load(base_path);
  for (DType t : {DType::F16, DType::Q8_0}) {
    const std::string lp = dummy_lora(base_path, std::string("llama-") + std::string(dtype_name(t)), {"attn_q", "ffn_up"}, 4, 32, t);
    auto f = GgufFile::open(lp);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight.lora_a")->type, t);
    const std::string mp = test::temp_dir() + "/lora-merged-llama-" + std::string(dtype_name(t)) + ".gguf";
    ASSERT_TRUE(merge_lora(base_path, {{lp, 1.0f}}, mp).ok());
    auto ad = LoraAdapter::load(lp, *base);
    ASSERT_TRUE(ad.ok()) << ad.error();
    ReferenceForward with(base, 8), want(load(mp), 8);
    with.set_lora(*ad, 1.0f);
    for (int p = 0; p < 4; ++p) {
      std::vector<float> got = with.forward(p + 10, p);
      ASSERT_LT(rel_err(got, want.forward(p + 10, p)), 1e-4) << dtype_name(t);
    }
  }
}

TEST(Lora, AdaptersThatDoNotFitAreRefusedNamingTheProblem) {
  const std::string llama = tiny_path("tiny-llama"), qwen3 = tiny_path("tiny-qwen3");
  auto base = load(llama);
  // another architecture
  auto r = LoraAdapter::load(dummy_lora(qwen3, "qwen3-q", {"attn_q"}), *base);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("architecture 'qwen3'"), std::string::npos) << r.error();
  // a model file is not an adapter
  r = LoraAdapter::load(llama, *base);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("general.type"), std::string::npos) << r.error();
  // shape mismatch: same architecture, other dimensions
  DummyOptions o;
  o.shape = *find_shape("tiny-llama");
  o.shape.n_ff = 96;
  o.dtype = DType::F32;
  const std::string other = test::temp_dir() + "/lora-base-llama-ff96.gguf";
  ASSERT_TRUE(write_dummy_model(o, other).ok());
  r = LoraAdapter::load(dummy_lora(other, "llama-ff96", {"ffn_down"}), *base);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("blk.0.ffn_down.weight"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("wrong base model"), std::string::npos) << r.error();
  // a pair missing its B, and an unexpected tensor
  auto bad = [&](bool drop_b) {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.set_string("general.type", "adapter");
    w.set_string("adapter.type", "lora");
    static std::vector<float> a(64 * 4, 0.01f);
    EXPECT_TRUE(w.add_tensor("blk.0.attn_q.weight.lora_a", DType::F32, {64, 4}, a.data()).ok());
    if (!drop_b) {
      EXPECT_TRUE(w.add_tensor("blk.0.attn_q.weight.extra", DType::F32, {64, 4}, a.data()).ok());
    }
    const std::string p = test::temp_dir() + (drop_b ? "/lora-no-b.gguf" : "/lora-extra.gguf");
    EXPECT_TRUE(w.write(p).ok());
    return LoraAdapter::load(p, *base);
  };
  r = bad(true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("lacks its .lora_b"), std::string::npos) << r.error();
  r = bad(false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("blk.0.attn_q.weight.extra"), std::string::npos) << r.error();
  // a dummy target that names nothing
  DummyLoraOptions d;
  d.base_path = llama;
  d.targets = {"attn_qkv"};
  auto st = write_dummy_lora(d, test::temp_dir() + "/lora-none.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("'attn_qkv'"), std::string::npos) << st.error();
}
