// POST /v1/embeddings, /v1/rerank and /v1/score (server/embed_request.h) on embedding models: the
// request mapped to token sequences, Engine::embed (batched with every other caller's inputs on the
// engine's embedding thread), the response built. A generation model answers 400 here, as an
// embedding model does on the generation routes.
#include <fmt/format.h>

#include "server/embed_request.h"
#include "server/request_fields.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {
HttpResponse Server::route_embeddings(HttpRequest& req) { return handle_embed(req, EmbedKind::Embeddings); }
HttpResponse Server::route_rerank(HttpRequest& req) { return handle_embed(req, EmbedKind::Rerank); }
HttpResponse Server::route_score(HttpRequest& req) { return handle_embed(req, EmbedKind::Score); }

HttpResponse Server::handle_embed(HttpRequest& req, EmbedKind kind) {
  try {
    json body = parse_body(req.body);
    ApiError err;
    auto lease = lease_model(body, &err);
    if (!lease.ok()) throw RequestError{err};
    const ServerContext& ctx = lease->model().ctx;
    Engine& engine = *lease->model().engine;
    const ModelInfo& info = engine.model_info();
    const std::string& name = ctx.served_model_name;
    const bool reranker = info.pooling == "rank";
    if (!info.is_embedding())
      throw RequestError{bad_request(fmt::format("The model '{}' is a generation model: it does not compute {}", name,
                                                 kind == EmbedKind::Embeddings ? "embeddings" : "relevance scores"),
                                     "model")};
    if (kind == EmbedKind::Embeddings && reranker)
      throw RequestError{bad_request(fmt::format("The model '{}' is a reranker (pooling rank): use /v1/rerank or /v1/score", name), "model")};
    if (kind != EmbedKind::Embeddings && !reranker)
      throw RequestError{bad_request(fmt::format("The model '{}' is not a reranker (pooling {}): use /v1/embeddings", name, info.pooling), "model")};
    if (kind == EmbedKind::Embeddings) {
      auto m = map_embedding_request(body, *ctx.tokenizer, ctx.n_vocab, info.embedding_dim, &err);
      if (!m.ok()) throw RequestError{err};
      int64_t tokens = 0;
      for (const auto& in : m->inputs) tokens += static_cast<int64_t>(in.size());
      auto vectors = engine.embed(m->inputs);
      if (!vectors.ok()) throw RequestError{bad_request(vectors.error(), "input")};
      if (req.count_tokens) req.count_tokens(tokens);
      return reply_json(embedding_response(name, *m, std::move(vectors).value(), tokens));
    }
    const bool score = kind == EmbedKind::Score;
    auto m = map_rerank_request(body, *ctx.tokenizer, score, &err, 1024, info.rerank_template);
    if (!m.ok()) throw RequestError{err};
    auto outputs = engine.embed(m->inputs);
    if (!outputs.ok()) throw RequestError{bad_request(outputs.error(), score ? "text_2" : "documents")};
    if (req.count_tokens) {
      int64_t tokens = 0;
      for (const auto& in : m->inputs) tokens += static_cast<int64_t>(in.size());
      req.count_tokens(tokens);
    }
    const std::vector<double> scores = relevance_scores(*outputs, info.rank_softmax);
    return reply_json(score ? score_response(name, *m, scores) : rerank_response(name, *m, scores));
  } catch (const RequestError& e) {
    return reply_error(e.error, request_failure_reason(e.error));
  }
}

}  // namespace tmill::server
