#include "eval/kld_base.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace tmill::eval {

namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr size_t kHeaderBytes = 8 + 3 * sizeof(int32_t);

int32_t read_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

Result<KldBaseFile> KldBaseFile::open(const std::string& path) {
  auto m = MappedFile::open(path);
  if (!m.ok()) return Error{fmt::format("{}: {}", path, m.error())};
  KldBaseFile f;
  f.file_ = std::move(*m);
  const uint8_t* d = f.file_.data();
  const size_t size = f.file_.size();
  if (size < kHeaderBytes || std::memcmp(d, kMagic, sizeof kMagic) != 0)
    return Error{fmt::format("{}: not a llama.cpp KL-divergence base file (llama-perplexity --kl-divergence-base "
                             "writes one; it starts with \"_logits_\")",
                             path)};
  f.n_ctx_ = read_i32(d + 8);
  f.n_vocab_ = read_i32(d + 12);
  f.n_chunk_ = read_i32(d + 16);
  if (f.n_ctx_ < 2 || f.n_vocab_ < 1 || f.n_chunk_ < 1 || f.n_ctx_ > (1 << 24) || f.n_vocab_ > (1 << 24) ||
      f.n_chunk_ > (1 << 24))
    return Error{fmt::format("{}: implausible header (n_ctx {}, n_vocab {}, n_chunk {})", path, f.n_ctx_, f.n_vocab_,
                             f.n_chunk_)};
  f.tokens_at_ = kHeaderBytes;
  f.rows_at_ = f.tokens_at_ + static_cast<size_t>(f.n_chunk_ * f.n_ctx_) * sizeof(int32_t);
  const uint64_t rows = static_cast<uint64_t>(f.n_chunk_) * static_cast<uint64_t>(kld_rows_per_chunk(f.n_ctx_));
  const uint64_t want = f.rows_at_ + rows * static_cast<uint64_t>(kld_row_slots(f.n_vocab_)) * sizeof(uint16_t);
  if (size != want)
    return Error{fmt::format("{}: {} bytes, but its header (n_ctx {}, n_vocab {}, n_chunk {}) needs {}: truncated or "
                             "not written by llama-perplexity --kl-divergence-base",
                             path, size, f.n_ctx_, f.n_vocab_, f.n_chunk_, want)};
  for (int64_t i = 0; i < f.n_chunk_ * f.n_ctx_; ++i) {
    const int32_t t = read_i32(d + f.tokens_at_ + static_cast<size_t>(i) * sizeof(int32_t));
    if (t < 0 || t >= f.n_vocab_)
      return Error{fmt::format("{}: token {} at index {} is outside the vocabulary of {}", path, t, i, f.n_vocab_)};
  }
  return f;
}

std::vector<int32_t> KldBaseFile::chunk_tokens(int64_t c) const {
  std::vector<int32_t> out(static_cast<size_t>(n_ctx_));
  std::memcpy(out.data(), file_.data() + tokens_at_ + static_cast<size_t>(c * n_ctx_) * sizeof(int32_t),
              out.size() * sizeof(int32_t));
  return out;
}

KldBaseRow KldBaseFile::row(int64_t c, int64_t r) const {
  const size_t idx = static_cast<size_t>(c * kld_rows_per_chunk(n_ctx_) + r);
  const uint8_t* p = file_.data() + rows_at_ + idx * static_cast<size_t>(kld_row_slots(n_vocab_)) * sizeof(uint16_t);
  KldBaseRow row;
  std::memcpy(&row.scale, p, sizeof(float));
  std::memcpy(&row.min_log_prob, p + sizeof(float), sizeof(float));
  row.q = reinterpret_cast<const uint16_t*>(p + 2 * sizeof(float));  // 2-byte aligned: rows are an even number of slots
  return row;
}

