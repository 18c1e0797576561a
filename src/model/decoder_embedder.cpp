// Decoder embedding models (a decoder GGUF with `<arch>.pooling_type`: Qwen3-Embedding, gte-Qwen with
// last-token pooling, llama-arch embedders with mean pooling): the batched causal forward over each
// whole sequence with a private paged KV scratch (blocks handed out in order, nothing cached between
// runs), returning the output-normed hidden states of the rows pooling needs.
// Qwen3-Reranker (qwen3 with pooling rank; llama.cpp's build_pooling): the last token's state times
// cls.output ([n_embd, n_cls_out], the lm_head rows of "yes" and "no" that convert_hf_to_gguf.py
// stacks), then a softmax over the outputs. With the pooling override rank on a plain qwen3
// generation file the two rows come from its output matrix (the tokens "yes" and "no").
// EmbeddingGemma (gemma-embedding): the same forward, bidirectional (every K/V of a sequence is stored
// before any of its tokens attends: one forward holds whole sequences), mean pooling by default, then
// the dense projections sentence-transformers adds (llama.cpp's build_dense_out: dense_2, then
// dense_3) when the file has them.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/log.h"
#include "kernels/matmul.h"
#include "quant/quant.h"

#include "core/strings.h"
#include "gpu/ops.h"
#include "model/embedder.h"
#include "model/forward.h"
#include "model/gpu_forward.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace tmill {
namespace {

class DecoderEmbedder final : public Embedder {
 public:
  // On the CPU (gpu null) or on a GPU backend's forward (model/gpu_forward.h).
  DecoderEmbedder(std::shared_ptr<const Model> model, ThreadPool* pool, std::unique_ptr<GpuForward> gpu)
      : model_(model), gpu_(std::move(gpu)) {
    if (!gpu_) forward_ = std::make_unique<Forward>(model, pool);
  }
  const EmbedderInfo& info() const override { return info_; }
  uint64_t weight_bytes() const override {
    uint64_t bytes = gpu_ ? GpuForward::weight_bytes_of(*model_) : forward_->weight_bytes();
    for (const PreparedMatrix& d : dense_) bytes += d.source().bytes();
    return bytes;
  }
  std::string placement() const override { return placement_; }
  void run(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out) override;

  EmbedderInfo info_;
  PreparedMatrix head_;            // rank: cls.output, or the yes/no rows copied to F32
  std::vector<PreparedMatrix> dense_;  // gemma-embedding: dense_2 then dense_3 after pooling, those present
  std::vector<float> head_f32_;    // storage of the copied rows
  std::string placement_ = "CPU";

  static constexpr int64_t kBlock = 16;

