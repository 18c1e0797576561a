// Reasoning output for /v1/chat/completions, as vLLM's --reasoning-parser gives it: the model's
// `<think>…</think>` part comes back as `message.reasoning_content` (and `delta.reasoning_content` when
// streaming), the rest as `content`. The split itself is the chat module's (chat/reasoning.h); this file
// decides it per request and maps it onto the response.
//
//   --reasoning-parser auto (default): a parser when the chat template writes <think> and </think>;
//   none: never; deepseek_r1, qwen3, ...: that parser. Per request, the rendered prompt decides where
//   the output starts (inside the reasoning when the generation prompt opens <think>; no reasoning when
//   it closes it, e.g. Qwen3 with chat_template_kwargs.enable_thinking=false), and a constrained request
//   (response_format, tools, ...) gets its constraint applied after the end tag when the output starts
//   inside the reasoning. `include_reasoning: false` (vLLM) drops the reasoning from the response.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/reasoning.h"
#include "core/result.h"

namespace tmill::server {

using json = nlohmann::ordered_json;
struct MappedRequest;
struct ChoiceOutput;
struct ServerContext;

// The server's --reasoning-parser.
struct ReasoningConfig {
  bool auto_detect = true;                  // "auto": detect from the chat template in use
  std::optional<ReasoningParserSpec> spec;  // a named parser (unset with auto or none)
};
Result<ReasoningConfig> reasoning_config(std::string_view name);

// One chat request's reasoning split.
struct RequestReasoning {
  ReasoningParserSpec spec;
  ReasoningStart start = ReasoningStart::MaybeTag;
  bool include = true;  // include_reasoning
};

// Fills m.reasoning for a chat request whose prompt is rendered (m.prompts[0].text) and whose
// constraint is set (call it last); auto-detection looks at the template the prompt was rendered with.
void map_reasoning(const json& body, const ServerContext& ctx, MappedRequest& m);

// Non-streaming: each choice's text becomes its content, its reasoning goes to ChoiceOutput::reasoning.
void split_reasoning_choices(const MappedRequest& m, std::vector<ChoiceOutput>& choices);

// Streaming: one parser per choice (none when the request has no reasoning split), and one output's
// text turned into a delta: "reasoning_content" set on `delta` when there is reasoning, the content
// returned (empty when none is certain yet).
std::vector<ReasoningStream> reasoning_streams(const MappedRequest& m, size_t choices);
std::string reasoning_delta(const MappedRequest& m, ReasoningStream& st, const std::string& text, bool finished,
                            json& delta);

}  // namespace tmill::server
