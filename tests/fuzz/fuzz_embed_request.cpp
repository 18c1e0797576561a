// fuzz-deps: server
// libFuzzer target: request body bytes -> parse_body -> map_embedding_request and map_rerank_request
// (/v1/embeddings, /v1/rerank, /v1/score before the engine), tokenizing with the WordPiece vocabulary
// of tests/data/tokenizers/ggml-vocab-bert-bge.gguf (or $TM_FUZZ_VOCAB). Checks: nothing throws or
// crashes; an error is a 400 with a message; a success has inputs with token ids in the vocabulary,
// dimensions within the embedding size, and a response that serializes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/log.h"
#include "server/embed_request.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

const Tokenizer& tokenizer() {
  static const std::shared_ptr<Tokenizer> tok = [] {
    std::string path = std::getenv("TM_FUZZ_VOCAB") ? std::getenv("TM_FUZZ_VOCAB") : "";
    if (path.empty())
      path = (std::filesystem::path(__FILE__).parent_path() / "../data/tokenizers/ggml-vocab-bert-bge.gguf").string();
    auto t = Tokenizer::load(path);
    if (!t.ok()) {
      std::fprintf(stderr, "fuzz_embed_request: cannot load %s: %s\n", path.c_str(), t.error().c_str());
      std::abort();
    }
    return *t;
  }();
  return *tok;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_embed_request: invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    set_log_level(LogLevel::Error);
    return true;
  }();
  (void)quiet;
  const Tokenizer& tok = tokenizer();
  const std::string body(reinterpret_cast<const char*>(data), size);
  json j;
  try {
    j = parse_body(body);
  } catch (const RequestError& e) {
    check(e.error.status == 400 && !e.error.message.empty(), "parse_body error is a 400 with a message");
    return 0;
  }
  constexpr int64_t kDim = 64;
  ApiError err;
  auto m = map_embedding_request(j, tok, tok.n_vocab(), kDim, &err, 16);
  if (!m.ok()) {
    check(err.status == 400 && !err.message.empty(), "embedding error is a 400 with a message");
  } else {
    check(!m->inputs.empty() && m->inputs.size() <= 16, "1..max_inputs inputs");
    for (const auto& in : m->inputs) {
      check(!in.empty(), "no empty input");
      for (int32_t t : in) check(t >= 0 && t < tok.n_vocab(), "token ids in the vocabulary");
    }
    check(!m->dimensions || (*m->dimensions >= 1 && *m->dimensions <= kDim), "dimensions in range");
    std::vector<std::vector<float>> vecs(m->inputs.size(), std::vector<float>(kDim, 0.5f));
    check(!embedding_response("m", *m, vecs, 1).dump().empty(), "response serializes");
  }
  for (int mode = 0; mode < 3; ++mode) {  // rerank, score, rerank through a template (Qwen3-Reranker style)
    const bool score = mode == 1;
    ApiError e2;
    auto r = map_rerank_request(j, tok, score, &e2, 16, mode == 2 ? "<s>q: {query} d: {document} {query}" : "");
    if (!r.ok()) {
      check(e2.status == 400 && !e2.message.empty(), "rerank error is a 400 with a message");
      continue;
    }
    check(r->inputs.size() == r->documents.size() && r->queries.size() == r->documents.size(), "one input per pair");
    std::vector<std::vector<float>> outs(r->inputs.size(), std::vector<float>{0.25f});
    auto scores = relevance_scores(outs, mode == 2);
    check(!(score ? score_response("m", *r, scores) : rerank_response("m", *r, scores)).dump().empty(), "serializes");
  }
  return 0;
}