 private:
  // One forward over seqs (hidden states of the rows pooling needs into hidden_), then their outputs.
  void run_part(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out);
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Forward> forward_;  // the CPU's
  KvStorage kv_;
  std::unique_ptr<GpuForward> gpu_;   // or a GPU's, with its fixed KV scratch
  std::vector<float> hidden_;
};

int64_t blocks_of(size_t tokens) { return static_cast<int64_t>((tokens + DecoderEmbedder::kBlock - 1) / DecoderEmbedder::kBlock); }

void DecoderEmbedder::run(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out) {
  out.assign(seqs.size(), {});
  if (!gpu_) return run_part(seqs, out);
  // the GPU's KV scratch is fixed (sized for max_batch_tokens in whole blocks per sequence, plus some):
  // sequences go in runs whose blocks fit it
  const int64_t cap = gpu_->kv_layout().num_blocks;
  size_t i = 0;
  while (i < seqs.size()) {
    size_t j = i;
    int64_t blocks = 0;
    while (j < seqs.size() && (j == i || blocks + blocks_of(seqs[j].size()) <= cap)) blocks += blocks_of(seqs[j++].size());
    const std::vector<std::span<const int32_t>> part(seqs.begin() + static_cast<std::ptrdiff_t>(i),
                                                     seqs.begin() + static_cast<std::ptrdiff_t>(j));
    std::vector<std::vector<float>> part_out(part.size());
    run_part(part, part_out);
    for (size_t k = 0; k < part.size(); ++k) out[i + k] = std::move(part_out[k]);
    i = j;
  }
}

void DecoderEmbedder::run_part(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out) {
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
    sl.state_slot = static_cast<int32_t>(batch.seqs.size());  // (recurrent layers: a state per sequence)
    sl.logits = info_.pooling == Pooling::Last || info_.pooling == Pooling::Rank ? SeqSlice::Logits::Last
                                                                               : SeqSlice::Logits::All;
    batch.tokens.insert(batch.tokens.end(), s.begin(), s.end());
    batch.seqs.push_back(std::move(sl));
  }
  const auto n_seqs = static_cast<int64_t>(seqs.size());
  if (!gpu_ && (kv_.layout().num_blocks < next_block ||
                (kv_.layout().n_state_layers > 0 && kv_.layout().num_state_slots < n_seqs))) {  // grow the scratch
    KvLayout layout =  // (doubling, so it settles)
        KvLayout::for_model(c, kBlock, std::max<int64_t>(next_block, 2 * kv_.layout().num_blocks), DType::F16);
    if (layout.n_state_layers > 0) layout.num_state_slots = std::max(n_seqs, 2 * kv_.layout().num_state_slots);
    auto kv = KvStorage::create(layout);
    TM_ASSERT(kv.ok(), "cannot allocate the embedding KV scratch");
    kv_ = std::move(kv).value();
  }
  out.assign(seqs.size(), {});
  if (batch.tokens.empty()) return;
  if (gpu_) {
    if (const Status st = gpu_->run(batch, hidden_); !st.ok()) {  // (a device fault: the outputs stay empty)
      log_error("embedding forward on the GPU failed: {}", st.error());
      return;
    }
  } else {
    forward_->run(batch, kv_, hidden_);
  }
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
    for (const PreparedMatrix& d : dense_) {  // dense_2, then dense_3
      std::vector<float> y(static_cast<size_t>(d.rows()));
      matmul(d, out[i].data(), static_cast<int64_t>(out[i].size()), y.data(), d.rows(), 1, nullptr);
      out[i] = std::move(y);
    }
  }
}

