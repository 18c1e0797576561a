// OpenAI's Responses API (responses.h) served by the chat route, and its stored responses
// (response_store.h): POST /v1/responses continues a stored response named by previous_response_id
// (its input and output items in front of this request's input), runs handle_generate(Chat), rewrites
// the answer (chat_adapter.h) and keeps it unless "store" is false; GET /v1/responses/{id} returns a
// stored response, GET /v1/responses/{id}/input_items lists what it answered, DELETE drops it -- each
// for the API key that made the response only.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "server/chat_adapter.h"
#include "server/request_fields.h"
#include "server/response_store.h"
#include "server/responses.h"
#include "server/server.h"

namespace tmill::server {
namespace {

ApiError not_found(const std::string& id) {
  ApiError e;
  e.status = 404;
  e.message = fmt::format("Response with id '{}' not found.", id);
  e.code = "response_not_found";
  return e;
}

}  // namespace

HttpResponse Server::route_responses(HttpRequest& req) {
  json body, chat, inputs;
  bool store = false;
  try {
    body = parse_body(req.body);
    if (!body.is_object()) throw_bad_request("The request body must be a JSON object");
    if (const json* s = field(body, "store"); s && !s->is_boolean()) throw_bad_request("'store' must be true or false", "store");
    store = responses_->enabled() && body.value("store", true);
    inputs = input_items_of(body);
    bool referenced = false;  // item_reference items: the stored item they name, in their place
    for (json& item : inputs) {
      if (!item.is_object() || item.value("type", "") != "item_reference") continue;
      const std::string ref = item.value("id", "");
      auto found = responses_->find_item(ref, req.api_key_name);
      if (!found) throw_bad_request(fmt::format("item_reference: no stored item with id '{}'", ref), "input");
      item = std::move(*found);
      referenced = true;
    }
    if (referenced) body["input"] = inputs;
    if (const json* prev = field(body, "previous_response_id"); prev && !(prev->is_string() && prev->get<std::string>().empty())) {
      if (!prev->is_string()) throw_bad_request("'previous_response_id' must be a string", "previous_response_id");
      auto stored = responses_->get(prev->get<std::string>(), req.api_key_name);
      if (!stored) {
        ApiError e = bad_request(fmt::format("Previous response with id '{}' not found.{}", prev->get<std::string>(),
                                             responses_->enabled() ? "" : " (this server keeps no responses: "
                                                                         "--max-stored-responses 0)"),
                                 "previous_response_id", "previous_response_not_found");
        throw RequestError{e};
      }
      json all = continued_items(*stored);
      for (json& item : inputs) all.push_back(std::move(item));
      inputs = std::move(all);
      body["input"] = inputs;
    }
    chat = responses_to_chat(body);
  } catch (const RequestError& e) {
    return reply_error(e.error, request_failure_reason(e.error));
  }
  req.body = chat.dump();
  const json settings = response_settings(body, store);
  auto stream = std::make_shared<ResponsesStream>(settings);
  ResponseStore* kept = store ? responses_.get() : nullptr;
  auto stored_inputs = std::make_shared<json>(std::move(inputs));
  const std::string owner = req.api_key_name;
  ChatAdapter a;
  a.result = [settings, kept, stored_inputs, owner](const json& c) {
    json res = chat_to_response(c, settings);
    if (kept) kept->put(res, *stored_inputs, owner);
    return res;
  };
  a.error = [](int, const json& e) { return e; };  // OpenAI's error body already
  a.chunk = [stream, kept, stored_inputs, owner](const json& c) {
    const bool was_finished = stream->finished();
    std::string out = stream->chunk(c);
    if (kept && !was_finished && stream->finished() && !stream->result().is_null())
      kept->put(stream->result(), *stored_inputs, owner);
    return out;
  };
  a.stream_error = [stream](const json& e) { return stream->error(e); };
  return adapt_chat_response(handle_generate(req, ApiKind::Chat), std::move(a));
}

// GET /v1/responses/{id}, GET /v1/responses/{id}/input_items (limit, order, after), DELETE /v1/responses/{id}.
HttpResponse Server::route_stored_response(HttpRequest& req) {
  const std::string prefix = req.path.starts_with("/v1/") ? "/v1/responses/" : "/responses/";
  std::string id = req.path.substr(prefix.size());
  const bool items = id.ends_with("/input_items");
  if (items) id.resize(id.size() - 12);
  if (id.empty() || id.find('/') != std::string::npos || (items && req.method == "DELETE")) {
    ApiError e;
    e.status = 404;
    e.message = fmt::format("Not found: {} {}", req.method, req.path);
    e.code = "not_found";
    return reply_error(e, "not_found");
  }
  if (req.method == "DELETE") {
    if (!responses_->erase(id, req.api_key_name)) return reply_error(not_found(id), "not_found");
    return reply_json(json{{"id", id}, {"object", "response"}, {"deleted", true}});
  }
  auto stored = responses_->get(id, req.api_key_name);
  if (!stored) return reply_error(not_found(id), "not_found");
  if (!items) return reply_json(stored->response);
  try {
    int64_t limit = 20;
    if (std::string l = req.query_param("limit"); !l.empty()) {
      const json v = json::parse(l, nullptr, false);
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 100)
        throw_bad_request("'limit' must be an integer from 1 to 100", "limit");
      limit = v.get<int64_t>();
    }
    const std::string order = req.query_param("order").empty() ? "desc" : req.query_param("order");
    if (order != "asc" && order != "desc") throw_bad_request("'order' must be asc or desc", "order");
    json all = stored->input_items;
    if (order == "desc") std::reverse(all.begin(), all.end());
    size_t start = 0;
    if (const std::string after = req.query_param("after"); !after.empty()) {
      while (start < all.size() && all[start].value("id", "") != after) ++start;
      if (start == all.size()) throw_bad_request(fmt::format("no input item '{}' in response '{}'", after, id), "after");
      ++start;
    }
    json data = json::array();
    for (size_t i = start; i < all.size() && static_cast<int64_t>(data.size()) < limit; ++i) data.push_back(all[i]);
    const bool more = start + data.size() < all.size();
    json first = data.empty() ? json(nullptr) : data.front().value("id", json(nullptr));
    json last = data.empty() ? json(nullptr) : data.back().value("id", json(nullptr));
    return reply_json(json{{"object", "list"}, {"data", std::move(data)}, {"first_id", first}, {"last_id", last},
                           {"has_more", more}});
  } catch (const RequestError& e) {
    return reply_error(e.error, "invalid_request");
  }
}

}  // namespace tmill::server
