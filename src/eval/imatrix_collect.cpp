#include "eval/imatrix_collect.h"

#include <fmt/format.h>

namespace tmill::eval {

void ImatrixCollector::on_matmul_input(const std::string& name, const float* x, int64_t n_rows, int64_t n_cols) {
  const bool block = name.rfind("blk.", 0) == 0;
  const bool output = name == "output.weight" || name == "token_embd.weight";
  if (!block && !(include_output_ && output)) return;
  out_->accumulate(name, x, n_rows, n_cols);
}

void ImatrixCollector::on_expert_matmul_input(const std::string& name, int64_t expert, int64_t n_expert, const float* x,
                                              int64_t n_rows, int64_t n_cols) {
  out_->accumulate(name, x, n_rows, n_cols, expert, n_expert);
}

Result<Imatrix> collect_imatrix(LogitStream& stream, const std::vector<std::vector<int32_t>>& chunks,
                                const ImatrixOptions& opt, const std::function<void(int64_t, int64_t)>& progress) {
  if (chunks.empty()) return Error{"no chunk to evaluate: the text has fewer tokens than the context length"};
  const auto n_ctx = static_cast<int64_t>(chunks[0].size());
  if (n_ctx > stream.options().max_ctx)
    return Error{fmt::format("chunks of {} tokens do not fit the stream's context of {}", n_ctx, stream.options().max_ctx)};
  Imatrix m;
  if (!opt.dataset.empty()) m.datasets.push_back(opt.dataset);
  m.chunk_size = n_ctx;
  ImatrixCollector collector(&m, opt.include_output);
  stream.set_activation_observer(&collector);
  // Logits only when the output matrix is collected (its input rows are the logits rows).
  const int64_t logits_from = opt.include_output ? 0 : n_ctx;
  Status st;
  for (const auto& chunk : chunks) {
    stream.reset();
    st = stream.feed(chunk, logits_from, [](int64_t, const float*) {});
    if (!st.ok()) break;
    ++m.chunk_count;
    if (progress) progress(m.chunk_count, static_cast<int64_t>(chunks.size()));
  }
  stream.set_activation_observer(nullptr);
  if (!st.ok()) return st.error_value();
  return m;
}

}  // namespace tmill::eval
