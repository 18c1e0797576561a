// POST /v1/embeddings, /v1/rerank and /v1/score: request bodies to token sequences, and results to
// response bodies. Pure functions (no engine, no I/O), fuzzed (tests/fuzz/fuzz_embed_request.cpp).
//
//   /v1/embeddings (OpenAI): {"input": "text" | ["text", ...] | [ids...] | [[ids...], ...],
//                             "encoding_format": "float" | "base64", "dimensions": N, "user": ...}
//     -> {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] | "b64"}],
//         "model": ..., "usage": {"prompt_tokens": P, "total_tokens": P}}
//     Embeddings are L2-normalized (as llama-server and the OpenAI API return them); "dimensions"
//     keeps the first N (Matryoshka models) and normalizes again.
//   /v1/rerank (vLLM / Jina / Cohere): {"query": "q", "documents": ["d" | {"text": "d"}, ...],
//                                       "top_n": K, "return_documents": true}
//     -> {"id", "model", "usage": {"total_tokens"}, "results": [{"index", "relevance_score",
//         "document": {"text"}}]} sorted by score, best first, at most top_n.
//   /v1/score (vLLM): {"text_1": "q" | ["q", ...], "text_2": "d" | ["d", ...]}
//     -> {"id", "object": "list", "model", "data": [{"index", "object": "score", "score"}], "usage"}
//     one text_1 against every text_2, or pairs of equal-length lists.
// Scores: a cross-encoder's single output through a sigmoid (as vLLM and sentence-transformers'
// CrossEncoder report relevance, and node-llama-cpp's ranking context); pair inputs are llama.cpp's
// BOS query EOS SEP document EOS, each special where the vocabulary has it ([CLS] q [SEP] d for BERT).
// Qwen3-Reranker style models (ModelInfo::rank_softmax): output[0] is already P("yes"), used as is;
// their pair prompt is the model's rerank template (tokenizer.chat_template.rerank) with {query} and
// {document} replaced, tokenized with special tokens and nothing added, as llama-server does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "server/api_error.h"

namespace tmill {
class Tokenizer;
}

namespace tmill::server {

struct EmbeddingRequest {
  std::vector<std::vector<int32_t>> inputs;
  bool base64 = false;
  std::optional<int64_t> dimensions;
};

// Errors (400, naming the field): no input, wrong types, an empty string, more than max_inputs inputs,
// token ids out of [0, n_vocab), dimensions out of [1, embedding_dim].
Result<EmbeddingRequest> map_embedding_request(const json& body, const Tokenizer& tok, int32_t n_vocab,
                                               int64_t embedding_dim, ApiError* err, size_t max_inputs = 2048);

// The response body: each vector L2-normalized after truncation to `dimensions` (when given).
json embedding_response(const std::string& model, const EmbeddingRequest& req, std::vector<std::vector<float>> vectors,
                        int64_t prompt_tokens);

struct RerankRequest {
  std::vector<std::string> queries;    // one per pair (rerank: the same query repeated)
  std::vector<std::string> documents;  // one per pair
  std::vector<std::vector<int32_t>> inputs;  // the pairs' tokens
  std::optional<int64_t> top_n;
  bool return_documents = true;
  int64_t total_tokens = 0;
};

// /v1/rerank (score = false) or /v1/score (score = true). rerank_template: the pair prompt with
// {query} and {document} (ModelInfo::rerank_template); empty: the BOS query EOS SEP document EOS layout.
Result<RerankRequest> map_rerank_request(const json& body, const Tokenizer& tok, bool score, ApiError* err,
                                         size_t max_documents = 1024, const std::string& rerank_template = {});

// The tokens of one pair: the template's text (every {query}, then every {document}, replaced, as
// llama-server's format_prompt_rerank) with special tokens, or the BOS query EOS SEP document EOS layout.
std::vector<int32_t> rerank_pair_tokens(const Tokenizer& tok, const std::string& query, const std::string& document,
                                        const std::string& rerank_template);

// Scores from the classifier outputs: the first output's sigmoid, or (softmax: the outputs are
// already probabilities, Qwen3-Reranker) the first output itself.
std::vector<double> relevance_scores(const std::vector<std::vector<float>>& outputs, bool softmax = false);
json rerank_response(const std::string& model, const RerankRequest& req, const std::vector<double>& scores);
json score_response(const std::string& model, const RerankRequest& req, const std::vector<double>& scores);

// Little-endian float32 bytes in base64 (OpenAI's encoding_format "base64").
std::string base64_floats(const std::vector<float>& v);

}  // namespace tmill::server
