// OpenAI chat messages to a prompt: validating `messages`, rendering them with a chat template the
// way Hugging Face's apply_chat_template does (bos/eos from the tokenizer, tools, extra template
// variables, continue_final_message), and tokenizing the result without doubling BOS. Used by the
// server's /v1/chat/completions and /tokenize.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/result.h"

namespace tmill {

class Tokenizer;

// `messages` as a template sees them: an array of objects with a non-empty string role; content a
// string (text content parts are joined with "\n", as vLLM does; other part types are an error),
// required except for assistant messages (absent or null: ""). As vLLM prepares them for the template:
// assistant tool-call arguments given as a JSON string are parsed into objects (absent or empty: {}),
// an empty tool_calls list is dropped, and `reasoning` / `reasoning_content` are copied to each other
// and to `thinking` (gpt-oss's harmony template reads it) unless the message has one.
// Errors name the message ("messages[2].role must be ...", "...tool_calls[0].function.arguments is not
// valid JSON").
Result<nlohmann::ordered_json> normalize_chat_messages(const nlohmann::ordered_json& messages);

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // Continue the last message instead of starting a new one: the rendered text is cut right after
  // that message's content (Hugging Face's continue_final_message). Excludes add_generation_prompt.
  bool continue_final_message = false;
  const nlohmann::ordered_json* tools = nullptr;           // the template's `tools`
  const nlohmann::ordered_json* template_kwargs = nullptr;  // extra template variables
};

// Why render_chat failed: a template error (the template raised or could not render), or a
// continue_final_message whose content is not found in the rendered text.
struct ChatRenderError {
  enum class Kind : uint8_t { Template, ContinueFinal } kind;
  std::string message;
};

// Renders normalized messages. On failure returns false and fills *error.
bool render_chat(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages, const ChatRenderOptions& opts,
                 const Tokenizer& tok, std::string* out, ChatRenderError* error);

// Token ids of a rendered chat prompt: special tokens parsed; with add_special_tokens the
// tokenizer's own BOS/EOS rules, else BOS only when the vocabulary wants one and the text did not
// already start with it (templates usually write "{{ bos_token }}" themselves).
std::vector<int32_t> tokenize_chat_prompt(const std::string& text, const Tokenizer& tok, bool add_special_tokens);

}  // namespace tmill
