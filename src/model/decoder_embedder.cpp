// Decoder embedding models (a decoder GGUF with `<arch>.pooling_type`: Qwen3-Embedding, gte-Qwen with
// last-token pooling, llama-arch embedders with mean pooling): the batched causal forward over each
// whole sequence with a private paged KV scratch (blocks handed out in order, nothing cached between
// runs), returning the output-normed hidden states of the rows pooling needs.
// Qwen3-Reranker (qwen3 with pooling rank; llama.cpp's build_pooling): the last token's state times
// cls.output ([n_embd, n_cls_out], the lm_head rows of "yes" and "no" that convert_hf_to_gguf.py
// stacks), then a softmax over the outputs. With the pooling override rank on a plain qwen3
// generation file the two rows come from its output matrix (the tokens "yes" and "no").
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/log.h"
#include "kernels/matmul.h"
#include "quant/quant.h"

#include "model/embedder.h"
#include "model/forward.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace tmill {
namespace {

class DecoderEmbedder final : public Embedder {
 public:
  DecoderEmbedder(std::shared_ptr<const Model> model, ThreadPool* pool) : model_(model), forward_(model, pool) {}
  const EmbedderInfo& info() const override { return info_; }
  uint64_t weight_bytes() const override { return forward_.weight_bytes(); }
  void run(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out) override;

  EmbedderInfo info_;
  PreparedMatrix head_;            // rank: cls.output, or the yes/no rows copied to F32
  std::vector<float> head_f32_;    // storage of the copied rows

 private:
  static constexpr int64_t kBlock = 16;
  std::shared_ptr<const Model> model_;
  Forward forward_;
  KvStorage kv_;
  std::vector<float> hidden_;
};

void DecoderEmbedder::run(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out) {
  const ModelConfig& c = model_->config();
  const int64_t E = c.n_embd;
  ForwardBatch batch;
  batch.hidden = true;
  int32_t next_block = 0;
  for (const auto& s : seqs) {
    SeqSlice sl;
    sl.token_begin = static_cast<int32_t>(batch.tokens.size());
    sl.n_tokens = static_cast<int32_t>(s.size());
    sl.pos_begin = 0;
    const auto n_blocks = static_cast<int32_t>((static_cast<int64_t>(s.size()) + kBlock - 1) / kBlock);
    for (int32_t b = 0; b < n_blocks; ++b) sl.block_table.push_back(next_block++);
    sl.logits = info_.pooling == Pooling::Last || info_.pooling == Pooling::Rank ? SeqSlice::Logits::Last
                                                                               : SeqSlice::Logits::All;
    batch.tokens.insert(batch.tokens.end(), s.begin(), s.end());
    batch.seqs.push_back(std::move(sl));
  }
  if (kv_.layout().num_blocks < next_block) {  // grow the scratch (doubling, so it settles)
    KvLayout layout{c.n_layer, c.n_head_kv, c.head_dim, kBlock, std::max<int64_t>(next_block, 2 * kv_.layout().num_blocks),
                    DType::F16};
    auto kv = KvStorage::create(layout);
    TM_ASSERT(kv.ok(), "cannot allocate the embedding KV scratch");
    kv_ = std::move(kv).value();
  }
  out.assign(seqs.size(), {});
  if (batch.tokens.empty()) return;
  forward_.run(batch, kv_, hidden_);
  int64_t row = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int64_t n = batch.seqs[i].logits == SeqSlice::Logits::Last ? 1 : static_cast<int64_t>(seqs[i].size());
    const float* rows = hidden_.data() + row * E;
    row += n;
    if (info_.pooling == Pooling::Rank) {
      const int64_t k = info_.out_dim;
      out[i].resize(static_cast<size_t>(k));
      matmul(head_, rows, E, out[i].data(), k, 1, nullptr);
      // softmax (llama.cpp's qwen3 reranker): output[0] = P(yes)
      const float mx = *std::max_element(out[i].begin(), out[i].end());
      double sum = 0;
      for (float& v : out[i]) sum += (v = std::exp(v - mx));
      for (float& v : out[i]) v = static_cast<float>(v / sum);
      continue;
    }
    out[i].resize(static_cast<size_t>(E));
    pool_rows(info_.pooling, rows, n, E, E, out[i].data());
  }
}

