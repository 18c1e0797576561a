#include "server/ollama.h"

#include <ctime>

#include <fmt/format.h>

#include "server/openai_response.h"
#include "server/request_fields.h"

namespace tmill::server {

namespace {

// Ollama's options -> the OpenAI / llama-server fields of the same meaning.
void map_options(const json& body, json& out, bool native) {
  const json* o = field(body, "options");
  if (!o) return;
  if (!o->is_object()) throw_bad_request("'options' must be an object", "options");
  for (const char* key : {"temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty", "stop"})
    if (const json* v = field(*o, key)) out[key] = *v;
  if (const json* v = field(*o, "repeat_penalty")) out[native ? "repeat_penalty" : "repetition_penalty"] = *v;
  if (const json* v = field(*o, "num_predict")) {
    if (!v->is_number_integer()) throw_bad_request("'options.num_predict' must be an integer", "options");
    const int64_t n = v->get<int64_t>();
    if (n > 0) out[native ? "n_predict" : "max_tokens"] = n;
    else if (n == 0) throw_bad_request("'options.num_predict' 0 generates nothing; give -1 or a positive count", "options");
    // -1 (no limit) and -2 (fill the context): the rest of the context
  }
  if (const json* v = field(*o, "repeat_last_n"); v && v->is_number() && v->get<double>() == 0) {
    for (const char* k : {"repetition_penalty", "repeat_penalty", "presence_penalty", "frequency_penalty"}) out.erase(k);
  }
  if (const json* v = field(*o, "mirostat"); v && v->is_number() && v->get<double>() != 0)
    throw_bad_request("'options.mirostat' (Mirostat sampling) is not supported by this server; leave it 0", "options");
  if (const json* v = field(*o, "typical_p"); v && v->is_number() && v->get<double>() < 1)
    throw_bad_request("'options.typical_p' (locally typical sampling) is not supported by this server; leave it 1",
                      "options");
  // num_ctx, num_keep, num_batch, num_gpu, num_thread, use_mmap, ...: this server's settings, not a request's
}

void map_format(const json& body, json& out) {
  const json* f = field(body, "format");
  if (!f) return;
  if (f->is_string()) {
    const std::string s = f->get<std::string>();
    if (s == "json") out["response_format"] = {{"type", "json_object"}};
    else if (!s.empty()) throw_bad_request("'format' must be \"json\" or a JSON schema", "format");
  } else if (f->is_object()) {
    out["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *f}}}};
  } else {
    throw_bad_request("'format' must be \"json\" or a JSON schema", "format");
  }
}

void map_think(const json& body, json& out) {
  const json* t = field(body, "think");
  if (!t) return;
  if (t->is_boolean()) {
    out["chat_template_kwargs"] = {{"enable_thinking", t->get<bool>()}};
  } else if (t->is_string()) {
    out["reasoning_effort"] = *t;  // gpt-oss's high / medium / low
  } else {
    throw_bad_request("'think' must be true, false or an effort (high, medium, low)", "think");
  }
}

json chat_message(const json& m) {
  if (!m.is_object()) throw_bad_request("each message must be an object", "messages");
  if (const json* images = field(m, "images"); images && !(images->is_array() && images->empty()))
    throw_bad_request("'images' are not supported: this server's models take text only", "messages");
  json out = {{"role", m.value("role", "")}, {"content", m.contains("content") ? m["content"] : json("")}};
  if (const json* th = field(m, "thinking")) out["reasoning_content"] = *th;
  if (const json* name = field(m, "tool_name")) out["name"] = *name;
  if (const json* calls = field(m, "tool_calls")) {
    if (!calls->is_array()) throw_bad_request("'tool_calls' must be a list", "messages");
    json tc = json::array();
    int k = 0;
    for (const json& c : *calls) {
      const json fn = c.is_object() ? c.value("function", json::object()) : json::object();
      const json args = fn.value("arguments", json::object());
      tc.push_back({{"id", c.is_object() ? c.value("id", fmt::format("call_{}", k)) : fmt::format("call_{}", k)},
                    {"type", "function"},
                    {"function", {{"name", fn.value("name", "")}, {"arguments", args.is_string() ? args.get<std::string>() : args.dump()}}}});
      ++k;
    }
    out["tool_calls"] = std::move(tc);
  }
  return out;
}

int64_t ns(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

}  // namespace

bool ollama_load_only(OllamaKind kind, const json& body) {
  if (!body.is_object()) return false;
  if (kind == OllamaKind::Chat) {
    const json* m = field(body, "messages");
    return !m || (m->is_array() && m->empty());
  }
  const json* p = field(body, "prompt");
  return !p || (p->is_string() && p->get<std::string>().empty() && !field(body, "suffix"));
}

json ollama_to_openai(OllamaKind kind, const json& body, bool* completions) {
  if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
  if (const json* s = field(body, "stream"); s && !s->is_boolean()) throw_bad_request("'stream' must be a boolean", "stream");
  if (const json* images = field(body, "images"); images && !(images->is_array() && images->empty()))
    throw_bad_request("'images' are not supported: this server's models take text only", "images");
  json out = json::object();
  if (const json* v = field(body, "keep_alive")) out["keep_alive"] = *v;
  if (const json* v = field(body, "model")) out["model"] = v->is_string() ? json(ollama_model_name(v->get<std::string>())) : *v;
  *completions = false;
  if (kind == OllamaKind::Chat) {
    const json* msgs = field(body, "messages");
    if (!msgs || !msgs->is_array()) throw_bad_request("'messages' (a list) is required", "messages");
    json messages = json::array();
    for (const json& m : *msgs) messages.push_back(chat_message(m));
    out["messages"] = std::move(messages);
    if (const json* tools = field(body, "tools")) out["tools"] = *tools;
  } else {
    const json* prompt = field(body, "prompt");
    if (prompt && !prompt->is_string()) throw_bad_request("'prompt' must be a string", "prompt");
    const std::string text = prompt ? prompt->get<std::string>() : "";
    const bool raw = opt_bool(body, "raw").value_or(false);
    if (const json* t = field(body, "template"); t && !(t->is_string() && t->get<std::string>().empty()))
      throw_bad_request("'template' is not supported: the model's chat template applies (or 'raw': true)", "template");
    if (field(body, "context"))
      throw_bad_request("'context' (the deprecated token context) is not supported; send the conversation to /api/chat",
                        "context");
    if (raw || field(body, "suffix")) {  // the prompt as it is: llama-server's /completion
      *completions = true;
      out["prompt"] = text;
      if (const json* suffix = field(body, "suffix")) out["suffix"] = *suffix;
    } else {
      json messages = json::array();
      if (const json* sys = field(body, "system")) messages.push_back({{"role", "system"}, {"content", *sys}});
      messages.push_back({{"role", "user"}, {"content", text}});
      out["messages"] = std::move(messages);
    }
  }
  map_options(body, out, *completions);
  map_format(body, out);
  if (!*completions) map_think(body, out);
  out["stream"] = true;  // always: the translator measures the durations and writes the answer
  if (!*completions) out["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  return out;
}

json ollama_error(const std::string& message) { return json{{"error", message}}; }

std::string ollama_model_name(const std::string& name) {
  const std::string tag = ":latest";
  return name.size() > tag.size() && name.compare(name.size() - tag.size(), tag.size(), tag) == 0
             ? name.substr(0, name.size() - tag.size())
             : name;
}

std::string ollama_time(std::chrono::system_clock::time_point t) {
  const auto since = t.time_since_epoch();
  const std::time_t secs = std::chrono::duration_cast<std::chrono::seconds>(since).count();
  const int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(since).count() % 1000000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, nanos);
}

json OllamaStream::line(const std::string& content, const std::string& thinking) const {
  json j = {{"model", model_}, {"created_at", ollama_time(std::chrono::system_clock::now())}};
  if (kind_ == OllamaKind::Chat) {
    j["message"] = {{"role", "assistant"}, {"content", content}};
    if (!thinking.empty()) j["message"]["thinking"] = thinking;
  } else {
    j["response"] = content;
    if (!thinking.empty()) j["thinking"] = thinking;
  }
  j["done"] = false;
  return j;
}

std::string OllamaStream::chunk(const json& c, std::chrono::steady_clock::time_point now) {
  if (finished_ || !c.is_object()) return "";
  if (!c.value("model", "").empty()) model_ = c.value("model", "");
  std::string content, thinking;
  bool done = false, length = false;
  if (c.contains("stop") && c["stop"].is_boolean()) {  // llama-server's /completion event (raw prompts)
    content = string_field(c, "content");
    usage_.prompt = c.value("tokens_evaluated", usage_.prompt);
    usage_.completion = c.value("tokens_predicted", usage_.completion);
    done = c["stop"].get<bool>();
    length = c.value("stop_type", "") == "limit";
  } else {
    if (const json* u = field(c, "usage")) usage_.update(*u);
    if (!c.contains("choices") || !c["choices"].is_array() || c["choices"].empty()) return "";
    const json& choice = c["choices"][0];
    const json delta = choice.value("delta", json::object());
    content = string_field(delta, "content");
    thinking = string_field(delta, "reasoning_content");
    if (delta.contains("tool_calls") && delta["tool_calls"].is_array())
      for (const json& tc : delta["tool_calls"]) {
        auto& [name, args] = calls_[tc.value("index", 0)];
        const json fn = tc.value("function", json::object());
        name += string_field(fn, "name");
        args += string_field(fn, "arguments");
      }
    done = choice.contains("finish_reason") && choice["finish_reason"].is_string();
    length = done && choice["finish_reason"] == "length";
  }
  if (!started_ && (!content.empty() || !thinking.empty() || !calls_.empty() || done)) {
    started_ = true;
    first_ = now;
  }
  last_ = now;
  std::string out;
  if (stream_) {
    if (!content.empty() || !thinking.empty()) out += dump_json(line(content, thinking)) + "\n";
  } else {
    content_ += content;
    thinking_ += thinking;
  }
  if (!done) return out;
  finished_ = true;
  json j = stream_ ? line("", "") : line(content_, thinking_);
  if (kind_ == OllamaKind::Chat && !calls_.empty()) {
    json calls = json::array();
    for (const auto& [index, call] : calls_) {
      json args = json::parse(call.second, nullptr, false);
      if (!args.is_object()) args = json::object();
      calls.push_back({{"function", {{"index", index}, {"name", call.first}, {"arguments", std::move(args)}}}});
    }
    j["message"]["tool_calls"] = std::move(calls);
  }
  j["done"] = true;
  j["done_reason"] = length ? "length" : "stop";
  j["total_duration"] = ns(now - arrival_);
  j["load_duration"] = 0;
  j["prompt_eval_count"] = usage_.prompt;
  j["prompt_eval_duration"] = ns(first_ - arrival_);
  j["eval_count"] = usage_.completion;
  j["eval_duration"] = ns(last_ - first_);
  out += dump_json(j) + "\n";
  return out;
}

std::string OllamaStream::error(const json& error_body) {
  finished_ = true;
  return dump_json(ollama_error(chat_error(500, error_body).message)) + "\n";
}

}  // namespace tmill::server
