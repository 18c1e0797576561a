// Reasoning output: splitting a reasoning model's `<think>…</think>` text into the reasoning and the
// answer (vLLM's reasoning parsers, `message.reasoning_content` / `delta.reasoning_content`), for finished
// text and incrementally while streaming.
//
//   auto spec = reasoning_parser("deepseek_r1");                        // or "qwen3", ...; "none": nullopt
//   ReasoningStart start = reasoning_start(**spec, rendered_prompt);    // where the output begins
//   ReasoningSplit s = split_reasoning(text, **spec, start);            // finished text
//   ReasoningStream st(**spec, start);  auto d = st.feed(piece); ...  auto last = st.finish();
//
// Where the output begins is decided from the rendered prompt first: a generation prompt that opens
// `<think>` (DeepSeek-R1, Qwen3-thinking-2507, MiniMax-M2, ...) means the output starts inside the
// reasoning without an opening tag; one that closes it (`<think>\n\n</think>`: Qwen3 with
// enable_thinking=false, DeepSeek-V3.1 without thinking) means there is no reasoning. Otherwise the
// parser's default applies: DeepSeek-R1-style parsers assume the reasoning comes first (an opening tag,
// when the model writes one, is dropped); Qwen3-style parsers see reasoning only when the output opens
// with the start tag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace tmill {

struct ReasoningParserSpec {
  std::string name;                 // vLLM's name: "deepseek_r1", "qwen3", ...
  std::string start = "<think>";
  std::string end = "</think>";
  bool implicit_start = false;      // the output starts in the reasoning even without the start tag
};

// The parser named `name` (vLLM's --reasoning-parser names); "none" gives nullopt. An unknown name is an
// error listing the known ones.
Result<std::optional<ReasoningParserSpec>> reasoning_parser(std::string_view name);
// The names reasoning_parser accepts, "none" included.
std::vector<std::string> reasoning_parser_names();
// A Qwen3-style parser for a chat template that writes both markers (detection from the template), Gemma
// 4's thinking channel for its template; nullopt when the template mentions no `<think>`/`</think>` pair.
std::optional<ReasoningParserSpec> reasoning_parser_for_template(std::string_view template_source);

enum class ReasoningStart : uint8_t {
  None,         // no reasoning: the whole output is the answer
  MaybeTag,     // reasoning only when the output opens with the start tag (leading whitespace allowed)
  InReasoning,  // the output starts inside the reasoning (a leading start tag is dropped)
};

// Where the output of a request with this rendered prompt begins (see the header comment).
ReasoningStart reasoning_start(const ReasoningParserSpec& spec, std::string_view prompt);

struct ReasoningSplit {
  std::optional<std::string> reasoning;  // nullopt: the output had no reasoning part
  std::string content;                   // the answer after the end tag (verbatim, whitespace kept)
};

// Splits finished text. Unterminated reasoning (cut by max_tokens) is all reasoning, content empty.
ReasoningSplit split_reasoning(std::string_view text, const ReasoningParserSpec& spec, ReasoningStart start);

// The same split, incrementally: feed() returns what is certain so far and holds back a possible
// partial marker (or undecided leading text); finish() releases the rest. The concatenated deltas equal
// split_reasoning() of the concatenated input, however the input is cut.
class ReasoningStream {
 public:
  struct Delta {
    std::string reasoning, content;
    bool empty() const { return reasoning.empty() && content.empty(); }
  };
  ReasoningStream(ReasoningParserSpec spec, ReasoningStart start);
  Delta feed(std::string_view text);
  Delta finish();
  bool saw_reasoning() const { return saw_reasoning_; }  // split_reasoning's reasoning has a value

 private:
  enum class State : uint8_t { Undecided, Reasoning, Content };
  void step(Delta& out, bool final);

  ReasoningParserSpec spec_;
  State state_;
  bool implicit_ = false;  // Undecided because the start tag is optional (InReasoning)
  bool saw_reasoning_ = false;
  std::string pending_;
};

}  // namespace tmill
