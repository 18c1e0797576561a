#include "tokenizer/detokenizer.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace tmill {

StreamingDetokenizer::StreamingDetokenizer(std::shared_ptr<const Tokenizer> tok, Options opt)
    : tok_(std::move(tok)), opt_(std::move(opt)) {
  opt_.stop.erase(std::remove(opt_.stop.begin(), opt_.stop.end(), std::string()), opt_.stop.end());
  for (const auto& s : opt_.stop) max_stop_ = std::max(max_stop_, s.size());
  if (!tok_->strips_leading_space()) opt_.strip_leading_space = false;
}

StreamingDetokenizer::StreamingDetokenizer(std::shared_ptr<const Tokenizer> tok, std::span<const int32_t> prompt,
                                           Options opt)
    : StreamingDetokenizer(tok, [&] {
        opt.strip_leading_space = starts_text(*tok, prompt);
        return std::move(opt);
      }()) {}

bool StreamingDetokenizer::starts_text(const Tokenizer& tok, std::span<const int32_t> prompt) {
  return tok.strips_leading_space() && tok.decode_continuation(prompt, true).empty();
}

std::string StreamingDetokenizer::push(int32_t id) {
  if (stopped()) return {};
  const std::string& p = tok_->piece(id, opt_.skip_special);
  if (p.empty()) return {};
  if (first_piece_ && opt_.strip_leading_space && p[0] == ' ') bytes_.append(p, 1);
  else bytes_ += p;
  first_piece_ = false;
  return release(false);
}

std::string StreamingDetokenizer::finish() {
  if (stopped()) return {};
  return release(true);
}

std::string StreamingDetokenizer::release(bool final) {
  // Move complete characters from bytes_ to held_.
  const size_t tail = final ? 0 : tok::incomplete_utf8_tail(bytes_);
  const size_t old_held = held_.size();
  std::string clean;
  std::string_view complete(bytes_.data(), bytes_.size() - tail);
  if (tok::sanitize_utf8(complete, clean)) held_.append(complete);
  else held_ += clean;
  bytes_.erase(0, bytes_.size() - tail);

  // A stop string: search only where it could involve the new text.
  if (max_stop_ > 0) {
    const size_t from = old_held >= max_stop_ ? old_held - max_stop_ + 1 : 0;
    size_t best = std::string::npos;
    for (size_t k = 0; k < opt_.stop.size(); ++k) {
      size_t f = held_.find(opt_.stop[k], from);
      if (f != std::string::npos && f < best) best = f, stop_index_ = int(k);
    }
    if (best != std::string::npos) {
      std::string out = held_.substr(0, best);
      held_.clear();
      bytes_.clear();
      emitted_ += out;
      return out;
    }
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t keep = 0;
  if (!final) {
    for (const auto& s : opt_.stop) {
      for (size_t len = std::min(s.size() - 1, held_.size()); len > keep; --len) {
        if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
          keep = len;
          break;
        }
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  emitted_ += out;
  return out;
}

}  // namespace tmill
