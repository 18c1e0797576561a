// OpenAI tool calling, response side: the model's text split into content and `tool_calls` by the
// request's tool-call parser, as a whole (message.tool_calls) or while streaming (delta.tool_calls,
// the first chunk of a call with index, id, type and function.name, later ones with argument pieces).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "server/openai_response.h"
#include "server/tool_request.h"

namespace tmill::server {

std::string new_tool_call_id();  // "call_" + 24 random hex digits

// Non-streaming: when the plan parses tool calls, each choice's text becomes its content and its
// ChoiceOutput::tool_calls (the message's "tool_calls" array, ids assigned).
void apply_tool_calls(const ToolPlan& plan, std::vector<ChoiceOutput>& choices);

// Streaming: one parser per choice.
class ToolStreamer {
 public:
  ToolStreamer() = default;
  ToolStreamer(const ToolPlan& plan, size_t choices);
  bool active() const { return !streams_.empty(); }
  // The chat delta for a new text piece of choice `ci` ({"content"} and/or {"tool_calls"}; empty while
  // text is held back); `finished` releases what is held.
  json delta(int32_t ci, const std::string& text, bool finished);
  bool called(int32_t ci) const;  // any call started in choice ci

 private:
  std::vector<ToolCallStream> streams_;
  std::vector<std::vector<std::string>> ids_;  // per choice, per call
};

}  // namespace tmill::server
