// Decoder embedding models (a decoder GGUF with `<arch>.pooling_type`: Qwen3-Embedding, gte-Qwen with
// last-token pooling, llama-arch embedders with mean pooling): the batched causal forward over each
// whole sequence with a private paged KV scratch (blocks handed out in order, nothing cached between
// runs), returning the output-normed hidden states of the rows pooling needs.
#include <algorithm>

#include <fmt/format.h>

#include "core/log.h"

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
    sl.logits = info_.pooling == Pooling::Last ? SeqSlice::Logits::Last : SeqSlice::Logits::All;
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
    out[i].resize(static_cast<size_t>(E));
    pool_rows(info_.pooling, hidden_.data() + row * E, n, E, E, out[i].data());
    row += n;
  }
}

}  // namespace

Result<std::unique_ptr<Embedder>> load_decoder_embedder(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                        int64_t max_batch_tokens) {
  (void)max_batch_tokens;
  TM_ASSIGN_OR_RETURN(auto pooling, read_pooling_type(*file));
  if (!pooling || *pooling == Pooling::None)
    return Error{"not an embedding model: the file declares no pooling type (<arch>.pooling_type)"};
  if (*pooling == Pooling::Rank)
    return Error{"pooling_type rank on a decoder (Qwen3-Reranker style) is not supported yet"};
  TM_ASSIGN_OR_RETURN(auto model, Model::from_gguf(file));
  auto e = std::make_unique<DecoderEmbedder>(model, pool);
  const ModelConfig& c = model->config();
  e->info_ = {c.arch.name, *pooling, c.n_embd, c.n_embd, c.n_ctx_train, c.n_vocab, true};
  return std::unique_ptr<Embedder>(std::move(e));
}

}  // namespace tmill
