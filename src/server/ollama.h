// Ollama's API (POST /api/chat, /api/generate; docs/server.md, "Ollama's API") over the chat and
// completions routes, as anthropic.h and responses.h do: the body translated, the route run, its
// stream rewritten. Ollama streams by default, as newline-delimited JSON; a non-streamed answer is
// the same translator's one object, written when the generation ends (the route always streams
// internally, so the durations Ollama reports are measured).
//
//   /api/chat     {"model", "messages": [{"role", "content", "thinking", "tool_calls"}], "tools",
//                  "format": "json" | {schema}, "options": {...}, "stream": true, "think", "keep_alive"}
//   /api/generate {"model", "prompt", "suffix", "system", "raw", "format", "options", "stream", "think"}
//   options: temperature, top_p, top_k, min_p, num_predict (-1 and -2: the rest of the context),
//            stop, seed, repeat_penalty, presence_penalty, frequency_penalty, repeat_last_n (0: no
//            penalties); runtime knobs (num_ctx, num_gpu, num_thread, ...) accepted; mirostat and
//            typical_p turned on are a 400.
//   -> {"model", "created_at", "message": {"role", "content", "thinking", "tool_calls"} | "response",
//       "done", "done_reason": "stop" | "length" | "load", "total_duration", "load_duration",
//       "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"} (nanoseconds)
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "server/api_error.h"
#include "server/chat_adapter.h"

namespace tmill::server {

enum class OllamaKind { Chat, Generate };

// The body for the chat route (Chat, and Generate without raw / suffix) or the completions route
// (*completions set); always streamed with usage on every chunk. Throws RequestError (400 naming the
// field).
json ollama_to_openai(OllamaKind kind, const json& body, bool* completions);
// Ollama's "load only" request: no messages (chat) or an empty prompt (generate).
bool ollama_load_only(OllamaKind kind, const json& body);
// A model name as Ollama's clients send it: "name:latest" is "name" (the tag Ollama adds by default).
std::string ollama_model_name(const std::string& name);
// Ollama's error body: {"error": "message"}.
json ollama_error(const std::string& message);
// RFC 3339 with nanoseconds, UTC ("2026-12-06T10:01:20.123456789Z").
std::string ollama_time(std::chrono::system_clock::time_point t);

// The translator: each chat / completions chunk in, NDJSON lines (or, not streaming, the one
// object at the end) out.
class OllamaStream {
 public:
  OllamaStream(OllamaKind kind, bool stream, std::string model, std::chrono::steady_clock::time_point arrival)
      : kind_(kind), stream_(stream), model_(std::move(model)), arrival_(arrival) {}
  std::string chunk(const json& c, std::chrono::steady_clock::time_point now);
  std::string error(const json& error_body);
  bool finished() const { return finished_; }

 private:
  json line(const std::string& content, const std::string& thinking) const;

  OllamaKind kind_;
  bool stream_;
  std::string model_;
  std::chrono::steady_clock::time_point arrival_, first_{}, last_{};
  bool started_ = false, finished_ = false;
  ChatUsage usage_;
  std::string content_, thinking_;                 // not streaming: the whole answer
  std::map<int, std::pair<std::string, std::string>> calls_;  // chat tool call index -> name, arguments
};

}  // namespace tmill::server