// The id of the token whose text is exactly `text` in tokenizer.ggml.tokens, or -1.
int64_t token_id(const GgufFile& f, const std::string& text) {
  const GgufValue* toks = f.find("tokenizer.ggml.tokens");
  const auto* arr = toks ? toks->as_string_array() : nullptr;
  if (!arr) return -1;
  for (size_t i = 0; i < arr->size(); ++i)
    if ((*arr)[i] == text) return static_cast<int64_t>(i);
  return -1;
}

// The reranker's head: cls.output from the file, else (a generation file used as a reranker) the
// output matrix's rows of "yes" and "no", in that order.
Status load_rank_head(const GgufFile& f, const Model& model, DecoderEmbedder& e) {
  const ModelConfig& c = model.config();
  const int64_t E = c.n_embd;
  if (c.arch.name != "qwen3")
    return Error{fmt::format("pooling rank on a decoder is Qwen3-Reranker's (arch qwen3), not {}", c.arch.name)};
  if (const GgufTensorInfo* t = f.find_tensor("cls.output.weight")) {
    if (t->ne.size() != 2 || t->ne[0] != E || t->ne[1] < 1 || t->ne[1] > 64)
      return Error{fmt::format("tensor 'cls.output.weight' has the wrong shape (expected [{}, n_cls_out])", E)};
    if (!can_dequantize(t->type)) return Error{fmt::format("tensor 'cls.output.weight' has unsupported type {}", dtype_name(t->type))};
    const GgufValue* labels = f.find(c.arch.name + ".classifier.output_labels");
    const auto* la = labels ? labels->as_string_array() : nullptr;
    if (la && static_cast<int64_t>(la->size()) != t->ne[1])
      return Error{fmt::format("cls.output.weight has {} rows but {}.classifier.output_labels {} labels", t->ne[1],
                               c.arch.name, la->size())};
    Matrix m;
    m.type = t->type;
    m.rows = t->ne[1];
    m.cols = E;
    m.data = t->data;
    m.row_bytes = static_cast<size_t>(t->nbytes / static_cast<uint64_t>(m.rows));
    m.name = "cls.output.weight";
    e.head_ = PreparedMatrix(m);
    e.info_.out_dim = m.rows;
    return ok_status();
  }
  const Matrix& out = model.weights().output;
  const int64_t yes = token_id(f, "yes"), no = token_id(f, "no");
  if (yes < 0 || no < 0 || yes >= out.rows || no >= out.rows)
    return Error{"pooling rank on a qwen3 generation model needs the tokens \"yes\" and \"no\" in its vocabulary"};
  e.head_f32_.resize(static_cast<size_t>(2 * E));
  dequantize_row(out.type, out.row(yes), e.head_f32_.data(), E);
  dequantize_row(out.type, out.row(no), e.head_f32_.data() + E, E);
  Matrix m;
  m.type = DType::F32;
  m.rows = 2;
  m.cols = E;
  m.data = e.head_f32_.data();
  m.row_bytes = static_cast<size_t>(E) * 4;
  m.name = "output.weight[yes,no]";
  e.head_ = PreparedMatrix(m);
  e.info_.out_dim = 2;
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<Embedder>> load_decoder_embedder(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                        int64_t max_batch_tokens, std::optional<Pooling> override_pooling) {
  (void)max_batch_tokens;
  TM_ASSIGN_OR_RETURN(auto declared, read_pooling_type(*file));
  const std::optional<Pooling> pooling = override_pooling ? override_pooling : declared;
  if (!pooling || *pooling == Pooling::None)
    return Error{"not an embedding model: the file declares no pooling type (<arch>.pooling_type)"};
  TM_ASSIGN_OR_RETURN(auto model, Model::from_gguf(file));
  auto e = std::make_unique<DecoderEmbedder>(model, pool);
  const ModelConfig& c = model->config();
  e->info_ = {c.arch.name, *pooling, c.n_embd, c.n_embd, c.n_ctx_train, c.n_vocab, true};
  if (*pooling == Pooling::Rank) {
    TM_TRY(load_rank_head(*file, *model, *e));
    e->info_.rank_softmax = true;
  }
  return std::unique_ptr<Embedder>(std::move(e));
}

}  // namespace tmill
