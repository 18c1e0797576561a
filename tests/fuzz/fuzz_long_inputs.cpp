// fuzz-deps: server
// libFuzzer target: the server's long-input paths on untrusted bytes, with the bundled stories260K
// tokenizer and the ChatML fallback template and fake generation (no engine):
//   - the bytes as a document: chunk_document (every chunk within its token budget, non-empty) and
//     run_map_reduce (one answer, stages that shrink, tokens that add up);
//   - the bytes as a chat body: compress_history (a RequestError is a 400 naming a field; a compressed
//     body keeps the latest message, its compressed prompt maps like any other).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "chat/chat_template.h"
#include "core/log.h"
#include "server/history_compression.h"
#include "server/map_reduce.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

const ServerContext& context() {
  static const ServerContext ctx = [] {
    std::string path = std::getenv("TM_FUZZ_MODEL") ? std::getenv("TM_FUZZ_MODEL") : "";
    if (path.empty())
      path = (std::filesystem::path(__FILE__).parent_path() / "../../models/stories260K/stories260K.gguf").string();
    auto tok = Tokenizer::load(path);
    if (!tok.ok()) std::abort();
    auto tmpl = ChatTemplate::parse(fallback_chat_template());
    if (!tmpl.ok()) std::abort();
    ServerContext c;
    c.served_model_name = "stories";
    c.tokenizer = *tok;
    c.chat_template = std::make_shared<const ChatTemplate>(std::move(tmpl).value());
    c.max_model_len = 256;
    c.n_vocab = (*tok)->n_vocab();
    return c;
  }();
  return ctx;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_long_inputs: invariant broken: %s\n", what);
    std::abort();
  }
}

void document(const std::string& text, const ServerContext& c) {
  const Tokenizer& tok = *c.tokenizer;
  const int32_t budget = 24 + static_cast<int32_t>(text.size() % 40);
  for (const std::string& chunk : chunk_document(text, tok, budget)) {
    check(!chunk.empty(), "chunk non-empty");
    check(static_cast<int32_t>(tok.encode(chunk, false, false).size()) <= budget + 8, "chunk within budget");
  }
  MapReduceOptions o;
  o.max_tokens = 8;
  auto build = [&](const std::string& t) { return tok.encode(t, true, false); };
  BatchRunner run = [](const std::vector<std::vector<int32_t>>& prompts,
                       const std::function<void(int32_t)>& done) -> Result<std::vector<StageOutput>> {
    std::vector<StageOutput> outs;
    for (const auto& p : prompts) {
      outs.push_back({"a short answer", static_cast<int32_t>(p.size()), 3});
      done(static_cast<int32_t>(outs.size()));
    }
    return outs;
  };
  auto r = run_map_reduce(text, tok, c.max_model_len, o, build, run);
  if (!r.ok()) return;
  check(!r->stages.empty() && r->stages[0].inputs == r->chunks, "map covers every chunk");
  check(r->stages.back().inputs == 1, "one answer at the end");
  for (size_t i = 1; i < r->stages.size(); ++i) check(r->stages[i].inputs < r->stages[i - 1].inputs, "levels shrink");
}

void chat(const json& body_in, const ServerContext& c) {
  json body = body_in;
  CompressionOptions o;
  o.default_on = true;
  o.threshold = 0.3;
  o.summary_max_tokens = 16;
  static SummaryCache cache(64);
  Summarizer summarize = [](const SummaryJob& j) -> Result<SummaryResult> {
    if (j.transcript.size() % 7 == 3) return Error{"no summary"};
    return SummaryResult{"they talked", 10, 2};
  };
  try {
    auto r = compress_history(body, c, o, cache, 0, summarize);
    if (!r.ok() || r->compressed_messages == 0) return;
    const json& before = body_in["messages"];
    const json& after = body["messages"];
    check(after.is_array() && !after.empty(), "messages stay an array");
    check(after.back() == before.back(), "the latest message stays");
    check(after.size() < before.size() + 1, "messages were replaced");
    ApiError err;
    auto m = map_chat_request(body, c, &err);
    check(m.ok() || err.status == 400, "the compressed body maps or is a 400");
  } catch (const RequestError& e) {
    check(e.error.status == 400 && !e.error.message.empty(), "a malformed body is a 400");
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
  const std::string text(reinterpret_cast<const char*>(data), size);
  document(text, c);
  json body;
  try {
    body = parse_body(text);
  } catch (const RequestError&) {
    return 0;
  }
  chat(body, c);
  return 0;
}