// The GPU forward of a decoder embedder: weights uploaded, scratch for max_batch_tokens (or the longest
// sequence) and a KV scratch of those tokens in whole blocks per sequence plus 64 blocks (a batch whose
// sequences need more runs in parts); F16 KV, no graphs (whole prompts). On a device it must fit
// memory_utilization of it.
Result<std::unique_ptr<GpuForward>> gpu_embedding_forward(const std::shared_ptr<const Model>& model, gpu::Ops& ops,
                                                          const EmbedderDevice& d, int64_t max_batch_tokens,
                                                          std::string* placement) {
  TM_TRY(ops.available());
  TM_TRY(gpu_forward_supports(*model, ops));
  const ModelConfig& c = model->config();
  const int64_t longest = d.max_seq_tokens > 0 ? d.max_seq_tokens : c.n_ctx_train;
  const int64_t tokens = std::max<int64_t>({max_batch_tokens, longest, 1});
  const int64_t bs = DecoderEmbedder::kBlock;
  KvLayout lay = KvLayout::for_model(c, bs, tokens / bs + 64, DType::F16);
  GpuForwardOptions fo;
  fo.scratch_tokens = tokens;
  fo.scratch_blocks = (longest + bs - 1) / bs + 1;
  const uint64_t weights = GpuForward::weight_bytes_of(*model);
  const uint64_t acts = GpuForward::scratch_bytes_of(c, tokens, fo.scratch_blocks, tokens);
  const uint64_t kv = lay.total_bytes();
  *placement = fmt::format("{}: weights {}, activations {}, KV scratch {} ({} tokens)", ops.name(), format_bytes(weights),
                           format_bytes(acts), format_bytes(kv), lay.num_blocks * bs);
  if (auto gpus = ops.devices(); gpus.ok() && !gpus->empty()) {
    const gpu::GpuInfo& g = gpus->front();
    const auto budget = static_cast<uint64_t>(static_cast<double>(g.total_bytes) * d.memory_utilization);
    if (weights + acts + kv > budget || weights + acts + kv > g.free_bytes)
      return Error{fmt::format("the embedding model needs {} on {} (weights {}, activations {}, KV scratch {} for {} "
                               "tokens), more than --gpu-memory-utilization {} of its {} ({}) or its free {}; lower "
                               "--max-num-batched-tokens or --max-model-len, or raise --gpu-memory-utilization",
                               format_bytes(weights + acts + kv), g.name, format_bytes(weights), format_bytes(acts),
                               format_bytes(kv), tokens, d.memory_utilization, format_bytes(g.total_bytes),
                               format_bytes(budget), format_bytes(g.free_bytes))};
    *placement = g.name + " " + *placement;
  }
  return GpuForward::create(model, ops, lay, fo);
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
    e.head_ = PreparedMatrix(matrix_of(*t, "cls.output.weight"));
    e.info_.out_dim = t->ne[1];
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

// sentence-transformers' projections after pooling (gemma-embedding files converted with
// --sentence-transformers-dense-modules): dense_2.weight [in, mid], then dense_3.weight [mid, out]; either
// may be absent. The first takes the hidden size, the second what the first gives.
Status load_dense_layers(const GgufFile& f, const ModelConfig& c, DecoderEmbedder& e) {
  int64_t width = c.n_embd;
  for (const char* name : {"dense_2.weight", "dense_3.weight"}) {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) continue;
    if (t->ne.size() != 2 || t->ne[0] != width || t->ne[1] < 1 || t->ne[1] > (int64_t{1} << 20))
      return Error{fmt::format("tensor '{}' has the wrong shape (expected [{}, n_out])", name, width)};
    if (!can_dequantize(t->type)) return Error{fmt::format("tensor '{}' has unsupported type {}", name, dtype_name(t->type))};
    e.dense_.emplace_back(matrix_of(*t, name));
    width = t->ne[1];
  }
  if (!e.dense_.empty() && !c.arch.bidirectional)
    return Error{fmt::format("dense_2 / dense_3 projections are gemma-embedding's, not {}'s", c.arch.name)};
  e.info_.out_dim = width;
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<Embedder>> load_decoder_embedder(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                        int64_t max_batch_tokens, std::optional<Pooling> override_pooling,
                                                        const EmbedderDevice& device) {
  TM_ASSIGN_OR_RETURN(auto declared, read_pooling_type(*file));
  if (!declared && is_embedding_model(*file)) declared = Pooling::Mean;  // gemma-embedding without the key
  const std::optional<Pooling> pooling = override_pooling ? override_pooling : declared;
  if (!pooling || *pooling == Pooling::None)
    return Error{"not an embedding model: the file declares no pooling type (<arch>.pooling_type)"};
  TM_ASSIGN_OR_RETURN(auto model, Model::from_gguf(file));
  std::unique_ptr<GpuForward> gpu;
  std::string placement = "CPU";
  if (device.ops) {
    TM_ASSIGN_OR_RETURN(gpu, gpu_embedding_forward(model, *device.ops, device, max_batch_tokens, &placement));
  }
  auto e = std::make_unique<DecoderEmbedder>(model, pool, std::move(gpu));
  e->placement_ = placement;
  const ModelConfig& c = model->config();
  e->info_ = {c.arch.name, *pooling, c.n_embd, c.n_embd, c.n_ctx_train, c.n_vocab, !c.arch.bidirectional};
  if (*pooling == Pooling::Rank) {
    TM_TRY(load_rank_head(*file, *model, *e));
    e->info_.rank_softmax = true;
  } else {
    TM_TRY(load_dense_layers(*file, c, *e));
  }
  return std::unique_ptr<Embedder>(std::move(e));
}

}  // namespace tmill
