#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/mmap.h"
#include "tokenizer/tokenizer.h"

namespace tmill::eval {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Status check_chunks(const LogitStream& s, const std::vector<std::vector<int32_t>>& chunks) {
  if (chunks.empty()) return Error{"no chunk to evaluate: the text has fewer tokens than the context length"};
  const auto n_ctx = static_cast<int64_t>(chunks[0].size());
  if (n_ctx < 2) return Error{"the context length must be at least 2"};
  for (const auto& c : chunks)
    if (static_cast<int64_t>(c.size()) != n_ctx) return Error{"all chunks must have the same length"};
  if (n_ctx - 1 > s.options().max_ctx)
    return Error{fmt::format("chunks of {} tokens do not fit the stream's context of {}", n_ctx, s.options().max_ctx)};
  return Status{};
}

// The summary statistics of a comparison from its per-token values.
void finish_compare(CompareResult& r, std::vector<double> kld, const std::vector<double>& nll_ref,
                    const std::vector<double>& nll_model) {
  r.tokens = static_cast<int64_t>(kld.size());
  r.top1_agreement = r.tokens ? static_cast<double>(r.top1_same) / static_cast<double>(r.tokens) : 0;
  r.ppl_reference = ppl_stats(nll_ref);
  r.ppl_model = ppl_stats(nll_model);
  std::vector<double> diff(nll_ref.size());
  double cov = 0;
  for (size_t i = 0; i < diff.size(); ++i) {
    diff[i] = nll_model[i] - nll_ref[i];
    cov += (nll_model[i] - r.ppl_model.mean_nll) * (nll_ref[i] - r.ppl_reference.mean_nll);
  }
  const SampleSummary d = summarize(diff);
  r.ln_ppl_ratio = d.mean;
  r.ln_ppl_ratio_stderr = d.stderr_mean;
  r.delta_ppl = r.ppl_model.ppl - r.ppl_reference.ppl;
  if (diff.size() > 1) {
    // Var(PPL_m - PPL_r) ~ PPL_m^2 se_m^2 + PPL_r^2 se_r^2 - 2 PPL_m PPL_r cov(mean nll_m, mean nll_r)
    const double n = static_cast<double>(diff.size());
    const double cov_means = cov / n / (n - 1);
    const double pm = r.ppl_model.ppl, pr = r.ppl_reference.ppl;
    const double var = pm * pm * r.ppl_model.nll_stderr * r.ppl_model.nll_stderr +
                       pr * pr * r.ppl_reference.nll_stderr * r.ppl_reference.nll_stderr - 2 * pm * pr * cov_means;
    r.delta_ppl_stderr = std::sqrt(std::max(0.0, var));
  }
  r.kld = summarize(std::move(kld));
}

}  // namespace

Result<EvalText> tokenize_text_file(const Model& model, const std::string& path) {
  auto text = read_file(path);
  if (!text.ok()) return Error{fmt::format("{}: {}", path, text.error())};
  auto tok = Tokenizer::from_gguf(model.file());
  if (!tok.ok()) return Error{fmt::format("{}: tokenizer: {}", model.path(), tok.error())};
  EvalText t;
  t.tokenizer = *tok;
  t.tokens = t.tokenizer->encode(*text, /*add_special=*/true, /*parse_special=*/false);
  t.bos = t.tokenizer->add_bos() ? t.tokenizer->bos_id() : -1;
  return t;
}

std::vector<std::vector<int32_t>> make_chunks(const std::vector<int32_t>& tokens, int64_t n_ctx, int32_t bos,
                                              int64_t max_chunks) {
  std::vector<std::vector<int32_t>> out;
  if (n_ctx < 1) return out;
  int64_t n = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (max_chunks > 0) n = std::min(n, max_chunks);
  for (int64_t k = 0; k < n; ++k) {
    std::vector<int32_t> c(tokens.begin() + k * n_ctx, tokens.begin() + (k + 1) * n_ctx);
    if (bos >= 0) c[0] = bos;
    out.push_back(std::move(c));
  }
  return out;
}

Result<PerplexityResult> perplexity(LogitStream& s, const std::vector<std::vector<int32_t>>& chunks,
                                    const ChunkProgress& progress, KldBaseWriter* base_out) {
  TM_TRY(check_chunks(s, chunks));
  const auto t0 = std::chrono::steady_clock::now();
  PerplexityResult r;
  r.n_ctx = static_cast<int64_t>(chunks[0].size());
  const int64_t first = first_scored(r.n_ctx), V = s.n_vocab();
  double sum = 0;
  for (const auto& chunk : chunks) {
    s.reset();
    // The last token's logits predict nothing inside the chunk: feed n_ctx - 1 tokens.
    Status write_status;
    TM_TRY(s.feed(std::span<const int32_t>(chunk.data(), chunk.size() - 1), first, [&](int64_t pos, const float* row) {
      const int32_t target = chunk[static_cast<size_t>(pos + 1)];
      const double nll = token_nll(row, V, target);
      r.nll.push_back(nll);
      sum += nll;
      if (base_out && write_status.ok()) write_status = base_out->add_row(row, target);
    }));
    TM_TRY(write_status);
    ++r.chunks;
    if (progress) progress(r.chunks, static_cast<int64_t>(chunks.size()), std::exp(sum / static_cast<double>(r.nll.size())));
  }
  r.ppl = ppl_stats(r.nll);
  r.seconds = seconds_since(t0);
  return r;
}

