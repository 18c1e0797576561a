#include "eval/logit_stream.h"

#include <algorithm>

#include <fmt/format.h>

namespace tmill::eval {

Result<DType> parse_kv_dtype(const std::string& name, const Model& model) {
  if (name == "auto") return model.main_weight_type() == DType::F32 ? DType::F32 : DType::F16;
  const std::optional<DType> t = kv_cache_dtype_named(name);
  if (!t) return Error{fmt::format("unsupported KV cache dtype '{}' ({})", name, kKvCacheDtypeNames)};
  return *t;  // (its shape rule: LogitStream::create)
}

const char* kv_dtype_name(DType t) { return kv_cache_dtype_label(t); }

Result<std::unique_ptr<LogitStream>> LogitStream::create(std::shared_ptr<const Model> model,
                                                         const LogitStreamOptions& opt, ThreadPool* pool) {
  return create(std::make_shared<Forward>(std::move(model), pool), opt);
}

Result<std::unique_ptr<LogitStream>> LogitStream::create(std::shared_ptr<Forward> forward, const LogitStreamOptions& opt) {
  if (forward->model().config().arch.bidirectional)  // (gemma-embedding: every position sees the positions after it)
    return Error{fmt::format("{} attends both ways: an embedding model has no next-token logits to evaluate",
                             forward->model().config().arch.name)};
  if (opt.max_ctx < 1) return Error{"context length must be at least 1"};
  if (opt.batch < 1) return Error{"batch must be at least 1"};
  if (opt.block_size < 1) return Error{"block size must be at least 1"};
  TM_TRY(check_kv_cache_shape(opt.kv_dtype, opt.block_size, forward->model().config().head_dim));
  auto s = std::unique_ptr<LogitStream>(new LogitStream());
  s->forward_ = std::move(forward);
  s->forward_->set_context_length(opt.max_ctx);  // LongRoPE's factors follow the stream's context
  s->opt_ = opt;
  const ModelConfig& c = s->model().config();
  const int64_t n_blocks = (opt.max_ctx + opt.block_size - 1) / opt.block_size;
  const KvLayout lay = KvLayout::for_model(c, opt.block_size, n_blocks, opt.kv_dtype);
  TM_ASSIGN_OR_RETURN(s->kv_, KvStorage::create(lay));
  s->block_table_.resize(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) s->block_table_[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  s->batch_.seqs.resize(1);
  return s;
}

void LogitStream::set_lora(std::shared_ptr<const LoraAdapter> adapter, float scale) {
  lora_ = std::move(adapter);
  batch_.loras.clear();
  if (lora_) batch_.loras.push_back({lora_.get(), scale});
  batch_.seqs[0].lora = lora_ ? 0 : -1;
}

Status LogitStream::feed(std::span<const int32_t> tokens, int64_t logits_from, const RowFn& fn) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (pos_ + n > opt_.max_ctx)
    return Error{fmt::format("sequence of {} tokens exceeds the stream's context of {}", pos_ + n, opt_.max_ctx)};
  const int64_t V = n_vocab();
  for (int32_t t : tokens)
    if (t < 0 || t >= V) return Error{fmt::format("token id {} is outside the vocabulary [0, {})", t, V)};
  int64_t i = 0;
  while (i < n) {
    const int64_t pos = pos_ + i;
    // Sub-batches never straddle logits_from: the part before it runs without logits.
    int64_t len = std::min(opt_.batch, n - i);
    const bool want = pos >= logits_from;
    if (!want) len = std::min(len, logits_from - pos);
    SeqSlice& s = batch_.seqs[0];
    batch_.tokens.assign(tokens.begin() + i, tokens.begin() + i + len);
    s.token_begin = 0;
    s.n_tokens = static_cast<int32_t>(len);
    s.pos_begin = static_cast<int32_t>(pos);
    const int64_t blocks = (pos + len + opt_.block_size - 1) / opt_.block_size;
    s.block_table.assign(block_table_.begin(), block_table_.begin() + blocks);
    s.logits = want ? SeqSlice::Logits::All : SeqSlice::Logits::None;
    forward_->run(batch_, kv_, logits_);
    if (want)
      for (int64_t r = 0; r < len; ++r) fn(pos + r, logits_.data() + r * V);
    i += len;
  }
  pos_ += n;
  return Status{};
}

}  // namespace tmill::eval
