// fuzz-deps: server
// libFuzzer target: request body bytes -> parse_body -> map_completion_request / map_chat_request /
// map_native_completion_request (llama-server's /completion), and anthropic_to_chat (Anthropic's
// /v1/messages), responses_to_chat (OpenAI's /v1/responses) and ollama_to_openai (Ollama's /api/chat
// and /api/generate), each then map_chat_request (or the native mapper) (the server's whole user-input path before the engine), with the bundled stories260K tokenizer
// and the ChatML fallback template. Checks: nothing throws or crashes; an error is a 400/404 with a
// message and serializes; a success is a request the engine would accept (tokens in the vocabulary,
// prompt + max_tokens within the context, valid sampling ranges). The transport's memory estimate of
// the same bytes (server/memory_budget.h) never charges less than the body itself.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "chat/chat_template.h"
#include "core/log.h"
#include "server/anthropic.h"
#include "server/llama_request.h"
#include "server/memory_budget.h"
#include "server/ollama.h"
#include "server/responses.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

const ServerContext& context() {
  static const ServerContext ctx = [] {
    // The repository's default model, found next to this source file (or $TM_FUZZ_MODEL).
    std::string path = std::getenv("TM_FUZZ_MODEL") ? std::getenv("TM_FUZZ_MODEL") : "";
    if (path.empty())
      path = (std::filesystem::path(__FILE__).parent_path() / "../../models/stories260K/stories260K.gguf").string();
    auto tok = Tokenizer::load(path);
    if (!tok.ok()) {
      std::fprintf(stderr, "fuzz_request: cannot load %s: %s\n", path.c_str(), tok.error().c_str());
      std::abort();
    }
    auto tmpl = ChatTemplate::parse(fallback_chat_template());
    if (!tmpl.ok()) std::abort();
    ServerContext c;
    c.served_model_name = "stories";
    c.tokenizer = *tok;
    c.chat_template = std::make_shared<const ChatTemplate>(std::move(tmpl).value());
    c.max_model_len = 256;
    c.n_vocab = (*tok)->n_vocab();
    c.max_tokens_default = 100;
    return c;
  }();
  return ctx;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_request: invariant broken: %s\n", what);
    std::abort();
  }
}

void check_result(const Result<MappedRequest>& r, const ApiError& err, const ServerContext& c) {
  if (!r.ok()) {
    check(err.status == 400 || err.status == 404, "error status is 400 or 404");
    check(!err.message.empty() && err.message == r.error(), "error message set");
    check(!error_body(err).empty(), "error body serializes");
    return;
  }
  const MappedRequest& m = *r;
  check(!m.prompts.empty(), "at least one prompt");
  check(m.n >= 1 && m.n <= c.max_n, "n in range");
  for (const MappedPrompt& p : m.prompts) {
    const GenerateRequest& g = p.request;
    check(!g.prompt.empty(), "non-empty prompt");
    for (int32_t t : g.prompt) check(t >= 0 && t < c.n_vocab, "prompt token in vocabulary");
    check(g.max_tokens >= 1, "max_tokens >= 1");
    check(static_cast<int64_t>(g.prompt.size()) + g.max_tokens <= c.max_model_len, "fits the context");
    check(g.min_tokens >= 0 && g.min_tokens <= g.max_tokens, "min_tokens range");
    check(g.n == m.n, "n copied");
    check(g.sampling.top_p > 0 && g.sampling.top_p <= 1, "top_p range");
    check(g.sampling.min_p >= 0 && g.sampling.min_p <= 1, "min_p range");
    check(g.sampling.temperature >= 0, "temperature range");
    check(g.sampling.repetition_penalty > 0, "repetition_penalty range");
    check(g.sampling.logprobs >= -1 && g.sampling.logprobs <= c.max_logprobs, "logprobs range");
    for (const auto& [t, b] : g.sampling.logit_bias) check(t >= 0 && t < c.n_vocab && b >= -100 && b <= 100, "bias");
    for (const std::string& s : g.stop) check(!s.empty(), "stop strings non-empty");
    for (int32_t t : g.stop_token_ids) check(t >= 0 && t < c.n_vocab, "stop token in vocabulary");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    set_log_level(LogLevel::Error);
    return true;
  }();
  (void)quiet;
  const ServerContext& c = context();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  check(request_memory_estimate(bytes) >= size, "the memory estimate covers the body");
  json body;
  try {
    body = parse_body(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const RequestError& e) {
    check(e.error.status == 400 && !e.error.message.empty(), "parse error is a 400");
    return 0;
  }
  ApiError err;
  check_result(map_completion_request(body, c, &err), err, c);
  ApiError err2;
  check_result(map_chat_request(body, c, &err2), err2, c);
  ApiError err3;
  auto native = map_native_completion_request(body, c, &err3);
  check_result(native, err3, c);
  if (native.ok()) {
    check(native->kind == ApiKind::Native, "native kind");
    check(!native->native.generation_settings.dump().empty(), "generation_settings serializes");
  }
  for (json (*translate)(const json&) : {&anthropic_to_chat, &responses_to_chat}) {
    json chat;
    try {
      chat = translate(body);
    } catch (const RequestError& e) {
      check(e.error.status == 400 && !e.error.message.empty(), "an untranslatable body is a 400");
      continue;
    }
    ApiError err4;
    check_result(map_chat_request(chat, c, &err4), err4, c);
  }
  check(!response_settings(body, true).dump().empty(), "response settings serialize");
  check(input_items_of(body).is_array(), "input items are a list");
  for (OllamaKind kind : {OllamaKind::Chat, OllamaKind::Generate}) {  // Ollama's /api/chat and /api/generate
    bool completions = false;
    json oai;
    try {
      oai = ollama_to_openai(kind, body, &completions);
    } catch (const RequestError& e) {
      check(e.error.status == 400 && !e.error.message.empty(), "an untranslatable Ollama body is a 400");
      continue;
    }
    ApiError err5;
    check_result(completions ? map_native_completion_request(oai, c, &err5) : map_chat_request(oai, c, &err5), err5, c);
  }
  return 0;
}
