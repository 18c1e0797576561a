// Tool calls in chat responses, whole and streamed.
#include "server/tool_response.h"

#include <chrono>
#include <random>
#include <set>

#include <fmt/format.h>

namespace tmill::server {

std::string new_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
  return fmt::format("call_{:016x}{:08x}", rng(), static_cast<uint32_t>(rng()));
}

namespace {

// The id a call gets: the one the model wrote (Kimi, Mistral) unless empty or already used.
std::string call_id(const std::string& from_text, std::set<std::string>& used) {
  std::string id = from_text.empty() || used.count(from_text) ? new_tool_call_id() : from_text;
  used.insert(id);
  return id;
}

}  // namespace

void apply_tool_calls(const ToolPlan& plan, std::vector<ChoiceOutput>& choices) {
  if (!plan.parse) return;
  for (ChoiceOutput& c : choices) {
    ToolCallParse p = parse_tool_calls(plan.format, c.text, plan.tools.get());
    if (p.calls.empty()) continue;
    json arr = json::array();
    std::set<std::string> used;
    for (ToolCall& call : p.calls)
      arr.push_back({{"id", call_id(call.id, used)},
                     {"type", "function"},
                     {"function", {{"name", std::move(call.name)}, {"arguments", std::move(call.arguments)}}}});
    c.text = std::move(p.content);
    c.tool_calls = std::move(arr);
  }
}

ToolStreamer::ToolStreamer(const ToolPlan& plan, size_t choices) {
  if (!plan.parse) return;
  streams_.reserve(choices);
  for (size_t i = 0; i < choices; ++i) streams_.emplace_back(plan.format, plan.tools.get());
  ids_.resize(choices);
}

json ToolStreamer::delta(int32_t ci, const std::string& text, bool finished) {
  ToolCallStream& s = streams_.at(static_cast<size_t>(ci));
  ToolStreamDelta d = s.feed(text);
  if (finished) {
    ToolStreamDelta rest = s.finish();
    d.content += rest.content;
    d.calls.insert(d.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  json out = json::object();
  if (!d.content.empty()) out["content"] = std::move(d.content);
  if (d.calls.empty()) return out;
  std::vector<std::string>& ids = ids_[static_cast<size_t>(ci)];
  json calls = json::array();
  for (ToolCallDelta& c : d.calls) {
    // Pieces of one call within one delta merge into one entry.
    if (!calls.empty() && calls.back()["index"] == c.index) {
      json& fn = calls.back()["function"];
      fn["arguments"] = fn["arguments"].get<std::string>() + c.arguments;
      continue;
    }
    json e = {{"index", c.index}};
    if (c.first) {
      std::set<std::string> used(ids.begin(), ids.end());
      ids.push_back(call_id(c.id, used));
      e["id"] = ids.back();
      e["type"] = "function";
      e["function"] = {{"name", std::move(c.name)}, {"arguments", std::move(c.arguments)}};
    } else {
      e["function"] = {{"arguments", std::move(c.arguments)}};
    }
    calls.push_back(std::move(e));
  }
  out["tool_calls"] = std::move(calls);
  return out;
}

bool ToolStreamer::called(int32_t ci) const {
  return active() && streams_.at(static_cast<size_t>(ci)).calls_started() > 0;
}

}  // namespace tmill::server
