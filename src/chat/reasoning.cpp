// The reasoning split (reasoning.h): named parsers, where the output starts, and the split itself, once
// for finished text and once as a state machine for streaming (tested to agree at every cut).
#include "chat/reasoning.h"

#include <algorithm>
#include <utility>

namespace tmill {

namespace {

struct NamedParser {
  const char* name;
  const char* start;
  const char* end;
  bool implicit_start;
};

// vLLM's reasoning parsers whose output is <start>reasoning<end>answer. implicit_start: the model's
// template (or training) opens the reasoning itself, so the output may lack the start tag.
constexpr NamedParser kParsers[] = {
    {"deepseek_r1", "<think>", "</think>", true},
    {"deepseek_v3", "<think>", "</think>", false},
    {"qwen3", "<think>", "</think>", false},
    {"glm45", "<think>", "</think>", false},
    {"minimax_m2", "<think>", "</think>", true},
    {"step3", "<think>", "</think>", true},
    {"seed_oss", "<seed:think>", "</seed:think>", false},
    {"gemma4", "<|channel>thought\n", "<channel|>", false},
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t first_non_space(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (!is_space(s[i])) return i;
  return std::string_view::npos;
}

bool all_space(std::string_view s) { return first_non_space(s) == std::string_view::npos; }

// Length of the longest suffix of `s` that is a proper prefix of `marker` (text that may still become it).
size_t partial_suffix(std::string_view s, std::string_view marker) {
  const size_t max = std::min(s.size(), marker.size() - 1);
  for (size_t n = max; n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

Result<std::optional<ReasoningParserSpec>> reasoning_parser(std::string_view name) {
  if (name == "none") return std::optional<ReasoningParserSpec>();
  for (const NamedParser& p : kParsers)
    if (name == p.name) return std::optional<ReasoningParserSpec>(ReasoningParserSpec{p.name, p.start, p.end, p.implicit_start});
  std::string known;
  for (const std::string& n : reasoning_parser_names()) known += (known.empty() ? "" : ", ") + n;
  return Error{"unknown reasoning parser '" + std::string(name) + "' (known: " + known + ")"};
}

std::vector<std::string> reasoning_parser_names() {
  std::vector<std::string> out{"none"};
  for (const NamedParser& p : kParsers) out.emplace_back(p.name);
  return out;
}

std::optional<ReasoningParserSpec> reasoning_parser_for_template(std::string_view source) {
  // Gemma 4: its thinking channel, <|channel>thought\n...<channel|>
  if (source.find("<|channel>thought") != std::string_view::npos && source.find("<channel|>") != std::string_view::npos)
    return ReasoningParserSpec{"gemma4", "<|channel>thought\n", "<channel|>", false};
  if (source.find("<think>") == std::string_view::npos || source.find("</think>") == std::string_view::npos)
    return std::nullopt;
  return ReasoningParserSpec{"template", "<think>", "</think>", false};
}

ReasoningStart reasoning_start(const ReasoningParserSpec& spec, std::string_view prompt) {
  const size_t s = prompt.rfind(spec.start);
  const size_t e = prompt.rfind(spec.end);
  // The generation prompt opens the reasoning: "...<think>\n" with nothing but whitespace after it.
  if (s != std::string_view::npos && (e == std::string_view::npos || e < s) &&
      all_space(prompt.substr(s + spec.start.size())))
    return ReasoningStart::InReasoning;
  // ...or closes it right away ("<think>\n\n</think>\n\n"): thinking is off, the output is the answer.
  if (e != std::string_view::npos && (s == std::string_view::npos || s < e) &&
      all_space(prompt.substr(e + spec.end.size())))
    return ReasoningStart::None;
  return spec.implicit_start ? ReasoningStart::InReasoning : ReasoningStart::MaybeTag;
}

ReasoningSplit split_reasoning(std::string_view text, const ReasoningParserSpec& spec, ReasoningStart start) {
  if (start == ReasoningStart::None) return {std::nullopt, std::string(text)};
  std::string_view rest = text;
  const size_t i = first_non_space(text);
  if (i != std::string_view::npos && text.substr(i).starts_with(spec.start)) {
    rest = text.substr(i + spec.start.size());
  } else if (start == ReasoningStart::MaybeTag) {
    return {std::nullopt, std::string(text)};
  }
  const size_t e = rest.find(spec.end);
  if (e == std::string_view::npos) return {std::string(rest), std::string()};
  return {std::string(rest.substr(0, e)), std::string(rest.substr(e + spec.end.size()))};
}

ReasoningStream::ReasoningStream(ReasoningParserSpec spec, ReasoningStart start) : spec_(std::move(spec)) {
  switch (start) {
    case ReasoningStart::None: state_ = State::Content; break;
    case ReasoningStart::MaybeTag: state_ = State::Undecided; break;
    case ReasoningStart::InReasoning:
      state_ = State::Undecided;  // until we know whether the model repeats the start tag
      implicit_ = true;
      saw_reasoning_ = true;
      break;
  }
}

ReasoningStream::Delta ReasoningStream::feed(std::string_view text) {
  pending_.append(text);
  Delta out;
  step(out, false);
  return out;
}

ReasoningStream::Delta ReasoningStream::finish() {
  Delta out;
  step(out, true);
  return out;
}

void ReasoningStream::step(Delta& out, bool final) {
  for (;;) {
    switch (state_) {
      case State::Content:
        out.content += pending_;
        pending_.clear();
        return;
      case State::Undecided: {
        const size_t i = first_non_space(pending_);
        const std::string_view rest = i == std::string::npos ? std::string_view() : std::string_view(pending_).substr(i);
        if (!rest.empty() && rest.starts_with(spec_.start)) {
          pending_.erase(0, i + spec_.start.size());
          state_ = State::Reasoning;
          saw_reasoning_ = true;
          continue;
        }
        const bool may_be_tag = rest.size() < spec_.start.size() && std::string_view(spec_.start).starts_with(rest);
        if (may_be_tag && !final) return;  // whitespace only, or a prefix of the start tag: wait
        state_ = implicit_ ? State::Reasoning : State::Content;
        continue;
      }
      case State::Reasoning: {
        const size_t e = pending_.find(spec_.end);
        if (e != std::string::npos) {
          out.reasoning.append(pending_, 0, e);
          pending_.erase(0, e + spec_.end.size());
          state_ = State::Content;
          continue;
        }
        const size_t hold = final ? 0 : partial_suffix(pending_, spec_.end);
        out.reasoning.append(pending_, 0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
    }
  }
}

}  // namespace tmill
