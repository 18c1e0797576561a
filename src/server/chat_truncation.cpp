// truncation "auto" for chat requests: the oldest whole turns go first, the system prompt and the
// latest turn never; the fewest turns that make the prompt and the completion fit, found by binary
// search (the prompt only shrinks as more turns go), each candidate rendered and tokenized as sent.
#include <fmt/format.h>

#include "chat/messages.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server::detail {

namespace {

bool auto_truncation(const json& body, const ServerContext& ctx) {
  const json* t = field(body, "truncation");
  if (!t) return ctx.truncation_auto;
  if (t->is_string() && (*t == "auto" || *t == "disabled")) return *t == "auto";
  throw_bad_request("'truncation' must be \"auto\" or \"disabled\"", "truncation");
}

std::string role_of(const json& m) {
  const json* r = m.is_object() ? field(m, "role") : nullptr;
  return r && r->is_string() ? r->get<std::string>() : std::string();
}

}  // namespace

void truncate_chat(const json& body, const ServerContext& ctx, std::optional<int64_t> max_tokens, bool add_special,
                   MappedPrompt& p) {
  if (!auto_truncation(body, ctx)) return;
  const int64_t reserve = std::max<int64_t>(1, max_tokens.value_or(1));
  auto fits = [&](size_t len) { return static_cast<int64_t>(len) + reserve <= ctx.max_model_len; };
  if (fits(p.request.prompt.size())) return;
  const json* msgs = field(body, "messages");
  if (!msgs || !msgs->is_array()) return;  // render_messages has already said what is wrong
  // Kept always: the leading system/developer messages. Turns start at each later user message (what
  // comes before the first one belongs to the first turn); the last turn stays.
  size_t prefix = 0;
  while (prefix < msgs->size() && (role_of((*msgs)[prefix]) == "system" || role_of((*msgs)[prefix]) == "developer"))
    ++prefix;
  std::vector<size_t> starts{prefix};
  for (size_t i = prefix + 1; i < msgs->size(); ++i) {
    if (role_of((*msgs)[i]) == "user") starts.push_back(i);
  }
  if (starts.size() < 2) return;
  auto without = [&](size_t k) {  // the request's messages without the k oldest turns
    json kept = json::array();
    for (size_t i = 0; i < prefix; ++i) kept.push_back((*msgs)[i]);
    for (size_t i = starts[k]; i < msgs->size(); ++i) kept.push_back((*msgs)[i]);
    return kept;
  };
  struct Candidate {
    std::string text;
    std::vector<int32_t> prompt;
  };
  auto render = [&](size_t k) {
    const json kept = without(k);
    Candidate c;
    c.text = render_messages(body, ctx, &kept);
    c.prompt = tokenize_chat_prompt(c.text, *ctx.tokenizer, add_special);
    return c;
  };
  size_t lo = 1, hi = starts.size() - 1;  // smallest k in [lo, hi] that fits, if any
  Candidate best = render(hi);
  if (!fits(best.prompt.size())) return;  // even the latest turn alone is too long: the usual 400
  size_t best_k = hi;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    Candidate c = render(mid);
    if (fits(c.prompt.size())) {
      best = std::move(c);
      best_k = hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  p.dropped_messages = static_cast<int32_t>(starts[best_k] - prefix);
  p.dropped_tokens = static_cast<int32_t>(p.request.prompt.size() - best.prompt.size());
  p.text = std::move(best.text);
  p.request.prompt = std::move(best.prompt);
}

}  // namespace tmill::server::detail