Result<CompareResult> compare(LogitStream& ref, LogitStream& model, const std::vector<std::vector<int32_t>>& chunks,
                              const ChunkProgress& progress) {
  TM_TRY(check_chunks(ref, chunks));
  TM_TRY(check_chunks(model, chunks));
  if (ref.n_vocab() != model.n_vocab())
    return Error{fmt::format("the models have different vocabularies ({} vs {} tokens): KL divergence needs the same one",
                             ref.n_vocab(), model.n_vocab())};
  const auto t0 = std::chrono::steady_clock::now();
  CompareResult r;
  r.n_ctx = static_cast<int64_t>(chunks[0].size());
  const int64_t first = first_scored(r.n_ctx), V = ref.n_vocab();
  const int64_t step = std::max<int64_t>(1, std::min(ref.options().batch, model.options().batch));
  std::vector<float> ref_rows(static_cast<size_t>(step * V));  // (step, V) reference logits of one piece
  std::vector<double> kld, nll_ref, nll_model;
  double sum_model = 0;
  for (const auto& chunk : chunks) {
    ref.reset();
    model.reset();
    const int64_t len = r.n_ctx - 1;
    for (int64_t b = 0; b < len; b += step) {
      const int64_t n = std::min(step, len - b);
      std::span<const int32_t> piece(chunk.data() + b, static_cast<size_t>(n));
      TM_TRY(ref.feed(piece, first, [&](int64_t pos, const float* row) {
        std::memcpy(ref_rows.data() + (pos - b) * V, row, static_cast<size_t>(V) * sizeof(float));
      }));
      TM_TRY(model.feed(piece, first, [&](int64_t pos, const float* row) {
        const int32_t target = chunk[static_cast<size_t>(pos + 1)];
        const TokenComparison c = compare_token(ref_rows.data() + (pos - b) * V, row, V, target);
        kld.push_back(c.kld);
        nll_ref.push_back(c.nll_ref);
        nll_model.push_back(c.nll_model);
        sum_model += c.nll_model;
        r.top1_same += c.same_top1 ? 1 : 0;
      }));
    }
    ++r.chunks;
    if (progress)
      progress(r.chunks, static_cast<int64_t>(chunks.size()), std::exp(sum_model / static_cast<double>(nll_model.size())));
  }
  finish_compare(r, std::move(kld), nll_ref, nll_model);
  r.seconds = seconds_since(t0);
  return r;
}

Result<CompareResult> compare_reference_logits(LogitStream& model, const KldBaseFile& base, int32_t bos,
                                               int64_t max_chunks, const ChunkProgress& progress) {
  if (model.n_vocab() != base.n_vocab())
    return Error{fmt::format("the reference logits have a vocabulary of {} tokens, the model {}: KL divergence needs "
                             "the same one",
                             base.n_vocab(), model.n_vocab())};
  const int64_t n_ctx = base.n_ctx();
  if (n_ctx - 1 > model.options().max_ctx)
    return Error{fmt::format("chunks of {} tokens do not fit the stream's context of {}", n_ctx, model.options().max_ctx)};
  const int64_t n_chunks = max_chunks > 0 ? std::min(max_chunks, base.n_chunk()) : base.n_chunk();
  const auto t0 = std::chrono::steady_clock::now();
  CompareResult r;
  r.n_ctx = n_ctx;
  const int64_t first = first_scored(n_ctx), V = model.n_vocab();
  std::vector<double> kld, nll_ref, nll_model;
  double sum_model = 0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk = base.chunk_tokens(c);
    if (bos >= 0) chunk[0] = bos;
    model.reset();
    TM_TRY(model.feed(std::span<const int32_t>(chunk.data(), chunk.size() - 1), first, [&](int64_t pos, const float* row) {
      const TokenComparison t = compare_token_base(base.row(c, pos - first), row, V, chunk[static_cast<size_t>(pos + 1)]);
      kld.push_back(t.kld);
      nll_ref.push_back(t.nll_ref);
      nll_model.push_back(t.nll_model);
      sum_model += t.nll_model;
      r.top1_same += t.same_top1 ? 1 : 0;
    }));
    ++r.chunks;
    if (progress) progress(r.chunks, n_chunks, std::exp(sum_model / static_cast<double>(nll_model.size())));
  }
  finish_compare(r, std::move(kld), nll_ref, nll_model);
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace tmill::eval