double encode_kld_row(const float* logits, int64_t n, int32_t target, uint16_t* out) {
  // The same float/double steps as llama-perplexity, so a file written here reads the same there.
  float mx = logits[0], mn = logits[0];
  for (int64_t i = 1; i < n; ++i) {
    mx = std::max(mx, logits[i]);
    mn = std::min(mn, logits[i]);
  }
  mn = std::max(mn, mx - 16);
  double sum_exp = 0;
  for (int64_t i = 0; i < n; ++i) sum_exp += std::exp(logits[i] - mx);
  const float lse = static_cast<float>(std::log(sum_exp));
  const float min_log_prob = mn - mx - lse;
  const float scale = (mx - mn) / 65535.f;
  std::memcpy(out, &scale, sizeof scale);
  std::memcpy(out + 2, &min_log_prob, sizeof min_log_prob);
  uint16_t* q = out + 4;
  const int64_t slots = kld_row_slots(n) - 4;
  std::fill(q, q + slots, uint16_t{0});
  if (scale != 0) {
    const float inv = 1 / scale;
    for (int64_t i = 0; i < n; ++i)
      if (logits[i] > mn) q[i] = static_cast<uint16_t>(std::lrintf(inv * (logits[i] - mn)));
  }
  return static_cast<double>(mx) + lse - logits[target];
}

KldBaseWriter::~KldBaseWriter() {
  if (f_) std::fclose(f_);
}

KldBaseWriter::KldBaseWriter(KldBaseWriter&& o) noexcept
    : f_(o.f_), path_(std::move(o.path_)), n_vocab_(o.n_vocab_), rows_expected_(o.rows_expected_), rows_(o.rows_),
      buf_(std::move(o.buf_)) {
  o.f_ = nullptr;
}

Result<KldBaseWriter> KldBaseWriter::create(const std::string& path, int64_t n_ctx, int64_t n_vocab,
                                            std::span<const int32_t> tokens) {
  if (n_ctx < 2 || n_vocab < 1 || tokens.empty() || tokens.size() % static_cast<size_t>(n_ctx) != 0)
    return Error{fmt::format("{}: a base file needs whole chunks of n_ctx >= 2 tokens", path)};
  KldBaseWriter w;
  w.f_ = std::fopen(path.c_str(), "wb");
  if (!w.f_) return Error{fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno))};
  w.path_ = path;
  w.n_vocab_ = n_vocab;
  const auto n_chunk = static_cast<int64_t>(tokens.size()) / n_ctx;
  w.rows_expected_ = n_chunk * kld_rows_per_chunk(n_ctx);
  w.buf_.resize(static_cast<size_t>(kld_row_slots(n_vocab)));
  const int32_t hdr[3] = {static_cast<int32_t>(n_ctx), static_cast<int32_t>(n_vocab), static_cast<int32_t>(n_chunk)};
  if (std::fwrite(kMagic, 1, sizeof kMagic, w.f_) != sizeof kMagic || std::fwrite(hdr, sizeof hdr, 1, w.f_) != 1 ||
      std::fwrite(tokens.data(), sizeof(int32_t), tokens.size(), w.f_) != tokens.size())
    return Error{fmt::format("{}: write failed: {}", path, std::strerror(errno))};
  return w;
}

Status KldBaseWriter::add_row(const float* logits, int32_t target) {
  if (rows_ >= rows_expected_) return Error{fmt::format("{}: more rows than the header announces", path_)};
  encode_kld_row(logits, n_vocab_, target, buf_.data());
  if (std::fwrite(buf_.data(), sizeof(uint16_t), buf_.size(), f_) != buf_.size())
    return Error{fmt::format("{}: write failed: {}", path_, std::strerror(errno))};
  ++rows_;
  return Status{};
}

Status KldBaseWriter::close() {
  if (!f_) return Error{fmt::format("{}: already closed", path_)};
  const bool ok = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!ok) return Error{fmt::format("{}: write failed: {}", path_, std::strerror(errno))};
  if (rows_ != rows_expected_)
    return Error{fmt::format("{}: {} rows written, the header announces {}", path_, rows_, rows_expected_)};
  return Status{};
}

TokenComparison compare_token_base(const KldBaseRow& base, const float* model, int64_t n, int32_t target) {
  TokenComparison r;
  const double lse_q = log_sum_exp(model, n);
  double kld = 0;
  int64_t top_base = 0;
  float top_lp = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float lp = base.log_prob(i);
    if (i == 0 || lp > top_lp) {
      top_lp = lp;
      top_base = i;
    }
    if (lp > -16.f) kld += std::exp(static_cast<double>(lp)) * (lp - (model[i] - lse_q));
  }
  r.kld = std::max(0.0, kld);
  r.nll_ref = -static_cast<double>(base.log_prob(target));
  r.nll_model = lse_q - model[target];
  r.same_top1 = top_base == argmax(model, n);
  return r;
}

}  // namespace tmill::eval
