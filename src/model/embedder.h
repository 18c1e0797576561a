// Embedding models: a whole sequence in, one pooled vector (or a reranker's score) out, as llama.cpp
// computes them with `<arch>.pooling_type`:
// - BERT-family encoders (model/encoder.cpp): `bert` (bge, e5, all-MiniLM; absolute positions, GELU,
//   optional classification head for rerankers), `nomic-bert` (fused qkv, NeoX RoPE, SwiGLU) and
//   `jina-bert-v2` (ALiBi attention, gated GELU).
//   Attention is bidirectional within a sequence; layers are post-norm LayerNorm.
// - Decoders with a pooling type (Qwen3-Embedding, gte-Qwen: last; llama-arch embedders: mean;
//   model/decoder_embedder.cpp): the ordinary causal forward pass (model/forward.h) over the whole
//   prompt, pooling the final (output-normed) hidden states instead of computing logits.
// - EmbeddingGemma (gemma-embedding, model/decoder_embedder.cpp too): gemma3's layers with
//   bidirectional attention (ArchSpec::bidirectional), mean pooling unless the file says otherwise,
//   then sentence-transformers' two dense projections when the file has them (dense_2, dense_3).
// - Qwen3-Reranker style rerankers (model/decoder_embedder.cpp): a qwen3 decoder with pooling rank,
//   as llama.cpp writes and runs them: the last token's normed hidden state times `cls.output` (the
//   lm_head rows of "yes" and "no"), then a softmax, so output[0] = P(yes) = sigmoid(yes - no).
//   A plain qwen3 generation model can be used so too (pooling override rank): the same two rows
//   taken from its output matrix.
// Pooling: mean over the sequence's tokens, the first token's state (cls), the last token's (last),
// or rank: the first token through the classification head (cls, tanh, cls.output) -> scores
// (qwen3: the last token, cls.output, softmax).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "formats/gguf.h"

namespace tmill {

class ThreadPool;
namespace gpu {
class Ops;
}

// Where a decoder embedder computes: the CPU (ops null), or a GPU backend (gpu/ops.h), its forward
// pass on model/gpu_forward.h with weights, activations and the KV scratch of max_batch_tokens in the
// backend's memory; on a device (ops->devices() lists one) these must fit memory_utilization of it.
struct EmbedderDevice {
  gpu::Ops* ops = nullptr;
  double memory_utilization = 0.9;
  int64_t max_seq_tokens = 0;  // the longest sequence it gets (0: the trained context)
};

// llama.cpp's enum llama_pooling_type (the GGUF values).
enum class Pooling : int { None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };
const char* pooling_name(Pooling p);
// "none", "mean", "cls", "last", "rank" -> the value; else nullopt.
std::optional<Pooling> pooling_from_name(const std::string& name);

// True for the encoder architectures (bert, nomic-bert, jina-bert-v2): these never generate.
bool is_encoder_arch(const std::string& arch);
// `<arch>.pooling_type` (absent: nullopt). Errors: not an integer, or not one of 0..4.
Result<std::optional<Pooling>> read_pooling_type(const GgufFile& f);
// An embedding model: an encoder architecture, a bidirectional one (gemma-embedding), or any file
// declaring a pooling type other than none.
bool is_embedding_model(const GgufFile& f);

struct EmbedderInfo {
  std::string arch;
  Pooling pooling = Pooling::Mean;
  int64_t n_embd = 0;       // hidden size
  int64_t out_dim = 0;      // floats per output: n_embd, or the classifier's outputs for rank
  int64_t n_ctx_train = 0;  // longest sequence the model takes
  int64_t n_vocab = 0;
  bool causal = false;      // decoders
  // rank: the outputs went through a softmax (qwen3, as llama.cpp does), so output[0] is already the
  // relevance probability; otherwise it is a logit (sigmoid gives the probability).
  bool rank_softmax = false;
};

class Embedder {
 public:
  virtual ~Embedder() = default;
  // Loads an embedding model (is_embedding_model). max_batch_tokens bounds one run()'s tokens (the
  // decoder's KV scratch). pool may be null. pooling: replaces the file's pooling type (llama.cpp's
  // --pooling), and makes a generation model an embedding model (mean, cls, last; rank on qwen3: the
  // yes/no rows of its output matrix, Qwen3-Reranker style); none is refused.
  // device: a GPU backend for decoder embedders (encoders are refused there).
  static Result<std::unique_ptr<Embedder>> create(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                  int64_t max_batch_tokens,
                                                  std::optional<Pooling> pooling = std::nullopt,
                                                  const EmbedderDevice& device = {});
  virtual const EmbedderInfo& info() const = 0;
  // One pooled output (info().out_dim floats, not normalized) per sequence. Every sequence is non-empty
  // and at most n_ctx_train tokens; together at most max_batch_tokens (callers split), or one sequence
  // alone. Not thread-safe. Outputs left empty: the forward failed (a GPU's fault, logged).
  virtual void run(const std::vector<std::span<const int32_t>>& seqs, std::vector<std::vector<float>>& out) = 0;
  // Bytes of weights held (memory reporting).
  virtual uint64_t weight_bytes() const = 0;
  // How it runs, for the start-up log ("CPU", or the GPU memory it took).
  virtual std::string placement() const { return "CPU"; }
};

// Pools the hidden states of one sequence (n rows of `dim` floats, row stride ld) into out.
void pool_rows(Pooling p, const float* rows, int64_t n, int64_t dim, int64_t ld, float* out);

}  // namespace tmill
