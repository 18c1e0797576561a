#include "model/embedder.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace tmill {

Result<std::unique_ptr<Embedder>> load_bert_encoder(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                    std::optional<Pooling> pooling);
Result<std::unique_ptr<Embedder>> load_decoder_embedder(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                        int64_t max_batch_tokens, std::optional<Pooling> pooling,
                                                        const EmbedderDevice& device);

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::None: return "none";
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
    case Pooling::Rank: return "rank";
  }
  return "?";
}

std::optional<Pooling> pooling_from_name(const std::string& name) {
  for (Pooling p : {Pooling::None, Pooling::Mean, Pooling::Cls, Pooling::Last, Pooling::Rank})
    if (name == pooling_name(p)) return p;
  return std::nullopt;
}

bool is_encoder_arch(const std::string& arch) { return arch == "bert" || arch == "nomic-bert" || arch == "jina-bert-v2"; }

Result<std::optional<Pooling>> read_pooling_type(const GgufFile& f) {
  const std::string key = f.get_string("general.architecture").value_or("") + ".pooling_type";
  if (!f.find(key)) return std::optional<Pooling>{};
  auto v = f.get_int(key);
  if (!v || *v < 0 || *v > 4) return Error{fmt::format("metadata key '{}' must be 0..4 (none, mean, cls, last, rank)", key)};
  return std::optional<Pooling>{static_cast<Pooling>(*v)};
}

bool is_embedding_model(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture").value_or("");
  if (is_encoder_arch(arch)) return true;
  if (const ArchSpec* spec = find_arch(arch); spec && spec->bidirectional) return true;  // gemma-embedding
  auto p = read_pooling_type(f);
  return p.ok() && p->has_value() && **p != Pooling::None;
}

Result<std::unique_ptr<Embedder>> Embedder::create(std::shared_ptr<const GgufFile> file, ThreadPool* pool,
                                                   int64_t max_batch_tokens, std::optional<Pooling> pooling,
                                                   const EmbedderDevice& device) {
  if (pooling == Pooling::None)
    return Error{"pooling none gives per-token embeddings, which tokenmill does not serve (mean, cls, last or rank)"};
  const std::string arch = file->get_string("general.architecture").value_or("");
  if (is_encoder_arch(arch)) {
    if (device.ops)
      return Error{fmt::format("{} encoders run on the CPU only for now (decoder embedders such as Qwen3-Embedding run on "
                               "the GPU); use --device cpu",
                               arch)};
    return load_bert_encoder(std::move(file), pool, pooling);
  }
  return load_decoder_embedder(std::move(file), pool, max_batch_tokens, pooling, device);
}

void pool_rows(Pooling p, const float* rows, int64_t n, int64_t dim, int64_t ld, float* out) {
  switch (p) {
    case Pooling::Cls:
    case Pooling::Rank:
      std::copy(rows, rows + dim, out);
      return;
    case Pooling::Last:
      std::copy(rows + (n - 1) * ld, rows + (n - 1) * ld + dim, out);
      return;
    case Pooling::Mean:
    case Pooling::None: {
      std::fill(out, out + dim, 0.0f);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < dim; ++i) out[i] += rows[t * ld + i];
      const float inv = 1.0f / static_cast<float>(n);
      for (int64_t i = 0; i < dim; ++i) out[i] *= inv;
      return;
    }
  }
}

}  // namespace tmill
