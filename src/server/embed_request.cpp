#include "server/embed_request.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {
namespace {

std::vector<int32_t> token_ids(const json& arr, const std::string& what, int32_t n_vocab) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const json& v : arr) ids.push_back(static_cast<int32_t>(as_int(v, what, 0, n_vocab - 1)));
  return ids;
}

std::vector<int32_t> encode_text(const Tokenizer& tok, const std::string& text, const char* what) {
  if (text.empty()) throw_bad_request(fmt::format("'{}' must not contain empty strings", what), what);
  return tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
}

std::string unique_id(const char* prefix) {
  static std::atomic<uint64_t> n{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return fmt::format("{}-{:x}{:04x}", prefix, std::chrono::duration_cast<std::chrono::microseconds>(now).count(), n++ & 0xffff);
}

}  // namespace

std::string base64_floats(const std::vector<float>& v) {
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {  // little-endian on every host
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((u >> (8 * b)) & 0xff);
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t x = 0;
    for (size_t k = 0; k < 3; ++k) x = (x << 8) | (k < n ? static_cast<uint8_t>(bytes[i + k]) : 0);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kChars[(x >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

Result<EmbeddingRequest> map_embedding_request(const json& body, const Tokenizer& tok, int32_t n_vocab,
                                               int64_t embedding_dim, ApiError* err, size_t max_inputs) {
  try {
    EmbeddingRequest r;
    const json* input = field(body, "input");
    if (!input) throw_bad_request("'input' is required", "input");
    if (input->is_string()) {
      r.inputs.push_back(encode_text(tok, input->get<std::string>(), "input"));
    } else if (input->is_array()) {
      if (input->empty()) throw_bad_request("'input' must not be an empty array", "input");
      if (input->size() > max_inputs)
        throw_bad_request(fmt::format("'input' has {} items; at most {} are allowed", input->size(), max_inputs), "input");
      const json& first = (*input)[0];
      if (first.is_number()) {  // one input of token ids
        r.inputs.push_back(token_ids(*input, "input", n_vocab));
      } else {
        for (const json& item : *input) {
          if (item.is_string()) r.inputs.push_back(encode_text(tok, item.get<std::string>(), "input"));
          else if (item.is_array()) {
            if (item.empty()) throw_bad_request("'input' must not contain empty token arrays", "input");
            r.inputs.push_back(token_ids(item, "input", n_vocab));
          } else {
            throw_bad_request("'input' must be a string, an array of strings, an array of token ids or an array of "
                              "token id arrays", "input");
          }
        }
      }
    } else {
      throw_bad_request("'input' must be a string, an array of strings, an array of token ids or an array of token id "
                        "arrays", "input");
    }
    if (auto fmt_name = opt_string(body, "encoding_format")) {
      if (*fmt_name == "base64") r.base64 = true;
      else if (*fmt_name != "float") throw_bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    }
    r.dimensions = opt_int(body, "dimensions", 1, std::max<int64_t>(1, embedding_dim));
    if (r.dimensions && *r.dimensions > embedding_dim)
      throw_bad_request(fmt::format("'dimensions' must be at most {} for this model", embedding_dim), "dimensions");
    return r;
  } catch (const RequestError& e) {
    if (err) *err = e.error;
    return Error{e.error.message};
  }
}

json embedding_response(const std::string& model, const EmbeddingRequest& req, std::vector<std::vector<float>> vectors,
                        int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    std::vector<float>& v = vectors[i];
    if (req.dimensions && static_cast<size_t>(*req.dimensions) < v.size()) v.resize(static_cast<size_t>(*req.dimensions));
    double norm = 0;
    for (float x : v) norm += double(x) * double(x);
    norm = std::sqrt(norm);
    if (norm > 0)
      for (float& x : v) x = static_cast<float>(x / norm);
    json item = {{"object", "embedding"}, {"index", i}};
    if (req.base64) item["embedding"] = base64_floats(v);
    else item["embedding"] = v;
    data.push_back(std::move(item));
  }
  return json{{"object", "list"},
              {"data", std::move(data)},
              {"model", model},
              {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

std::vector<int32_t> rerank_pair_tokens(const Tokenizer& tok, const std::string& query, const std::string& document,
                                        const std::string& rerank_template) {
  if (!rerank_template.empty()) {
    std::string prompt = rerank_template;
    for (const auto& [key, value] : {std::pair<std::string, const std::string*>{"{query}", &query}, {"{document}", &document}}) {
      for (size_t pos = 0; (pos = prompt.find(key, pos)) != std::string::npos; pos += value->size())
        prompt.replace(pos, key.size(), *value);
    }
    return tok.encode(prompt, /*add_special=*/false, /*parse_special=*/true);
  }
  // llama.cpp's pair layout (llama-server, node-llama-cpp): BOS query EOS SEP document EOS,
  // each special only when the vocabulary has it
  const auto& vd = tok.data();
  std::vector<int32_t> ids;
  if (vd.bos >= 0) ids.push_back(vd.bos);
  std::vector<int32_t> q = tok.encode(query, /*add_special=*/false, /*parse_special=*/false);
  ids.insert(ids.end(), q.begin(), q.end());
  if (vd.eos >= 0) ids.push_back(vd.eos);
  if (vd.sep >= 0) ids.push_back(vd.sep);
  std::vector<int32_t> doc = tok.encode(document, /*add_special=*/false, /*parse_special=*/false);
  ids.insert(ids.end(), doc.begin(), doc.end());
  if (vd.eos >= 0) ids.push_back(vd.eos);
  return ids;
}

Result<RerankRequest> map_rerank_request(const json& body, const Tokenizer& tok, bool score, ApiError* err,
                                         size_t max_documents, const std::string& rerank_template) {
  try {
    RerankRequest r;
    auto texts = [&](const char* key, bool objects) {
      const json* v = field(body, key);
      if (!v) throw_bad_request(fmt::format("'{}' is required", key), key);
      std::vector<std::string> out;
      auto one = [&](const json& item) {
        if (item.is_string()) out.push_back(item.get<std::string>());
        else if (objects && item.is_object() && item.contains("text") && item["text"].is_string())
          out.push_back(item["text"].get<std::string>());
        else
          throw_bad_request(fmt::format("'{}' must hold strings{}", key, objects ? " or {\"text\": ...} objects" : ""), key);
        if (out.back().empty()) throw_bad_request(fmt::format("'{}' must not contain empty strings", key), key);
      };
      if (v->is_array()) {
        if (v->empty()) throw_bad_request(fmt::format("'{}' must not be empty", key), key);
        if (v->size() > max_documents)
          throw_bad_request(fmt::format("'{}' has {} items; at most {} are allowed", key, v->size(), max_documents), key);
        for (const json& item : *v) one(item);
      } else {
        one(*v);
      }
      return out;
    };
    if (score) {
      auto a = texts("text_1", false), b = texts("text_2", false);
      if (a.size() == 1) a.resize(b.size(), a[0]);
      if (a.size() != b.size())
        throw_bad_request(fmt::format("'text_1' has {} items and 'text_2' {}: give one text_1 or as many as text_2",
                                      a.size(), b.size()), "text_1");
      r.queries = std::move(a);
      r.documents = std::move(b);
    } else {
      const json* q = field(body, "query");
      if (!q || !q->is_string()) throw_bad_request("'query' (a string) is required", "query");
      if (q->get_ref<const std::string&>().empty()) throw_bad_request("'query' must not be empty", "query");
      r.documents = texts("documents", true);
      r.queries.assign(r.documents.size(), q->get<std::string>());
      r.top_n = opt_int(body, "top_n", 0, 1 << 30);
      r.return_documents = opt_bool(body, "return_documents").value_or(true);
    }
    for (size_t i = 0; i < r.documents.size(); ++i) {
      std::vector<int32_t> ids = rerank_pair_tokens(tok, r.queries[i], r.documents[i], rerank_template);
      r.total_tokens += static_cast<int64_t>(ids.size());
      r.inputs.push_back(std::move(ids));
    }
    return r;
  } catch (const RequestError& e) {
    if (err) *err = e.error;
    return Error{e.error.message};
  }
}

std::vector<double> relevance_scores(const std::vector<std::vector<float>>& outputs, bool softmax) {
  std::vector<double> s;
  for (const auto& o : outputs)
    s.push_back(o.empty() ? 0.0 : softmax ? double(o[0]) : 1.0 / (1.0 + std::exp(-double(o[0]))));
  return s;
}

json rerank_response(const std::string& model, const RerankRequest& req, const std::vector<double>& scores) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (req.top_n && *req.top_n > 0 && static_cast<size_t>(*req.top_n) < order.size()) order.resize(static_cast<size_t>(*req.top_n));
  json results = json::array();
  for (size_t i : order) {
    json item = {{"index", i}, {"relevance_score", scores[i]}};
    if (req.return_documents) item["document"] = {{"text", req.documents[i]}};
    results.push_back(std::move(item));
  }
  return json{{"id", unique_id("rerank")},
              {"model", model},
              {"usage", {{"prompt_tokens", req.total_tokens}, {"total_tokens", req.total_tokens}}},
              {"results", std::move(results)}};
}

json score_response(const std::string& model, const RerankRequest& req, const std::vector<double>& scores) {
  json data = json::array();
  for (size_t i = 0; i < scores.size(); ++i) data.push_back({{"index", i}, {"object", "score"}, {"score", scores[i]}});
  return json{{"id", unique_id("score")},
              {"object", "list"},
              {"created", std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()},
              {"model", model},
              {"data", std::move(data)},
              {"usage", {{"prompt_tokens", req.total_tokens}, {"total_tokens", req.total_tokens}}}};
}

}  // namespace tmill::server
