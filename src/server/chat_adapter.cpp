#include "server/chat_adapter.h"

#include <memory>

#include "server/openai_response.h"
#include "server/request_fields.h"

namespace tmill::server {

namespace {

struct Rewrite {
  ChatAdapter adapter;
  std::string pending;  // an event not yet complete
};

class RewritingSink final : public ChunkSink {
 public:
  RewritingSink(ChunkSink& inner, Rewrite& st) : inner_(inner), st_(st) {}
  bool write(std::string_view data) override {
    st_.pending.append(data);
    std::string out;
    size_t end;
    while ((end = st_.pending.find("\n\n")) != std::string::npos) {
      const std::string ev = st_.pending.substr(0, end);
      st_.pending.erase(0, end + 2);
      if (ev.compare(0, 6, "data: ") != 0) continue;
      const std::string text = ev.substr(6);
      if (text == "[DONE]") continue;
      const json j = json::parse(text, nullptr, false);
      if (j.is_discarded()) continue;
      out += j.contains("error") ? st_.adapter.stream_error(j) : st_.adapter.chunk(j);
    }
    return out.empty() || inner_.write(out);
  }
  void done() override { inner_.done(); }

 private:
  ChunkSink& inner_;
  Rewrite& st_;
};

}  // namespace

HttpResponse adapt_chat_response(HttpResponse res, ChatAdapter adapter) {
  if (res.next_chunk) {
    auto st = std::make_shared<Rewrite>();
    st->adapter = std::move(adapter);
    res.next_chunk = [inner = std::move(res.next_chunk), st](ChunkSink& sink) {
      RewritingSink rewrite(sink, *st);
      return inner(rewrite);
    };
    return res;
  }
  const json j = json::parse(res.body, nullptr, false);
  if (res.status == 200 && j.is_object() && j.contains("choices")) {
    res.body = dump_json(adapter.result(j));
  } else if (j.is_object() && j.contains("error")) {
    res.body = dump_json(adapter.error(res.status, j));
  }
  return res;
}

void ChatUsage::update(const json& u) {
  if (!u.is_object()) return;
  prompt = u.value("prompt_tokens", prompt);
  completion = u.value("completion_tokens", completion);
  if (const json* d = field(u, "prompt_tokens_details"); d && d->is_object()) cached = d->value("cached_tokens", cached);
}

std::string chat_id_suffix(const json& chat) {
  std::string id = chat.is_object() ? chat.value("id", "") : "";
  const std::string prefix = "chatcmpl-";
  return id.compare(0, prefix.size(), prefix) == 0 ? id.substr(prefix.size()) : id;
}

ApiError chat_error(int status, const json& error_body) {
  ApiError e;
  e.status = status;
  const json* err = error_body.is_object() ? field(error_body, "error") : nullptr;
  if (err && err->is_object()) {
    e.message = string_field(*err, "message");
    e.code = string_field(*err, "code");
    e.param = string_field(*err, "param");
  }
  return e;
}

std::string string_field(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : std::string();
}

}  // namespace tmill::server
